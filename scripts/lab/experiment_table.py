#!/usr/bin/python3
"""The table and plots of scripts/lab/experiment.sh (docs/operations/lab.md).

usage: scripts/lab/experiment_table.py OUT [--seeds N] [--algorithms LIST]

Reads OUT/<cluster>/seed<k>/real-<row>/ (gossamer launch) and sim-<name>.json with
sim-<name>/ (gossamer sim; name: the algorithm, allreduce for ddp, multirate) for the clusters uneven8 and homogeneous8, prints a
markdown table per cluster (real and sim side by side, mean +- half the range over the seeds) and
the issue's targets, and writes OUT/table.json and per cluster OUT/<cluster>-accuracy-time.svg
and OUT/<cluster>-accuracy-bytes.svg (the first seed: real solid, sim dashed).

Rows (LIST, comma-separated): an algorithm of gossamer launch (its runs in real-<algorithm>/,
its sim in sim-<algorithm>), multirate (dpsgd with config_multirate.json), ddp and diloco (the
torch rows; ddp's sim is allreduce's, diloco's is sim-diloco: ours under the same "outer"
section), or LABEL=ALGORITHM: a labelled row of ours, e.g. local SGD or DiLoCo, which are
`allreduce` under a config with "outer" (localsgd8=allreduce, diloco8=allreduce): its runs in
real-LABEL/ (launch's OUT, with ALGORITHM/ inside), its sim in sim-LABEL.json with
sim-LABEL/ALGORITHM/, its config config_LABEL.json where there is one (config.json else).

Real figures: time to the target = the first evaluation tick at which the mean accuracy of the
peers' own models reaches it; per iteration = the slowest peer's training time / its steps;
bytes at a tick (plot) = each peer's bytes sent x the share of its steps done by then. Sim
figures: the same definitions (time_to_target_peer_mean; end_time / steps). ddp has no sim of
its own: its sim column is allreduce's (DDP all-reduces the gradients).
"""
import json
import pathlib
import sys

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
import strict_json  # noqa: E402  (scripts/strict_json.py)



CLUSTERS = ["uneven8", "homogeneous8"]
GOSSIP = ["dpsgd", "sgp", "async", "choco", "multirate"]
COLORS = {"ddp": "#444444", "allreduce": "#d62728", "dpsgd": "#1f77b4", "sgp": "#2ca02c",
          "async": "#ff7f0e", "choco": "#9467bd", "multirate": "#17becf", "diloco": "#8c564b"}
# Labelled rows (LABEL=ALGORITHM), in the order listed.
LABEL_COLORS = ["#e377c2", "#bcbd22", "#7f7f7f", "#ff9896", "#98df8a", "#c5b0d5", "#c49c94"]


class Row:
    """One row of the table: its label, the algorithm its launch ran (the folder in real-LABEL/),
    the algorithm and file name of its sim, and its training config's file name."""

    def __init__(self, spec):
        label, _, algorithm = spec.partition("=")
        self.label, self.labelled = label, bool(algorithm)
        self.real = algorithm or {"multirate": "dpsgd"}.get(label, label)
        self.sim = algorithm or {"multirate": "dpsgd", "ddp": "allreduce",
                                 "diloco": "allreduce"}.get(label, label)
        self.saved = "allreduce" if label == "ddp" else label  # sim-<saved>.json
        own = self.labelled or label in ("multirate", "diloco")
        self.config = f"config_{label}.json" if own else "config.json"

    def name(self):
        if self.label == "multirate":
            return "multirate (slow_gossip)"
        if self.label == "ddp":
            return "ddp (sim: allreduce)"
        if self.label == "diloco":
            return "diloco (torch; sim: ours)"
        return f"{self.label} ({self.real})" if self.labelled else self.label


def lines(path):
    if not path.exists():
        return []
    with path.open() as fh:
        return [json.loads(x) for x in fh if x.strip()]


def load(path):
    return json.loads(path.read_text()) if path.exists() else None


def real_run(seed_dir, spec):
    """(row of result.json or None, per-iteration seconds, curve [(t, acc, mb)])."""
    base = seed_dir / f"real-{spec.label}"
    name = spec.real
    result = load(base / "result.json")
    row = None
    for r in (result or {}).get("algorithms", []):
        if r.get("algorithm") == name:
            row = r
    per_iter, peers, points = None, 0, []  # points: per peer {tick time: (accuracy, mb)}
    for path in sorted((base / name).glob("peer*.jsonl")):
        recs = lines(path)
        summary = next((r for r in recs if r.get("summary")), None)
        steps = [r["time"] for r in recs if "step" in r and "time" in r]
        if summary and summary.get("steps"):
            it = summary["end_time"] / summary["steps"]
            per_iter = it if per_iter is None else max(per_iter, it)
        peers += 1
        sent = summary.get("bytes_sent", 0) if summary else 0
        own = {}
        for r in recs:
            if "eval" in r and r.get("accuracy") is not None:
                done = sum(1 for t in steps if t <= r.get("at", r["time"]))
                own[r["time"]] = (r["accuracy"], sent * done / max(len(steps), 1) / 1e6)
        points.append((own, summary is not None))
    # As gossamer launch's time to target: at each tick the peers evaluated at it, and those
    # that finished at their latest evaluation before it (their model is final).
    curve = []
    for t in sorted({t for own, _ in points for t in own}):
        got = []
        for own, finished in points:
            if t in own:
                got.append(own[t])
            elif finished:
                before = [u for u in own if u < t]
                if before:
                    got.append(own[max(before)])
        if got:
            curve.append((t, sum(a for a, _ in got) / len(got), sum(m for _, m in got) / len(got)))
    if row is not None:
        # Recomputed from the curve, so runs made before launch counted finished peers agree.
        config = load(seed_dir / spec.config) or load(seed_dir / "config.json")
        target = ((config or {}).get("training") or {}).get("target_accuracy", 0.85)
        row = dict(row, time_to_target=next((t for t, a, _ in curve if a >= target), None))
    return row, per_iter, curve


def sim_run(seed_dir, spec):
    """(row of the sim --json summary or None, per-iteration seconds, curve)."""
    name, saved = spec.sim, spec.saved
    summary = load(seed_dir / f"sim-{saved}.json")
    row = next((r for r in (summary or {}).get("algorithms", []) if r["algorithm"] == name), None)
    run = seed_dir / f"sim-{saved}" / name / "seed0"
    steps = [p["steps"] for p in lines(run / "peers.jsonl")]
    per_iter = row["end_time"] / max(steps) if row and steps else None
    n = (summary or {}).get("n", 8)
    curve = [(m["time"], m.get("mean_accuracy", m["accuracy"]), m["bytes"] / n / 1e6)
             for m in lines(run / "metrics.jsonl")]
    return row, per_iter, curve


def spread(values, scale=1.0, fmt="{:.2f}"):
    got = [v * scale for v in values if v is not None]
    if not got:
        return "—"
    mean = sum(got) / len(got)
    text = fmt.format(mean)
    if len(values) > 1:
        text += " ± " + fmt.format((max(got) - min(got)) / 2)
    if len(got) < len(values):
        text += f" ({len(got)}/{len(values)} reached)"
    return text


def mean(values):
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if len(got) == len(values) and got else None


def svg(title, xlabel, series, path, ylabel="test accuracy (mean of the peers)", is_loss=False):
    """A line chart: series = [(label, color, dashed, [(x, y)])]; y an accuracy in [0, 1], or a
    loss (is_loss: unclamped, ticks as numbers)."""
    pts = [p for *_, s in series for p in s]
    if not pts:
        return
    w, h, left, right, top, bottom = 720, 420, 60, 170, 30, 45
    x1 = max(p[0] for p in pts) or 1.0
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    if not is_loss:
        y0, y1 = max(0.0, y0 - 0.02), min(1.0, y1 + 0.02)
    if y1 <= y0:
        y1 = y0 + 0.1
    sx = lambda x: left + (w - left - right) * x / x1
    sy = lambda y: h - bottom - (h - top - bottom) * (y - y0) / (y1 - y0)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
           f'<text x="{(left + w - right) / 2}" y="{h - 8}" text-anchor="middle">{xlabel}</text>',
           f'<text x="14" y="{(top + h - bottom) / 2}" transform="rotate(-90 14 {(top + h - bottom) / 2})" text-anchor="middle">{ylabel}</text>']
    for k in range(6):
        x, y = x1 * k / 5, y0 + (y1 - y0) * k / 5
        out.append(f'<text x="{sx(x):.1f}" y="{h - bottom + 16}" text-anchor="middle">{x:.3g}</text>')
        tick = f"{y:.2f}" if is_loss else f"{100 * y:.0f}%"
        out.append(f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{tick}</text>')
    for i, (label, color, dashed, s) in enumerate(series):
        if not s:
            continue
        d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s)
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6"{dash} points="{d}"/>')
        ly = top + 14 * i
        out.append(f'<line x1="{w - right + 10}" y1="{ly}" x2="{w - right + 34}" y2="{ly}" stroke="{color}" stroke-width="1.6"{dash}/>')
        out.append(f'<text x="{w - right + 40}" y="{ly + 4}">{label}</text>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2 if len(argv) < 2 else 0
    root = pathlib.Path(argv[1])
    seeds = int(argv[argv.index("--seeds") + 1]) if "--seeds" in argv else 1
    algos = (argv[argv.index("--algorithms") + 1].split(",") if "--algorithms" in argv
             else ["ddp", "allreduce"] + GOSSIP)
    if not root.is_dir():
        print(f"experiment_table.py: {root} is not a folder; run scripts/lab/experiment.sh first",
              file=sys.stderr)
        return 2
    report, text = {"seeds": seeds, "clusters": {}}, []
    for cluster in CLUSTERS:
        rows, plots_t, plots_b, names = {}, [], [], {}
        target = None
        for spec in algos:
            row = Row(spec)
            algo = row.label
            real = [real_run(root / cluster / f"seed{k}", row) for k in range(1, seeds + 1)]
            sim = [sim_run(root / cluster / f"seed{k}", row) for k in range(1, seeds + 1)]
            if all(r[0] is None for r in real) and all(s[0] is None for s in sim):
                continue
            target = target or load(root / cluster / "seed1" / "real" / "result.json") or {}
            get = lambda runs, key: [(r[0] or {}).get(key) for r in runs]
            rows[algo] = {
                "real": {"time_to_target": get(real, "time_to_target"),
                         "final_accuracy": get(real, "final_accuracy"),
                         "per_iteration": [r[1] for r in real],
                         "mb_sent_per_peer": get(real, "mb_sent_per_peer"),
                         "idle_share": get(real, "idle_share")},
                "sim": {"time_to_target": get(sim, "time_to_target_peer_mean"),
                        "final_accuracy": get(sim, "final_accuracy"),
                        "per_iteration": [s[1] for s in sim],
                        "mb_sent_per_peer": get(sim, "mb_sent_per_peer"),
                        "idle_share": get(sim, "idle_share")}}
            labelled = [s for s in algos if "=" in s]
            color = (LABEL_COLORS[labelled.index(spec) % len(LABEL_COLORS)] if row.labelled
                     else COLORS.get(algo, "#000000"))
            names[algo] = row.name()
            plots_t += [(f"{algo} (lab)", color, False, [(t, a) for t, a, _ in real[0][2]]),
                        (f"{algo} (sim)", color, True, [(t, a) for t, a, _ in sim[0][2]])]
            plots_b += [(f"{algo} (lab)", color, False, [(m, a) for _, a, m in real[0][2]]),
                        (f"{algo} (sim)", color, True, [(m, a) for _, a, m in sim[0][2]])]
        if not rows:
            continue
        goal = (target or {}).get("target")
        report["clusters"][cluster] = {"target": goal, "rows": rows}
        pct = f"{100 * goal:.0f}%" if goal else "target"
        text.append(f"### {cluster} ({seeds} seed{'s' if seeds > 1 else ''}; lab / sim)\n")
        text.append(f"| algorithm | time to {pct} [s] | final accuracy [%] | per iteration [s] | MB sent per peer | idle |")
        text.append("|---|---|---|---|---|---|")
        for algo, r in rows.items():
            cells = []
            for key, scale, fmt in (("time_to_target", 1, "{:.1f}"), ("final_accuracy", 100, "{:.2f}"),
                                    ("per_iteration", 1, "{:.3f}"), ("mb_sent_per_peer", 1, "{:.1f}"),
                                    ("idle_share", 100, "{:.1f}%")):
                cells.append(f"{spread(r['real'][key], scale, fmt)} / {spread(r['sim'][key], scale, fmt)}")
            text.append(f"| {names[algo]} | " + " | ".join(cells) + " |")
        text.append("")
        text += targets(cluster, rows, [Row(s).label for s in algos if "=" in s])
        svg(f"{cluster}: accuracy against time", "time [s]", plots_t,
            root / f"{cluster}-accuracy-time.svg")
        svg(f"{cluster}: accuracy against bytes", "MB sent per peer", plots_b,
            root / f"{cluster}-accuracy-bytes.svg")
    (root / "table.json").write_text(strict_json.dumps(report, indent=1) + "\n")
    if not report["clusters"]:
        print(f"experiment_table.py: {root}: no runs found under <cluster>/seed<k>/", file=sys.stderr)
        return 2
    print("\n".join(text))
    return 0


def targets(cluster, rows, labelled=()):
    """The issue's targets that this cluster's rows can judge, as lines of text; `labelled`:
    the labelled rows of ours (local SGD, DiLoCo), each set against the torch diloco row."""
    out = []
    t = {a: mean(r["real"]["time_to_target"]) for a, r in rows.items()}
    acc = {a: mean(r["real"]["final_accuracy"]) for a, r in rows.items()}
    gossip = [a for a in GOSSIP if a != "multirate" and t.get(a) is not None]
    best = min(gossip, key=lambda a: t[a]) if gossip else None
    verdict = lambda ok: "met" if ok else "**missed**"
    if best:
        for base, factor in ((("ddp", 3.0), ("allreduce", 3.0)) if cluster == "uneven8"
                             else (("ddp", 1.3),)):
            if t.get(base):
                x = t[base] / t[best]
                out.append(f"- best gossip ({best}) reaches the target {x:.2f}x sooner than {base} "
                           f"(target {factor}x): {verdict(x >= factor)}")
        if cluster == "uneven8" and acc.get("ddp") is not None and acc.get(best) is not None:
            d = 100 * (acc[best] - acc["ddp"])
            out.append(f"- {best} ends {d:+.2f} points from ddp (target: within 0.5): "
                       f"{verdict(d >= -0.5)}")
    if t.get("multirate") and t.get("dpsgd"):
        x = t["dpsgd"] / t["multirate"]
        d = 100 * (acc["multirate"] - acc["dpsgd"])
        out.append(f"- multirate {x:.2f}x sooner than dpsgd (target 1.2x), {d:+.2f} points "
                   f"(target: within 0.5): {verdict(x >= 1.2 and d >= -0.5)}")
    for a in labelled:  # issue 40: our DiLoCo matches or beats the torch row
        if t.get("diloco") and t.get(a) and acc.get(a) is not None and acc.get("diloco") is not None:
            x, d = t["diloco"] / t[a], 100 * (acc[a] - acc["diloco"])
            out.append(f"- {a} reaches the target {x:.2f}x sooner than diloco (torch) and ends "
                       f"{d:+.2f} points from it (matches or beats it: {verdict(x >= 1 and d >= -0.3)})")
    for a, r in rows.items():
        real, sim = mean(r["real"]["time_to_target"]), mean(r["sim"]["time_to_target"])
        if real and sim:
            out.append(f"- sim predicts {a}'s time to the target {sim / real:.2f}x the lab's "
                       f"(target: within 25%): {verdict(abs(sim / real - 1) <= 0.25)}")
    return out + [""] if out else []


if __name__ == "__main__":
    sys.exit(main(sys.argv))
