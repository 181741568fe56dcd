#!/usr/bin/python3
"""A rack-aware one-peer hypercube topology (docs/formats/topology-format.md, "A periodic schedule")
for racks of K consecutive ranks (the racks of lognormal_cluster.py --rack-size K):
docs/results/at_scale.md.

usage: scripts/sim/rack_schedule.py --n N --rack-size K [--out FILE]

Every round is a perfect matching, an undirected pair per peer (uniform weights: each keeps 1/2
and takes 1/2 from its partner). Rank r is position i = r mod K of rack g = r // K. A cycle is
the log2 K in-rack rounds, i paired with i xor 2^d (d = 0, 1, ...), then one cross-rack round,
rack g paired with rack g xor 2^j (same position), j advancing by one each cycle: the period is
log2(N / K) cycles of log2 K + 1 rounds. Only one round in log2 K + 1 leaves the rack, and then
every rack's K peers use its uplink at once. Averaging alone (no training between rounds) makes
every peer the exact mean after one period (a hypercube's dimensions, each once). N and K powers
of two, K < N. Bad flags: one line, exit 2.
"""
import argparse
import json
import sys


def die(msg):
    print(f"scripts/sim/rack_schedule.py: {msg}", file=sys.stderr)
    sys.exit(2)


def power_of_two(x):
    return x >= 1 and x & (x - 1) == 0


def schedule(n, k):
    racks = n // k
    rounds = []
    for j in range(racks.bit_length() - 1):
        for d in range(k.bit_length() - 1):
            rounds.append([[r, r ^ (1 << d)] for r in range(n) if r < r ^ (1 << d)])
        step = k << j  # rack g xor 2^j, the same position: rank r xor (K 2^j)
        rounds.append([[r, r ^ step] for r in range(n) if r < r ^ step])
    return rounds


def main():
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--n", type=int)
    p.add_argument("--rack-size", type=int)
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
    if a.n is None or not power_of_two(a.n) or a.n < 2:
        die("--n: give the number of peers, a power of two >= 2")
    if a.rack_size is None or not power_of_two(a.rack_size) or not 1 <= a.rack_size < a.n:
        die(f"--rack-size: give a power of two below --n {a.n}")
    doc = {"version": 1, "peers": {"count": a.n, "host": "127.0.0.1", "base_port": 29500},
           "graph": {"schedule": schedule(a.n, a.rack_size)}, "weights": "uniform"}
    text = json.dumps(doc, separators=(",", ":")) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
