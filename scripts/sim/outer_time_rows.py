#!/usr/bin/python3
"""Issue 41's simulator rows in one go, and their table (docs/results/outer_time.md).

usage: scripts/sim/outer_time_rows.py [--gossamer BIN] [--out DIR] [--sets dirichlet,256]
           [--rows NAME,...] [--time-rows] [--seed N] [--eval-interval S] [--clip-norm C]
           [--table-only] [--list] [--dry-run]

Two set-ups, each a training config, a cluster and a topology, run by `gossamer sim` in math mode:

  dirichlet  examples/sim/dirichlet16_outer.json (the Fashion-MNIST MLP, 16 peers, Dirichlet label
             skew alpha 0.1, equal shards) on examples/clusters/straggler16.json (peer 0 four times
             slower) over examples/topologies/one-peer-exp16.json
  256        examples/sim/fashion_mlp256_outer.json (the same MLP, 256 peers, iid) on
             examples/clusters/lognormal256.json (scripts/sim/lognormal_cluster.py --n 256
             --seed 1: lognormal compute and link speeds, sigma 0.5) over
             examples/topologies/one-peer-exp256.json; allreduce is DiLoCo over the ring
  racks256   issue 43's at-scale rows (docs/results/at_scale.md): the 256 set's job on
             examples/clusters/lognormal256_racks8.json (the same peers in racks of 8, one rack
             in eight behind a slow uplink): DDP (allreduce per step), DiLoCo over the ring and
             over the rack-aware all-reduce ("hierarchy": {"rack_size": 8}), the gossip forms
  racks1024  the same on 1,024 peers: examples/sim/fashion_mlp1024_outer.json (batch 16, the
             same global batch), examples/clusters/lognormal1024_racks8.json,
             examples/topologies/one-peer-exp1024.json; peers' own evaluations on 200 samples

Every row is (set, name, algorithm, "outer" section, algorithm options); ROWS below lists them.
The rows of rounds by time ("outer": {"seconds": T, "reference_steps": R, ...}) are in ROWS
too, marked "time": they run only with --time-rows (a build without rounds by time refuses their
config with exit 2). For each row the script writes the set's config with "seed" and that row's
"outer" (and options) into OUT/<set>/<name>/config.json, runs gossamer sim there (sim.json: its
summary plus the wall and CPU time and the load average; sim/: the metrics), skips a row whose
sim.json exists (delete it to rerun), and then prints one markdown table per set: time to the
target read from the exact average on 2,000 test samples every 1 s (sim's time_to_target) and
from the mean of the peers' own models on --peer-eval-samples (time_to_target_peer_mean), the
final accuracy of the exact average on the whole test set, MB sent per peer, the virtual end, the
wall and user-CPU seconds of the sim, and per set the ratio of each row's time to the set's
reference row (DiLoCo: allreduce with the fixed-H outer section).
--eval-interval S evaluates every S virtual seconds instead of the issue's 1 (a finer reading of
the time to target on short jobs). --clip-norm C sets every row's inner "optimizer.clip_norm" (the
global gradient norm clipped at C: the 1,024-peer rows of rounds by time diverge without it; give
the clipped runs their own --out). Bad flags: one line, exit 2; a row whose sim fails is reported and the others go on.
"""
import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]

SETS = {
    "dirichlet": {
        "config": "examples/sim/dirichlet16_outer.json",
        "cluster": "examples/clusters/straggler16.json",
        "topology": "examples/topologies/one-peer-exp16.json",
        "flags": ["--eval-interval", "1", "--peer-eval-samples", "2000",
                  "--average-eval-samples", "2000"],
        "reference": "allreduce-H8",
    },
    "256": {
        "config": "examples/sim/fashion_mlp256_outer.json",
        "cluster": "examples/clusters/lognormal256.json",
        "topology": "examples/topologies/one-peer-exp256.json",
        # 256 peers' own evaluations on 2,000 samples would cost 4x the training's compute at
        # every tick: 500 each (the exact average still reads 2,000).
        "flags": ["--eval-interval", "1", "--peer-eval-samples", "500",
                  "--average-eval-samples", "2000"],
        "reference": "diloco-H8",
    },
    "racks256": {
        "config": "examples/sim/fashion_mlp256_outer.json",
        "cluster": "examples/clusters/lognormal256_racks8.json",
        "topology": "examples/topologies/one-peer-exp256.json",
        "flags": ["--eval-interval", "1", "--peer-eval-samples", "500",
                  "--average-eval-samples", "2000"],
        "reference": "diloco-hier-H8",
    },
    "racks1024": {
        "config": "examples/sim/fashion_mlp1024_outer.json",
        "cluster": "examples/clusters/lognormal1024_racks8.json",
        "topology": "examples/topologies/one-peer-exp1024.json",
        # 1,024 peers' own evaluations: 200 samples each (205k a tick, 1.6x the 256 set's).
        "flags": ["--eval-interval", "1", "--peer-eval-samples", "200",
                  "--average-eval-samples", "2000"],
        "reference": "diloco-hier-H8",
    },
}

SGD1 = {"optimizer": "sgd", "lr": 1.0, "momentum": 0}
# Rounds by time: T is the time a peer of mean speed takes for R inner steps (base_time 0.05 s:
# the straggler16 cluster's fast peers, the lognormal cluster's mean factor 1).
TIME_DIR = {"seconds": 0.4, "reference_steps": 8}
TIME_256 = {"seconds": 0.4, "reference_steps": 8}
HIER8 = {"hierarchy": {"rack_size": 8}}  # the rack-aware all-reduce over the racks of 8


def at_scale_rows(set_name, n):
    """Issue 43 item 6: DDP, DiLoCo over the ring and the rack-aware all-reduce, gossip (on the
    set's one-peer exponential graph, and on a rack-aware one-peer hypercube whose rounds leave
    the rack one time in four: scripts/sim/rack_schedule.py --n N --rack-size 8)."""
    fed = dict(TIME_256, normalize="fednova", **SGD1)
    rack_hc = f"examples/topologies/rack-hypercube{n}.json"
    return [
        (set_name, "ddp", "allreduce", None, None, False),
        (set_name, "ddp-hier", "allreduce", None, HIER8, False),
        (set_name, "diloco-H8", "allreduce", dict(steps=8, **SGD1), None, False),
        (set_name, "diloco-hier-H8", "allreduce", dict(steps=8, **SGD1), HIER8, False),
        (set_name, "dpsgd-H4", "dpsgd", dict(steps=4, **SGD1), None, False),
        (set_name, "diloco-T", "allreduce", fed, None, True),
        (set_name, "diloco-hier-T", "allreduce", fed, HIER8, True),
        (set_name, "dpsgd-T", "dpsgd", fed, None, True),
        (set_name, "async-T-delayed", "async",
         dict(TIME_256, normalize="fednova", optimizer="delayed_nesterov", lr=0.7, momentum=0.6,
              delay=4), None, True),
        # Gossip that spares the slow rack links: 4-bit anchor deltas (choco, outer-codecs.md),
        # and async pushing to a slow edge less often ("links": "aware", async.md).
        (set_name, "choco-T-int4", "choco", fed,
         {"gamma": 1.0, "compressor": {"name": "int4"}}, True),
        (set_name, "async-T-delayed-aware", "async",
         dict(TIME_256, normalize="fednova", optimizer="delayed_nesterov", lr=0.7, momentum=0.6,
              delay=4), {"links": "aware"}, True),
        (set_name, "dpsgd-T-rackhc", "dpsgd", fed, None, True, rack_hc),
        (set_name, "choco-T-int4-rackhc", "choco", fed,
         {"gamma": 1.0, "compressor": {"name": "int4"}}, True, rack_hc),
    ]


# (set, name, algorithm, outer section or None (no layer), algorithm options or None, time row[,
# topology instead of the set's])
ROWS = [
    ("dirichlet", "allreduce-per-step", "allreduce", None, None, False),
    ("dirichlet", "allreduce-H8", "allreduce", dict(steps=8, **SGD1), None, False),
    ("dirichlet", "dpsgd-H8", "dpsgd", dict(steps=8, **SGD1), None, False),
    ("dirichlet", "async-H8", "async", dict(steps=8, **SGD1), None, False),
    ("dirichlet", "allreduce-T", "allreduce", dict(TIME_DIR, normalize="fednova", **SGD1), None,
     True),
    ("dirichlet", "allreduce-T-raw", "allreduce", dict(TIME_DIR, normalize="none", **SGD1), None,
     True),
    ("dirichlet", "allreduce-T-scale4", "allreduce",
     dict(TIME_DIR, normalize="fednova", max_scale=4, **SGD1), None, True),
    ("dirichlet", "dpsgd-T", "dpsgd", dict(TIME_DIR, normalize="fednova", **SGD1), None, True),
    ("dirichlet", "dpsgd-T-raw", "dpsgd", dict(TIME_DIR, normalize="none", **SGD1), None, True),
    ("256", "diloco-H8", "allreduce", dict(steps=8, **SGD1), None, False),
    ("256", "dpsgd-H8", "dpsgd", dict(steps=8, **SGD1), None, False),
    ("256", "dpsgd-H4", "dpsgd", dict(steps=4, **SGD1), None, False),
    ("256", "sgp-H8", "sgp", dict(steps=8, **SGD1), None, False),
    ("256", "async-H8", "async", dict(steps=8, **SGD1), None, False),
    ("256", "diloco-T", "allreduce", dict(TIME_256, normalize="fednova", **SGD1), None, True),
    ("256", "dpsgd-T", "dpsgd", dict(TIME_256, normalize="fednova", **SGD1), None, True),
    ("256", "sgp-T", "sgp", dict(TIME_256, normalize="fednova", **SGD1), None, True),
    ("256", "async-T", "async", dict(TIME_256, normalize="fednova", **SGD1), None, True),
    ("256", "async-T-delayed", "async",
     dict(TIME_256, normalize="fednova", optimizer="delayed_nesterov", lr=0.7, momentum=0.6,
          delay=4), None, True),
] + at_scale_rows("racks256", 256) + at_scale_rows("racks1024", 1024)


def die(msg):
    print(f"scripts/sim/outer_time_rows.py: {msg}", file=sys.stderr)
    sys.exit(2)


def describe_outer(o):
    if o is None:
        return "none (per step)"
    head = (f"T={o['seconds']:g}s R={o['reference_steps']} {o.get('normalize', 'fednova')}"
            if "seconds" in o else f"H={o['steps']}")
    opt = o.get("optimizer", "sgd")
    s = f"{head} {opt} lr {o.get('lr', 1.0):g}"
    if o.get("momentum"):
        s += f" m {o['momentum']:g}"
    if "max_scale" in o:
        s += f" max_scale {o['max_scale']:g}"
    if "delay" in o:
        s += f" delay {o['delay']}"
    return s


def run_row(args, row):
    set_name, name, algo, outer, options = row[:5]
    spec = SETS[set_name]
    topology = row[6] if len(row) > 6 else spec["topology"]
    d = pathlib.Path(args.out) / set_name / name
    if (d / "sim.json").exists():
        return
    d.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((ROOT / spec["config"]).read_text())
    cfg["seed"] = args.seed
    if args.clip_norm:
        cfg["optimizer"]["clip_norm"] = args.clip_norm
    cfg.pop("outer", None)
    if outer is not None:
        cfg["outer"] = outer
    if options is not None:
        cfg.setdefault("algorithms", {})[algo] = options
    (d / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    flags = list(spec["flags"])
    flags[flags.index("--eval-interval") + 1] = f"{args.eval_interval:g}"
    cmd = [args.gossamer, "sim", "--topology", str(ROOT / topology),
           "--cluster", str(ROOT / spec["cluster"]), "--config", str(d / "config.json"),
           "--algorithms", algo, *flags, "--json", "--save", str(d / "sim.json.part"),
           "--out", str(d / "sim")]
    (d / "command.txt").write_text(" ".join(cmd) + "\n")
    print(f"== {set_name}/{name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    if args.dry_run:
        return
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    t0, cpu0 = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    with open(d / "sim.log", "w") as log:
        rc = subprocess.call(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)
    wall = time.time() - t0
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - cpu0
    if rc != 0:
        last = (d / "sim.log").read_text().strip().splitlines()[-1:] or ["?"]
        print(f"warning: {set_name}/{name}: gossamer sim exited {rc}: {last[0]}", file=sys.stderr)
        return
    summary = json.loads((d / "sim.json.part").read_text())
    summary["row"] = {"set": set_name, "name": name, "algorithm": algo, "outer": outer,
                      "options": options, "clip_norm": args.clip_norm or None, "topology": topology, "seed": args.seed,
                      "wall_s": round(wall, 1),
                      "cpu_s": round(cpu, 1), "load": round(os.getloadavg()[0], 1)}
    (d / "sim.json").write_text(json.dumps(summary, indent=1) + "\n")
    (d / "sim.json.part").unlink()


def fmt_t(a, key):
    return f"{a[key]:.4g}" if a.get("reached") and a.get(key) is not None else "—"


def table(args, sets):
    for set_name in sets:
        found = {}
        for row in ROWS:
            p = pathlib.Path(args.out) / set_name / row[1] / "sim.json"
            if row[0] == set_name and p.exists():
                found[row[1]] = json.loads(p.read_text())
        if not found:
            print(f"({set_name}: no rows in {args.out})\n")
            continue
        spec = SETS[set_name]
        target = json.loads((ROOT / spec["config"]).read_text())["training"].get(
            "target_accuracy")
        print(f"### {set_name}: {spec['config']}, {spec['cluster']}, {spec['topology']}\n")
        ref = found.get(spec["reference"])
        ref_t = (ref["algorithms"][0].get("time_to_target_peer_mean")
                 if ref and ref["algorithms"][0].get("reached") else None)
        tgt = f"{100 * target:g}%" if target else "the target"
        print(f"| row | algorithm | outer | to {tgt}, exact avg [s] | to {tgt}, peer mean [s] | "
              f"{spec['reference']}'s time / this (peer mean) | final acc [%] | MB sent/peer | "
              f"end [s] | sim wall / CPU [s] | load |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for row in ROWS:
            if row[0] != set_name or row[1] not in found:
                continue
            s = found[row[1]]
            a, r = s["algorithms"][0], s["row"]
            t = a.get("time_to_target_peer_mean") if a.get("reached") else None
            ratio = f"{ref_t / t:.2f}" if ref_t and t else "—"
            algo = r["algorithm"] + (f" {json.dumps(r['options'])}" if r.get("options") else "")
            print(f"| {row[1]} | {algo} | {describe_outer(r['outer'])} | "
                  f"{fmt_t(a, 'time_to_target')} | {fmt_t(a, 'time_to_target_peer_mean')} | "
                  f"{ratio} | {100 * a['final_accuracy']:.2f} | {a['mb_sent_per_peer']:.1f} | "
                  f"{a['end_time']:.1f} | {r['wall_s']:.0f} / {r['cpu_s']:.0f} | {r['load']} |")
        print()


def main():
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--gossamer", default=os.environ.get("GOSSAMER", "build/ci/cli/gossamer"))
    p.add_argument("--out", default="out/outer-time")
    p.add_argument("--sets", default="dirichlet,256")  # racks256, racks1024: by name
    p.add_argument("--rows", default="")
    p.add_argument("--time-rows", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-interval", type=float, default=1.0)
    p.add_argument("--clip-norm", type=float, default=0.0)
    p.add_argument("--table-only", action="store_true")
    p.add_argument("--list", action="store_true")
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
    if not args.eval_interval > 0:
        die(f"--eval-interval {args.eval_interval:g}: give virtual seconds > 0, e.g. 0.25")
    if not args.clip_norm >= 0:
        die(f"--clip-norm {args.clip_norm:g}: give a norm > 0 (0: no clipping)")
    sets = [s for s in args.sets.split(",") if s]
    for s in sets:
        if s not in SETS:
            die(f"--sets: unknown set \"{s}\"; use {','.join(SETS)}")
    names = {r[1] for r in ROWS if r[0] in sets}
    wanted = [n for n in args.rows.split(",") if n]
    for n in wanted:
        if n not in names:
            die(f"--rows: no row \"{n}\" in sets {','.join(sets)}; see --list")
    rows = [r for r in ROWS if r[0] in sets and (not wanted or r[1] in wanted)
            and (args.time_rows or not r[5])]
    if args.list:
        for r in ROWS:
            print(f"{r[0]:9} {r[1]:20} {r[2]:9} {describe_outer(r[3])}"
                  f"{' ' + json.dumps(r[4]) if r[4] else ''}"
                  f"{'  (--time-rows)' if r[5] else ''}")
        return
    if not args.table_only:
        if not args.dry_run and not (pathlib.Path(args.gossamer).is_file()
                                     and os.access(args.gossamer, os.X_OK)):
            die(f"--gossamer {args.gossamer}: not an executable; build the gossamer target first")
        for r in rows:
            run_row(args, r)
    table(args, sets)


if __name__ == "__main__":
    main()
