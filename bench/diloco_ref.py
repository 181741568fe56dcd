#!/usr/bin/python3
"""PyTorch DiLoCo reference for `gossamer launch --algorithms ...,diloco` (docs/results/benchmarks.md,
"DiLoCo (torch)").

One rank of DiLoCo (Douillard et al. 2023) over torch.distributed's gloo backend, one CPU thread,
training the built-in job of the launcher's training config as a built-in `allreduce` peer with
the config's "outer" section does: the same model (softmax or mlp, nn.Linear layers in the
built-in layout, or the GPT's twin gossamer.models_torch.Gpt on text windows), first point, shard, batches (rows and order) and optimizer, all from
`gossamer.shard`, the T inner steps of the job without "outer" (its batches per epoch x epochs)
with the learning rate of each inner step's index (the schedule runs over inner steps only).

Each round (R = ceil(T / H) of them, H = outer.steps): the inner point x starts at the anchor
theta; k = min(H, T - r H) inner steps on x with the config's optimizer, whose state (momentum)
is kept across rounds and never averaged; the pseudo-gradient Delta = theta - x (float32) is
averaged over the ranks by one all-reduce over gloo (the sum, then / n); the outer step is
torch.optim.SGD on theta with theta.grad = the mean Delta (lr outer.lr, momentum
outer.momentum, Nesterov for "nesterov", dampening 0; its momentum buffer starts at zero, so
the first is the mean Delta), then x restarts from theta. Every inner step is padded to the
cluster file's step time (GOSSAMER_STEP_TIME) as bench/ddp_ref.py pads a step.

The model judged is theta, the anchor, never the inner point x, as for a built-in peer with
"outer": the evaluation points (rank 0's: every rank holds the same theta) come between rounds,
at the start (tick 0: the first point) and at the first round's end at or after each later
tick, and the final evaluation (OUT/average.json) and OUT/model.bin (rank 0, Gossamer's model
file) are theta after the last round. As a built-in peer's under "outer", a step of
OUT/peer<rank>.jsonl and of the summary is a round (the summary's inner_steps: T).

Started by `gossamer launch` (never by hand), as ddp_ref.py is, with the same environment
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GLOO_SOCKET_IFNAME in the lab; GOSSAMER_CONFIG,
GOSSAMER_EPOCHS, GOSSAMER_OUT, GOSSAMER_EVAL_INTERVAL, GOSSAMER_EVAL_SAMPLES,
GOSSAMER_STEP_TIME). Writes OUT/peer<rank>.jsonl (step lines, evaluation points, summary) and
rank 0 OUT/average.json and OUT/model.bin (with GOSSAMER_DILOCO_ROUNDS=1 also OUT/theta-<r>.bin
after every round r). Exit status 2 with one line on bad input (no "outer"
section, outer.partitions, a model or optimizer this script does not mirror). What it shares with
ddp_ref.py is in bench/torch_job.py, beside it.
"""
import math
import os
import sys
import time

import torch_job

SCRIPT = torch_job.Script("diloco_ref.py", "diloco")


def outer_options(job):
    """(H, lr, momentum, nesterov) of the config's "outer" section; the launcher has checked it
    (and Gossamer's config loader its values) before starting this script."""
    outer = job.cfg.get("outer")
    where = f"{job.launch.config}: outer"
    if not isinstance(outer, dict):
        SCRIPT.fail(f"{where}: the section is missing; diloco is DiLoCo's outer loop: add "
                    "\"outer\": {\"steps\": H, \"optimizer\": \"nesterov\", \"lr\": 0.7, "
                    "\"momentum\": 0.9}")
    if "partitions" in outer:
        SCRIPT.fail(f"{where}.partitions: diloco (bench/diloco_ref.py) trains the whole model; "
                    "remove outer.partitions or leave diloco out of --algorithms")
    if "seconds" in outer:
        SCRIPT.fail(f"{where}.seconds: diloco (bench/diloco_ref.py) is torch's DiLoCo, rounds of "
                    "a fixed step count; give the torch row a config with \"steps\": H (the "
                    "reference_steps of this one) or leave diloco out of --algorithms")
    try:
        steps = int(outer["steps"])
        lr, momentum = float(outer.get("lr", 1.0)), float(outer.get("momentum", 0.0))
    except (KeyError, TypeError, ValueError):
        SCRIPT.fail(f"{where}: steps, lr and momentum must be numbers (steps >= 1); fix the "
                    "section")
    optimizer = outer.get("optimizer", "sgd")
    if steps < 1 or not (lr > 0 and math.isfinite(lr)) or not 0 <= momentum < 1 or \
            optimizer not in ("sgd", "nesterov"):
        SCRIPT.fail(f"{where}: steps {steps}, optimizer \"{optimizer}\", lr {lr}, momentum "
                    f"{momentum}; give steps >= 1, sgd or nesterov, lr > 0, 0 <= momentum < 1")
    return steps, lr, momentum, optimizer == "nesterov"


def main():
    job = torch_job.Job(SCRIPT)
    h, outer_lr, mu, nesterov = outer_options(job)
    job.build()
    torch, dist, world, steps = job.torch, job.dist, job.world, job.steps
    buffer = job.flat.buffer  # x: the net's parameters are views into it
    theta = buffer.detach().clone().requires_grad_(True)  # the anchor, at the first point
    # torch's rule with dampening 0; with momentum 0 Nesterov's formula is plain SGD (and torch
    # refuses nesterov=True without momentum).
    outer = torch.optim.SGD([theta], lr=outer_lr, momentum=mu, nesterov=nesterov and mu > 0)
    delta = torch.zeros_like(buffer)
    # GOSSAMER_DILOCO_ROUNDS=1: rank 0 also writes theta after every round r as
    # OUT/theta-<r>.bin (to set beside a built-in peer's checkpoint-<rank>-<r>.bin of
    # --checkpoint-every 1: under "outer" its checkpoints count rounds).
    every_round = os.environ.get("GOSSAMER_DILOCO_ROUNDS", "") not in ("", "0")
    t0 = job.start()
    # Tick 0 before the first round (a round boundary too): the first point, as a built-in peer
    # evaluates it.
    job.evaluation_point(0.0)
    busy = idle = 0.0
    rounds = 0
    round_loss = round_seconds = 0.0
    for s in range(steps):
        loss, start, waited = job.gradient(s)
        busy += waited - start
        round_loss += loss.item()
        round_seconds += waited - start
        job.clip()  # optimizer.clip_norm: this rank's gradient, before its inner step
        job.set_lr(s)  # the inner step's own index: the schedule runs over inner steps only
        job.opt.step()
        if (s + 1) % h != 0 and s + 1 != steps:
            continue
        # The round's end, after k = min(H, T - r H) inner steps.
        ready = time.monotonic()
        with torch.no_grad():
            torch.sub(theta, buffer, out=delta)  # Delta = theta - x, float32
        dist.all_reduce(delta)  # the sum over ranks (gloo), then the mean
        delta /= world
        idle += time.monotonic() - ready
        theta.grad = delta
        outer.step()
        with torch.no_grad():
            buffer.copy_(theta)  # x restarts from the new anchor: the net holds theta now
        k = s + 1 - rounds * h
        now = time.monotonic() - t0
        # One line a round, as a built-in peer under "outer" writes (its step is a round): the
        # mean loss of the round's inner steps, their seconds computed and padded.
        job.metrics.write({"rank": job.rank, "step": rounds, "time": now,
                           "loss": round_loss / k, "step_seconds": round_seconds})
        rounds += 1
        round_loss = round_seconds = 0.0
        if every_round and job.rank == 0:  # theta after this round, for comparisons
            job.save_model(f"{job.launch.out}/theta-{rounds}.bin", rounds)
        # Evaluation points between rounds, on theta (never on the inner point x).
        job.evaluation_point(now)
    end = time.monotonic() - t0
    # Each round's ring all-reduce sends 2 (n - 1) / n of Delta from every rank.
    sent = rounds * 2 * (world - 1) * 4 * delta.numel() / world
    if job.rank == 0 and job.launch.out:
        job.save_model(f"{job.launch.out}/model.bin", rounds)  # theta after the last round
    # As a built-in peer's under "outer" (docs/formats/metrics.md): the summary line's "outer"
    # (the options in OuterOptions::describe()'s words) and "inner_steps", average.json's
    # "inner_steps" and "rounds".
    options = f"H={h} {'nesterov' if nesterov else 'sgd'} lr={outer_lr:g} momentum={mu:g}"
    job.finish(end, busy, idle, sent, steps=rounds,
               extra={"outer": options, "inner_steps": steps},
               what=f"rounds ({steps} inner steps)",
               average={"inner_steps": steps, "rounds": rounds})
    return 0


if __name__ == "__main__":
    sys.exit(main())
