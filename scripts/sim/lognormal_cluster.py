#!/usr/bin/python3
"""A cluster file (docs/formats/cluster-format.md) with static lognormal per-peer compute and link
speeds, drawn from a seed: issue 41's 256-peer target (docs/results/outer_time.md).

usage: scripts/sim/lognormal_cluster.py --n N [--seed S] [--sigma-compute 0.5] [--sigma-link 0.5]
           [--base-time 0.05] [--bandwidth 1.25e7] [--latency 1e-4] [--out FILE]
           [--rack-size K [--slow-racks F] [--rack-uplink B] [--slow-rack-uplink B]]

Peer r gets
  factor   = exp(sigma_c * Z_r - sigma_c^2 / 2)              (its step takes base_time x factor)
  uplink   = downlink = bandwidth * exp(sigma_l * Y_r - sigma_l^2 / 2)   (its access link)
with Z_r, Y_r independent standard normals from Python's random.Random(seed) (Mersenne Twister,
the same on every machine and Python 3 version), drawn in rank order, Z before Y. Both factors
have mean 1, as the cluster file's lognormal jitter: the mean step time stays base_time and the
mean access link `bandwidth`; the median peer is exp(-sigma^2/2) (0.88 at 0.5) and the tail makes
the stragglers and the slow links. A message from a to b runs at min(a's uplink, b's downlink)
(the network's default bandwidth is the mean and binds nowhere). Speeds are static: no per-step
jitter (add it to "defaults" by hand).

Racks (docs/formats/cluster-format.md, "Racks"), only with --rack-size K: ranks [jK, (j+1)K) form
rack j (the last one shorter when K does not divide n), each with an uplink and a downlink out of
and into the rack of --rack-uplink bytes/s (default 4 x --bandwidth: 8 peers at the mean access
link oversubscribe it 2:1); every F-th rack (j = F-1, 2F-1, ...; --slow-racks F, default 8: one
rack in eight; 0: none) is behind a slow one of --slow-rack-uplink (default --rack-uplink / 10).
The racks take no random draws: the peers' speeds are those of the same seed without racks, and
a file written without --rack-size is byte for byte the one of before. Writes the file to --out or stdout and a one-line summary
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


def racks(n, size, every, uplink, slow_uplink):
    out = []
    for j, first in enumerate(range(0, n, size)):
        b = slow_uplink if every > 0 and j % every == every - 1 else uplink
        out.append({"range": [first, min(first + size, n) - 1], "uplink": b, "downlink": b})
    return out


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
    p.add_argument("--rack-size", type=int)
    p.add_argument("--slow-racks", type=int)
    p.add_argument("--rack-uplink", type=float)
    p.add_argument("--slow-rack-uplink", type=float)
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
    rack_flags = ("slow_racks", "rack_uplink", "slow_rack_uplink")
    if a.rack_size is None:
        for f in rack_flags:
            if getattr(a, f) is not None:
                die(f"--{f.replace('_', '-')} needs --rack-size K")
    else:
        if not 1 <= a.rack_size <= a.n:
            die(f"--rack-size: {a.rack_size} is outside [1, {a.n}]")
        every = 8 if a.slow_racks is None else a.slow_racks
        if every < 0:
            die(f"--slow-racks: {every} is negative; give F >= 1 (every F-th rack), or 0")
        up = 4 * a.bandwidth if a.rack_uplink is None else a.rack_uplink
        slow = up / 10 if a.slow_rack_uplink is None else a.slow_rack_uplink
        for name, v in (("rack-uplink", up), ("slow-rack-uplink", slow)):
            if not (1 <= v <= 1e15) or not math.isfinite(v):
                die(f"--{name}: {v:g} bytes/s is outside [1, 1e15]")
        c["network"]["racks"] = racks(a.n, a.rack_size, every, up, slow)
        c["name"] += f"_racks{a.rack_size}"
        c["description"] += (f" --rack-size {a.rack_size} --slow-racks {every} --rack-uplink "
                             f"{up:g} --slow-rack-uplink {slow:g}")
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
          f"link min {ls[0]:.4g} median {ls[len(ls) // 2]:.4g} max {ls[-1]:.4g} B/s"
          + (f"; {len(c['network']['racks'])} racks" if "racks" in c["network"] else ""),
          file=sys.stderr)


if __name__ == "__main__":
    main()
