#!/usr/bin/python3
"""A cluster file (docs/formats/cluster-format.md) with static lognormal per-peer compute and link
speeds, drawn from a seed: issue 41's 256-peer target (docs/results/outer_time.md).

usage: scripts/sim/lognormal_cluster.py --n N [--seed S] [--sigma-compute 0.5] [--sigma-link 0.5]
           [--base-time 0.05] [--bandwidth 1.25e7] [--latency 1e-4] [--out FILE]

Peer r gets
  factor   = exp(sigma_c * Z_r - sigma_c^2 / 2)              (its step takes base_time x factor)
  uplink   = downlink = bandwidth * exp(sigma_l * Y_r - sigma_l^2 / 2)   (its access link)
with Z_r, Y_r independent standard normals from Python's random.Random(seed) (Mersenne Twister,
the same on every machine and Python 3 version), drawn in rank order, Z before Y. Both factors
have mean 1, as the cluster file's lognormal jitter: the mean step time stays base_time and the
mean access link `bandwidth`; the median peer is exp(-sigma^2/2) (0.88 at 0.5) and the tail makes
the stragglers and the slow links. A message from a to b runs at min(a's uplink, b's downlink)
(the network's default bandwidth is the mean and binds nowhere). Speeds are static: no per-step
jitter (add it to "defaults" by hand). Writes the file to --out or stdout and a one-line summary
of the draws to stderr. Bad flags: one line, exit 2.
"""
import argparse
import json
import math
import random
import sys


def die(msg):
    print(f"scripts/sim/lognormal_cluster.py: {msg}", file=sys.stderr)
    sys.exit(2)


def cluster(n, seed, sigma_c, sigma_l, base_time, bandwidth, latency):
    rng = random.Random(seed)
    peers = []
    for r in range(n):
        z, y = rng.gauss(0.0, 1.0), rng.gauss(0.0, 1.0)
        factor = math.exp(sigma_c * z - sigma_c * sigma_c / 2)
        link = bandwidth * math.exp(sigma_l * y - sigma_l * sigma_l / 2)
        peers.append({"rank": r, "factor": round(factor, 6), "uplink": round(link, 1),
                      "downlink": round(link, 1)})
    return {
        "version": 1,
        "name": f"lognormal{n}",
        "description": (f"{n} peers with static lognormal speeds (mean 1): compute sigma "
                        f"{sigma_c:g}, access links sigma {sigma_l:g} around {bandwidth:g} B/s; "
                        f"scripts/sim/lognormal_cluster.py --n {n} --seed {seed} "
                        f"--sigma-compute {sigma_c:g} --sigma-link {sigma_l:g} --base-time "
                        f"{base_time:g} --bandwidth {bandwidth:g} --latency {latency:g}"),
        "n": n,
        "defaults": {"base_time": base_time},
        "peers": peers,
        "network": {"latency": latency, "bandwidth": bandwidth},
    }


def main():
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--n", type=int)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sigma-compute", type=float, default=0.5)
    p.add_argument("--sigma-link", type=float, default=0.5)
    p.add_argument("--base-time", type=float, default=0.05)
    p.add_argument("--bandwidth", type=float, default=1.25e7)
    p.add_argument("--latency", type=float, default=1e-4)
    p.add_argument("--out")
    p.add_argument("-h", "--help", action="store_true")
    try:
        a, extra = p.parse_known_args()
    except SystemExit:
        die("bad arguments; see --help")
    if a.help:
        print(__doc__)
        return
    if extra:
        die(f"unknown argument \"{extra[0]}\"; see --help")
    if a.n is None or a.n < 1:
        die("--n: give the number of peers, >= 1")
    for name, v, lo, hi in (("sigma-compute", a.sigma_compute, 0, 3),
                            ("sigma-link", a.sigma_link, 0, 3),
                            ("base-time", a.base_time, 1e-9, 86400),
                            ("bandwidth", a.bandwidth, 1e-9, 1e15),
                            ("latency", a.latency, 0, 1e3)):
        if not (lo <= v <= hi) or not math.isfinite(v):
            die(f"--{name}: {v:g} is outside [{lo:g}, {hi:g}]")
    c = cluster(a.n, a.seed, a.sigma_compute, a.sigma_link, a.base_time, a.bandwidth, a.latency)
    # The cluster format's range: base_time x factor at most a day, factor in (0, 10000].
    worst = max(pe["factor"] for pe in c["peers"])
    if worst > 10000 or a.base_time * worst > 86400:
        die(f"the draw gives a factor of {worst:g}, past the cluster file's range; lower "
            "--sigma-compute or --base-time")
    text = json.dumps(c, indent=1) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    fs = sorted(pe["factor"] for pe in c["peers"])
    ls = sorted(pe["uplink"] for pe in c["peers"])
    print(f"{a.n} peers: factor min {fs[0]:.3f} median {fs[len(fs) // 2]:.3f} max {fs[-1]:.3f}; "
          f"link min {ls[0]:.4g} median {ls[len(ls) // 2]:.4g} max {ls[-1]:.4g} B/s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
