#!/usr/bin/python3
"""Plots the metrics that `gossamer sim` (and later `gossamer launch`) write.

usage: scripts/plot.py DIR [--target ACC] [--x time|bytes|backward]

DIR/<algorithm>/seed<k>/metrics.jsonl: one JSON object per evaluation with "time" (virtual
seconds for sim, wall-clock for real peers), "accuracy" (of the exact average of the peers'
models), "min_accuracy", "max_accuracy". DIR/<algorithm>/seed<k>/peers.jsonl: one object per
peer with "rank" and "idle_share". Writes DIR/accuracy.png (accuracy against time, the mean over
seeds per algorithm, min/max over peers shaded) and DIR/idle.png (idle share per peer).
--x bytes (MB sent per peer) or --x backward (backward GMAC per peer, from "backward_macs")
plots accuracy against that instead, into DIR/accuracy-bytes.png or DIR/accuracy-backward.png.
"""

X_AXES = {
    "time": ("time", 1.0, "time [s]", "accuracy.png", "over time"),
    "bytes": ("bytes", 1e-6, "MB sent per peer", "accuracy-bytes.png", "against bytes sent"),
    "backward": ("backward_macs", 1e-9, "backward GMAC per peer", "accuracy-backward.png",
                 "against backward compute"),
}
import json
import pathlib
import sys


def read_lines(path):
    with path.open() as fh:
        return [json.loads(line) for line in fh if line.strip()]


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2 if len(argv) < 2 else 0
    root = pathlib.Path(argv[1])
    target = float(argv[argv.index("--target") + 1]) if "--target" in argv else None
    x_name = argv[argv.index("--x") + 1] if "--x" in argv else "time"
    if x_name not in X_AXES:
        print(f"plot.py: --x {x_name}: use time, bytes or backward", file=sys.stderr)
        return 2
    x_key, x_scale, x_label, x_file, x_title = X_AXES[x_name]
    runs = {}
    for metrics in sorted(root.glob("*/seed*/metrics.jsonl")):
        runs.setdefault(metrics.parent.parent.name, []).append(metrics.parent)
    if not runs:
        print(f"plot.py: {root}: no <algorithm>/seed<k>/metrics.jsonl files; run gossamer sim --out {root}",
              file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for algo, dirs in sorted(runs.items()):
        series = [read_lines(d / "metrics.jsonl") for d in dirs]
        steps = min(len(s) for s in series)
        if steps == 0:
            continue
        per_peer = 1.0 if x_name == "time" else 1.0 / max(1, n_peers(dirs[0]))
        t = [x_scale * per_peer * sum(s[i].get(x_key, 0) for s in series) / len(series)
             for i in range(steps)]
        acc = [100 * sum(s[i]["accuracy"] for s in series) / len(series) for i in range(steps)]
        lo = [100 * min(s[i].get("min_accuracy", s[i]["accuracy"]) for s in series) for i in range(steps)]
        hi = [100 * max(s[i].get("max_accuracy", s[i]["accuracy"]) for s in series) for i in range(steps)]
        (line,) = ax.plot(t, acc, label=f"{algo} ({len(series)} seed{'s' if len(series) > 1 else ''})")
        ax.fill_between(t, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
    if target:
        ax.axhline(100 * target, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel(x_label)
    ax.set_ylabel("test accuracy of the averaged model [%] (band: min..max over peers)")
    ax.set_title(f"{root.name}: accuracy {x_title}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    # Show the interesting range: from a little below the accuracy after the first evaluations.
    lows = [min(list(l.get_ydata())[2:] or list(l.get_ydata())) for l in ax.get_lines()
            if len(l.get_ydata()) and l.get_linestyle() == "-"]
    if lows:
        ax.set_ylim(max(0, min(lows) - 5), None)
    save(fig, root / x_file)
    if x_name != "time":
        return 0

    fig, ax = plt.subplots(figsize=(8, 4))
    algos = sorted(runs)
    width = 0.8 / max(1, len(algos))
    for k, algo in enumerate(algos):
        peers = read_lines(runs[algo][0] / "peers.jsonl") if (runs[algo][0] / "peers.jsonl").exists() else []
        ranks = [p["rank"] for p in peers]
        idle = [100 * p["idle_share"] for p in peers]
        ax.bar([r + k * width for r in ranks], idle, width=width, label=algo)
    ax.set_xlabel("peer")
    ax.set_ylabel("time idle [%]")
    ax.set_title(f"{root.name}: share of time each peer sat idle (first seed)")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    save(fig, root / "idle.png")
    return 0


def n_peers(run_dir):
    peers = run_dir / "peers.jsonl"
    return len(read_lines(peers)) if peers.exists() else 1


def save(fig, path):
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    tmp.replace(path)
    print(f"plot: {path}")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
