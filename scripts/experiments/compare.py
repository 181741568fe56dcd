#!/usr/bin/python3
"""Compares two algorithms of `gossamer sim --save FILE` summaries against a target.

usage: scripts/experiments/compare.py NAME METRIC REF_FILE:ALGO NEW_FILE:ALGO [--min R] [--max R]
                                      [--acc-within PP]

METRIC is `time` (virtual time to the target accuracy: ratio = ref / new, "times sooner"),
`bytes` (MB sent per peer until the target: ratio = ref / new, "times fewer") or `backward`
(backward multiply-adds per peer until the target: ref / new).
--min R: the ratio must be at least R. --acc-within PP: the final accuracy (mean over seeds)
must be within PP percentage points of the reference's. Prints one line per check with the
figures and "met" or "MISSED", and exits 0 either way (a missed target is a result, not an
error); exits 2 when a file or an algorithm is missing.
"""
import json
import sys

FIELDS = {"time": "time_to_target", "bytes": "mb_to_target_per_peer",
          "backward": "backward_gmac_to_target_per_peer"}


def load(spec):
    path, _, algo = spec.rpartition(":")
    try:
        with open(path) as fh:
            summary = json.load(fh)
    except (OSError, ValueError) as e:
        sys.exit(f"compare.py: {path}: {e}; run the experiment script first")
    for a in summary["algorithms"]:
        if a["algorithm"] == algo:
            return a
    sys.exit(f"compare.py: {path} has no algorithm {algo!r}")


def main(argv):
    if len(argv) < 5 or "-h" in argv or "--help" in argv:
        print(__doc__.strip(), file=sys.stderr)
        return 0 if "-h" in argv or "--help" in argv else 2
    name, metric, ref_spec, new_spec = argv[1:5]
    opts = dict(zip(argv[5::2], argv[6::2]))
    ref, new = load(ref_spec), load(new_spec)
    field = FIELDS[metric]
    r, n = ref.get(field), new.get(field)
    ref_name, new_name = ref_spec.rpartition(":")[2], new_spec.rpartition(":")[2]
    if ref_name == new_name:  # the same algorithm from two runs: name them by their folders
        ref_name = f"{ref_name} ({ref_spec.rpartition(':')[0].split('/')[-2]})"
        new_name = f"{new_name} ({new_spec.rpartition(':')[0].split('/')[-2]})"
    if r is None or n is None:
        who = ref_name if r is None else new_name
        print(f"{name}: {who} did not reach the target on every seed ({field} is null): MISSED")
    else:
        ratio = r / n
        verdict = ""
        if "--min" in opts:
            verdict = "met" if ratio >= float(opts["--min"]) else "MISSED"
            verdict = f" (target >= {opts['--min']}: {verdict})"
        print(f"{name}: {metric} to target {ref_name} {r:.4g}, {new_name} {n:.4g}: "
              f"ratio {ratio:.2f}{verdict}")
    if "--acc-within" in opts:
        d = 100 * (new["final_accuracy"] - ref["final_accuracy"])
        ok = abs(d) <= float(opts["--acc-within"]) or d > 0
        print(f"{name}: final accuracy {ref_name} {100 * ref['final_accuracy']:.2f}%, "
              f"{new_name} {100 * new['final_accuracy']:.2f}% ({d:+.2f} pp; target within "
              f"{opts['--acc-within']} pp: {'met' if ok else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
