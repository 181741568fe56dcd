#!/usr/bin/env python3
"""Real launched peers beside `gossamer sim` of the calibrated cluster file: a markdown table of
time to target, final accuracy and MB sent per peer, with the ratio real / predicted. Real peers
time the mean of their own accuracies; sim predicts both that (peer mean, like for like) and the
time of its exact average.
Usage: real_vs_sim.py OUT SETTING...  (reads OUT/SETTING/real/result.json, OUT/SETTING/sim.json)
"""
import json
import sys


def rows(path):
    d = json.load(open(path))
    items = d["algorithms"] if isinstance(d, dict) else d
    return {r["algorithm"]: r for r in items}


def fmt(x, spec=".1f"):
    return "—" if x is None else format(x, spec)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    print("| setting | algorithm | real time to target [s] | sim, peer mean [s] | real / sim "
          "| sim, exact average [s] | real final acc [%] | sim final acc [%] | real MB/peer "
          "| sim MB/peer |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for setting in sys.argv[2:]:
        real = rows(f"{out}/{setting}/real/result.json")
        sim = rows(f"{out}/{setting}/sim.json")
        for algo, r in real.items():
            s = sim.get(algo, {})
            tr, tp = r.get("time_to_target"), s.get("time_to_target_peer_mean")
            ts = s.get("time_to_target")
            ratio = tr / tp if tr is not None and tp else None
            ra, sa = r.get("final_accuracy"), s.get("final_accuracy")
            print(f"| {setting} | {algo} | {fmt(tr)} | {fmt(tp)} | {fmt(ratio, '.2f')} "
                  f"| {fmt(ts)} | {fmt(ra and 100 * ra, '.2f')} | {fmt(sa and 100 * sa, '.2f')} "
                  f"| {fmt(r.get('mb_sent_per_peer'))} | {fmt(s.get('mb_sent_per_peer'))} |")


if __name__ == "__main__":
    main()
