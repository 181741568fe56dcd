#!/usr/bin/python3
"""PyTorch DDP reference for `gossamer launch --algorithms ...,ddp` (docs/results/benchmarks.md, "DDP").

One rank of synchronous data-parallel SGD over torch.distributed's gloo backend, one CPU thread,
training the built-in job of the launcher's training config step for step: the same model
(softmax or mlp, nn.Linear layers in the built-in layout), the same first parameters, shard,
batches (rows and order), learning rate at every step, optimizer (SGD with momentum, Nesterov
and weight decay) as a built-in `allreduce` peer, all from `gossamer.shard`. Each step's
gradients are averaged with one all-reduce of the flat gradient (what DistributedDataParallel
does with one bucket; done by hand so that computing, padding and waiting are timed apart).

Started by `gossamer launch` (never by hand): RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and
GLOO_SOCKET_IFNAME in the lab) for torch.distributed; GOSSAMER_CONFIG, GOSSAMER_EPOCHS,
GOSSAMER_OUT, GOSSAMER_EVAL_INTERVAL, GOSSAMER_EVAL_SAMPLES and GOSSAMER_STEP_TIME (the step time
of the cluster file to pad to) for the job. Writes OUT/peer<rank>.jsonl (the lines of
`gossamer peer`: steps, evaluation points, summary) and rank 0 writes OUT/average.json.
Exit status 2 with one line on bad input (a model or optimizer this script does not mirror).
"""
import datetime
import json
import os
import sys
import time


def _strict(value):
    """The value with NaN and infinities as null: JSON has no literal for them (RFC 8259).
    (scripts/strict_json.py's, kept here: this reference runs without the scripts folder.)"""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    return [_strict(v) for v in value] if isinstance(value, (list, tuple)) else value


NAME = "ddp_ref.py"
TIMEOUT_S = 120  # every torch.distributed wait (rendezvous, all-reduce, barrier)


def fail(what, status=2):
    print(f"{NAME}: {what}", file=sys.stderr, flush=True)
    sys.exit(status)


def env(name, kind=str, default=None):
    text = os.environ.get(name, "")
    if text == "":
        if default is None:
            fail(f"{name} is not set; gossamer launch --algorithms ddp sets it")
        return default
    try:
        return kind(text)
    except ValueError:
        fail(f"{name}: \"{text}\" is not a number; gossamer launch sets a number")


def build_model(cfg, features, classes, torch):
    """The built-in model as nn.Linear layers (their weight [out, in] then bias is the built-in
    layout, docs/library/python.md), or exit 2 for a model this script does not mirror."""
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
    fail(f"{os.environ.get('GOSSAMER_CONFIG')}: model.name: \"{name}\" has no torch twin here; "
         "use softmax or mlp for ddp")


def build_optimizer(cfg, params, torch):
    o = cfg.get("optimizer", {})
    if o.get("name") != "sgd":
        fail(f"{os.environ.get('GOSSAMER_CONFIG')}: optimizer.name: \"{o.get('name')}\" is not "
             "mirrored by ddp (Gossamer's sgd is torch.optim.SGD's rule); use sgd")
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
    with torch.no_grad():
        out = net(x)
        loss = torch.nn.functional.cross_entropy(out, y).item()
        acc = (out.argmax(1) == y).double().mean().item()
    return loss, acc


def main():
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        fail("PyTorch is not installed (python3-torch); install it with scripts/deps.sh")
    import gossamer
    import gossamer.torch as gt

    torch.set_num_threads(1)
    rank, world = env("RANK", int), env("WORLD_SIZE", int)
    env("MASTER_ADDR"), env("MASTER_PORT", int)
    launch = gossamer.launched()
    if launch is None:
        fail("GOSSAMER_RANK and GOSSAMER_TOPOLOGY are not set; run it as gossamer launch "
             "--algorithms ddp")
    with open(launch.config) as f:
        cfg = json.load(f)
    step_time = launch.step_time or 0.0
    interval = launch.eval_interval
    eval_samples = launch.eval_samples or 2000

    shard = gossamer.shard(cfg, rank, world, epochs=launch.epochs)
    data = gossamer.load_data(cfg)
    x = torch.from_numpy(shard["x"]).reshape(len(shard["y"]), -1)
    y = torch.from_numpy(shard["y"])
    test_x = torch.from_numpy(data["test"]["x"]).reshape(len(data["test"]["y"]), -1)
    test_y = torch.from_numpy(data["test"]["y"])
    net = build_model(cfg, x.shape[1], int(shard["classes"]), torch)
    flat = gt.flatten(net)
    if flat.buffer.numel() != shard["params"].size:
        fail(f"{launch.config}: model: torch's {flat.buffer.numel()} parameters differ from the "
             f"built-in {shard['params'].size}; use a softmax or mlp model")
    with torch.no_grad():
        flat.buffer.copy_(torch.from_numpy(shard["params"]))  # the built-in first point
    params = list(net.parameters())
    opt = build_optimizer(cfg, params, torch)
    batches, lrs, steps = shard["batches"], shard["lr"], int(shard["steps"])
    grad = torch.zeros(flat.buffer.numel())
    metrics = Metrics(launch.metrics_path)

    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    dist.barrier()  # every rank starts its clock together, as the built-in peers do
    t0 = time.monotonic()
    busy = idle = 0.0
    next_tick = 0
    for s in range(steps):
        start = time.monotonic()
        rows = torch.from_numpy(batches[s])
        loss = torch.nn.functional.cross_entropy(net(x[rows]), y[rows])
        opt.zero_grad(set_to_none=False)
        loss.backward()
        # Emulated heterogeneity: step time = max(measured, the cluster file's base x factor).
        pad = step_time - (time.monotonic() - start)
        if pad > 0:
            time.sleep(pad)
        waited = time.monotonic()
        busy += waited - start
        torch.cat([p.grad.reshape(-1) for p in params], out=grad)
        dist.all_reduce(grad)  # sum over ranks (gloo), then the mean
        grad /= world
        offset = 0
        for p in params:
            p.grad.copy_(grad[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        idle += time.monotonic() - waited
        for group in opt.param_groups:
            group["lr"] = float(lrs[s])
        opt.step()
        now = time.monotonic() - t0
        metrics.write({"rank": rank, "step": s, "time": now, "loss": loss.item(),
                       "step_seconds": waited - start})  # computing and padding, as peer's
        # Evaluation points: at the first step boundary at or after tick k * interval. Every
        # rank holds the same model, so rank 0's point stands for all (docs/results/benchmarks.md).
        if interval > 0 and now >= next_tick * interval:
            tick = int(now // interval)
            if rank == 0:
                e_loss, e_acc = evaluate(net, test_x[:eval_samples], test_y[:eval_samples], torch)
                metrics.write({"eval": tick, "rank": rank, "time": tick * interval,
                               "accuracy": e_acc, "loss": e_loss})
            next_tick = tick + 1
    end = time.monotonic() - t0
    size_bytes = 4 * grad.numel()
    # The ring all-reduce sends 2 (n - 1) / n of the gradient per step from every rank.
    sent = steps * 2 * (world - 1) * size_bytes / world
    metrics.write({"summary": True, "rank": rank, "algorithm": "ddp", "steps": steps,
                   "end_time": end, "busy": busy, "idle": idle, "bytes_sent": sent,
                   "bytes_received": sent, "failed": 0, "failed_peers": []})
    if rank == 0:
        loss, acc = evaluate(net, test_x, test_y, torch)
        launch.write_average({"average_of": list(range(world)), "n": world, "algorithm": "ddp",
                              "steps": steps}, loss, acc)
        print(f"rank 0: {steps} steps in {end:.2f} s (idle {idle:.2f} s), test loss {loss:.4f}, "
              f"accuracy {100 * acc:.2f}%", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
