#!/usr/bin/python3
"""Issue 40's tuning grid of the outer layer in the simulator (docs/results/lab.md, "Local updates
and outer optimizers (issue 40)").

usage: scripts/lab/outer_grid.py [--gossamer BIN] [--out DIR] [--algorithms LIST]
           [--steps LIST] [--lr LIST] [--momentum LIST] [--points LIST] [--seed N]
           [--config FILE] [--cluster FILE] [--topology FILE] [--eval-interval S]
           [--peer-eval-samples N] [--average-eval-samples N] [--table-only] [--dry-run]

For every point (algorithm, H, outer lr, outer momentum) it writes a copy of the config (the
experiment's job, examples/lab/experiment8.json, with "seed" and the "outer" section set) and runs
`gossamer sim` of the cluster file and topology on it, one point at a time, into
OUT/<algorithm>-H<H>-lr<lr>-m<momentum>/ (config.json, sim.json: the summary, sim/: the metrics).
A point already there (its sim.json) is not run again, so the grid resumes and grows a few points
at a time. Then it prints the markdown table of every point in OUT: time to the target (the
first tick at which the mean accuracy of the peers' own models reaches it, sim's
time_to_target_peer_mean: the figure the lab reports), the exact average's time, the final
accuracy of the exact average on the whole test set, MB sent per peer, the virtual end time and
the sim's wall time; and per algorithm the best point (the soonest to the target, ties broken by
the final accuracy).

Outer optimizer: momentum 0 is outer SGD ("sgd", no momentum), momentum > 0 is DiLoCo's Nesterov
("nesterov", torch.optim.SGD's formula). --steps, --lr and --momentum span the grid (their
product, for every algorithm of --algorithms); --points names points instead, each
ALGORITHM:H:LR:MOMENTUM, comma-separated (e.g. async:16:1.0:0,dpsgd:16:1.0:0). The sims run as
the caller runs this script (use `nice -n 19` beside other work: virtual time does not move with
the load). Bad flags: one line, exit 2.
"""
import argparse
import itertools
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def die(msg):
    print(f"scripts/lab/outer_grid.py: {msg}", file=sys.stderr)
    sys.exit(2)


def floats(text, name, lo=None, hi=None, hi_open=False):
    out = []
    for part in text.split(","):
        try:
            v = float(part)
        except ValueError:
            die(f"--{name}: \"{part}\" is not a number; give a comma-separated list, e.g. 0.7,1.0")
        if (lo is not None and v < lo) or (hi is not None and (v >= hi if hi_open else v > hi)):
            die(f"--{name}: {v} is out of range; see --help")
        out.append(v)
    return out


def name_of(algo, h, lr, mom):
    return f"{algo}-H{h}-lr{lr:g}-m{mom:g}"


def outer_section(h, lr, mom):
    if mom == 0:
        return {"steps": h, "optimizer": "sgd", "lr": lr, "momentum": 0.0}
    return {"steps": h, "optimizer": "nesterov", "lr": lr, "momentum": mom}


def run_point(args, algo, h, lr, mom):
    d = pathlib.Path(args.out) / name_of(algo, h, lr, mom)
    if (d / "sim.json").exists():
        return
    d.mkdir(parents=True, exist_ok=True)
    cfg = json.loads(pathlib.Path(args.config).read_text())
    cfg["seed"] = args.seed
    cfg["outer"] = outer_section(h, lr, mom)
    (d / "config.json").write_text(json.dumps(cfg, indent=1))
    cmd = [args.gossamer, "sim", "--topology", args.topology, "--cluster", args.cluster,
           "--config", str(d / "config.json"), "--algorithms", algo,
           "--eval-interval", str(args.eval_interval),
           "--peer-eval-samples", str(args.peer_eval_samples),
           "--average-eval-samples", str(args.average_eval_samples),
           "--json", "--save", str(d / "sim.json.part"), "--out", str(d / "sim")]
    (d / "command.txt").write_text(" ".join(cmd) + "\n")
    print(f"== {d.name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    if args.dry_run:
        return
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    t0 = time.time()
    with open(d / "sim.log", "w") as log:
        rc = subprocess.call(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)
    wall = time.time() - t0
    if rc != 0:
        print(f"warning: {d.name}: gossamer sim exited {rc} (see {d / 'sim.log'})", file=sys.stderr)
        return
    summary = json.loads((d / "sim.json.part").read_text())
    summary["grid"] = {"algorithm": algo, "steps": h, "lr": lr, "momentum": mom,
                       "seed": args.seed, "wall_s": round(wall, 1),
                       "load": os.getloadavg()[0]}
    (d / "sim.json").write_text(json.dumps(summary, indent=1))
    (d / "sim.json.part").unlink()


def rows(out):
    found = []
    for path in sorted(pathlib.Path(out).glob("*/sim.json")):
        s = json.loads(path.read_text())
        g, a = s["grid"], s["algorithms"][0]
        found.append((g, a))
    found.sort(key=lambda r: (r[0]["algorithm"], r[0]["steps"], r[0]["lr"], r[0]["momentum"]))
    return found


def fmt_t(a, key):
    return f"{a[key]:.0f}" if a.get("reached") and a.get(key) is not None else "—"


def table(out):
    found = rows(out)
    if not found:
        print("(no points in", out, ")")
        return
    print("| algorithm | H | outer | lr | momentum | time to 85% [s] (peer mean) | "
          "exact average [s] | final acc [%] | MB sent per peer | end [s] | sim wall [s] |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for g, a in found:
        opt = "sgd" if g["momentum"] == 0 else "nesterov"
        print(f"| {g['algorithm']} | {g['steps']} | {opt} | {g['lr']:g} | {g['momentum']:g} | "
              f"{fmt_t(a, 'time_to_target_peer_mean')} | {fmt_t(a, 'time_to_target')} | "
              f"{100 * a['final_accuracy']:.2f} | {a['mb_sent_per_peer']:.0f} | "
              f"{a['end_time']:.0f} | {g['wall_s']:.0f} |")
    print()
    for algo in sorted({g["algorithm"] for g, _ in found}):
        pts = [(g, a) for g, a in found if g["algorithm"] == algo]
        inf = float("inf")

        def key(p):
            t = p[1].get("time_to_target_peer_mean") if p[1].get("reached") else None
            return (t if t is not None else inf, -p[1]["final_accuracy"])
        g, a = min(pts, key=key)
        print(f"best {algo} ({len(pts)} points): H {g['steps']}, lr {g['lr']:g}, momentum "
              f"{g['momentum']:g}: {fmt_t(a, 'time_to_target_peer_mean')} s to 85%, "
              f"{100 * a['final_accuracy']:.2f}%")


def main():
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--gossamer", default=os.environ.get("GOSSAMER", "build/ci/cli/gossamer"))
    p.add_argument("--out", default="out/outer-grid")
    p.add_argument("--algorithms", default="allreduce")
    p.add_argument("--steps", default="8,16,32")
    p.add_argument("--lr", default="0.7,1.0")
    p.add_argument("--momentum", default="0,0.6,0.9")
    p.add_argument("--points", default="")
    p.add_argument("--seed", type=int, default=2)
    p.add_argument("--config", default=str(ROOT / "examples/lab/experiment8.json"))
    p.add_argument("--cluster", default=str(ROOT / "examples/lab/uneven8.json"))
    p.add_argument("--topology", default=str(ROOT / "examples/lab/ring8.json"))
    p.add_argument("--eval-interval", type=float, default=1.0)
    p.add_argument("--peer-eval-samples", type=int, default=2000)
    p.add_argument("--average-eval-samples", type=int, default=500)
    p.add_argument("--table-only", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("-h", "--help", action="store_true")
    try:
        args, extra = p.parse_known_args()
    except SystemExit:
        die("bad arguments; see --help")
    if args.help:
        print(__doc__)
        return
    if extra:
        die(f"unknown argument \"{extra[0]}\"; see --help")
    if args.table_only:
        table(args.out)
        return
    for f in (args.config, args.cluster, args.topology):
        if not pathlib.Path(f).is_file():
            die(f"{f}: no such file")
    if not (pathlib.Path(args.gossamer).is_file() and os.access(args.gossamer, os.X_OK)):
        die(f"--gossamer {args.gossamer}: not an executable; build the gossamer target first")
    if args.eval_interval <= 0 or args.peer_eval_samples < 1 or args.average_eval_samples < 1:
        die("--eval-interval must be > 0 and the sample counts >= 1")
    points = []
    if args.points:
        for item in args.points.split(","):
            parts = item.split(":")
            if len(parts) != 4 or not parts[1].isdigit() or int(parts[1]) < 1:
                die(f"--points: \"{item}\" is not ALGORITHM:H:LR:MOMENTUM (H >= 1), e.g. async:16:1.0:0")
            lr = floats(parts[2], "points lr", lo=1e-9)[0]
            mom = floats(parts[3], "points momentum", lo=0, hi=1, hi_open=True)[0]
            points.append((parts[0], int(parts[1]), lr, mom))
    else:
        hs = [int(h) for h in floats(args.steps, "steps", lo=1)]
        lrs = floats(args.lr, "lr", lo=1e-9)
        moms = floats(args.momentum, "momentum", lo=0, hi=1, hi_open=True)
        for algo in args.algorithms.split(","):
            points += [(algo, h, lr, m) for h, lr, m in itertools.product(hs, lrs, moms)]
    for pt in points:
        run_point(args, *pt)
    table(args.out)


if __name__ == "__main__":
    main()
