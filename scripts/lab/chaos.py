#!/usr/bin/env python3
"""The chaos run (docs/operations/reliability.md, "Chaos run"): jobs of `gossamer peer` processes in the
network-namespace lab (`gossamer launch --hosts netns`) under `async`, `dpsgd` and `allreduce`,
while a seeded schedule kills peers (SIGKILL), pauses them (SIGSTOP, then SIGCONT), takes their
links down and up (`ip link set`) and throttles their uplinks (`tc class change`). After every job
it checks the invariants and prints one line per job; any broken invariant is named and the run
exits 1. Run it through scripts/chaos.sh (as root, after scripts/deps.sh --lab).

Invariants checked after each job:
  bounded     the launcher ended within its --timeout plus a margin, and no peer process or
              namespace of the job is left;
  survivors   every peer no fault made leave exits 0 (gossip), or, under allreduce, the job either
              finished whole or every survivor stopped naming a peer the schedule took out;
  result      at most one result: average.json exists exactly when some peer finished, its
              survivors are exactly the peers that exited 0 (the agreed survivors), and no peer
              the job lost is in it;
  files       average.json parses, model.bin and every checkpoint load (`gossamer eval`), none is
              torn;
  mass        async: with nobody lost the survivors' mass is n (1e-6); with losses it is below n
              but not drained (at least n / 1000), and the exact average's loss is a number.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
import strict_json  # noqa: E402  (scripts/strict_json.py)



STEP = 0.02  # seconds a step (the cluster file's base_time)


def fail_usage(line):
    print(f"scripts/chaos.sh: {line}", file=sys.stderr)
    sys.exit(2)


def write_inputs(folder, n, seconds, seed):
    """Topology, training config and cluster file of one job: n peers on a ring training a small
    MLP on synthetic data for about `seconds` of 20 ms steps, checkpoints every 100 steps."""
    folder.mkdir(parents=True, exist_ok=True)
    samples = 20 * 10 * n  # 10 steps of 20 per epoch and peer
    epochs = max(1, int(seconds / STEP / 10))
    topo = {"peers": {"count": n, "host": "127.0.0.1", "base_port": 29700},
            "graph": {"family": "ring"}}
    config = {"seed": seed,
              "data": {"name": "logreg_synthetic", "samples": samples, "test_samples": 200,
                       "features": 10, "seed": 5},
              "model": {"name": "mlp", "hidden": [32]},
              "optimizer": {"name": "sgd", "lr": 0.2},
              "training": {"epochs": epochs, "batch_size": 20},
              "output": {"checkpoint_every": 100}}
    # Uplinks capped (200 Mbit/s) so that each veth has the htb class a throttle changes.
    cluster = {"version": 1, "n": n,
               "defaults": {"base_time": STEP, "uplink": 2.5e7, "downlink": 2.5e7},
               "network": {"latency": 1e-5, "bandwidth": 1e9}}
    paths = {}
    for name, body in (("topology.json", topo), ("train.json", config), ("cluster.json", cluster)):
        paths[name] = folder / name
        paths[name].write_text(strict_json.dumps(body, indent=1) + "\n")
    return paths


def schedule(rng, n, seconds, max_losing):
    """The faults of one job: (at, kind, rank, duration, rate); times from the first step."""
    faults, losing = [], 0
    for _ in range(rng.randint(2, 4)):
        kind = rng.choice(["kill", "pause", "link", "throttle"])
        at = round(rng.uniform(2.0, max(2.5, seconds - 3.0)), 2)
        rank = rng.randrange(n)
        duration = round(rng.uniform(0.5, 8.0), 2)
        rate = round(rng.uniform(0.5, 5.0), 1)  # Mbit/s, throttle only
        # A kill, or a pause or cut past the 5 s heartbeat timeout, may make the job lose the
        # peer: at most max_losing of them, so that a majority stays.
        may_lose = kind == "kill" or (kind in ("pause", "link") and duration >= 4.0)
        if may_lose:
            if losing >= max_losing or any(f[2] == rank for f in faults):
                kind, duration = "throttle", round(rng.uniform(2.0, 8.0), 2)
            else:
                losing += 1
        faults.append((at, kind, rank, duration if kind != "kill" else 0.0, rate))
    return sorted(faults)


def run(cmd, check=False):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


def peer_processes(out_dir):
    """pid -> rank of the job's running `gossamer peer` processes (found by their --out)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv]
        if "peer" not in args or "--out" not in args or "--rank" not in args:
            continue
        if os.path.realpath(args[args.index("--out") + 1]) != os.path.realpath(out_dir):
            continue
        found[int(entry)] = int(args[args.index("--rank") + 1])
    return found


def netns_of(pid):
    r = run(["ip", "netns", "identify", str(pid)])
    return r.stdout.strip()


def ns_inode(name):
    try:
        return os.stat(f"/run/netns/{name}").st_ino
    except OSError:
        return None


def htb_rate(ns, dev):
    r = run(["tc", "-n", ns, "class", "show", "dev", dev])
    m = re.search(r"class htb 1:1 root rate (\S+) ceil (\S+)", r.stdout)
    return (m.group(1), m.group(2)) if m else None


class Injector:
    """Applies one job's faults at their times and undoes each after its duration."""

    def __init__(self, faults, peers, log):
        self.pending = list(faults)
        self.undo = []  # (at, callable, text)
        self.peers = peers  # rank -> (pid, netns, device)
        self.log = log
        self.applied = []

    def tick(self, t):
        while self.pending and self.pending[0][0] <= t:
            at, kind, rank, duration, rate = self.pending.pop(0)
            self.apply(t, kind, rank, duration, rate)
        for item in [u for u in self.undo if u[0] <= t]:
            self.undo.remove(item)
            try:
                item[1]()
                self.log(f"  {t:6.2f} s  {item[2]}")
            except (OSError, RuntimeError) as e:
                self.log(f"  {t:6.2f} s  {item[2]}: {e}")

    def apply(self, t, kind, rank, duration, rate):
        if rank not in self.peers:
            return
        pid, ns, dev = self.peers[rank]
        try:
            if kind == "kill":
                os.kill(pid, signal.SIGKILL)
                text = f"kill rank {rank}"
            elif kind == "pause":
                os.kill(pid, signal.SIGSTOP)
                self.undo.append((t + duration, lambda: os.kill(pid, signal.SIGCONT),
                                  f"resume rank {rank}"))
                text = f"pause rank {rank} for {duration} s"
            elif kind == "link":
                run(["ip", "-n", ns, "link", "set", dev, "down"], check=True)
                self.undo.append((t + duration,
                                  lambda: run(["ip", "-n", ns, "link", "set", dev, "up"],
                                              check=True),
                                  f"link of rank {rank} up"))
                text = f"link of rank {rank} down for {duration} s"
            else:
                old = htb_rate(ns, dev)
                if old is None:
                    self.log(f"  {t:6.2f} s  throttle rank {rank}: no htb class on {dev}")
                    return
                new = f"{rate}mbit"
                run(["tc", "-n", ns, "class", "change", "dev", dev, "parent", "1:", "classid",
                     "1:1", "htb", "rate", new, "ceil", new], check=True)
                self.undo.append((t + duration,
                                  lambda: run(["tc", "-n", ns, "class", "change", "dev", dev,
                                               "parent", "1:", "classid", "1:1", "htb", "rate",
                                               old[0], "ceil", old[1]], check=True),
                                  f"uplink of rank {rank} back to {old[0]}"))
                text = f"throttle rank {rank}'s uplink to {new} for {duration} s"
        except (ProcessLookupError, RuntimeError) as e:
            self.log(f"  {t:6.2f} s  {kind} rank {rank}: not applied ({e})")
            return
        self.applied.append({"at": t, "kind": kind, "rank": rank, "duration": duration,
                             "rate_mbit": rate if kind == "throttle" else None})
        self.log(f"  {t:6.2f} s  {text}")

    def finish(self):
        """Undoes what is still applied (a job that ended early)."""
        for _, undo, text in self.undo:
            try:
                undo()
            except (OSError, RuntimeError):
                pass
        self.undo.clear()


def eval_file(gossamer, model, config):
    r = run([gossamer, "eval", "--model", str(model), "--config", str(config), "--json"])
    return r.returncode == 0, (r.stderr.strip().splitlines() or [""])[-1]


def check_job(job, gossamer, n, algo, alg_dir, config, status, took, limit, namespaces,
              applied):
    """The invariants; returns the list of violations (empty: the job passed)."""
    bad = []
    if status is None or took > limit:
        bad.append(f"bounded: the launcher ran {took:.0f} s (limit {limit:.0f} s)")
    left = peer_processes(alg_dir)
    if left:
        bad.append(f"bounded: peer processes left: {sorted(left.values())}")
    # The job's own namespaces (same name and inode: a slot may be taken by another lab at
    # once), given the holder a few seconds to remove them.
    deadline = time.monotonic() + 10
    while True:
        stale = [ns for ns, ino in namespaces.items() if ns_inode(ns) == ino]
        if not stale or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if stale:
        bad.append(f"bounded: namespaces left: {stale}")
    result_file = alg_dir / "result.json"
    if not result_file.exists():
        bad.append("result: no result.json from the launcher")
        return bad, {}
    result = json.loads(result_file.read_text())
    exits = {p["rank"]: p["exit"] for p in result.get("peers", [])}
    finished = sorted(r for r, e in exits.items() if e == "exit status 0")
    faulted = {f["rank"] for f in applied}
    losing = {f["rank"] for f in applied
              if f["kind"] == "kill" or (f["kind"] in ("pause", "link") and f["duration"] >= 4.0)}
    avg_file = alg_dir / "average.json"
    avg = None
    if avg_file.exists():
        try:
            avg = json.loads(avg_file.read_text())
        except json.JSONDecodeError as e:
            bad.append(f"files: average.json does not parse ({e})")
    if algo == "allreduce":
        if finished and len(finished) != n:
            bad.append(f"survivors: all-reduce finished on {finished} only")
        if not finished:
            for r, e in exits.items():
                # A peer the schedule cut off or paused names whichever endpoint broke first
                # from where it stands; the others must name a peer the schedule touched.
                if e == "exit status 1" and r not in faulted:
                    log = Path(alg_dir / f"peer{r}.log").read_text(errors="replace")
                    named = [int(x) for x in re.findall(r"stopped: peer (\d+) failed", log)]
                    if not named or named[0] not in faulted:
                        bad.append(f"survivors: all-reduce rank {r} stopped without naming a "
                                   f"faulted peer ({named})")
        if not finished and not losing and not faulted:
            bad.append("survivors: all-reduce stopped with no fault")
    else:
        for r, e in exits.items():
            if e != "exit status 0" and r not in faulted:
                bad.append(f"survivors: rank {r} ({e}) had no fault yet did not finish")
    if finished:
        if avg is None:
            bad.append(f"result: peers {finished} finished but no average.json")
        elif sorted(avg.get("survivors", [])) != finished:
            bad.append(f"result: average.json survivors {avg.get('survivors')} != the peers "
                       f"that finished {finished}")
    elif avg is not None:
        bad.append("result: average.json written although no peer finished")
    files = sorted(alg_dir.glob("checkpoint-*.bin")) + ([alg_dir / "model.bin"]
                                                        if (alg_dir / "model.bin").exists()
                                                        else [])
    if avg is not None and not (alg_dir / "model.bin").exists():
        bad.append("files: average.json without model.bin")
    for f in files:
        ok, line = eval_file(gossamer, f, config)
        if not ok:
            bad.append(f"files: {f.name} does not load: {line}")
    mass = {}
    if algo == "async" and avg is not None:
        total = float(avg.get("total_mass", 0.0))
        estimates = []
        for r in finished:
            for line in (alg_dir / f"peer{r}.jsonl").read_text().splitlines()[::-1]:
                rec = json.loads(line)
                if "mass_lost" in rec:
                    estimates.append(float(rec["mass_lost"]))
                    break
        lost_members = n - len(finished)
        mass = {"total": total, "lost": n - total, "max_estimate": max(estimates, default=0.0)}
        if lost_members == 0 and abs(total - n) > 1e-6:
            bad.append(f"mass: nobody lost but the survivors' mass is {total!r}, not {n}")
        if lost_members > 0 and not total < n:
            bad.append(f"mass: {lost_members} peers lost but the survivors' mass is {total!r}")
        # Not drained: before the silent-neighbour rule a stopped peer swallowed nearly all of
        # it (5.6e-12 of 6 left, the average's loss NaN). The peers' own estimates of the lost
        # mass are recorded, not checked: they estimate a lost peer's w at its last split seen,
        # which is neither a lower nor an upper bound of what it held when it died.
        if finished and total < 1e-3 * n:
            bad.append(f"mass: the survivors kept {total!r} of {n}: drained")
        if finished and avg.get("loss") is None:
            bad.append("mass: the exact average's loss is not a number")
    return bad, {"exits": exits, "finished": finished, "mass": mass,
                 "files_checked": len(files)}


def main():
    ap = argparse.ArgumentParser(prog="scripts/chaos.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--peers", type=int, default=6)
    ap.add_argument("--job-seconds", type=float, default=20.0,
                    help="training time of one job without faults (default 20)")
    ap.add_argument("--algorithms", default="async,dpsgd,allreduce")
    ap.add_argument("--out", default="out/chaos")
    ap.add_argument("--gossamer", default=os.environ.get("GOSSAMER", "build/release/cli/gossamer"))
    a = ap.parse_args()
    if a.minutes <= 0 or a.minutes > 24 * 60:
        fail_usage(f"--minutes {a.minutes}: must be in (0, 1440]")
    if not 3 <= a.peers <= 16:
        fail_usage(f"--peers {a.peers}: must be 3..16 (a majority must survive two losses)")
    if not 5 <= a.job_seconds <= 600:
        fail_usage(f"--job-seconds {a.job_seconds}: must be 5..600")
    algorithms = a.algorithms.split(",")
    for algo in algorithms:
        if algo not in ("async", "dpsgd", "allreduce", "sgp", "choco"):
            fail_usage(f"--algorithms: unknown '{algo}'; use async, dpsgd, allreduce, sgp, choco")
    if not (os.path.isfile(a.gossamer) and os.access(a.gossamer, os.X_OK)):
        fail_usage(f"--gossamer {a.gossamer}: not an executable; build it or set GOSSAMER")
    out = Path(a.out)
    if out.exists():
        # Replace only what an earlier chaos run wrote (the project's output-folder rule).
        if not out.is_dir() or (any(out.iterdir()) and not (out / ".gossamer-chaos").exists()):
            fail_usage(f"--out {out}: exists and was not written by a chaos run (no "
                       f".gossamer-chaos in it); pick another folder or empty it")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / ".gossamer-chaos").write_text("written by scripts/chaos.sh; replaced by the next run\n")
    report = open(out / "chaos.log", "w")

    def log(line):
        print(line, flush=True)
        report.write(line + "\n")
        report.flush()

    budget = a.minutes * 60
    start = time.monotonic()
    jobs, violations = [], 0
    max_losing = 1 if a.peers < 5 else 2  # a majority of the job stays
    k = 0
    log(f"chaos: seed {a.seed}, {a.minutes:g} min, {a.peers} peers, jobs of about "
        f"{a.job_seconds:g} s under {', '.join(algorithms)}")
    # Every algorithm runs once, whatever the budget: jobs of "about 20 s" took 30 and 55 s on 2
    # cores under ctest -j 4 (issue 37), and a 2-minute run then never reached allreduce.
    while k < len(algorithms) or time.monotonic() - start + a.job_seconds * 1.5 + 20 < budget:
        algo = algorithms[k % len(algorithms)]
        rng = random.Random(a.seed * 100_003 + k)
        job_dir = out / f"job{k:03d}"
        paths = write_inputs(out / "inputs" / f"job{k:03d}", a.peers, a.job_seconds, a.seed + k)
        faults = schedule(rng, a.peers, a.job_seconds, max_losing)
        limit = a.job_seconds * 4 + 90
        alg_dir = job_dir / algo
        log(f"job {k} ({algo}): {len(faults)} faults planned")
        cmd = [a.gossamer, "launch", "--hosts", "netns", "--topology", str(paths["topology.json"]),
               "--config", str(paths["train.json"]), "--cluster", str(paths["cluster.json"]),
               "--algorithms", algo, "--out", str(job_dir), "--no-plots",
               "--eval-interval", "2", "--eval-samples", "200",
               "--timeout", str(int(a.job_seconds * 4 + 60))]
        launch_log = out / "inputs" / f"job{k:03d}" / "launch.log"
        launcher = subprocess.Popen(cmd, stdout=open(launch_log, "w"),
                                    stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.monotonic()
        peers, namespaces, started = {}, {}, None
        injector = None
        status = None
        while True:
            status = launcher.poll()
            now = time.monotonic()
            if status is not None or now - t0 > limit:
                break
            if injector is None:
                found = peer_processes(alg_dir)
                for pid, rank in found.items():
                    if rank not in peers:
                        ns = netns_of(pid)
                        if ns:
                            peers[rank] = (pid, ns, ns.replace("-p", "p"))
                            for name in (ns, ns.split("-")[0] + "-lab"):
                                namespaces[name] = ns_inode(name)
                # The clock starts when every peer has written a step.
                if len(peers) == a.peers and all(
                        (alg_dir / f"peer{r}.jsonl").exists() for r in peers):
                    started = now
                    injector = Injector(faults, peers, log)
            else:
                injector.tick(now - started)
            time.sleep(0.05)
        if status is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
        if status == 2:  # bad input: the run itself is wrong, not the job
            last = (launch_log.read_text().strip().splitlines() or ["(empty)"])[-1]
            print(f"scripts/chaos.sh: gossamer launch refused job {k}: {last}", file=sys.stderr)
            sys.exit(2)
        took = time.monotonic() - t0
        if injector:
            injector.finish()
        applied = injector.applied if injector else []
        bad, facts = check_job(k, a.gossamer, a.peers, algo, alg_dir, paths["train.json"],
                               status, took, limit, namespaces, applied)
        if injector is None:
            bad.append("bounded: the peers never all started")
        jobs.append({"job": k, "algorithm": algo, "faults": applied, "launch_exit": status,
                     "seconds": round(took, 1), "violations": bad, **facts})
        verdict = "ok" if not bad else "VIOLATED: " + "; ".join(bad)
        mass = facts.get("mass") or {}
        extra = f", mass {mass['total']:.6f}" if mass else ""
        log(f"job {k} ({algo}): {len(applied)} faults, launch exit {status}, {took:.0f} s, "
            f"finished {facts.get('finished')}{extra}: {verdict}")
        violations += len(bad)
        k += 1
    summary = {"seed": a.seed, "minutes": a.minutes, "peers": a.peers, "jobs": jobs,
               "violations": violations}
    (out / "chaos.json").write_text(strict_json.dumps(summary, indent=1) + "\n")
    log(f"chaos: {len(jobs)} jobs, {sum(len(j['faults']) for j in jobs)} faults, "
        f"{violations} violations; {out / 'chaos.json'}")
    sys.exit(1 if violations else 0)


if __name__ == "__main__":
    main()
