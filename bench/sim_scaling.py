#!/usr/bin/env python3
"""How gossamer sim scales with the number of peers (docs/modules/simulator.md, "Scale").

Runs `gossamer sim --mode cost` for each algorithm on one-peer exponential graphs of growing n
(the same steps per peer), each run `--repeats` times, and reports per n the fastest wall time,
the peak memory of that process (its own ru_maxrss, from wait4) and peer-steps per second. The
reference is the smallest n of the same run: the scaling exponent is the least-squares slope of
log(time) and log(memory) over log(n); the target is an exponent <= 1.15 for sgp's time (issue
39) and <= 1.1 otherwise. Also checks the issue's absolute targets where the sizes include them
(65,536 peers x 1000 steps: sgp <= 60 s and <= 400 MB, async <= 180 s and <= 4 GB).

The cluster is the benchmark's own (homogeneous 10 ms steps, 1 GB/s, 100 us latency, the
fair-share network) unless --cluster names a file; it must fit any n (defaults and network
only, like examples/clusters/homogeneous16.json), since the same file serves every size.
--network fifo|fair overrides its network model (gossamer sim --network).

  bench/sim_scaling.py [--gossamer BIN] [--algorithms sgp,async,dpsgd,choco]
                       [--sizes 1024,2048,4096,8192,16384] [--steps 1000] [--repeats 2]
                       [--cluster FILE] [--network fair|fifo] [--json FILE]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

TARGET_EXPONENT = 1.1
# Per algorithm where the issue names another (issue 39: sgp's time over 1k..64k).
TARGET_EXPONENTS = {"sgp": 1.15}
# (algorithm, n, steps): (seconds, bytes)
ABSOLUTE = {("sgp", 65536, 1000): (60, 400 * 10**6), ("async", 65536, 1000): (180, 4 << 30)}


def topology(path, n, weights):
    # Past one host's ports the peers are spread over several (simulated) hosts.
    per_host = 32768
    hosts = [f"sim{i}" for i in range((n + per_host - 1) // per_host)]
    peers = {"count": n, "base_port": 1}
    if len(hosts) > 1:
        peers["hosts"] = hosts
    with open(path, "w") as f:
        json.dump({"peers": peers, "graph": {"family": "one_peer_exponential"},
                   "weights": weights}, f)


def run_once(cmd):
    """(wall seconds, peak RSS bytes, user CPU seconds) of one process, or raises with its
    stderr. The CPU time is the better figure on a shared machine (wall counts the waits)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} failed: {err.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss * 1024, usage.ru_utime


def slope(xs, ys):
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / den if den > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gossamer", default="build/release/cli/gossamer")
    ap.add_argument("--algorithms", default="sgp,async,dpsgd,choco")
    ap.add_argument("--sizes", default="1024,2048,4096,8192,16384")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cluster", help="a cluster file that fits any n (default: the benchmark's)")
    ap.add_argument("--network", choices=("fair", "fifo"), help="override its network model")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.cluster and not os.path.isfile(a.cluster):
        sys.exit(f"--cluster: {a.cluster} is not a file")
    try:
        sizes = sorted({int(s) for s in a.sizes.split(",")})
    except ValueError:
        sys.exit(f"--sizes: a comma-separated list of peer counts, not {a.sizes!r}")
    if len(sizes) < 2 or sizes[0] < 2:
        sys.exit("--sizes: give at least two peer counts >= 2")
    if not os.access(a.gossamer, os.X_OK):
        sys.exit(f"--gossamer: {a.gossamer} is not an executable; build it first "
                 "(cmake --build --preset release)")
    rows, report = [], {"steps": a.steps, "repeats": a.repeats, "cluster": a.cluster,
                        "network": a.network, "algorithms": []}
    with tempfile.TemporaryDirectory() as d:
        cluster = a.cluster
        if not cluster:
            cluster = os.path.join(d, "cluster.json")
            with open(cluster, "w") as f:
                json.dump({"defaults": {"base_time": 0.01},
                           "network": {"latency": 1e-4, "bandwidth": 1e9}}, f)
        for algo in a.algorithms.split(","):
            # Push-sum protocols take column-stochastic weights, averaging ones row-stochastic.
            weights = "push_sum" if algo in ("sgp", "async") else "uniform"
            points = []
            for n in sizes:
                topo = os.path.join(d, f"t{n}-{weights}.json")
                if not os.path.exists(topo):
                    topology(topo, n, weights)
                cmd = [a.gossamer, "sim", "--mode", "cost", "--topology", topo, "--cluster",
                       cluster, "--algorithms", algo, "--steps", str(a.steps),
                       "--peer-metrics", "none", "--out", os.path.join(d, "out")]
                if a.network:
                    cmd += ["--network", a.network]
                best = min((run_once(cmd) for _ in range(a.repeats)), key=lambda r: r[0])
                wall, rss, user = best
                rate = n * a.steps / wall
                points.append({"n": n, "seconds": wall, "user_seconds": user, "peak_bytes": rss,
                               "peer_steps_per_s": rate, "bytes_per_peer": rss / n})
                print(f"{algo:>8} n={n:>8}: {wall:8.2f} s ({user:.2f} s CPU), {rss / 1e6:8.1f} MB, "
                      f"{rate:>10.0f} peer-steps/s, {rss / n / 1e3:6.1f} kB/peer", flush=True)
            ns = [p["n"] for p in points]
            et = slope(ns, [p["seconds"] for p in points])
            em = slope(ns, [p["peak_bytes"] for p in points])
            ec = slope(ns, [max(p["user_seconds"], 1e-3) for p in points])
            target = TARGET_EXPONENTS.get(algo, TARGET_EXPONENT)
            entry = {"algorithm": algo, "points": points, "time_exponent": et, "cpu_exponent": ec,
                     "memory_exponent": em, "target_exponent": target,
                     "time_met": et <= target, "memory_met": em <= TARGET_EXPONENT}
            for p in points:
                goal = ABSOLUTE.get((algo, p["n"], a.steps))
                if goal:
                    entry[f"target_{p['n']}"] = {
                        "seconds": goal[0], "bytes": goal[1],
                        "met": p["seconds"] <= goal[0] and p["peak_bytes"] <= goal[1]}
            report["algorithms"].append(entry)
            rows.append(entry)
    load = os.getloadavg()
    report["load_average"] = load
    print(f"\nload average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"scaling over n = {sizes[0]}..{sizes[-1]}, {a.steps} steps, cost mode "
          f"(reference: n = {sizes[0]} of this run; target exponent <= {TARGET_EXPONENT}, "
          f"sgp's time <= {TARGET_EXPONENTS['sgp']}; cluster: {a.cluster or 'built in'}"
          f"{', network ' + a.network if a.network else ''})")
    print(f"{'algorithm':>9} {'time exp':>9} {'memory exp':>11} {'x slower/peer-step':>19} "
          f"{'CPU exp':>8}")
    for e in rows:
        first, last = e["points"][0], e["points"][-1]
        ratio = first["peer_steps_per_s"] / last["peer_steps_per_s"]
        print(f"{e['algorithm']:>9} {e['time_exponent']:>9.2f} {e['memory_exponent']:>11.2f} "
              f"{ratio:>19.2f} {e['cpu_exponent']:>8.2f}   time "
              f"{'met' if e['time_met'] else 'MISSED'}, memory "
              f"{'met' if e['memory_met'] else 'MISSED'}")
        for k, v in e.items():
            if k.startswith("target_") and isinstance(v, dict):
                print(f"{'':>9} {k[7:]} peers: {'met' if v['met'] else 'MISSED'} "
                      f"(<= {v['seconds']} s and <= {v['bytes'] / 1e6:.0f} MB)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
