#!/usr/bin/python3
"""The table, targets and plots of issue 43's campaign (scripts/lab/campaign.py,
docs/results/campaign.md).

usage: scripts/lab/campaign_table.py DIR [--campaign FILE]

Reads DIR/time/<cluster>/<workload>/seed<S>/<row>/ (measures a and b) and DIR/wall/... (measure
c) as scripts/lab/campaign.py writes them, prints per cluster and workload a markdown table (mean
and range over the seeds that ran) and the issue's targets, and writes DIR/table.json and the
plots DIR/<cluster>-<workload>-time.svg and -bytes.svg (quality of the peers' mean against time
and against MB sent per peer; the first seed; lab solid, sim dashed).

Definitions. Time to the target: the first evaluation tick at which the mean over the peers of
each one's latest evaluation at or before it (all peers evaluated at least once) reaches the
target; torch rows hold one model, evaluated on rank 0. Final quality: the exact average of the
peers' models at the end, on the whole test set (launch's final_accuracy / final_loss). Quality
at W (measure c): the peers' mean at the last tick at or before W. CPU: the run's mean share of
the cores busy, of it the evaluator threads', training's the rest; a run whose training share is
at or above the campaign's cpu_bound_share is marked "CPU-bound" and left out of the targets.
Eval gap: the median over the peers of the median time between a peer's evaluations (they run at
the lowest priority and skip ticks where the cores are busy).
"""
import json
import pathlib
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import campaign_spec as spec_mod  # noqa: E402
from experiment_table import lines, load, svg  # noqa: E402

COLORS = ["#444444", "#888888", "#bcbd22", "#8c564b", "#d62728", "#ff9896", "#e377c2", "#9467bd",
          "#17becf", "#1f77b4", "#2ca02c", "#ff7f0e", "#98df8a", "#c5b0d5", "#7f7f7f", "#c49c94"]


def curve_of(run_dir, metric):
    """[(tick time, mean of the peers' latest `metric`, mean MB sent by then)], eval gap."""
    peers = []
    for path in sorted(run_dir.glob("peer*.jsonl")):
        recs = lines(path)
        summary = next((r for r in recs if r.get("summary")), None)
        steps = [r["time"] for r in recs if "step" in r and "time" in r]
        sent = (summary or {}).get("bytes_sent", 0)
        evals = sorted((r["time"], r[metric], r.get("at", r["time"])) for r in recs
                       if "eval" in r and r.get(metric) is not None)
        if evals:
            mb = [sent * sum(1 for t in steps if t <= at) / max(len(steps), 1) / 1e6
                  for _, _, at in evals]
            peers.append([(t, v, m) for (t, v, _), m in zip(evals, mb)])
    if not peers:
        return [], None
    gaps = [statistics.median([b[0] - a[0] for a, b in zip(p, p[1:])]) for p in peers
            if len(p) > 1]
    ticks = sorted({t for p in peers for t, _, _ in p})
    curve = []
    for t in ticks:
        latest = [max((e for e in p if e[0] <= t), default=None) for p in peers]
        if all(latest):
            curve.append((t, sum(e[1] for e in latest) / len(latest),
                          sum(e[2] for e in latest) / len(latest)))
    return curve, (statistics.median(gaps) if gaps else None)


def reached(curve, target, is_loss):
    return next((t for t, v, _ in curve if (v <= target if is_loss else v >= target)), None)


def one_run(d, algorithm, target, is_loss, wall=None):
    res = load(d / "launch" / "result.json")
    row = ((res or {}).get("algorithms") or [None])[0]
    metric = "loss" if is_loss else "accuracy"
    curve, gap = curve_of(d / "launch" / algorithm, metric)
    cpu = load(d / "cpu.json") or {}
    sim = ((load(d / "sim.json") or {}).get("algorithms") or [None])[0]
    sim_curve = [(m["time"], m.get("mean_loss" if is_loss else "mean_accuracy", m[metric]),
                  m["bytes"] / 8 / 1e6) for m in lines(d / "sim" / (sim or {}).get(
                      "algorithm", "-") / "seed0" / "metrics.jsonl")] if sim else []
    out = {"ok": bool(row and row.get("ok")), "curve": curve, "sim_curve": sim_curve,
           "eval_gap": gap, "cpu": cpu, "cpu_bound": bool(cpu.get("cpu_bound"))}
    if row:
        out.update(time=reached(curve, target, is_loss),
                   final=row.get("final_loss" if is_loss else "final_accuracy"),
                   # a run stopped before its end (the target plus a margin) wrote no summary
                   mb=row.get("mb_sent_per_peer") if row.get("ok") else None,
                   idle=row.get("idle_share") if row.get("ok") else None,
                   train_seconds=row.get("train_seconds"))
    if sim:
        out.update(sim_time=sim.get("time_to_target_peer_mean"))
    if wall is not None:
        before = [v for t, v, _ in curve if t <= wall]
        out["at_wall"] = before[-1] if before else None
    return out


def pct(cell):
    return cell if cell == "—" else cell + "%"


def stat(values, fmt):
    got = [v for v in values if v is not None]
    if not got:
        return "—"
    text = fmt.format(sum(got) / len(got))
    if len(got) > 1:
        text += f" [{fmt.format(min(got))}, {fmt.format(max(got))}]"
    if len(got) < len(values):
        text += f" ({len(got)}/{len(values)})"
    return text


def mean(values):
    got = [v for v in values if v is not None]
    return sum(got) / len(got) if got and len(got) == len(values) else None


RATIO = {"uneven8": 1.5, "homogeneous8": 1.0, "racks8": 1.5}
CLOSE = {"accuracy": 0.003, "loss": 0.03}


def table(root, camp, cluster, workload, out_rows, say):
    w = camp.workloads[workload]
    is_loss = "loss" in w["target"]
    target = next(iter(w["target"].values()))
    base = root / "time" / cluster / workload
    seeds = sorted(p.name for p in base.glob("seed*")) if base.is_dir() else []
    if not seeds:
        return
    unit = "nats" if is_loss else "%"
    scale = 1 if is_loss else 100
    fq = "{:.4f}" if is_loss else "{:.2f}"
    head = []
    head.append(f"\n### {cluster}, {workload} (target: {'loss <= ' if is_loss else ''}{target}"
        f"{'' if is_loss else ' accuracy'}; seeds {', '.join(s[4:] for s in seeds)})\n")
    head.append(f"| row | family | time to target lab [s] | sim [s] | sim / lab | final [{unit}] | "
        f"at W [{unit}] | MB sent / peer | idle | CPU training / evaluations | eval gap [s] |")
    head.append("|---|---|---|---|---|---|---|---|---|---|---|")
    # Measure (c)'s budget per seed: W = wall_factor x ddp's time to the target.
    ddp_time = {s: one_run(base / s / "ddp", "ddp", target, is_loss).get("time") for s in seeds}
    rows = {}
    for r in camp.rows:
        runs = []
        for s in seeds:
            d = base / s / r["label"]
            if not (d / "launch" / "result.json").exists():
                continue  # not run, or still running
            run = one_run(d, r["algorithm"], target, is_loss)
            wd = root / "wall" / cluster / workload / s / r["label"]
            if (wd / "launch").is_dir() and ddp_time[s] is not None:
                run["at_wall"] = one_run(wd, r["algorithm"], target, is_loss,
                                         wall=camp.wall_factor * ddp_time[s]).get("at_wall")
            runs.append(run)
        if not runs:
            continue
        for h in head:
            say(h)
        head = []
        ok = [x for x in runs if not x["cpu_bound"]]
        t = [x.get("time") for x in ok]
        st = [x.get("sim_time") for x in ok]
        ratio = [b / a if a and b else None for a, b in zip(t, st)]
        final = [x.get("final") * scale if x.get("final") is not None else None for x in ok]
        wall = [x.get("at_wall") * scale if x.get("at_wall") is not None else None for x in ok]
        cpu = [x["cpu"] for x in runs if x["cpu"].get("samples")]
        bound = sum(1 for x in runs if x["cpu_bound"])
        name = r["label"] + (" (CPU-bound: %d of %d runs left out)" % (bound, len(runs))
                             if bound else "")
        say(f"| {name} | {r['family']} | {stat(t, '{:.0f}')} | {stat(st, '{:.0f}')} | "
            f"{stat(ratio, '{:.2f}')} | {stat(final, fq)} | {stat(wall, fq)} | "
            f"{stat([x.get('mb') for x in ok], '{:.0f}')} | "
            f"{pct(stat([x.get('idle') and 100 * x['idle'] for x in ok], '{:.0f}'))} | "
            f"{stat([100 * c['train_share'] for c in cpu], '{:.0f}')}% / "
            f"{stat([100 * c['eval_share'] for c in cpu], '{:.0f}')}% | "
            f"{stat([x.get('eval_gap') for x in runs], '{:.1f}')} |")
        rows[r["label"]] = {"family": r["family"], "algorithm": r["algorithm"], "time": mean(t),
                            # the seeds whose runs ended (others stopped at the target)
                            "final": mean([v for v in final if v is not None] or [None]),
                            "final_runs": sum(1 for v in final if v is not None),
                            "at_wall": mean([v for v in wall if v is not None] or [None]),
                            "sim_ratio": ratio, "runs": len(runs),
                            "cpu_bound_runs": bound, "first": runs[0]}
    if not rows:
        return
    out_rows[f"{cluster}/{workload}"] = {k: {kk: vv for kk, vv in v.items() if kk != "first"}
                                         for k, v in rows.items()}
    targets(cluster, workload, rows, is_loss, say)
    colors = dict(zip(rows, COLORS))
    for key, xlabel, idx in (("time", "seconds", 0), ("bytes", "MB sent per peer", 2)):
        series = []
        for label, v in rows.items():
            first = v["first"]
            series.append((label, colors[label], False, [(p[idx], p[1]) for p in first["curve"]]))
            if key == "time" and first["sim_curve"]:
                series.append((label + " (sim)", colors[label], True,
                               [(p[0], p[1]) for p in first["sim_curve"]]))
        svg(f"{cluster}, {workload}: the peers' mean against {xlabel}", xlabel, series,
            root / f"{cluster}-{workload}-{key}.svg",
            "validation loss (nats/char)" if is_loss else "test accuracy (mean of the peers)",
            is_loss)


def targets(cluster, workload, rows, is_loss, say):
    timed = {k: v for k, v in rows.items() if v["time"] is not None}
    torch = {k: v for k, v in timed.items() if v["family"] == "torch"}
    ours = {k: v for k, v in timed.items() if v["family"] == "ours"}
    say("")
    if torch and ours:
        bt = min(torch, key=lambda k: torch[k]["time"])
        bo = min(ours, key=lambda k: ours[k]["time"])
        ratio = torch[bt]["time"] / ours[bo]["time"]
        need = RATIO.get(cluster, 1.5)
        say(f"- best of ours ({bo}, {ours[bo]['time']:.1f} s) against the best torch row ({bt}, "
            f"{torch[bt]['time']:.1f} s): **{ratio:.2f}x** sooner (target {need}x): "
            f"{'met' if ratio >= need else '**missed**'}")
        fo, ft = ours[bo]["final"], torch[bt]["final"]
        if fo is not None and ft is not None:
            diff = fo - ft
            lim = 0.03 if is_loss else 0.3
            good = diff <= lim if is_loss else diff >= -lim
            n_o, n_t = ours[bo]["final_runs"], torch[bt]["final_runs"]
            seeds = (f"; finals of {n_o} and {n_t} runs: the others stopped at the target plus "
                     f"a margin" if n_o != n_t else "")
            say(f"- its final quality against {bt}'s: {diff:+.4f} {'nats' if is_loss else 'points'}"
                f" (target within {lim}{seeds}): {'met' if good else '**missed**'}")
        gossip = {k: v for k, v in ours.items() if v["algorithm"] not in ("allreduce", "qallreduce")}
        if gossip:
            bg = min(gossip, key=lambda k: gossip[k]["time"])
            fg = gossip[bg]["final"]
            say(f"- the best gossip row ({bg}, {gossip[bg]['time']:.1f} s): "
                f"{torch[bt]['time'] / gossip[bg]['time']:.2f}x sooner than {bt}"
                + (f", final {fg - ft:+.4f} {'nats' if is_loss else 'points'} from it"
                   if fg is not None and ft is not None else ""))
    elif torch and any(v["family"] == "ours" and v["runs"] > v["cpu_bound_runs"]
                       for v in rows.values()):
        bt = min(torch, key=lambda k: torch[k]["time"])
        say(f"- no row of ours reached the target in its budget ({bt}, the best torch row, did "
            f"at {torch[bt]['time']:.1f} s): **missed**")
    # Measure (c): the best of ours at W (the row that reached the target soonest, else the best
    # at W) against DDP's quality at W.
    at_w = {k: v for k, v in rows.items() if v["family"] == "ours" and v["at_wall"] is not None}
    if "ddp" in rows and rows["ddp"]["at_wall"] is not None and at_w:
        bo = min(ours, key=lambda k: ours[k]["time"]) if ours else None
        if bo not in at_w:
            bo = (min if is_loss else max)(at_w, key=lambda k: at_w[k]["at_wall"])
        a, b = at_w[bo]["at_wall"], rows["ddp"]["at_wall"]
        good = a <= b if is_loss else a >= b
        say(f"- at the wall budget W: {bo} {a:.4g} against ddp {b:.4g}: "
            f"{'met' if good else '**missed**'}")
    for k, v in rows.items():
        got = [x for x in v["sim_ratio"] if x is not None]
        if got:
            worst = max(got, key=lambda x: abs(x - 1))
            say(f"- sim predicts {k}'s time to the target {worst:.2f}x the lab's (target within "
                f"25%): {'met' if abs(worst - 1) <= 0.25 else '**missed**'}")


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    root = pathlib.Path(argv[0])
    if not root.is_dir():
        print(f"scripts/lab/campaign_table.py: {root}: no such folder; give the --out of "
              "scripts/lab/campaign.py", file=sys.stderr)
        return 2
    path = argv[argv.index("--campaign") + 1] if "--campaign" in argv else \
        str(HERE.parents[1] / "examples/lab/campaign/campaign.json")
    camp = spec_mod.load(path)
    text, out_rows = [], {}
    for cluster in camp.clusters:
        for workload in camp.workloads:
            table(root, camp, cluster, workload, out_rows, text.append)
    print("\n".join(text))
    (root / "table.md").write_text("\n".join(text) + "\n")
    (root / "table.json").write_text(json.dumps(out_rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
