#!/usr/bin/python3
"""PyTorch reference for `gossamer bench compute`.

Trains the same models as Gossamer's built-ins on random data of the same shape, one CPU thread,
and prints one JSON object: samples per second of forward + backward + SGD step per model.

usage: bench/torch_ref.py [--batch 64] [--seconds 3] [--models mlp,cnn,gpt_tiny:16,...]
(a model's ":N" sets its batch; without it, --batch).
Run by Debian's /usr/bin/python3 with python3-torch (scripts/deps.sh --bench).
"""
import argparse
import json
import os
import sys
import time


# The GPTs of `gossamer bench compute` (models.hpp's "gpt"): name -> layers, heads, width, context.
GPTS = {"gpt_tiny": (2, 4, 128, 64), "gpt_lab": (4, 4, 192, 64)}
VOCAB = 63  # the King James Bible's characters, the newline included


def gpt(torch, layers, heads, width, context):
    """Gossamer's GPT: pre-LayerNorm blocks, causal attention, exact GELU, untied head."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(width)
            self.qkv = nn.Linear(width, 3 * width)
            self.proj = nn.Linear(width, width)
            self.ln2 = nn.LayerNorm(width)
            self.fc = nn.Linear(width, 4 * width)
            self.fc2 = nn.Linear(4 * width, width)
            self.register_buffer("mask", torch.tril(torch.ones(context, context, dtype=torch.bool)))

        def forward(self, x):
            b, t, c = x.shape
            d = c // heads
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, heads, d).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / d ** 0.5)
            att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, c)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc(self.ln2(x))))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB, width)
            self.wpe = nn.Embedding(context, width)
            self.blocks = nn.Sequential(*[Block() for _ in range(layers)])
            self.lnf = nn.LayerNorm(width)
            self.out = nn.Linear(width, VOCAB)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1])
            return self.out(self.lnf(self.blocks(self.wte(idx) + self.wpe(pos))))

    return Gpt()


def build(name, torch):
    nn = torch.nn
    if name in GPTS:
        return gpt(torch, *GPTS[name])
    if name == "mlp":  # gossamer: {"name": "mlp", "hidden": [256, 128]}
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                             nn.ReLU(), nn.Linear(128, 10))
    if name == "cnn":  # gossamer: {"name": "cnn", "channels": [16, 32], "kernel": 5}
        return nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    raise SystemExit(f"torch_ref.py: unknown model '{name}'; use mlp, cnn, gpt_tiny or gpt_lab")


def measure(name, batch, seconds, torch):
    torch.manual_seed(0)
    model = build(name, torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    if name in GPTS:  # windows of context + 1 random token ids: inputs and next-token targets
        w = torch.randint(0, VOCAB, (batch, GPTS[name][3] + 1))
        x, y = w[:, :-1], w[:, 1:].reshape(-1)
    else:
        x = torch.randn(batch, 1, 28, 28)
        y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x).reshape(y.shape[0], -1), y)
        loss.backward()
        opt.step()

    for _ in range(10):  # warm-up: allocations, kernel selection
        step()
    steps, start = 0, time.perf_counter()
    while True:
        step()
        steps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds and steps >= 5:
            return steps * batch / elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--models", default="mlp,cnn")
    args = ap.parse_args()
    # One thread for every library torch may call: torch.set_num_threads does not reach
    # OpenBLAS's own pthreads, which would otherwise use every core for the products.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        import torch
    except ImportError:
        print("torch_ref.py: PyTorch is not installed; run scripts/deps.sh --bench", file=sys.stderr)
        return 3
    torch.set_num_threads(1)
    out = {"torch": torch.__version__, "threads": torch.get_num_threads(), "batch": args.batch}
    for item in args.models.split(","):
        name, _, batch = item.partition(":")
        out[name] = measure(name, int(batch) if batch else args.batch, args.seconds, torch)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
