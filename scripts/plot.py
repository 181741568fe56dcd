#!/usr/bin/python3
"""Plots the metrics that `gossamer sim` and `gossamer launch` write.

usage: scripts/plot.py DIR [--target ACC] [--x time|bytes|backward]

gossamer launch (DIR/<algorithm>/result.json and peer<r>.jsonl, docs/operations/cli.md): writes
DIR/loss.png (training loss against wall-clock time, the mean over peers in time bins, min/max
over peers shaded; the test accuracy of the final averaged model in the legend), DIR/accuracy.png
(the peers' evaluation points: at each tick the mean test accuracy of the peers' own models, min/max
over peers shaded, the first tick at the target marked; a star for the exact average of the
survivors' models at the longest peer's end) and DIR/idle.png.

gossamer sim:

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
    if (root / "result.json").exists() and not sorted(root.glob("*/seed*/metrics.jsonl")):
        return plot_launch(root, target)
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
    text = False  # a language model (lines with "bpc"): bits per character instead of accuracy
    for algo, dirs in sorted(runs.items()):
        series = [read_lines(d / "metrics.jsonl") for d in dirs]
        steps = min(len(s) for s in series)
        if steps == 0:
            continue
        per_peer = 1.0 if x_name == "time" else 1.0 / max(1, n_peers(dirs[0]))
        t = [x_scale * per_peer * sum(s[i].get(x_key, 0) for s in series) / len(series)
             for i in range(steps)]
        if "bpc" in series[0][0]:
            text = True
            acc = [sum(s[i]["bpc"] for s in series) / len(series) for i in range(steps)]
            lo = [min(s[i]["bpc"] for s in series) for i in range(steps)]  # band: over seeds
            hi = [max(s[i]["bpc"] for s in series) for i in range(steps)]
        else:
            acc = [100 * sum(s[i]["accuracy"] for s in series) / len(series) for i in range(steps)]
            lo = [100 * min(s[i].get("min_accuracy", s[i]["accuracy"]) for s in series) for i in range(steps)]
            hi = [100 * max(s[i].get("max_accuracy", s[i]["accuracy"]) for s in series) for i in range(steps)]
        (line,) = ax.plot(t, acc, label=f"{algo} ({len(series)} seed{'s' if len(series) > 1 else ''})")
        ax.fill_between(t, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
    if target and not text:
        ax.axhline(100 * target, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel(x_label)
    if text:
        ax.set_ylabel("bits per character of the averaged model")
        ax.set_title(f"{root.name}: bits per character {x_title}")
    else:
        ax.set_ylabel("test accuracy of the averaged model [%] (band: min..max over peers)")
        ax.set_title(f"{root.name}: accuracy {x_title}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    # Show the interesting range: from a little below the accuracy after the first evaluations.
    lows = [min(list(l.get_ydata())[2:] or list(l.get_ydata())) for l in ax.get_lines()
            if len(l.get_ydata()) and l.get_linestyle() == "-"]
    if lows and not text:
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


def plot_launch(root, target):
    """The plots of a gossamer launch folder (real peers, wall-clock time)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # The algorithms of the last launch into root (older folders there may be stale).
    summary = json.loads((root / "result.json").read_text())
    results = {}
    for row in summary["algorithms"]:
        results[row["algorithm"]] = json.loads((root / row["algorithm"] / "result.json").read_text())
    fig, ax = plt.subplots(figsize=(8, 5))
    fig_acc, ax_acc = plt.subplots(figsize=(8, 5))
    # A language model (rows with "final_bpc"): bits per character where accuracy is drawn.
    text = any("final_bpc" in row for row in summary["algorithms"])
    scale, key, final_key = (1, "bpc", "final_bpc") if text else (100, "accuracy", "final_accuracy")
    for algo, res in results.items():
        steps, ticks = [], {}
        for peer in sorted((root / algo).glob("peer*.jsonl")):
            for rec in read_lines_lenient(peer):
                if rec.get("summary"):
                    continue
                if "eval" in rec and isinstance(rec.get(key), (int, float)):
                    ticks.setdefault(rec["eval"], (rec["time"], []))[1].append(rec[key])
                elif "loss" in rec and "time" in rec and "step" in rec:
                    steps.append((rec["time"], rec["rank"], rec["loss"]))
        acc = res.get(final_key)
        label = algo + ((f" (final {acc:.3f} bpc)" if text else f" (final {100 * acc:.1f}%)")
                        if acc is not None else "")
        if steps:
            t, mean, lo, hi = binned(steps, 60)
            (line,) = ax.plot(t, mean, label=label)
            ax.fill_between(t, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
            color = line.get_color()
        else:
            color = None
        if ticks:
            ks = sorted(ticks)
            t = [ticks[k][0] for k in ks]
            mean = [scale * sum(ticks[k][1]) / len(ticks[k][1]) for k in ks]
            (line,) = ax_acc.plot(t, mean, color=color, label=f"{algo}: mean over peers")
            ax_acc.fill_between(t, [scale * min(ticks[k][1]) for k in ks],
                                [scale * max(ticks[k][1]) for k in ks], color=line.get_color(),
                                alpha=0.12, linewidth=0)
            color = line.get_color()
            if res.get("time_to_target") is not None:
                ax_acc.axvline(res["time_to_target"], color=color, linestyle="--", linewidth=1)
        if acc is not None:
            ax_acc.plot([res["train_seconds"]], [scale * acc], marker="*", markersize=14,
                        linestyle="", color=color, label=f"{algo}: exact average at the end")
    ax.set_xlabel("wall-clock time [s]")
    ax.set_ylabel("training loss (mean over peers; band: min..max)")
    ax.set_title(f"{root.name}: training loss of real peers over time")
    ax.grid(True, alpha=0.3)
    ax.legend()
    save(fig, root / "loss.png")
    if target and not text:
        ax_acc.axhline(100 * target, color="grey", linestyle=":", linewidth=1)
    ax_acc.set_xlim(left=0)
    ax_acc.set_xlabel("time since the peers started [s] (dashed: first tick at the target)")
    if text:
        ax_acc.set_ylabel("bits per character of the peers' models (band: min..max)")
        ax_acc.set_title(f"{root.name}: bits per character of real peers at their evaluation points")
    else:
        ax_acc.set_ylabel("test accuracy of the peers' models [%] (band: min..max)")
        ax_acc.set_title(f"{root.name}: accuracy of real peers at their evaluation points")
    ax_acc.grid(True, alpha=0.3)
    ax_acc.legend()
    save(fig_acc, root / "accuracy.png")

    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len(results))
    for k, (algo, res) in enumerate(results.items()):
        peers = [p for p in res.get("peers", []) if "idle_share" in p]
        ax.bar([p["rank"] + k * width for p in peers], [100 * p["idle_share"] for p in peers],
               width=width, label=algo)
    ax.set_xlabel("peer")
    ax.set_ylabel("time idle [%]")
    ax.set_title(f"{root.name}: share of time each peer sat idle")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    save(fig, root / "idle.png")
    return 0


def read_lines_lenient(path):
    """JSON lines, skipping a last line a killed peer left unfinished."""
    out = []
    with path.open() as fh:
        for line in fh:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def binned(points, bins):
    """(time, key, value) points -> bin centres, mean, min and max of the values per bin."""
    points.sort()
    t0, t1 = points[0][0], points[-1][0]
    width = (t1 - t0) / bins or 1.0
    groups = {}
    for t, _, v in points:
        groups.setdefault(min(int((t - t0) / width), bins - 1), []).append(v)
    keys = sorted(groups)
    centre = [t0 + (k + 0.5) * width for k in keys]
    return (centre, [sum(groups[k]) / len(groups[k]) for k in keys],
            [min(groups[k]) for k in keys], [max(groups[k]) for k in keys])


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
