"""One rank of the check in test_ddp_rows.py: bench/ddp_ref.py's arithmetic against torch's own
DistributedDataParallel with fp16_compress_hook, and with post_localSGD_hook +
PeriodicModelAverager (post-local SGD), on the same model, data and SGD.

python3 torch_ddp_hooks.py RANK WORLD PORT BENCH_DIR: prints one JSON line of the largest
differences, per row, between torch's parameters and the script's after every step."""
import datetime
import json
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as post_local
from torch.distributed.algorithms.model_averaging import averagers

rank, world, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
sys.path.insert(0, sys.argv[4])
import ddp_ref  # noqa: E402

torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                        world_size=world, timeout=datetime.timedelta(seconds=30))
STEPS, START, PERIOD = 7, 2, 3


def net():
    torch.manual_seed(7)  # the same first point on every rank
    return torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def batch(s):
    g = torch.Generator().manual_seed(100 * s + rank)  # each rank its own rows
    return torch.randn(20, 10, generator=g), torch.randint(0, 3, (20,), generator=g)


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def torch_row(hook):
    model = net()
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=100)
    averager = None
    if hook == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    else:  # post-local SGD, each rank its own subgroup (one worker per "node")
        # (dist.new_subgroups needs CUDA: the same groups by hand, every rank creating each.)
        subgroup = [dist.new_group([r]) for r in range(world)][rank]
        state = post_local.PostLocalSGDState(process_group=None, subgroup=subgroup,
                                             start_localSGD_iter=START)
        ddp.register_comm_hook(state, post_local.post_localSGD_hook)
        averager = averagers.PeriodicModelAverager(period=PERIOD, warmup_steps=START)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    points = []
    for s in range(STEPS):
        x, y = batch(s)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        if averager:
            averager.average_parameters(model.parameters())
        points.append(flat(model))
    return points


def script_row(hook, start, period):
    """bench/ddp_ref.py's loop body on the same data (its average_gradient and
    average_parameters, its step rule without the final average)."""
    model = net()
    params = list(model.parameters())
    buffer = flat(model).clone()
    offset = 0
    for p in params:  # views into one flat buffer, as gossamer.torch.flatten makes them
        p.data = buffer[offset:offset + p.numel()].view_as(p)
        offset += p.numel()
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    grad = torch.zeros(buffer.numel())
    points = []
    for s in range(STEPS):
        x, y = batch(s)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        if s < start:
            torch.cat([p.grad.reshape(-1) for p in params], out=grad)
            ddp_ref.average_gradient(torch, dist, grad, world, hook)
            offset = 0
            for p in params:
                p.grad.copy_(grad[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
        opt.step()
        if s >= start and (s - start) % period == 0:
            ddp_ref.average_parameters(torch, dist, buffer, world)
        points.append(buffer.clone())
    return points


def gap(a, b):
    return [float((u - v).abs().max()) for u, v in zip(a, b)]


result = {"fp16": gap(torch_row("fp16"), script_row("fp16", STEPS, 1)),
          "post_local": gap(torch_row("post_local"), script_row("none", START, PERIOD)),
          "fp32": gap(torch_row("post_local")[:1], script_row("none", STEPS, 1)[:1])}
print(json.dumps(result), flush=True)
dist.destroy_process_group()
