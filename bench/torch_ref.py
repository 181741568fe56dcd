#!/usr/bin/python3
"""PyTorch reference for `gossamer bench compute`.

Trains the same models as Gossamer's built-ins on random data of the same shape, one CPU thread,
and prints one JSON object: samples per second of forward + backward + SGD step per model.

usage: bench/torch_ref.py [--batch 64] [--seconds 3] [--models mlp,cnn]
Run by Debian's /usr/bin/python3 with python3-torch (scripts/deps.sh --bench).
"""
import argparse
import json
import sys
import time


def build(name, torch):
    nn = torch.nn
    if name == "mlp":  # gossamer: {"name": "mlp", "hidden": [256, 128]}
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                             nn.ReLU(), nn.Linear(128, 10))
    if name == "cnn":  # gossamer: {"name": "cnn", "channels": [16, 32], "kernel": 5}
        return nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    raise SystemExit(f"torch_ref.py: unknown model '{name}'; use mlp or cnn")


def measure(name, batch, seconds, torch):
    torch.manual_seed(0)
    model = build(name, torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
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
    try:
        import torch
    except ImportError:
        print("torch_ref.py: PyTorch is not installed; run scripts/deps.sh --bench", file=sys.stderr)
        return 3
    torch.set_num_threads(1)
    out = {"torch": torch.__version__, "threads": torch.get_num_threads(), "batch": args.batch}
    for name in args.models.split(","):
        out[name] = measure(name, args.batch, args.seconds, torch)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
