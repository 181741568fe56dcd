"""The campaign file of scripts/lab/campaign.py (docs/results/campaign.md, "The campaign file"):
read, checked (one line naming the file, the JSON path, what is wrong and the fix), and turned
into runs: for each cluster, workload, seed and row, the row's training config (the workload's
config, its seed, the row's `set`, `set_workload` and `set_cluster` patches merged in), its
topology, algorithm, and the sim's algorithm and config; for measure (c) the sample budget of
the wall-clock budget."""
import copy
import json
import math
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROW_KEYS = {"label", "family", "algorithm", "topology", "set", "set_workload", "set_cluster",
            "sim", "headline", "timeout", "workloads", "note"}
WORKLOAD_KEYS = {"config", "target", "clusters", "timeout", "eval_samples", "budget", "note"}
TOP_KEYS = {"version", "description", "topology", "eval_interval", "eval_samples",
            "cpu_bound_share", "wall_factor", "workloads", "rows"}
FAMILIES = ("torch", "ours")


class SpecError(Exception):
    pass


def fail(msg):
    """One line on stderr and exit status 2, as for every bad input of the campaign's scripts."""
    print(f"scripts/lab/campaign.py: {msg}", file=sys.stderr)
    sys.exit(2)


def merge(base, patch):
    """A copy of base with patch merged in: objects key by key, anything else replaced; a null
    removes the key."""
    out = copy.deepcopy(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def pick(text, names, flag):
    if not text:
        return list(names)
    chosen = [x for x in text.split(",") if x]
    for x in chosen:
        if x not in names:
            fail(f"{flag}: unknown name \"{x}\"; the campaign file has {', '.join(names)}")
    return chosen


class Job:
    pass


class Campaign:
    def __init__(self, path, doc):
        self.path = path

        def bad(where, what):
            raise SpecError(f"{path}: {where}: {what}")

        if not isinstance(doc, dict):
            bad("(top)", "not a JSON object; see docs/results/campaign.md")
        def known(obj, keys, at):
            for k in obj:
                if k not in keys:
                    bad(f"{at}{k}", f"unknown key; use some of {', '.join(sorted(keys))}")

        known(doc, TOP_KEYS, "")
        self.topology = self.file(doc.get("topology", "examples/lab/ring8.json"), "topology", bad)
        self.eval_interval = self.number(doc, "eval_interval", 1.0, 0.05, 60, bad)
        self.eval_samples = int(self.number(doc, "eval_samples", 2000, 1, 1e6, bad))
        self.cpu_bound = self.number(doc, "cpu_bound_share", 0.9, 0.1, 1.0, bad)
        self.wall_factor = self.number(doc, "wall_factor", 2.0, 0.1, 100, bad)
        self.workloads = doc.get("workloads")
        if not isinstance(self.workloads, dict) or not self.workloads:
            bad("workloads", "missing or empty; name at least one, e.g. {\"mlp\": {...}}")
        self.clusters = []
        for name, w in self.workloads.items():
            at = f"workloads.{name}"
            if not isinstance(w, dict):
                bad(at, "not an object")
            known(w, WORKLOAD_KEYS, at + ".")
            w["config_doc"] = json.loads(pathlib.Path(self.file(w.get("config"), at + ".config",
                                                                  bad)).read_text())
            t = w.get("target")
            if not isinstance(t, dict) or len(t) != 1 or not set(t) <= {"accuracy", "loss"}:
                bad(at + ".target", "give exactly one of {\"accuracy\": A} or {\"loss\": L}")
            if not isinstance(w.get("clusters"), dict) or not w["clusters"]:
                bad(at + ".clusters", "missing; map cluster names to cluster files")
            for c, f in w["clusters"].items():
                self.file(f, f"{at}.clusters.{c}", bad)
                if c not in self.clusters:
                    self.clusters.append(c)
            b = w.get("budget", "train_limit")
            if b not in ("train_limit", "stride", "none"):
                bad(at + ".budget", "use \"train_limit\" (measure c sets the samples through "
                    "data.train_limit: images), \"stride\" (through whole epochs and the "
                    "training windows' data.stride: text) or \"none\" (no measure c)")
            w["budget"] = b
        self.rows = doc.get("rows")
        if not isinstance(self.rows, list) or not self.rows:
            bad("rows", "missing or empty; a list of rows, each with label, family, algorithm")
        labels = set()
        for i, r in enumerate(self.rows):
            at = f"rows[{i}]"
            if not isinstance(r, dict):
                bad(at, "not an object")
            known(r, ROW_KEYS, at + ".")
            for k in ("label", "algorithm"):
                if not isinstance(r.get(k), str) or not r[k]:
                    bad(f"{at}.{k}", "missing; a non-empty string")
            if r["label"] in labels:
                bad(f"{at}.label", f"\"{r['label']}\" is used twice; labels name rows")
            labels.add(r["label"])
            if r.get("family") not in FAMILIES:
                bad(f"{at}.family", f"use one of {', '.join(FAMILIES)}")
            if "topology" in r:
                self.file(r["topology"], at + ".topology", bad)
            for k in ("set", "set_workload", "set_cluster", "sim"):
                if k in r and not isinstance(r[k], dict):
                    bad(f"{at}.{k}", "not an object")
            for k in r.get("set_workload", {}):
                if k not in self.workloads:
                    bad(f"{at}.set_workload.{k}", f"no such workload; use one of "
                        f"{', '.join(self.workloads)}")
            for k in r.get("set_cluster", {}):
                c, _, w = k.partition("/")
                if c not in self.clusters or (w and w not in self.workloads):
                    bad(f"{at}.set_cluster.{k}", "no such cluster (or cluster/workload); use "
                        f"one of {', '.join(self.clusters)}, optionally /<workload>")

    @staticmethod
    def file(name, where, bad):
        if not isinstance(name, str) or not (ROOT / name).is_file():
            bad(where, f"{name!r} is not a file (paths are relative to the repository root)")
        return str(ROOT / name)

    @staticmethod
    def number(doc, key, default, lo, hi, bad):
        v = doc.get(key, default)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v <= hi:
            bad(key, f"{v!r} is not a number in [{lo}, {hi}]")
        return float(v)

    def config(self, row, workload, cluster, seed):
        w = self.workloads[workload]
        c = merge(w["config_doc"], row.get("set", {}))
        c = merge(c, row.get("set_workload", {}).get(workload, {}))
        c = merge(c, row.get("set_cluster", {}).get(cluster, {}))
        c = merge(c, row.get("set_cluster", {}).get(f"{cluster}/{workload}", {}))
        c["seed"] = seed
        target = w["target"]
        c.setdefault("training", {})
        c["training"].pop("target_accuracy", None)
        c["training"].pop("target_loss", None)
        c["training"]["target_" + next(iter(target))] = next(iter(target.values()))
        return c

    def jobs(self, out, measure, clusters, workloads, rows, seeds, die):
        jobs = []
        for cluster in clusters:
            for workload in workloads:
                w = self.workloads[workload]
                if cluster not in w["clusters"]:
                    continue
                for seed in seeds:
                    for row in (r for r in self.rows if r["label"] in rows and
                                workload in r.get("workloads", [workload])):
                        j = Job()
                        j.row, j.workload, j.seed = row, w, seed
                        j.name = f"{measure}/{cluster}/{workload}/seed{seed}/{row['label']}"
                        j.dir = out / j.name
                        j.cluster = str(ROOT / w["clusters"][cluster])
                        j.topology = str(ROOT / row["topology"]) if "topology" in row \
                            else self.topology
                        j.algorithm = row["algorithm"]
                        j.config = self.config(row, workload, cluster, seed)
                        j.eval_samples = int(w.get("eval_samples", self.eval_samples))
                        j.timeout = int(row.get("timeout", w.get("timeout", 1800)))
                        sim = row.get("sim", {})
                        j.sim_algorithm = sim.get("algorithm", j.algorithm)
                        j.sim_config = merge(j.config, sim.get("set", {}))
                        if measure == "wall":
                            self.wall_budget(j, out, cluster, workload, seed, die)
                        jobs.append(j)
        return jobs

    def wall_budget(self, j, out, cluster, workload, seed, die):
        """Measure (c): W = wall_factor x ddp's time to the target (its `time` run); the row's
        sample budget = what its own `time` run trained in W, its schedule over that budget."""
        base = out / "time" / cluster / workload / f"seed{seed}"
        ddp = _result(base / "ddp" / "launch")
        if not ddp or ddp.get("time_to_target") is None:
            die(f"--measure wall: {base}/ddp has no time to the target; run --measure time "
                f"--rows ddp for {cluster}, {workload}, seed {seed} first")
        wall = self.wall_factor * ddp["time_to_target"]
        own = _result(base / j.row["label"] / "launch")
        if own and not own.get("train_seconds"):  # stopped at the target plus a margin
            own["train_seconds"] = _extrapolated_seconds(base / j.row["label"])
        if not own or not own.get("train_seconds"):
            die(f"--measure wall: {base}/{j.row['label']} has no finished run to take its rate "
                f"from; run --measure time --rows {j.row['label']} first")
        if j.workload["budget"] == "none":
            die(f"--measure wall: workload {workload} has no sample budget (\"budget\": "
                "\"none\"); leave it out of --workloads")
        share = min(4.0, wall / own["train_seconds"])  # of the time run's samples
        want = share * j.config["training"].get("epochs", 1)  # in epochs of the time run's data
        if j.workload["budget"] == "stride":
            self.stride_budget(j, want)
        else:
            self.limit_budget(j, want)
        j.wall = wall
        j.timeout = int(wall * 1.5 + 120)

    @staticmethod
    def limit_budget(j, want):
        """Images: `want` epochs' worth of the time run's samples as whole epochs of
        data.train_limit samples each."""
        data = j.config["data"]
        total = data.get("train_limit") or 60000  # Fashion-MNIST's training set
        epochs = max(1, math.ceil(want))
        data["train_limit"] = int(want * total / epochs)
        j.config["training"]["epochs"] = epochs
        j.sim_config = merge(j.sim_config, {"training": {"epochs": epochs},
                                            "data": {"train_limit": data["train_limit"]}})

    @staticmethod
    def stride_budget(j, want):
        """Text: `want` epochs' worth of the time run's windows as whole epochs (at least one)
        of windows `stride` characters apart: epochs = floor(want), stride = context x epochs /
        want (the default stride is the context: windows side by side; a finer one overlaps
        them, a coarser one skips text). The validation split and its windows do not move."""
        context = j.config["model"]["context"]
        base = j.config["data"].get("stride", context)
        epochs = max(1, math.floor(want))
        stride = max(1, round(base * epochs / want))
        j.config["training"]["epochs"] = epochs
        j.config["data"]["stride"] = stride
        j.sim_config = merge(j.sim_config, {"training": {"epochs": epochs},
                                            "data": {"stride": stride}})


def _extrapolated_seconds(row_dir):
    """A run stopped before its budget's end (--stop-after, a row's timeout): the time its whole
    budget would have taken at its rate, from the slowest peer's last step record (its time,
    its step) and the budget's steps (launch's progress line: "k/~N steps" over all peers), or
    None. Each peer trains the same steps of an equal-samples run."""

    try:
        total = int(re.findall(r"/~(\d+) steps", (row_dir / "launch.log").read_text())[-1])
    except (OSError, IndexError):
        return None
    last = []
    for f in sorted(row_dir.glob("launch/*/peer*.jsonl")):
        step = None
        for line in f.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "step" in r and "time" in r and "eval" not in r:
                step = r
        if step is None:
            return None
        last.append(step)
    if not last:
        return None
    per_peer = total / len(last)
    return max(r["time"] * per_peer / (r["step"] + 1) for r in last)


def _result(launch_dir):
    try:
        doc = json.loads((launch_dir / "result.json").read_text())
    except (OSError, ValueError):
        return None
    rows = doc.get("algorithms") or []
    return rows[0] if rows else None


def load(path):
    try:
        doc = json.loads(pathlib.Path(path).read_text())
    except OSError as e:
        fail(f"{path}: cannot read: {e.strerror}")
    except ValueError as e:
        fail(f"{path}: not JSON ({e}); fix the file")
    try:
        return Campaign(path, doc)
    except SpecError as e:
        fail(str(e))
