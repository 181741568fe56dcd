#!/usr/bin/python3
"""A cluster file with the step times a lab run measured, for `gossamer sim` of the same row.

usage: scripts/lab/measured_cluster.py RUN CLUSTER OUT [--inner H]

RUN: a real run's algorithm folder (`gossamer launch ... --out DIR`: DIR/<algorithm>/, with its
peer<r>.jsonl). CLUSTER: the cluster file the run used. OUT: where to write the copy.

Each peer's `step_seconds` is the compute time of its step as its driver measured it (padded to
the cluster file's step time, longer where 8 peers on 2 cores could not keep up with the pad);
under the training config's "outer" section a record is one round of H inner steps (--inner H,
or read from the run's config.json), so a round's seconds / H is the inner step's. The copy sets
each rank's `factor` to max(its declared factor, its measured mean step / base_time), the last
(short) round and the first round (start-up) left out when there are more; links, latencies and
the rest stay as they are. Prints per rank the declared and the measured step time.
Bad input: one line, exit 2.
"""
import json
import math
import pathlib
import sys


def die(msg):
    print(f"scripts/lab/measured_cluster.py: {msg}", file=sys.stderr)
    sys.exit(2)


def main(argv):
    inner = None
    if "--inner" in argv:
        i = argv.index("--inner")
        try:
            inner = int(argv[i + 1])
        except (IndexError, ValueError):
            die("--inner needs a whole number of inner steps per record (the outer steps H)")
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 3 or argv[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if argv and argv[0] in ("-h", "--help") else 2)
    run, cluster_path, out = (pathlib.Path(a) for a in argv)
    peers = sorted(run.glob("peer*.jsonl"), key=lambda p: int(p.stem[4:].split(".")[0]))
    peers = [p for p in peers if p.stem[4:].isdigit()]
    if not peers:
        die(f"{run}: no peer<r>.jsonl; give a launch's algorithm folder, e.g. OUT/allreduce")
    try:
        cluster = json.loads(cluster_path.read_text())
    except (OSError, ValueError) as e:
        die(f"{cluster_path}: not a readable JSON cluster file ({e})")
    if inner is None:
        cfg = run / "config.json"
        if not cfg.exists():
            cfg = run.parent / "config.json"
        try:
            inner = int(json.loads(cfg.read_text()).get("outer", {}).get("steps", 1))
        except (OSError, ValueError):
            inner = 1
    base = cluster["defaults"]["base_time"]
    default_factor = cluster["defaults"].get("factor", 1.0)
    declared = {}
    for entry in cluster.get("peers", []):
        if "factor" in entry:
            ranks = entry.get("ranks") or ([entry["rank"]] if "rank" in entry else
                                           list(range(entry["range"][0], entry["range"][1] + 1)))
            for r in ranks:
                declared[r] = entry["factor"]
    # The measured factors replace every declared one: drop factor from the entries.
    entries = []
    for entry in cluster.get("peers", []):
        e = {k: v for k, v in entry.items() if k != "factor"}
        if set(e) - {"rank", "ranks", "range"}:
            entries.append(e)
    print("| rank | declared step [s] | measured inner step [s] | rounds |")
    print("|---|---|---|---|")
    for path in peers:
        r = int(path.stem[4:])
        recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        took = [x["step_seconds"] for x in recs if "step" in x and "step_seconds" in x]
        if not took:
            die(f"{path}: no step records with step_seconds")
        use = took[1:-1] if len(took) > 2 else took
        measured = sum(use) / len(use) / inner
        f_decl = declared.get(r, default_factor)
        factor = max(f_decl, measured / base)
        entries.append({"rank": r, "factor": round(factor, 4)})
        print(f"| {r} | {base * f_decl:.3f} | {measured:.3f} | {len(took)} |")
    cluster["peers"] = entries
    cluster["name"] = cluster.get("name", "cluster") + "-measured"
    cluster["description"] = (f"{cluster_path} with each rank's step time measured by the lab run "
                              f"{run} (scripts/lab/measured_cluster.py)")
    if any(not math.isfinite(e.get("factor", 1.0)) for e in entries):
        die(f"{run}: a measured step time is not finite")
    pathlib.Path(out).write_text(json.dumps(cluster, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
