#!/usr/bin/env python3
"""Compares the outputs of two builds of gossamer (issue 38: a refactor must not change them).

Usage: scripts/compare_builds.sh [options] OLD_GOSSAMER NEW_GOSSAMER [OUT_DIR]
(docs/operations/testing.md, "Comparing two builds"). Runs the same jobs with both binaries, one process at
a time, and prints one line per (algorithm, driver, file): `same` or `DIFFERENT (...)`. Exit
status: 0 when everything is the same, 1 when something differs (a run that fails on either
side included), 2 for bad usage.

sim (virtual time, every algorithm): `gossamer sim` of examples/sim/fashion_mlp16.json on
examples/topologies/one-peer-exp16.json with examples/clusters/straggler16.json, compared byte
for byte: metrics.jsonl, peers.jsonl, the --save summary and the --trace timeline. gadmm only runs
on a chain in rank order, which the one-peer exponential graph is not (gossamer refuses it, exit
2), so gadmm runs on the 16-peer ring (`ring16.json`, written into OUT_DIR: the same peers with
family "ring"). The config already carries what the algorithms need (choco's top-k compressor);
the others run with their defaults.

launch --inproc (real threads, the algorithms whose values do not depend on thread timing):
the same config and topology as sim, without a cluster file (natural speed), one BLAS thread per
peer, and --eval-interval 1000 so that only the evaluation at tick 0 happens (the later ticks
fall at wall-clock moments, so which step they see depends on timing). The files are compared
after dropping the fields in WALL_CLOCK below and sorting each peer's records (its evaluator
thread writes evaluation points between the step lines whenever they come).
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = "examples/sim/fashion_mlp16.json"
TOPOLOGY = "examples/topologies/one-peer-exp16.json"
CLUSTER = "examples/clusters/straggler16.json"
ALGORITHMS = ["allreduce", "dpsgd", "sgp", "async", "choco", "lsgd", "gadmm", "qallreduce"]
# Under launch --inproc, sgp and async give other models from run to run of one binary: a
# push-sum peer adds whatever shares have arrived when it mixes (sgp: within its staleness bound;
# the config's staleness 1 and staleness 0 alike), so the step losses, final_accuracy, mass
# and staleness differ (async: its message and byte counts too). The others wait for the same
# messages every round, so everything but the fields of WALL_CLOCK is the same from run to run.
LAUNCH_ALGORITHMS = ["allreduce", "dpsgd", "choco", "lsgd", "gadmm", "qallreduce"]

# Fields of launch's outputs that hold wall-clock time or depend on thread timing; dropped before
# comparing (docs/modules/peer.md "Metrics", docs/algorithms/protocol-contract.md "Measured edges", docs/operations/cli.md launch).
WALL_CLOCK = {
    # peer<r>.jsonl, one line per step: seconds since the driver's start, the step's compute
    # seconds, seconds idle before it, and the neighbour whose message came last (arrival order)
    "step": ["time", "step_seconds", "wait", "waited_for"],
    # peer<r>.jsonl, an evaluation point: the wall-clock second at which it was taken (`time` is
    # the tick k*S and stays)
    "eval": ["at"],
    # peer<r>.jsonl, the summary line: end of training, seconds busy and idle, the job's clock
    # shift
    "summary": ["end_time", "busy", "idle", "job_shift"],
    # the summary's edges: measured link rate and latency, sends timed, and wire bytes completed
    # when the summary was taken (sends still in flight are not counted yet)
    "edge": ["throughput", "latency", "link_samples", "link_bytes"],
    # result.json (OUT and OUT/<algorithm>): the longest peer's training, start-up included, and
    # the idle share
    "row": ["train_seconds", "wall_seconds", "idle_share"],
    # result.json, per peer
    "peer": ["seconds", "end_time", "idle_share"],
}


def log(msg, start=[time.monotonic()]):
    print(f"[{time.monotonic() - start[0]:6.1f}s] {msg}", file=sys.stderr, flush=True)


def drop(record, kind):
    for key in WALL_CLOCK[kind]:
        record.pop(key, None)


def normalize_peer_jsonl(path):
    steps, evals, summaries, other = [], [], [], []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("summary"):
                drop(r, "summary")
                for e in r.get("edges", []):
                    drop(e, "edge")
                summaries.append(r)
            elif "eval" in r:
                drop(r, "eval")
                evals.append(r)
            elif "step" in r:
                drop(r, "step")
                steps.append(r)
            else:
                other.append(r)
    steps.sort(key=lambda r: r["step"])
    evals.sort(key=lambda r: r["eval"])
    return [json.dumps(r, sort_keys=True) for r in steps + evals + other + summaries]


def normalize_result_json(path):
    with open(path) as f:
        d = json.load(f)
    for row in d.get("algorithms", [d]):
        drop(row, "row")
        for p in row.get("peers", []):
            drop(p, "peer")
    return json.dumps(d, sort_keys=True, indent=1).splitlines()


def first_difference(a, b):
    """None when the two lists of lines are equal, else a description."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first differing line {i + 1}"
    if len(a) != len(b):
        return f"first differing line {min(len(a), len(b)) + 1} (old has {len(a)} lines, new {len(b)})"
    return None


def read_lines(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Comparison:
    def __init__(self, args):
        self.args = args
        self.failures = 0
        self.rows = []

    def report(self, algorithm, driver, name, verdict):
        line = f"{algorithm:<11} {driver:<7} {name:<18} {verdict}"
        print(line, flush=True)
        self.rows.append(line)
        if verdict != "same":
            self.failures += 1

    def run(self, side, binary, driver, algorithm, argv):
        """Runs one job into OUT/<side>/<driver>/<algorithm>; True when it exited 0."""
        folder = os.path.join(self.args.out, side, driver, algorithm)
        stamp_path = os.path.join(folder, "stamp.json")
        stamp = {"binary_sha256": sha256(binary), "argv": argv,
                 "inputs": {p: sha256(os.path.join(REPO, p)) if not os.path.isabs(p) else sha256(p)
                            for p in self.inputs(driver, algorithm)}}
        if side == "old" and self.args.reuse_old and os.path.exists(stamp_path):
            with open(stamp_path) as f:
                kept = json.load(f)
            if {k: v for k, v in kept.items() if k != "exit"} == stamp and kept.get("exit") == 0:
                log(f"{driver} {algorithm}: old: kept from {folder}")
                return True
            log(f"{driver} {algorithm}: old: the kept run is of another binary, other options or failed; running again")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        full = [binary] + [a.replace("@OUT@", folder) for a in argv]
        log(f"{driver} {algorithm}: {side}: {' '.join(full[1:3])} ...")
        t0 = time.monotonic()
        with open(os.path.join(folder, "stdout.txt"), "wb") as out, \
             open(os.path.join(folder, "stderr.txt"), "wb") as err:
            rc = subprocess.call(full, cwd=REPO, stdout=out, stderr=err)
        log(f"{driver} {algorithm}: {side}: exit {rc} in {time.monotonic() - t0:.1f} s")
        stamp["exit"] = rc
        with open(stamp_path, "w") as f:
            json.dump(stamp, f, indent=1)
        return rc == 0

    def topology(self, algorithm):
        return self.ring16 if algorithm == "gadmm" else TOPOLOGY

    def inputs(self, driver, algorithm):
        return [CONFIG, self.topology(algorithm)] + ([CLUSTER] if driver == "sim" else [])

    def sim(self, algorithm):
        argv = ["sim", "--topology", self.topology(algorithm), "--cluster", CLUSTER,
                "--config", CONFIG, "--algorithms", algorithm, "--out", "@OUT@/run",
                "--save", "@OUT@/summary.json", "--trace", "@OUT@/trace.json"]
        if self.args.sim_epochs != "config":
            argv += ["--epochs", self.args.sim_epochs]
        files = [("metrics.jsonl", f"run/{algorithm}/seed0/metrics.jsonl"),
                 ("peers.jsonl", f"run/{algorithm}/seed0/peers.jsonl"),
                 ("summary.json", "summary.json"), ("trace.json", "trace.json")]
        ok = [self.run(side, b, "sim", algorithm, argv) for side, b in self.sides()]
        if not all(ok):
            return self.failed("sim", algorithm, ok)
        for name, rel in files:
            paths = [os.path.join(self.args.out, side, "sim", algorithm, rel) for side in ("old", "new")]
            missing = [s for s, p in zip(("old", "new"), paths) if not os.path.exists(p)]
            if missing:
                self.report(algorithm, "sim", name, f"DIFFERENT (missing in {' and '.join(missing)})")
                continue
            diff = first_difference(read_lines(paths[0]), read_lines(paths[1]))
            self.report(algorithm, "sim", name, "same" if diff is None else f"DIFFERENT ({diff})")

    def launch(self, algorithm):
        argv = ["launch", "--inproc", "--topology", self.topology(algorithm), "--config", CONFIG,
                "--algorithms", algorithm, "--epochs", self.args.launch_epochs,
                "--threads-per-peer", "1", "--eval-interval", "1000", "--timeout", "600",
                "--no-plots", "--out", "@OUT@/run"]
        ok = [self.run(side, b, "launch", algorithm, argv) for side, b in self.sides()]
        if not all(ok):
            return self.failed("launch", algorithm, ok)
        base = [os.path.join(self.args.out, side, "launch", algorithm, "run") for side in ("old", "new")]
        # every peer's file in one normalized file, rank by rank, so one line says where
        n_peers = 16
        norm = []
        for b in base:
            lines = []
            for r in range(n_peers):
                p = os.path.join(b, algorithm, f"peer{r}.jsonl")
                lines += [f"# peer{r}.jsonl"] + (normalize_peer_jsonl(p) if os.path.exists(p) else ["missing"])
            norm.append(lines)
            self.write(os.path.join(b, "..", "peers.normalized.jsonl"), lines)
        self.compare_normalized(algorithm, "peer<r>.jsonl", "peers.normalized.jsonl", norm)
        for name, rel, written in (("result.json", f"{algorithm}/result.json", "result.normalized.json"),
                                   ("OUT/result.json", "result.json", "OUT-result.normalized.json")):
            norm = []
            for b in base:
                p = os.path.join(b, rel)
                norm.append(normalize_result_json(p) if os.path.exists(p) else ["missing"])
                self.write(os.path.join(b, "..", written), norm[-1])
            self.compare_normalized(algorithm, name, written, norm)

    def compare_normalized(self, algorithm, name, written, norm):
        diff = first_difference(*norm)
        if diff is not None:
            diff = re.sub(r"^first differing line (\d+)", rf"first differing line \1 of {written}", diff)
            old, new = norm
            i = next((i for i, (x, y) in enumerate(zip(old, new)) if x != y), min(len(old), len(new)))
            where = next((l for l in reversed(old[:i + 1]) if l.startswith("# peer")), None)
            if where:
                diff += f", in {where[2:]}"
        self.report(algorithm, "launch", name, "same" if diff is None else f"DIFFERENT ({diff})")

    @staticmethod
    def write(path, lines):
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")

    def failed(self, driver, algorithm, ok):
        bad = [s for s, k in zip(("old", "new"), ok) if not k]
        logs = ", ".join(os.path.join(self.args.out, s, driver, algorithm, "stderr.txt") for s in bad)
        self.report(algorithm, driver, "(run)", f"DIFFERENT ({' and '.join(bad)} failed; see {logs})")

    def sides(self):
        return [("old", self.args.old), ("new", self.args.new)]

    def main(self):
        a = self.args
        algorithms = a.algorithms.split(",") if a.algorithms else ALGORITHMS
        for alg in algorithms:
            if alg not in ALGORITHMS:
                print(f"scripts/compare_builds.sh: unknown algorithm {alg!r}; use {', '.join(ALGORITHMS)}", file=sys.stderr)
                return 2
        os.makedirs(a.out, exist_ok=True)
        # gadmm needs a chain in rank order: the ring of the same 16 peers (ring 0-1-...-15)
        with open(os.path.join(REPO, TOPOLOGY)) as f:
            topo = json.load(f)
        topo["graph"]["family"] = "ring"
        self.ring16 = os.path.join(a.out, "ring16.json")
        with open(self.ring16, "w") as f:
            json.dump(topo, f, indent=2, sort_keys=True)
            f.write("\n")
        drivers = a.drivers.split(",")
        t0 = time.monotonic()
        if "sim" in drivers:
            for alg in algorithms:
                self.sim(alg)
        if "launch" in drivers:
            for alg in algorithms:
                if alg in LAUNCH_ALGORITHMS:
                    self.launch(alg)
        elapsed = time.monotonic() - t0
        verdict = "all same" if self.failures == 0 else f"{self.failures} DIFFERENT"
        summary = f"{verdict}: {len(self.rows)} comparisons in {elapsed:.0f} s (outputs in {a.out})"
        print(summary)
        self.write(os.path.join(a.out, "comparison.txt"), self.rows + [summary])
        return 0 if self.failures == 0 else 1


def parse():
    p = argparse.ArgumentParser(
        prog="scripts/compare_builds.sh",
        description="Runs the same sim and launch --inproc jobs with two gossamer binaries and "
                    "compares their outputs (docs/operations/testing.md, 'Comparing two builds').")
    p.add_argument("old", metavar="OLD_GOSSAMER")
    p.add_argument("new", metavar="NEW_GOSSAMER")
    p.add_argument("out", metavar="OUT_DIR", nargs="?", default=os.path.join(REPO, "out", "compare_builds"),
                   help="where both sides' outputs go: OUT_DIR/old, OUT_DIR/new (default out/compare_builds)")
    p.add_argument("--algorithms", help="comma-separated subset (default: all: " + ",".join(ALGORITHMS) +
                   "; launch runs only " + ",".join(LAUNCH_ALGORITHMS) + ")")
    p.add_argument("--drivers", default="sim,launch", help="sim, launch or both (default sim,launch)")
    p.add_argument("--sim-epochs", default="1",
                   help="sim's --epochs: a number, or 'config' for the config's 10 (default 1)")
    p.add_argument("--launch-epochs", default="1", help="launch's --epochs (default 1)")
    p.add_argument("--reuse-old", action="store_true",
                   help="keep OUT_DIR/old's run of a job when it was made by the same OLD binary "
                        "(sha256) with the same arguments and input files")
    a = p.parse_args()
    for name in ("old", "new"):
        path = os.path.abspath(getattr(a, name))
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            p.error(f"{name.upper()}_GOSSAMER {getattr(a, name)}: not an executable file")
        setattr(a, name, path)
    a.out = os.path.abspath(a.out)
    if not (a.sim_epochs == "config" or a.sim_epochs.isdigit() and int(a.sim_epochs) > 0):
        p.error("--sim-epochs: a positive number or 'config'")
    if not (a.launch_epochs.isdigit() and int(a.launch_epochs) > 0):
        p.error("--launch-epochs: a positive number")
    if not set(a.drivers.split(",")) <= {"sim", "launch"}:
        p.error("--drivers: sim, launch or sim,launch")
    return a


if __name__ == "__main__":
    sys.exit(Comparison(parse()).main())
