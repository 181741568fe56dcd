"""Gossamer from Python: join a gossip job from your own training loop (docs/library/python.md).

    import gossamer, gossamer.torch
    flat = gossamer.torch.flatten(model)              # parameters become views into flat.buffer
    peer = gossamer.Peer(flat.buffer, topology="ring4.json", algorithm="async",
                         options={"straggler": {...}}, steps=500, layout=flat.layout)
    opt = gossamer.torch.GossipOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), peer)
    ...; loss.backward(); more = opt.step(loss)       # local step, then gossip

The C++ core (gossamer._native) does the work; errors are the CLI's one-line messages.
"""

import json as _json
import math as _math
import os as _os
import sys as _sys

from . import _native
from ._native import (ConfigError, Diverged, Error, InprocJob, PeerFailure, Timeout,
                      TransportError)
from .model_file import ModelFile, load_model

__all__ = ["Topology", "Peer", "InprocJob", "Launch", "launched", "Error", "ConfigError", "Diverged",
           "PeerFailure", "Timeout",
           "TransportError", "peer_count", "load_data", "shard", "train_builtin", "loss_and_gradient",
           "model_layers", "ALGORITHMS",
           "DEFAULT_ALGORITHM",
           "ModelFile", "load_model"]

# The registry's algorithms, in its order (docs/algorithms/README.md), and gossamer peer's default.
ALGORITHMS = tuple(name for name, _summary in _native.algorithms())
DEFAULT_ALGORITHM = _native.default_algorithm()

Topology = _native.Topology
peer_count = _native.peer_count


def _json_text(value, name):
    """A dict (or JSON text) as JSON text; None as ""."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        raise ConfigError(f"{name}: a {type(value).__name__} is not a JSON object; "
                          "give a dict or JSON text")
    return _json.dumps(value)


def _env_number(name, kind=int):
    """The number in environment variable `name` (int or float), None when unset or empty."""
    text = _os.environ.get(name)
    if text is None or text == "":
        return None
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise ConfigError(f"{name}: \"{text}\" is not {what}; the launcher sets it as a "
                          "number") from None


def _env_int(name):
    return _env_number(name, int)


def _env_float(name):
    return _env_number(name, float)


class Peer:
    """One peer of a gossip job over a flat float32 buffer (gossamer::Peer, docs/library/api.md).

    params: a 1-D float32 buffer: a NumPy array or a torch tensor (gossamer.torch.flatten's
        buffer), on the CPU or on a CUDA device. The peer writes the first point into it now and
        the next point at every step().
    device: where params live, "cpu" or "cuda" (default: the tensor's own). With "cuda", every
        algorithm does the round's work on the tensor's GPU (docs/operations/gpu.md); Gossamer's
        device calls run on the default stream and wait, so synchronize other streams before
        step().
    topology: a topology file path or a gossamer.Topology (default $GOSSAMER_TOPOLOGY).
    rank: this peer's rank (default $GOSSAMER_RANK, else OMPI_COMM_WORLD_RANK, PMI_RANK,
        SLURM_PROCID).
    algorithm: allreduce, dpsgd, sgp, async, choco, lsgd, gadmm or qallreduce; options: its options (dict, docs/algorithms/async.md).
    partitions: per-partition gossip (the training config's "multirate" section as a dict).
    layout: [(name, offset, size), ...] covering the buffer (gossamer.torch.flatten's layout).
    token_file: the job token's file ("": $GOSSAMER_JOB_TOKEN); job_id: default $GOSSAMER_JOB_ID,
        else 1. steps: local steps this peer takes. transport: "ucx" (processes) or "inproc" (threads of
        this process sharing job=gossamer.InprocJob(n)). Timeouts are in seconds.
    trace: a file for this peer's timeline (Chrome trace / Perfetto JSON, docs/formats/trace.md),
        written when the peer finishes; "" for none. trace_limit bounds its events in bytes.
    outer: local updates and an outer optimizer, the training config's "outer" section as a dict
        ({"steps": H, "optimizer": "sgd" | "nesterov", "lr": L, "momentum": M}; DiLoCo is
        allreduce with outer={"steps": 8, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9}):
        your optimizer's steps become inner steps, `steps` of them in rounds of H, and the point
        handed back after a round's last inner step is the new anchor (docs/library/python.md).
    """

    def __init__(self, params, topology=None, *, rank=None, algorithm=DEFAULT_ALGORITHM, options=None,
                 partitions=None, layout=None, steps, transport="ucx", job=None, token_file="",
                 job_id=None, join_timeout=30.0, step_timeout=180.0, stall_timeout=120.0,
                 run_timeout=86400.0, metrics_path="", exact_average=False, device=None,
                 eval_interval=None, trace="", trace_limit=64e6, outer=None):
        if topology is None:
            topology = _os.environ.get("GOSSAMER_TOPOLOGY")
            if not topology:
                raise ConfigError("topology: no topology file given and GOSSAMER_TOPOLOGY is not "
                                  "set; pass topology=PATH or start the script with gossamer launch")
        if isinstance(topology, Topology):
            topology = _topology_file(topology)
        if rank is None:
            rank = _env_int("GOSSAMER_RANK")
        if job_id is None:
            job_id = _env_int("GOSSAMER_JOB_ID") or 1
        if eval_interval is None:
            eval_interval = _env_float("GOSSAMER_EVAL_INTERVAL") or 0.0
        device, buffer = _as_buffer(params, device)
        self._params = params  # the caller's object stays alive as long as the peer
        args = (buffer, str(topology), rank, algorithm, _json_text(options, "options"),
                _json_text(partitions, "partitions"), list(layout or []), int(steps), transport, job,
                token_file, int(job_id), float(join_timeout), float(step_timeout),
                float(stall_timeout), float(run_timeout), str(metrics_path), bool(exact_average),
                device, float(eval_interval), str(trace), float(trace_limit),
                _json_text(outer, "outer"))
        if device == "cuda" and getattr(params.device, "index", None) is not None:
            import torch  # the GPU is the tensor's: Gossamer uses the current device
            with torch.cuda.device(params.device.index):
                self._peer = _native.Peer(*args)
        else:
            self._peer = _native.Peer(*args)
        # The outer options in one line, "H=8 nesterov lr=0.7 momentum=0.9", or None
        # (GossipOptimizer compares its own outer= with them).
        self.outer = _native.outer_describe(_json_text(outer, "outer")) if outer else None

    def step(self, loss):
        """Hands over this step's update (params before - params now) and returns with the next
        point in params; False after the last step (params then hold the final model)."""
        return self._peer.step(float(loss))

    def finish(self):
        """Takes the remaining steps with a zero update, waits for the others; final metrics."""
        return self._peer.finish()

    def close(self):
        """Leaves the job (after the last step: waits for the others, as finish() does)."""
        self._peer.close()

    def metrics(self):
        return self._peer.metrics()

    def evaluation_due(self):
        """True once per eval_interval tick (tick 0 first): evaluate your model now and pass the
        result to record_evaluation() (docs/library/python.md, "Evaluation points")."""
        return self._peer.evaluation_due()

    def record_evaluation(self, accuracy, loss):
        """Writes the due tick's point {"eval", "time", "accuracy", "loss"} to the metrics file:
        what `gossamer launch` times its target with."""
        self._peer.record_evaluation(float(accuracy), float(loss))

    @property
    def rank(self):
        return self._peer.rank

    @property
    def size(self):
        return self._peer.size

    @property
    def steps_left(self):
        return self._peer.steps_left

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _topology_file(topology):
    if not _os.path.isfile(topology.source):
        raise ConfigError("topology: a generated topology has no file; call "
                          "topology.save(path) and pass the path")
    return topology.source


def _save(self, path):
    """Writes this topology's file (what `gossamer topo gen` prints) and returns it loaded."""
    with open(path, "w") as f:
        f.write(self.json_text + "\n")
    return Topology.load(str(path))


Topology.save = _save


def _as_buffer(params, device):
    """(device, what the native Peer takes): a writable buffer-protocol view of CPU params (a
    torch tensor becomes its NumPy view: the same memory, no copy), or (pointer, count) of a
    CUDA tensor's memory."""
    is_tensor = hasattr(params, "data_ptr") and hasattr(params, "device")
    where = params.device.type if is_tensor else "cpu"
    if device is None:
        device = where
    if device not in ("cpu", "cuda"):
        raise ConfigError(f"device: unknown device \"{device}\"; use \"cpu\" or \"cuda\"")
    if where != device:
        raise ConfigError(f"params: the buffer is in {where} memory but device is \"{device}\"; "
                          f"move it (params.to(\"{device}\")) or pass device=\"{where}\"")
    if device == "cuda":
        if str(params.dtype) != "torch.float32" or params.dim() != 1 or \
                not params.is_contiguous():
            raise ConfigError(f"params: a {params.dtype} tensor of {params.dim()} dimension(s); "
                              "hand over one contiguous float32 vector (gossamer.torch.flatten)")
        return device, (params.data_ptr(), params.numel())
    if is_tensor:
        return device, params.detach().numpy()
    return device, params


def load_data(config):
    """Gossamer's data set as NumPy arrays: {"train": {"x", "y", "classes", "name"}, "test":
    {...}}; images are [N, C, H, W]. Text data: x is int64 [N, context + 1], the windows' token
    ids, y each window's last id, and "vocabulary" the characters of the ids (a str, id i is
    vocabulary[i]; bytes as Latin-1). config: a training config (dict with "data") or only its
    "data" section, e.g. {"name": "fashion-mnist", "train_limit": 12000} (docs/modules/data.md);
    text windows are as long as the config's model's context needs, so give text data in a
    whole config."""
    if isinstance(config, dict) and "data" not in config:
        # only the data section: the smallest config around it (model and optimizer unused)
        config = {"data": config, "model": {"name": "softmax"}, "optimizer": {"name": "sgd", "lr": 0.1}}
    return _native.load_data(_json_text(config, "config"))


def shard(config, rank, n, epochs=None):
    """Peer rank's shard of a training config's data (as a built-in peer gets it), with the
    model's first parameters ("params"), its local "steps" and "batch_size", the rows of the
    shard each step trains on ("batches", [steps, batch_size]) and each step's learning rate
    ("lr", the config's schedule), and the model's "layers" ([(name, offset, size)] of the flat
    parameters) and "model" (its one-line description). Text data as in load_data (with
    "vocabulary"). epochs: default the config's."""
    return _native.shard(_json_text(config, "config"), int(rank), int(n),
                         None if epochs is None else int(epochs))


def loss_and_gradient(config, params, rows, rank=None, n=None, split="train"):
    """The built-in model's mean loss and gradient (a float, a float32 NumPy vector) at `params`
    (the flat vector) on the samples `rows` of the config's data: rows of the training split
    (split="test": of the test split), or with rank and n rows of peer rank's shard of n (the
    indices of gossamer.shard(config, rank, n)["batches"]). For comparing a twin (e.g.
    gossamer.models_torch.Gpt) with the built-in, number for number."""
    import numpy as _np
    return _native.loss_and_gradient(_json_text(config, "config"),
                                      _np.ascontiguousarray(params, dtype=_np.float32),
                                      _np.ascontiguousarray(rows, dtype=_np.int64),
                                      None if rank is None else int(rank),
                                      None if n is None else int(n), str(split))


def model_layers(config):
    """The built-in model's layers for the config's data: [(name, offset, size)]."""
    return _native.model_layers(_json_text(config, "config"))


def train_builtin(config, topology, algorithm, options=None):
    """The built-in peers of a training config as threads (`gossamer run --local`'s code): the
    test loss and accuracy of the average model, for comparisons with a Python loop."""
    if isinstance(topology, Topology):
        topology = _topology_file(topology)
    return _native.train_builtin(_json_text(config, "config"), str(topology), algorithm,
                                 _json_text(options, "options"))


class Launch:
    """What `gossamer launch --script` hands a Python peer through its environment
    (docs/library/python.md): rank, topology file, algorithm, output folder, epochs, training config."""

    def __init__(self, env):
        self.rank = int(env["GOSSAMER_RANK"])
        self.topology = env["GOSSAMER_TOPOLOGY"]
        self.algorithm = env.get("GOSSAMER_ALGORITHM", DEFAULT_ALGORITHM)
        self.out = env.get("GOSSAMER_OUT", "")
        self.epochs = int(env["GOSSAMER_EPOCHS"]) if env.get("GOSSAMER_EPOCHS") else None
        self.config = env.get("GOSSAMER_CONFIG", "")
        # The launcher's --eval-interval and --eval-samples (gossamer.Peer reads the interval
        # itself): evaluate on the first eval_samples test samples at each due point.
        self.eval_interval = float(env.get("GOSSAMER_EVAL_INTERVAL") or 0)
        self.eval_samples = int(env.get("GOSSAMER_EVAL_SAMPLES") or 0) or None
        # With --cluster: the cluster file and this rank's declared step time (base_time x
        # factor, seconds) that a script pads its steps to; None without one.
        self.cluster = env.get("GOSSAMER_CLUSTER") or None
        self.step_time = float(env["GOSSAMER_STEP_TIME"]) if env.get("GOSSAMER_STEP_TIME") \
            else None

    @property
    def metrics_path(self):
        """OUT/peer<rank>.jsonl, the file launch follows and its table and plots read."""
        return _os.path.join(self.out, f"peer{self.rank}.jsonl") if self.out else ""

    def write_average(self, metrics, loss, accuracy=None):
        """After an exact_average run: the lowest surviving rank writes OUT/average.json (the
        test loss and accuracy of the average model, as `gossamer peer` does); True if it did."""
        survivors = list(metrics.get("average_of") or [])
        if not self.out or not survivors or self.rank != min(survivors):
            return False
        bad = [name for name, v in (("loss", loss), ("accuracy", accuracy))
               if v is not None and not _math.isfinite(float(v))]
        if bad:  # no result from a model that is not one (docs/operations/reliability.md)
            raise Diverged(f"rank {self.rank}: the average model's {' and '.join(bad)} "
                           f"{'is' if len(bad) == 1 else 'are'} not finite ({loss}, {accuracy}); "
                           "no average.json written")
        n = metrics.get("n", 0)
        record = {"algorithm": metrics.get("algorithm", self.algorithm), "survivors": survivors,
                  "lost": [r for r in range(n) if r not in survivors], "loss": float(loss),
                  "accuracy": None if accuracy is None else float(accuracy),
                  "steps": metrics.get("steps", 0)}
        # Under "outer" steps count rounds: both counts, as gossamer peer's average.json has them.
        record.update({k: metrics[k] for k in ("inner_steps", "rounds") if k in metrics})
        path = _os.path.join(self.out, "average.json")
        with open(path + ".tmp", "w") as f:
            f.write(_json.dumps(record, indent=2, allow_nan=False) + "\n")
        _os.replace(path + ".tmp", path)  # whole file or nothing
        return True


def _exit_5_on_diverged():
    """In a script gossamer launch started: an unhandled gossamer.Diverged ends the process as
    `gossamer peer` does (one line, exit status 5, no goodbye), so the launcher's table counts the
    peer lost and diverged (docs/operations/reliability.md)."""
    previous = _sys.excepthook
    if getattr(previous, "_gossamer", False):
        return

    def hook(kind, value, tb):
        if isinstance(value, Diverged):
            _sys.stderr.write(f"error: {value}\n")
            _sys.stderr.flush()
            _os._exit(5)
        previous(kind, value, tb)

    hook._gossamer = True
    _sys.excepthook = hook


def launched():
    """The Launch of a script started by `gossamer launch --script` (GOSSAMER_RANK and
    GOSSAMER_TOPOLOGY set), else None."""
    if not _os.environ.get("GOSSAMER_RANK") or not _os.environ.get("GOSSAMER_TOPOLOGY"):
        return None
    _exit_5_on_diverged()
    try:
        return Launch(_os.environ)
    except ValueError as e:
        raise ConfigError(f"GOSSAMER_RANK/GOSSAMER_EPOCHS: {e}; gossamer launch sets numbers") \
            from None
