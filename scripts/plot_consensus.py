#!/usr/bin/python3
"""Plots averaging runs written by `gossamer topo show --curve-dir DIR` into one PNG.

usage: scripts/plot_consensus.py DIR OUT.png
Each DIR/<name>.csv holds "round,disagreement"; the plot shows relative disagreement
(log scale) against rounds, one line per topology.
"""
import csv
import pathlib
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    files = sorted(src.glob("*.csv"))
    if not files:
        print(f"plot_consensus: {src}: no .csv files; run 'gossamer topo show --curve-dir {src} FILE...'",
              file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for f in files:
        rounds, values = [], []
        with f.open() as fh:
            for row in csv.DictReader(fh):
                rounds.append(int(row["round"]))
                values.append(max(float(row["disagreement"]), 1e-12))
        ax.semilogy(rounds, values, label=f.stem, marker="." if len(rounds) < 40 else None)
    ax.set_ylim(1e-12, 2)
    ax.axhline(1e-6, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("symlog", linthresh=10)  # fast graphs take few rounds, rings thousands
    ax.set_xlim(left=0)
    ax.set_xlabel("round (linear to 10, then log)")
    ax.set_ylabel("||x - mean|| / ||x0 - mean||")
    ax.set_title("Averaging runs: disagreement per round")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    tmp.replace(out)
    print(f"plot: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
