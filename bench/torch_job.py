"""What the torch reference rows of `gossamer launch` share (bench/ddp_ref.py for `ddp`,
bench/diloco_ref.py for `diloco`; docs/results/benchmarks.md): the launcher's facts from the
environment, the built-in job of the training config as torch objects (the same model, first
point, shard, batches, learning rates and optimizer as a built-in peer, all from
`gossamer.shard`; a "gpt" model is its twin gossamer.models_torch.Gpt on the text's windows,
docs/library/gpt_twin.md), step padding, evaluation points and the per-peer lines `gossamer launch`
reads (OUT/peer<rank>.jsonl, OUT/average.json).

Imported by those scripts from their own folder (Python puts a script's folder first on its
path): keep it beside them.
"""
import datetime
import json
import math
import os
import struct
import sys
import time
import zlib

TIMEOUT_S = 120  # every torch.distributed wait (rendezvous, all-reduce, barrier)


def _strict(value):
    """The value with NaN and infinities as null: JSON has no literal for them (RFC 8259).
    (scripts/strict_json.py's, kept here: this reference runs without the scripts folder.)"""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    return [_strict(v) for v in value] if isinstance(value, (list, tuple)) else value


class Script:
    """One reference script: its file name (the prefix of its error lines) and the algorithm
    name `gossamer launch --algorithms` knows it by."""

    def __init__(self, name, algorithm):
        self.name, self.algorithm = name, algorithm

    def fail(self, what, status=2):
        print(f"{self.name}: {what}", file=sys.stderr, flush=True)
        sys.exit(status)

    def env(self, name, kind=str, default=None):
        text = os.environ.get(name, "")
        if text == "":
            if default is None:
                self.fail(f"{name} is not set; gossamer launch --algorithms {self.algorithm} "
                          "sets it")
            return default
        try:
            return kind(text)
        except ValueError:
            self.fail(f"{name}: \"{text}\" is not a number; gossamer launch sets a number")


def is_gpt(cfg):
    """A config whose model is the built-in GPT: the rows train its twin
    (gossamer.models_torch.Gpt) on the text's windows."""
    return cfg.get("model", {}).get("name") == "gpt"


def build_model(script, cfg, features, classes, torch):
    """The built-in model as nn.Linear layers (their weight [out, in] then bias is the built-in
    layout, docs/library/python.md), or exit 2 for a model this script does not mirror (the GPT
    is built from the shard: Job.build)."""
    model = cfg.get("model", {})
    name = model.get("name")
    nn = torch.nn
    if name == "softmax":
        return nn.Sequential(nn.Flatten(), nn.Linear(features, classes))
    if name == "mlp":
        sizes = [features] + list(model.get("hidden", [])) + [classes]
        layers = [nn.Flatten()]
        for i in range(len(sizes) - 1):
            if i > 0:
                layers.append(nn.ReLU())
            layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        return nn.Sequential(*layers)
    script.fail(f"{os.environ.get('GOSSAMER_CONFIG')}: model.name: \"{name}\" has no torch twin "
                f"here; use softmax, mlp or gpt for {script.algorithm}")


def build_optimizer(script, cfg, params, torch):
    o = cfg.get("optimizer", {})
    if o.get("name") in ("adam", "adamw"):  # Gossamer's rules are torch's (local_optimizer.cpp)
        import gossamer.models_torch as gm
        return gm.optimizer(cfg, params)
    if o.get("name") != "sgd":
        script.fail(f"{os.environ.get('GOSSAMER_CONFIG')}: optimizer.name: \"{o.get('name')}\" "
                    f"is not mirrored by {script.algorithm} (Gossamer's sgd, adam and adamw are "
                    "torch.optim's rules); use sgd, adam or adamw")
    return torch.optim.SGD(params, lr=float(o["lr"]), momentum=float(o.get("momentum", 0)),
                           nesterov=bool(o.get("nesterov", False)),
                           weight_decay=float(o.get("weight_decay", 0)))


class Metrics:
    """OUT/peer<rank>.jsonl, line by line, flushed: gossamer launch follows it as it grows."""

    def __init__(self, path):
        self.f = open(path, "w") if path else None

    def write(self, record):
        if self.f:
            self.f.write(json.dumps(_strict(record), allow_nan=False) + "\n")
            self.f.flush()


def evaluate(net, x, y, torch):
    """(mean loss, accuracy) of the net on x, y; the GPT twin: the loss per character (nats)
    and the fraction of windows whose last character it predicts, as the built-in's."""
    if hasattr(net, "evaluate"):
        return net.evaluate(x)
    with torch.no_grad():
        out = net(x)
        loss = torch.nn.functional.cross_entropy(out, y).item()
        acc = (out.argmax(1) == y).double().mean().item()
    return loss, acc


class Evaluator:
    """Rank 0's evaluation points on a thread of their own at nice 19 (that thread alone; Linux
    sets a niceness per thread), named gossamer-eval as the built-in peers' evaluator, so
    scripts/lab/campaign.py tells its CPU time from training's. One slot: a tick queued while
    another is evaluated replaces the older queued one."""

    def __init__(self, job):
        import copy
        import threading
        self.job, self.torch = job, job.torch
        self.net = copy.deepcopy(job.net)
        self.params = list(self.net.parameters())
        self.cv = threading.Condition()
        self.queued, self.running, self.done = None, False, []
        threading.Thread(target=self.loop, name="gossamer-eval", daemon=True).start()

    def queue(self, tick, now, params):
        with self.torch.no_grad():
            copy = [p.detach().clone() for p in params]
        with self.cv:
            self.queued = (tick, now, copy)
            self.cv.notify_all()

    def take(self, wait_s):
        with self.cv:
            if wait_s > 0:
                self.cv.wait_for(lambda: self.queued is None and not self.running, wait_s)
            lines, self.done = self.done, []
        return lines

    def loop(self):
        try:
            import ctypes
            ctypes.CDLL(None).prctl(15, b"gossamer-eval", 0, 0, 0)  # PR_SET_NAME: this thread
        except (OSError, AttributeError):
            pass
        try:
            os.setpriority(os.PRIO_PROCESS, threading_native_id(), 19)
        except (OSError, AttributeError):
            pass
        job = self.job
        while True:
            with self.cv:
                self.cv.wait_for(lambda: self.queued is not None)
                tick, now, copy = self.queued
                self.queued, self.running = None, True
            with self.torch.no_grad():
                for p, c in zip(self.params, copy):
                    p.copy_(c)
            n = job.eval_samples
            e_loss, e_acc = evaluate(self.net, job.test_x[:n], job.test_y[:n], self.torch)
            line = {"eval": tick, "rank": job.rank, "time": tick * job.interval, "at": now,
                    "accuracy": e_acc, "loss": e_loss}
            with self.cv:
                self.done.append(line)
                self.running = False
                self.cv.notify_all()


def threading_native_id():
    import threading
    return threading.get_native_id()


class Job:
    """The built-in job of the launcher's training config for this rank, as torch objects:
    net (its parameters views into flat.buffer, at the built-in first point), opt (the config's
    optimizer on them), the shard's x and y, batches and lrs (row indices and learning rate of
    every step), steps, the test set, and the rank's metrics file. Exits 2 with one line on bad
    input."""

    def __init__(self, script):
        self.script = script
        try:
            import torch
            import torch.distributed as dist
        except ImportError:
            script.fail("PyTorch is not installed (python3-torch); install it with "
                        "scripts/deps.sh")
        import gossamer

        self.torch, self.dist = torch, dist
        torch.set_num_threads(1)
        self.rank, self.world = script.env("RANK", int), script.env("WORLD_SIZE", int)
        script.env("MASTER_ADDR"), script.env("MASTER_PORT", int)
        launch = gossamer.launched()
        if launch is None:
            script.fail("GOSSAMER_RANK and GOSSAMER_TOPOLOGY are not set; run it as gossamer "
                        f"launch --algorithms {script.algorithm}")
        self.launch = launch
        with open(launch.config) as f:
            self.cfg = json.load(f)
        self.step_time = launch.step_time or 0.0
        self.interval = launch.eval_interval
        self.eval_samples = launch.eval_samples or 2000

    def build(self):
        """The data, model and optimizer (after the script's own checks of the config)."""
        import gossamer
        import gossamer.torch as gt

        torch, launch, script = self.torch, self.launch, self.script
        try:
            shard = gossamer.shard(self.cfg, self.rank, self.world, epochs=launch.epochs)
            data = gossamer.load_data(self.cfg)
        except gossamer.ConfigError as e:  # the config's own line, as gossamer peer says it
            script.fail(f"{launch.config}: {str(e).removeprefix('config: ')}")
        self.x = torch.from_numpy(shard["x"]).reshape(len(shard["y"]), -1)
        self.y = torch.from_numpy(shard["y"])
        self.test_x = torch.from_numpy(data["test"]["x"]).reshape(len(data["test"]["y"]), -1)
        self.test_y = torch.from_numpy(data["test"]["y"])
        self.layers = shard["layers"]
        self.description = shard["model"]  # the built-in's describe(): model files name it
        if is_gpt(self.cfg):  # the twin, on the windows of token ids (x: [N, context + 1])
            import gossamer.models_torch as gm
            try:
                self.net = gm.from_shard(self.cfg, shard)
            except gossamer.ConfigError as e:
                script.fail(f"{launch.config}: {e}")
        else:
            self.net = build_model(script, self.cfg, self.x.shape[1], int(shard["classes"]),
                                   torch)
        self.flat = gt.flatten(self.net)
        if self.flat.buffer.numel() != shard["params"].size:
            script.fail(f"{launch.config}: model: torch's {self.flat.buffer.numel()} parameters "
                        f"differ from the built-in {shard['params'].size}; use a softmax, mlp "
                        "or gpt model")
        with torch.no_grad():
            self.flat.buffer.copy_(torch.from_numpy(shard["params"]))  # the built-in first point
        self.params = list(self.net.parameters())
        self.opt = build_optimizer(script, self.cfg, self.params, torch)
        self.batches, self.lrs, self.steps = shard["batches"], shard["lr"], int(shard["steps"])
        self.metrics = Metrics(launch.metrics_path)
        self.next_tick = 0
        self.evaluator = None
        self.every_rank = False  # True where the ranks' models differ (post-local SGD)

    def start(self):
        """Meets the other ranks over gloo; every rank starts its clock together, as the built-in
        peers do. Returns that clock's zero."""
        self.dist.init_process_group("gloo", rank=self.rank, world_size=self.world,
                                     timeout=datetime.timedelta(seconds=TIMEOUT_S))
        self.dist.barrier()
        self.t0 = time.monotonic()
        return self.t0

    def gradient(self, s):
        """Step s's loss and gradients (in the parameters' .grad), then the padding: emulated
        heterogeneity, step time = max(measured, the cluster file's base x factor). Returns the
        loss, the step's start and the end of its padding (time.monotonic())."""
        torch, start = self.torch, time.monotonic()
        rows = torch.from_numpy(self.batches[s])
        if is_gpt(self.cfg):  # cross-entropy per character over the windows' positions
            loss = self.net.loss(self.x[rows])
        else:
            loss = torch.nn.functional.cross_entropy(self.net(self.x[rows]), self.y[rows])
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        pad = self.step_time - (time.monotonic() - start)
        if pad > 0:
            time.sleep(pad)
        return loss, start, time.monotonic()

    def clip(self):
        """Global-norm clipping of the gradients to optimizer.clip_norm (as the built-in's local
        optimizer does; nothing without it): after the all-reduce for ddp, before each inner
        step for diloco."""
        if self.cfg.get("optimizer", {}).get("clip_norm"):
            import gossamer.models_torch as gm
            gm.clip_gradients(self.cfg, self.params)

    def set_lr(self, s):
        for group in self.opt.param_groups:
            group["lr"] = float(self.lrs[s])

    def evaluation_point(self, now):
        """At the first step boundary at or after tick k * interval: rank 0 queues a copy of the
        net as it stands (every rank holds the same model, so rank 0's point stands for all),
        which a thread of the lowest priority evaluates, as the built-in peers do
        (docs/modules/peer.md, "Evaluation points"): the evaluation takes neither the training
        loop's time nor, where ranks share the cores, their CPU. A tick queued while one is
        being evaluated replaces an older queued one."""
        if self.interval > 0 and now >= self.next_tick * self.interval:
            tick = int(now // self.interval)
            if self.rank == 0 or self.every_rank:
                if self.evaluator is None:
                    self.evaluator = Evaluator(self)
                self.evaluator.queue(tick, now, self.params)
            self.next_tick = tick + 1
        self.flush_evaluations()

    def flush_evaluations(self, wait_s=0.0):
        """Writes the finished evaluations' lines (the metrics file has one writer: this
        thread); with wait_s > 0 waits that long at most for the queued and running one."""
        if self.evaluator is not None:
            for line in self.evaluator.take(wait_s):
                self.metrics.write(line)

    def finish(self, end, busy, idle, sent, steps=None, extra=None, what="steps", average=None):
        """The summary line, rank 0's average.json and closing line, then the last barrier.
        steps: what the summary counts as steps (default the job's steps), `what` in the line;
        extra and average: more fields of the summary line and of average.json."""
        algorithm, rank, world = self.script.algorithm, self.rank, self.world
        steps = self.steps if steps is None else steps
        self.flush_evaluations(wait_s=120)  # a GPT's evaluation on 2,000 windows takes seconds
        self.metrics.write({"summary": True, "rank": rank, "algorithm": algorithm,
                            "steps": steps, "end_time": end, "busy": busy, "idle": idle,
                            "bytes_sent": sent, "bytes_received": sent, "failed": 0,
                            "failed_peers": [], **(extra or {})})
        if rank == 0:
            loss, acc = evaluate(self.net, self.test_x, self.test_y, self.torch)
            self.launch.write_average({"average_of": list(range(world)), "n": world,
                                       "algorithm": algorithm, "steps": steps,
                                       **(average or {})}, loss, acc)
            if is_gpt(self.cfg):  # text: the loss per character, and in bits
                score = (f"validation loss {loss:.4f} nats/char "
                         f"({loss / math.log(2):.4f} bits/char)")
            else:
                score = f"test loss {loss:.4f}, accuracy {100 * acc:.2f}%"
            print(f"rank 0: {steps} {what} in {end:.2f} s (idle {idle:.2f} s), {score}",
                  flush=True)
        self.dist.barrier()
        self.dist.destroy_process_group()

    def save_model(self, path, steps):
        """The net's flat parameters as Gossamer's model file (docs/formats/model-file.md), one
        partition, written to PATH.tmp then renamed: `gossamer eval` and gossamer.load_model
        read it."""
        params = self.flat.buffer.detach().numpy().astype("<f4").tobytes()
        name = self.cfg["model"]["name"]
        n = self.flat.buffer.numel()
        if is_gpt(self.cfg):  # the built-in's own description and layers
            text = self.description.encode()
            parts = [(l.encode(), offset, size) for l, offset, size in self.layers]
        else:
            sizes = [self.x.shape[1]] + list(self.cfg["model"].get("hidden", [])) + [
                int(self.net[-1].out_features)]
            text = f"{name} {'-'.join(str(s) for s in sizes)} ({n} parameters)".encode()
            parts = [(b"model", 0, n)]
        layout = b"".join(struct.pack("<I", len(p)) + p + struct.pack("<QQ", o, k)
                          for p, o, k in parts)
        body = (b"GSMRMODL" + struct.pack("<Iq", 1, steps) + struct.pack("<I", len(text)) + text
                + struct.pack("<QI", n, len(parts)) + layout + params)
        with open(path + ".tmp", "wb") as f:
            f.write(body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF))
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
