#!/usr/bin/python3
"""PyTorch DDP reference for `gossamer launch --algorithms ...,ddp` (docs/results/benchmarks.md, "DDP").

One rank of synchronous data-parallel SGD over torch.distributed's gloo backend, one CPU thread,
training the built-in job of the launcher's training config step for step: the same model
(softmax or mlp, nn.Linear layers in the built-in layout, or the GPT's twin
gossamer.models_torch.Gpt on text windows), the same first parameters, shard, batches (rows and
order), learning rate at every step, optimizer (SGD with momentum, Nesterov and weight decay;
Adam or AdamW; optimizer.clip_norm) as a built-in `allreduce` peer, all from `gossamer.shard`.
For a GPT it reports the validation loss in nats and bits per character. Each step's
gradients are averaged with one all-reduce of the flat gradient (what DistributedDataParallel
does with one bucket; done by hand so that computing, padding and waiting are timed apart).

Options, the training config's "algorithms": {"ddp": {...}} (docs/results/benchmarks.md):
- "hook": "fp16" is DDP with torch's fp16_compress_hook: the flat gradient cast to float16,
  divided by the world size in float16, summed by gloo in float16, cast back to float32 (half
  the bytes). Default "none": the float32 all-reduce (the sum, then / world).
- "post_local": {"start": S, "period": H} is torch's post-local SGD (PostLocalSGDState with
  start_localSGD_iter S and a subgroup of one rank each, post_localSGD_hook, and
  PeriodicModelAverager(period=H, warmup_steps=S) after every optimizer step): steps 0 to S - 1
  are plain DDP; from step S on every rank steps on its own gradient, and after step s the
  parameters are averaged (divided by the world size, then summed by one all-reduce) when
  s >= S and (s - S) % H == 0, torch's rule. Optimizer state (momentum) is never averaged. After
  the last step the parameters are averaged once more unless that step already did: the final
  model is one model, as a built-in allreduce's with "period". Not with "hook": "fp16".

Started by `gossamer launch` (never by hand): RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and
GLOO_SOCKET_IFNAME in the lab) for torch.distributed; GOSSAMER_CONFIG, GOSSAMER_EPOCHS,
GOSSAMER_OUT, GOSSAMER_EVAL_INTERVAL, GOSSAMER_EVAL_SAMPLES and GOSSAMER_STEP_TIME (the step time
of the cluster file to pad to) for the job. Writes OUT/peer<rank>.jsonl (the lines of
`gossamer peer`: steps, evaluation points, summary), and rank 0 OUT/average.json and
OUT/model.bin (Gossamer's model file of its final parameters). Evaluation points are rank 0's
model as it stands; under post_local, where the ranks' models differ between two averagings,
every rank evaluates its own (the peers' mean, as for Gossamer's local SGD).
Exit status 2 with one line on bad input (a model or optimizer this script does not mirror, bad
options). What it shares with bench/diloco_ref.py is in bench/torch_job.py, beside it.
"""
import json
import math
import sys
import time

import torch_job

SCRIPT = torch_job.Script("ddp_ref.py", "ddp")
HOOKS = ("none", "fp16")


def _count(value):
    """An integer given as a JSON number (not a bool, not 1.5), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value != int(value):
        return None
    return int(value)


def ddp_options(cfg, path):
    """(hook, post_local) of the config's algorithms.ddp: "none" or "fp16", and None or
    (start, period). Exits 2 with one line on a bad option (gossamer launch checks the same)."""
    where = f"{path}: algorithms.ddp"
    options = cfg.get("algorithms", {}).get("ddp", {})
    if not isinstance(options, dict):
        SCRIPT.fail(f"{where}: expected an object of options, e.g. {{\"hook\": \"fp16\"}}")
    for key in options:
        if key not in ("hook", "post_local"):
            SCRIPT.fail(f"{where}: unknown key \"{key}\"; ddp takes \"hook\" and \"post_local\"")
    hook = options.get("hook", "none")
    if hook not in HOOKS:
        SCRIPT.fail(f"{where}.hook: {json.dumps(hook)} is not a hook of ddp; use \"none\" or "
                    "\"fp16\" (torch's fp16_compress_hook)")
    if "post_local" not in options:
        return hook, None
    post = options["post_local"]
    fix = "give {\"start\": S, \"period\": H} with S >= 0 and H >= 1 (integers)"
    if not isinstance(post, dict):
        SCRIPT.fail(f"{where}.post_local: expected an object; {fix}")
    for key in post:
        if key not in ("start", "period"):
            SCRIPT.fail(f"{where}.post_local: unknown key \"{key}\"; {fix}")
    start, period = _count(post.get("start")), _count(post.get("period"))
    for key, value, low in (("start", start, 0), ("period", period, 1)):
        if value is None or value < low:
            given = json.dumps(post[key]) if key in post else "missing"
            SCRIPT.fail(f"{where}.post_local.{key}: {given}; {fix}")
    if hook != "none":
        SCRIPT.fail(f"{where}: \"hook\": \"{hook}\" with \"post_local\" is not mirrored; give "
                    "one of them (two rows)")
    return hook, (start, period)


def average_gradient(torch, dist, grad, world, hook):
    """The flat gradient (float32) averaged over the ranks in place, as DDP's one bucket: "none"
    sums it over gloo then divides by world; "fp16" is fp16_compress_hook's arithmetic (cast to
    float16, divide by world in float16, gloo's float16 sum, cast back)."""
    if hook == "fp16":
        half = grad.to(torch.float16).div_(world)
        dist.all_reduce(half)
        grad.copy_(half)
    else:
        dist.all_reduce(grad)
        grad /= world


def average_parameters(torch, dist, buffer, world):
    """PeriodicModelAverager's averaging (model_averaging.utils.average_parameters) on the flat
    parameters in place: divided by world, then summed by one float32 all-reduce."""
    with torch.no_grad():
        buffer.div_(world)
        dist.all_reduce(buffer)


def main():
    job = torch_job.Job(SCRIPT)
    hook, post_local = ddp_options(job.cfg, job.launch.config)
    job.build()
    torch, dist, world = job.torch, job.dist, job.world
    params, steps, buffer = job.params, job.steps, job.flat.buffer
    grad = torch.zeros(buffer.numel())
    start_local, period = post_local if post_local else (steps, 1)
    job.every_rank = post_local is not None
    t0 = job.start()
    busy = idle = 0.0
    reduced = averaged = 0  # steps whose gradients were all-reduced; model averagings
    last_average = -1
    for s in range(steps):
        loss, start, waited = job.gradient(s)
        busy += waited - start
        if s < start_local:  # DDP: the flat gradient all-reduced (one bucket)
            torch.cat([p.grad.reshape(-1) for p in params], out=grad)
            average_gradient(torch, dist, grad, world, hook)
            offset = 0
            for p in params:
                p.grad.copy_(grad[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
            reduced += 1
        idle += time.monotonic() - waited
        job.clip()  # optimizer.clip_norm: the averaged gradient's global norm (own, when local)
        job.set_lr(s)
        job.opt.step()
        if s >= start_local and ((s - start_local) % period == 0 or s == steps - 1):
            # PeriodicModelAverager (and the final average): parameters / world, then summed.
            ready = time.monotonic()
            average_parameters(torch, dist, buffer, world)
            idle += time.monotonic() - ready
            averaged += 1
            last_average = s
        now = time.monotonic() - t0
        job.metrics.write({"rank": job.rank, "step": s, "time": now, "loss": loss.item(),
                           "step_seconds": waited - start})  # computing and padding, as peer's
        # Evaluation points (docs/results/benchmarks.md): rank 0's model (post_local: each's).
        job.evaluation_point(now)
    end = time.monotonic() - t0
    # The ring all-reduce sends 2 (n - 1) / n of the vector from every rank: float16 gradients
    # under the fp16 hook, float32 gradients otherwise, and float32 parameters per averaging.
    ring = 2 * (world - 1) * buffer.numel() / world
    sent = reduced * ring * (2 if hook == "fp16" else 4) + averaged * ring * 4
    if job.rank == 0 and job.launch.out:
        job.save_model(f"{job.launch.out}/model.bin", steps)
    extra = {"hook": hook}
    if post_local:
        extra.update(post_local=f"start={start_local} period={period}", averagings=averaged,
                     final_average=last_average == steps - 1 and
                     (steps - 1 - start_local) % period != 0)
    job.finish(end, busy, idle, sent, extra=extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
