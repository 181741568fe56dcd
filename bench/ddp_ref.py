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

Started by `gossamer launch` (never by hand): RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and
GLOO_SOCKET_IFNAME in the lab) for torch.distributed; GOSSAMER_CONFIG, GOSSAMER_EPOCHS,
GOSSAMER_OUT, GOSSAMER_EVAL_INTERVAL, GOSSAMER_EVAL_SAMPLES and GOSSAMER_STEP_TIME (the step time
of the cluster file to pad to) for the job. Writes OUT/peer<rank>.jsonl (the lines of
`gossamer peer`: steps, evaluation points, summary) and rank 0 writes OUT/average.json.
Exit status 2 with one line on bad input (a model or optimizer this script does not mirror).
What it shares with bench/diloco_ref.py is in bench/torch_job.py, beside it.
"""
import sys
import time

import torch_job

SCRIPT = torch_job.Script("ddp_ref.py", "ddp")


def main():
    job = torch_job.Job(SCRIPT)
    job.build()
    torch, dist, world = job.torch, job.dist, job.world
    params, steps = job.params, job.steps
    grad = torch.zeros(job.flat.buffer.numel())
    t0 = job.start()
    busy = idle = 0.0
    for s in range(steps):
        loss, start, waited = job.gradient(s)
        busy += waited - start
        torch.cat([p.grad.reshape(-1) for p in params], out=grad)
        dist.all_reduce(grad)  # sum over ranks (gloo), then the mean
        grad /= world
        offset = 0
        for p in params:
            p.grad.copy_(grad[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        idle += time.monotonic() - waited
        job.clip()  # optimizer.clip_norm: the averaged gradient's global norm
        job.set_lr(s)
        job.opt.step()
        now = time.monotonic() - t0
        job.metrics.write({"rank": job.rank, "step": s, "time": now, "loss": loss.item(),
                           "step_seconds": waited - start})  # computing and padding, as peer's
        # Evaluation points (docs/results/benchmarks.md): one model on every rank.
        job.evaluation_point(now)
    end = time.monotonic() - t0
    size_bytes = 4 * grad.numel()
    # The ring all-reduce sends 2 (n - 1) / n of the gradient per step from every rank.
    sent = steps * 2 * (world - 1) * size_bytes / world
    job.finish(end, busy, idle, sent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
