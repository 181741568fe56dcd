#!/usr/bin/env python3
"""Compares the benchmarks' figures with the last recorded ones (docs/results/benchmarks.md,
"Comparing with the recorded figures").

Reads every benchmark's JSON in out/bench/ (what scripts/bench.sh writes), takes each ratio
against its reference and each scale figure of bench/sim_scaling.py, and prints those that moved
more than their noise band from bench/recorded.json. Exit status 0 when none moved, 1 when one
did, 2 for a missing, unreadable or ill-formed file.

  scripts/bench_compare.py [--out-dir out/bench] [--recorded bench/recorded.json] [--all]
  scripts/bench_compare.py --record [DIR ...]   # rewrite the recorded file from DIR(s)

--record with one folder (default --out-dir) keeps each figure's recorded band (or its kind's
default); with several folders of repeated runs each figure is recorded as their median and its
band as their spread (max/min - 1; max - min for exponents), at least the kind's floor.
Standard library only.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

# Each kind of figure: which way is better, the unit, the default noise band (relative: moved
# when new/old leaves [1/(1+band), 1+band]; absolute: when |new - old| > band) and the floor a
# band measured from repeated runs may not go under. How the defaults were found:
# docs/results/benchmarks.md, "Comparing with the recorded figures".
KINDS = {
    "compute_ratio": ("higher", "ratio", "relative", 0.15, 0.05),
    "mix_ratio": ("higher", "ratio", "relative", 0.27, 0.05),
    "transport_tcp_ratio": ("higher", "ratio", "relative", 0.37, 0.05),
    "transport_shm_ratio": ("higher", "ratio", "relative", 1.0, 0.05),
    "transport_tcp_latency": ("lower", "ratio", "relative", 0.36, 0.05),
    "transport_shm_latency": ("lower", "ratio", "relative", 0.10, 0.05),
    "allreduce_ratio": ("lower", "ratio", "relative", 1.0, 0.05),
    "sim_seconds": ("lower", "s", "relative", 0.5, 0.05),
    "sim_peak_bytes": ("lower", "bytes", "relative", 0.05, 0.03),
    "sim_exponent": ("lower", "exponent", "absolute", 0.10, 0.03),
}
# Files scripts/bench.sh writes that hold no ratio: measurements of this machine, not of code.
NO_RATIO = {"calibrate.json": "bench calibrate measures this machine (no reference)",
            "cluster.json": "the cluster file bench calibrate writes"}


class BadInput(Exception):
    """One line: a file that is missing, unreadable or not what it should be."""


def size_label(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: cannot be read ({e.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: not JSON ({e})") from None


def number(value, path, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise BadInput(f"{path}: {where} must be a number, not {json.dumps(value)}")
    return float(value)


def rows(doc, key, path):
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise BadInput(f"{path}: expected an object with a list \"{key}\"")
    for i, r in enumerate(doc[key]):
        if not isinstance(r, dict):
            raise BadInput(f"{path}: {key}[{i}] must be an object")
    return doc[key]


def extract(name, doc, path):
    """The figures of one benchmark file: {figure name: (value, kind)}."""
    out = {}
    stem = name[:-len(".json")]
    if stem == "compute":
        for i, r in enumerate(rows(doc, "rows", path)):
            if r.get("ratio") is not None:
                out[f"compute {r.get('model', i)} ratio"] = (
                    number(r["ratio"], path, f"rows[{i}].ratio"), "compute_ratio")
    elif stem == "mix":
        for i, r in enumerate(rows(doc, "rows", path)):
            out[f"mix k={r.get('neighbours', i)} ratio"] = (
                number(r.get("ratio"), path, f"rows[{i}].ratio"), "mix_ratio")
    elif stem.startswith("transport"):
        net = "tcp" if doc.get("error_handling") == "peer" else "shm"
        for i, r in enumerate(rows(doc, "bandwidth", path)):
            if "ratio" in r:
                size = size_label(int(number(r.get("bytes"), path, f"bandwidth[{i}].bytes")))
                out[f"{stem} {size} ratio"] = (
                    number(r["ratio"], path, f"bandwidth[{i}].ratio"), f"transport_{net}_ratio")
        lat = doc.get("latency")
        if isinstance(lat, dict) and "ratio" in lat:
            out[f"{stem} latency ratio"] = (number(lat["ratio"], path, "latency.ratio"),
                                            f"transport_{net}_latency")
    elif stem == "allreduce":
        for i, r in enumerate(rows(doc, "rows", path)):
            if "ratio" in r:
                size = size_label(int(number(r.get("bytes"), path, f"rows[{i}].bytes")))
                out[f"allreduce {r.get('procs')} procs {size} ratio"] = (
                    number(r["ratio"], path, f"rows[{i}].ratio"), "allreduce_ratio")
    elif stem == "sim_scaling":
        # The steps are part of a figure's name: runs of other lengths are other figures.
        steps = int(number(doc.get("steps"), path, "steps"))
        for i, a in enumerate(rows(doc, "algorithms", path)):
            algo = a.get("algorithm", i)
            for j, p in enumerate(rows(a, "points", path)):
                n = int(number(p.get("n"), path, f"algorithms[{i}].points[{j}].n"))
                out[f"sim {algo} n={n} x {steps} steps seconds"] = (
                    number(p.get("seconds"), path, f"algorithms[{i}].points[{j}].seconds"),
                    "sim_seconds")
                out[f"sim {algo} n={n} x {steps} steps peak bytes"] = (
                    number(p.get("peak_bytes"), path, f"algorithms[{i}].points[{j}].peak_bytes"),
                    "sim_peak_bytes")
            for key in ("time_exponent", "memory_exponent"):
                out[f"sim {algo} x {steps} steps {key.replace('_', ' ')}"] = (
                    number(a.get(key), path, f"algorithms[{i}].{key}"), "sim_exponent")
    else:
        return None
    return out


def measured(folder):
    """Every figure of the benchmark files in `folder`: {name: (value, kind, file)}."""
    if not os.path.isdir(folder):
        raise BadInput(f"{folder}: no such folder (run scripts/bench.sh, or pass --out-dir)")
    figures, names = {}, sorted(f for f in os.listdir(folder) if f.endswith(".json"))
    for name in names:
        if name in NO_RATIO:
            continue
        path = os.path.join(folder, name)
        got = extract(name, read_json(path), path)
        if got is None:
            print(f"note: {path}: not a benchmark this script knows; ignored", file=sys.stderr)
            continue
        for fig, (value, kind) in got.items():
            figures[fig] = (value, kind, name)
    if not figures:
        raise BadInput(f"{folder}: no benchmark figures in it (run scripts/bench.sh first)")
    return figures


def load_recorded(path):
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("figures"), dict):
        raise BadInput(f"{path}: expected an object with an object \"figures\" "
                       "(rewrite it with scripts/bench_compare.py --record)")
    for name, f in doc["figures"].items():
        if not isinstance(f, dict) or f.get("kind") not in KINDS:
            raise BadInput(f"{path}: figures[\"{name}\"] needs a \"kind\", one of "
                           f"{', '.join(KINDS)}")
        number(f.get("value"), path, f"figures[\"{name}\"].value")
        if number(f.get("band"), path, f"figures[\"{name}\"].band") < 0:
            raise BadInput(f"{path}: figures[\"{name}\"].band must be >= 0")
    return doc


def moved(old, new, band, band_kind):
    if band_kind == "absolute":
        return abs(new - old) > band
    if old <= 0 or new <= 0:
        return old != new
    return new > old * (1 + band) or new < old / (1 + band)


def describe(name, rec, new):
    old, band = rec["value"], rec["band"]
    better = KINDS[rec["kind"]][0]
    if KINDS[rec["kind"]][2] == "absolute":
        change, band_text = f"{new - old:+.3g}", f"±{band:.3g}"
    else:
        change, band_text = f"{(new / old - 1) * 100:+.0f}%" if old else "new", f"±{band * 100:.0f}%"
    verdict = "better" if (new > old) == (better == "higher") else "WORSE"
    return f"  {name:<44} {old:>10.4g} -> {new:<10.4g} {change:>6} (band {band_text})  {verdict}"


def compare(args):
    rec = load_recorded(args.recorded)
    now = measured(args.out_dir)
    figs = rec["figures"]
    moves, within, new_names = [], [], []
    for name, (value, kind, _) in sorted(now.items()):
        r = figs.get(name)
        if r is None:
            new_names.append(name)
        elif moved(r["value"], value, r["band"], KINDS[r["kind"]][2]):
            moves.append(describe(name, r, value))
        else:
            within.append(describe(name, r, value))
    unmeasured = sorted(set(figs) - set(now))
    where = (f"recorded {rec.get('date', '?')} at {rec.get('commit', '?')} on "
             f"{rec.get('machine', {}).get('host', '?')}")
    if moves:
        print(f"moved more than their noise band ({where}):")
        print("\n".join(moves))
    if args.all and within:
        print("within their bands:")
        print("\n".join(within))
    if new_names:
        print(f"not recorded yet ({len(new_names)}): {', '.join(new_names)}")
    if unmeasured:
        print(f"recorded but not measured in {args.out_dir} ({len(unmeasured)}): "
              f"{', '.join(unmeasured)}")
    print(f"{len(moves)} moved, {len(within)} within their bands, {len(new_names)} new, "
          f"{len(unmeasured)} not measured ({where})")
    return 1 if moves else 0


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), "?")
    except OSError:
        pass
    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count()}


def commit():
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True,
                             cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True,
                               cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
        return out + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def record(args):
    folders = args.record or [args.out_dir]
    runs = [measured(f) for f in folders]
    old = {}
    if os.path.exists(args.recorded):
        try:
            old = load_recorded(args.recorded)["figures"]
        except BadInput as e:
            print(f"note: {e}; its bands are not kept", file=sys.stderr)
    figures = {}
    for name in sorted(set().union(*runs)):
        values = [r[name][0] for r in runs if name in r]
        _, kind, source = next(r[name] for r in runs if name in r)
        better, unit, band_kind, default, floor = KINDS[kind]
        if len(values) > 1:
            spread = (max(values) - min(values) if band_kind == "absolute" else
                      (max(values) / min(values) - 1 if min(values) > 0 else default))
            band, band_from = max(spread, floor), f"spread of {len(values)} runs"
        elif name in old and old[name].get("kind") == kind:
            band, band_from = old[name]["band"], old[name].get("band_from", "kept")
        else:
            band, band_from = default, "default of its kind"
        figures[name] = {"value": statistics.median(values), "kind": kind, "unit": unit,
                         "better": better, "band": round(band, 4), "band_kind": band_kind,
                         "band_from": band_from, "file": source}
    doc = {"about": "the last recorded benchmark figures; scripts/bench_compare.py compares "
                    "out/bench/*.json with them (docs/results/benchmarks.md)",
           "machine": machine(), "commit": commit(),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "load": os.getloadavg()[0], "from": folders, "figures": figures}
    tmp = args.recorded + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(tmp, args.recorded)
    print(f"recorded {len(figures)} figures from {', '.join(folders)} in {args.recorded}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default="out/bench")
    ap.add_argument("--recorded", default="bench/recorded.json")
    ap.add_argument("--all", action="store_true", help="also print the figures within bands")
    ap.add_argument("--record", nargs="*", metavar="DIR",
                    help="rewrite --recorded from DIR(s) (default: --out-dir)")
    args = ap.parse_args(argv)
    try:
        return record(args) if args.record is not None else compare(args)
    except BadInput as e:
        print(f"bench_compare: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
