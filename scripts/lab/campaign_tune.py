#!/usr/bin/python3
"""Tuning points of issue 43's campaign in the simulator (docs/results/campaign.md, "Tuning"):
each POINT is a row of the campaign file with some of its values changed, simulated on a cluster
of the campaign with its declared step times on the tuning seed (2 unless --seed), virtual time,
so a point may run beside the lab at `nice -n 19`.

usage: scripts/lab/campaign_tune.py --out DIR [--campaign FILE] [--cluster uneven8]
           [--workload mlp] [--seed 2] POINT...

POINT: ROW or ROW:PATH=VALUE[:PATH=VALUE...], e.g. ddp:optimizer.lr=0.05 or
postlocal:algorithms.allreduce.period=32 (PATH is a dotted path into the row's sim config, VALUE
JSON). Writes DIR/<point>.json (the sim's --json summary) and DIR/<point>.config.json, skips a
point already there, and prints one line a point: time to the target (the peers' mean), the
exact average's, the final quality and MB sent per peer. GOSSAMER=path picks the binary
(default build/ci/cli/gossamer). Bad input: one line, exit 2.
"""
import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import campaign_spec as spec_mod  # noqa: E402


def die(msg):
    print(f"scripts/lab/campaign_tune.py: {msg}", file=sys.stderr)
    sys.exit(2)


def flag(argv, name, default):
    if name in argv:
        i = argv.index(name)
        if i + 1 >= len(argv):
            die(f"{name} needs a value")
        value = argv[i + 1]
        del argv[i:i + 2]
        return value
    return default


def main(argv):
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    out = flag(argv, "--out", None)
    camp = spec_mod.load(flag(argv, "--campaign", str(HERE.parents[1] /
                                                      "examples/lab/campaign/campaign.json")))
    cluster = flag(argv, "--cluster", "uneven8")
    workload = flag(argv, "--workload", "mlp")
    seed = flag(argv, "--seed", "2")
    if not out:
        die("--out is required (a folder for the points)")
    if workload not in camp.workloads or cluster not in camp.workloads[workload]["clusters"]:
        die(f"--workload {workload} --cluster {cluster}: not in the campaign file")
    if not seed.isdigit():
        die(f"--seed {seed}: a whole number")
    if not argv:
        die("no points; give ROW or ROW:PATH=VALUE, e.g. ddp:optimizer.lr=0.05")
    g = os.environ.get("GOSSAMER", str(HERE.parents[1] / "build/ci/cli/gossamer"))
    rows = {r["label"]: r for r in camp.rows}
    outdir = pathlib.Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    w = camp.workloads[workload]
    for point in argv:
        label, *changes = point.split(":")
        if label not in rows:
            die(f"point {point}: no row \"{label}\"; rows: {', '.join(rows)}")
        row = rows[label]
        cfg = spec_mod.merge(camp.config(row, workload, cluster, int(seed)),
                             row.get("sim", {}).get("set", {}))
        for ch in changes:
            path, sep, text = ch.partition("=")
            try:
                value = json.loads(text)
            except ValueError:
                die(f"point {point}: {text!r} is not JSON (write strings in quotes)")
            if not sep or not path:
                die(f"point {point}: \"{ch}\" is not PATH=VALUE")
            node = cfg
            keys = path.split(".")
            for k in keys[:-1]:
                node = node.setdefault(k, {})
            node[keys[-1]] = value
        name = point.replace(":", "_").replace("=", "-").replace("/", "-")
        summary = outdir / f"{name}.json"
        (outdir / f"{name}.config.json").write_text(json.dumps(cfg, indent=1) + "\n")
        algorithm = row.get("sim", {}).get("algorithm", row["algorithm"])
        topology = str(spec_mod.ROOT / row["topology"]) if "topology" in row else camp.topology
        if not summary.exists():
            cmd = ["nice", "-n", "19", g, "sim", "--topology", topology, "--cluster",
                   str(spec_mod.ROOT / w["clusters"][cluster]), "--config",
                   str(outdir / f"{name}.config.json"), "--algorithms", algorithm,
                   "--eval-interval", str(camp.eval_interval), "--peer-eval-samples",
                   str(int(w.get("eval_samples", camp.eval_samples))),
                   "--average-eval-samples", "500", "--json", "--save", str(summary) + ".part",
                   "--out", str(outdir / name)]
            rc = subprocess.call(cmd, stdout=subprocess.DEVNULL)
            if rc != 0:
                print(f"{point}: the sim failed (exit {rc})", flush=True)
                continue
            os.rename(str(summary) + ".part", summary)
        r = json.loads(summary.read_text())["algorithms"][0]
        print(f"{point}: peer mean {r.get('time_to_target_peer_mean')} s, exact average "
              f"{r.get('time_to_target')} s, final {r.get('final_accuracy')}, "
              f"{r.get('mb_sent_per_peer', 0):.0f} MB/peer, end {r.get('end_time', 0):.1f} s",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
