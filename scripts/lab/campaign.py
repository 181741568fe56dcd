#!/usr/bin/python3
"""Issue 43's campaign (docs/results/campaign.md): every row of a campaign file (the torch rows
and ours, each with every hyperparameter written down) on the lab's clusters and workloads, as 8
real peers in a network-namespace lab, each run beside a CPU sampler and `gossamer sim` of the same
files with the step times the run measured. The successor of scripts/lab/experiment.sh and
scripts/lab/outer_lab.sh for the comparison table.

usage: scripts/lab/campaign.py --out DIR [--campaign FILE] [--clusters LIST] [--workloads LIST]
           [--rows LIST] [--seeds LIST] [--measure time|wall] [--part real|sim|both]
           [--stop-after S] [--dry-run]

--campaign FILE: the campaign file (default examples/lab/campaign/campaign.json; its form:
docs/results/campaign.md, "The campaign file"). --clusters, --workloads, --rows: comma-separated
names of the file's (default: all of them); --seeds: comma-separated seeds (default 1).
--measure time (default): measures (a) and (b): the row's config as written, its samples and
schedule, the time to the target and the final quality. --measure wall: measure (c): the wall
budget W = 2 x ddp's time to the target in the same cluster, workload and seed (its `time` run
must be there), each row's sample budget set to what its `time` run trained in W (its schedule
over that budget), its quality read at W.
--part real: the lab runs only (keep the machine otherwise idle: the CPU share is measured);
--part sim: the sims of lab runs already there (deterministic: they may share the machine).
A part already in DIR is skipped: delete its folder to run it again. --dry-run: print what would
run, run nothing. --stop-after S: stop each run after S seconds (the time-to-target runs of the
extra seeds: the target plus a margin; their final quality is then not measured).

Writes DIR/<measure>/<cluster>/<workload>/seed<S>/<row>/: config.json (the row's training
config), launch/ (gossamer launch's output), cpu.json (the CPU sampler: the share of the 2 cores
busy, that of the evaluator threads, training's = the rest, and whether the CPU bound the run),
cluster.json and sim.json with sim/ (the sim). Then scripts/lab/campaign_table.py prints the
table. Needs root and iproute2 for --part real (scripts/deps.sh --lab), python3-torch for the
torch rows; GOSSAMER=path picks the binary (default build/ci/cli/gossamer). Bad input: one line,
exit 2.
"""
import argparse
import copy
import json
import math
import os
import pathlib
import subprocess
import sys
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import campaign_spec as spec_mod  # noqa: E402


def die(msg):
    print(f"scripts/lab/campaign.py: {msg}", file=sys.stderr)
    sys.exit(2)


class CpuSampler:
    """The share of the machine's cores busy while a run goes on (/proc/stat), and the shares
    taken by tasks at nice 19 (/proc/*/task/*/stat): the evaluators (threads named
    gossamer-eval) and other background work (a `nice -n 19` sim), sampled every 0.5 s;
    training's share is the rest: the peers, their kernel time and anything not niced."""

    def __init__(self):
        self.stop = threading.Event()
        self.cores = os.cpu_count() or 1
        self.tick = os.sysconf("SC_CLK_TCK")
        self.samples = []
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def busy(self):
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v) - v[3] - v[4], sum(v)  # busy jiffies (all but idle, iowait), total

    def background_ticks(self):
        """{task: (utime + stime, is an evaluator)} of every task at nice 19: the evaluators
        (threads named gossamer-eval, at nice 19 by design) and whatever else runs at the lowest
        priority beside the lab (a `nice -n 19` sim): they take only what training leaves."""
        seen = {}
        for task in pathlib.Path("/proc").glob("[0-9]*/task/[0-9]*"):
            try:
                text = (task / "stat").read_text()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2:].split()
            if int(fields[16]) >= 19:  # nice
                name = text[text.index("(") + 1:text.rindex(")")]
                seen[task.parent.parent.name + "/" + task.name] = (
                    int(fields[11]) + int(fields[12]), name == "gossamer-eval")
        return seen

    def loop(self):
        last_busy, last_total = self.busy()
        last_bg = self.background_ticks()
        while not self.stop.wait(0.5):
            b, t = self.busy()
            bg = self.background_ticks()
            d_eval = d_other = 0
            for k, (v, is_eval) in bg.items():
                d = max(0, v - last_bg.get(k, (0, is_eval))[0])
                if is_eval:
                    d_eval += d
                else:
                    d_other += d
            if t > last_total:
                # /proc/stat counts every core's jiffies; a task's utime + stime is its own.
                span = t - last_total
                self.samples.append(((b - last_busy) / span, min(1.0, d_eval / span),
                                     min(1.0, d_other / span)))
            last_busy, last_total, last_bg = b, t, bg

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def result(self, bound):
        if not self.samples:
            return {"samples": 0}
        n = len(self.samples)
        busy = sum(s[0] for s in self.samples) / n
        ev = sum(s[1] for s in self.samples) / n
        other = sum(s[2] for s in self.samples) / n
        train = max(0.0, busy - ev - other)
        saturated = sum(1 for s in self.samples if s[0] - s[1] - s[2] >= 0.98) / n
        return {"samples": n, "cores": self.cores, "busy_share": round(busy, 4),
                "eval_share": round(ev, 4), "background_share": round(other, 4),
                "train_share": round(train, 4), "saturated_share": round(saturated, 4),
                "cpu_bound_at": bound, "cpu_bound": train >= bound}


def run(cmd, dry, log=None):
    print("  $ " + " ".join(str(c) for c in cmd), flush=True)
    if dry:
        return 0
    with open(log, "w") if log else open(os.devnull, "w") as out:
        return subprocess.call([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT)


def lab_run(g, camp, job, dry):
    d = job.dir
    if (d / "launch" / "result.json").exists():
        print(f"== {job.name}: lab run already in {d}/launch (delete it to rerun)")
        return
    print(f"== {job.name}: 8 real peers in the lab ({time.strftime('%H:%M:%S', time.gmtime())}"
          f" UTC, load {os.getloadavg()[0]:.2f})", flush=True)
    cmd = [g, "launch", "--hosts", "netns", "--topology", job.topology, "--cluster", job.cluster,
           "--config", d / "config.json", "--algorithms", job.algorithm, "--eval-interval",
           camp.eval_interval, "--eval-samples", job.eval_samples, "--timeout", job.timeout,
           "--no-plots", "--json", "--out", d / "launch"]
    target = job.workload["target"]
    cmd += ["--target-loss", target["loss"]] if "loss" in target else ["--target",
                                                                       target["accuracy"]]
    if dry:
        run(cmd, dry)
        return
    with CpuSampler() as cpu:
        t0 = time.monotonic()
        rc = run(cmd, dry, d / "launch.log")
    info = cpu.result(camp.cpu_bound)
    info.update({"exit_status": rc, "wall_seconds": round(time.monotonic() - t0, 2),
                 "load_after": os.getloadavg()[0]})
    (d / "cpu.json").write_text(json.dumps(info, indent=1) + "\n")
    print(f"== {job.name}: exit {rc}, CPU busy {info.get('busy_share', 0):.0%}, training "
          f"{info.get('train_share', 0):.0%}, evaluations {info.get('eval_share', 0):.0%}"
          + (" (CPU-bound: does not count)" if info.get("cpu_bound") else ""), flush=True)


def sim_run(g, camp, job, dry):
    d = job.dir
    if (d / "sim.json").exists():
        print(f"== {job.name}: sim already in {d}/sim.json")
        return
    runs = d / "launch" / job.algorithm
    if not (d / "launch" / "result.json").exists() and not dry:
        print(f"warning: {job.name}: no finished lab run to take the step times from; sim "
              "skipped", file=sys.stderr)
        return
    outer = job.config.get("outer") or {}
    if "seconds" in outer:
        # Rounds by time: a record is a round of T seconds whatever the step time, so the step
        # times cannot be read back from it (measured_cluster.py would take a round for a step);
        # the declared cluster is the sim's, and the table's step-time check says whether the
        # lab's steps kept their pads.
        if not dry:
            (d / "cluster.json").write_text(pathlib.Path(job.cluster).read_text())
    else:
        run(["/usr/bin/python3", HERE / "measured_cluster.py", runs, job.cluster,
             d / "cluster.json", "--inner", outer.get("steps", 1)], dry)
    sim_cfg = d / "sim_config.json"
    if not dry:
        sim_cfg.write_text(json.dumps(job.sim_config, indent=1) + "\n")
    cmd = ["nice", "-n", "19", g, "sim", "--topology", job.topology, "--cluster",
           d / "cluster.json", "--config", sim_cfg, "--algorithms", job.sim_algorithm,
           "--eval-interval", camp.eval_interval, "--peer-eval-samples", job.eval_samples,
           "--average-eval-samples", 500, "--json", "--save", d / "sim.json.part",
           "--out", d / "sim"]
    rc = run(cmd, dry, d / "sim.log")
    if rc == 0 and not dry:
        (d / "sim.json.part").rename(d / "sim.json")
    elif not dry:
        print(f"warning: {job.name}: the sim failed (exit {rc}, {d}/sim.log)", file=sys.stderr)


def main(argv):
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--out")
    p.add_argument("--campaign", default=str(ROOT / "examples/lab/campaign/campaign.json"))
    for k in ("clusters", "workloads", "rows"):
        p.add_argument("--" + k, default="")
    p.add_argument("--seeds", default="1")
    p.add_argument("--measure", default="time")
    p.add_argument("--part", default="both")
    p.add_argument("--stop-after", type=int, default=0)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("-h", "--help", action="store_true")
    a, rest = p.parse_known_args(argv)
    if a.help:
        print(__doc__)
        return 0
    if rest:
        die(f"unknown argument \"{rest[0]}\"; see --help")
    if not a.out:
        die("--out is required (a folder for the runs)")
    if a.measure not in ("time", "wall"):
        die(f"--measure {a.measure}: use time (measures a and b) or wall (measure c)")
    if a.stop_after < 0:
        die(f"--stop-after {a.stop_after}: whole seconds >= 0")
    if a.part not in ("real", "sim", "both"):
        die(f"--part {a.part}: use real, sim or both")
    camp = spec_mod.load(a.campaign)
    try:
        seeds = [int(s) for s in a.seeds.split(",") if s]
    except ValueError:
        die(f"--seeds {a.seeds}: comma-separated whole numbers, e.g. 1,2,3")
    jobs = camp.jobs(pathlib.Path(a.out), a.measure, spec_mod.pick(a.clusters, camp.clusters,
                     "--clusters"), spec_mod.pick(a.workloads, list(camp.workloads),
                     "--workloads"), spec_mod.pick(a.rows, [r["label"] for r in camp.rows],
                     "--rows"), seeds, die)
    g = os.environ.get("GOSSAMER", str(ROOT / "build/ci/cli/gossamer"))
    if not a.dry_run and not os.access(g, os.X_OK):
        die(f"GOSSAMER={g} is not an executable; build the gossamer target or set GOSSAMER")
    if a.part != "sim" and not a.dry_run and os.geteuid() != 0:
        die("the lab runs need root (and iproute2: scripts/deps.sh --lab)")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    for job in jobs:
        if a.stop_after:
            job.timeout = min(job.timeout, a.stop_after)
        job.dir.mkdir(parents=True, exist_ok=True)
        if not a.dry_run:
            (job.dir / "config.json").write_text(json.dumps(job.config, indent=1) + "\n")
        if a.part != "sim":
            lab_run(g, camp, job, a.dry_run)
        if a.part != "real":
            sim_run(g, camp, job, a.dry_run)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
