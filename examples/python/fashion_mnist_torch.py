#!/usr/bin/python3
"""A small PyTorch CNN on Fashion-MNIST, gossip-trained by 4 Gossamer peers (docs/library/python.md).

    examples/python/fashion_mnist_torch.py --algorithm async --slow 0:3
    examples/python/fashion_mnist_torch.py --algorithm allreduce --slow 0:3

By default the peers are threads of this process (the inproc transport). Started with a rank
(--rank, or GOSSAMER_RANK / OMPI_COMM_WORLD_RANK from a launcher) it is one peer of a job of
processes over UCX, and the topology comes from --topology or GOSSAMER_TOPOLOGY. Started by
`gossamer launch --script` it takes the algorithm, epochs and output folder from the launcher,
reads the data section, batch size and learning rate of its training config (GOSSAMER_CONFIG),
ends with the exact average of the survivors' models, and the lowest surviving rank writes
OUT/average.json for the launcher's table.
"""

import argparse
import os
import sys
import threading
import time

import torch
import torch.nn.functional as F

import gossamer
import gossamer.torch

PARTITIONS = {"classifier": ["classifier"], "features": ["*"]}


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 8, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten())
        self.classifier = torch.nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        return self.classifier(self.features(x))


def slow_spec(text):
    """--slow RANK:FACTOR, checked by argparse (one line and exit 2 when wrong)."""
    try:
        rank, factor = text.split(":")
        if int(rank) >= 0 and float(factor) >= 1:
            return text
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"\"{text}\" is not RANK:FACTOR with FACTOR >= 1, e.g. 0:3")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algorithm", default=None, choices=gossamer.ALGORITHMS,
                   help="default: the launcher's (GOSSAMER_ALGORITHM), else async")
    p.add_argument("--options", default="", help="the algorithm's options as JSON text "
                   "(default for async: straggler-aware weights, {\"straggler_aware\": true})")
    p.add_argument("--topology", default=None, help="topology file (default: a ring of --peers)")
    p.add_argument("--peers", type=int, default=4, help="threads when no topology is given")
    p.add_argument("--rank", type=int, default=None, help="run one peer (processes over UCX)")
    p.add_argument("--train", type=int, default=20000, help="training images (a subset)")
    p.add_argument("--test", type=int, default=2000, help="test images")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--slow", default=None, type=slow_spec, help="RANK:FACTOR, e.g. 0:3: that peer's steps take "
                   "FACTOR times as long (a straggler)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="where the model trains; with cuda, Gossamer mixes on the GPU too")
    p.add_argument("--metrics-dir", default="", help="write DIR/peer<R>.jsonl (metrics)")
    return p.parse_args()


def load(args, data=None):
    """Gossamer's loader (normalised, [N, 1, 28, 28]); data: a training config's data section."""
    d = gossamer.load_data(data or {"name": "fashion-mnist", "train_limit": args.train,
                                    "test_limit": args.test})
    return ({k: torch.from_numpy(v) for k, v in d["train"].items() if k in ("x", "y")},
            {k: torch.from_numpy(v) for k, v in d["test"].items() if k in ("x", "y")})


def evaluate(model, test):
    device = next(model.parameters()).device
    with torch.no_grad():
        x, y = test["x"].to(device), test["y"].to(device)
        out = model(x)
        return (float(F.cross_entropy(out, y)), float((out.argmax(1) == y).float().mean()))


_print_lock = threading.Lock()


def say(line):
    """One whole line on stdout (peers are threads: print's pieces would interleave)."""
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def first_model(seed):
    """Every peer must start from the same point: the same seed, and (threads share torch's
    generator) the models built before the threads start."""
    torch.manual_seed(seed)
    return SmallCNN()


def train_peer(rank, n, args, train, test, topology, job, slow, model, launch=None):
    """One peer: its shard (every n-th image), the CNN as views into Gossamer's buffer, SGD with
    momentum wrapped by GossipOptimizer. Returns (final buffer, metrics, seconds to the last
    step)."""
    torch.set_num_threads(1)
    model.to(args.device)  # before flatten: the flat buffer lives where the parameters do
    flat = gossamer.torch.flatten(model, PARTITIONS)
    x, y = train["x"][rank::n].to(args.device), train["y"][rank::n].to(args.device)
    per_epoch = len(x) // args.batch
    steps = per_epoch * args.epochs
    options = args.options or None
    if options is None and args.algorithm == "async":
        options = {"straggler_aware": True}
    metrics = os.path.join(args.metrics_dir, f"peer{rank}.jsonl") if args.metrics_dir else ""
    if launch:
        metrics = launch.metrics_path
    peer = gossamer.Peer(flat.buffer, topology, rank=rank, algorithm=args.algorithm,
                         options=options, layout=flat.layout, steps=steps,
                         transport="inproc" if job else "ucx", job=job, metrics_path=metrics,
                         exact_average=launch is not None)
    scored = None  # evaluation points for gossamer launch's time-to-target column
    if launch and launch.eval_interval > 0:
        k = launch.eval_samples or len(test["x"])
        subset = {"x": test["x"][:k], "y": test["y"][:k]}
        scored = lambda: evaluate(model, subset)[::-1]  # (accuracy, loss)
    opt = gossamer.torch.GossipOptimizer(
        torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9), peer, flat, scored)
    g = torch.Generator().manual_seed(args.seed * 1000 + rank)
    start = time.monotonic()
    step = 0
    while not opt.done:
        if step % per_epoch == 0:
            order = torch.randperm(len(x), generator=g).to(args.device)
        idx = order[(step % per_epoch) * args.batch:(step % per_epoch + 1) * args.batch]
        t0 = time.monotonic()
        opt.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        if rank in slow:
            time.sleep((slow[rank] - 1) * (time.monotonic() - t0))
        opt.step(loss)
        step += 1
    seconds = time.monotonic() - start
    m = peer.finish()  # waits for the others
    tl, acc = evaluate(model, test)
    if launch and launch.write_average(m, tl, acc):
        say(f"rank {rank}: average of ranks {m['average_of']}: test loss {tl:.4f}, accuracy "
            f"{acc:.4f}; wrote {os.path.join(launch.out, 'average.json')}")
    say(f"rank {rank}: {m['steps']} steps done after {seconds:.1f} s (waited {m['wait_seconds']:.1f} s)"
          f", last batch loss {m['loss']:.3f}, test loss {tl:.3f}, accuracy {100 * acc:.1f}%, "
          f"sent {m['bytes_sent'] / 1e6:.1f} MB")
    return flat.buffer.clone(), m, seconds


def main():
    args = parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("fashion_mnist_torch.py: --device cuda: PyTorch sees no CUDA device here; use "
              "--device cpu", file=sys.stderr)
        return 2
    slow = {}
    if args.slow:
        r, f = args.slow.split(":")
        slow[int(r)] = float(f)
    launch = gossamer.launched()
    if args.algorithm is None:
        args.algorithm = launch.algorithm if launch else "async"
    data = None
    if launch and launch.config:  # the launcher's training config: its data, batch and rate
        import json
        with open(launch.config) as f:
            cfg = json.load(f)
        data = cfg.get("data")
        args.batch = cfg.get("training", {}).get("batch_size", args.batch)
        args.lr = cfg.get("optimizer", {}).get("lr", args.lr)
    if launch and launch.epochs:
        args.epochs = launch.epochs
    train, test = load(args, data)
    rank = args.rank
    if rank is None:
        for var in ("GOSSAMER_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
            if os.environ.get(var):
                rank = int(os.environ[var])
                break
    if args.metrics_dir:
        os.makedirs(args.metrics_dir, exist_ok=True)
    if rank is not None:  # one process of a job over UCX
        topology = args.topology or os.environ.get("GOSSAMER_TOPOLOGY")
        n = gossamer.peer_count(topology)
        train_peer(rank, n, args, train, test, topology, None, slow, first_model(args.seed),
                   launch)
        return 0
    topology = args.topology
    if topology is None:  # a ring of --peers, in a file removed at exit
        import atexit
        import tempfile
        tmp = tempfile.TemporaryDirectory(prefix="gossamer-")
        atexit.register(tmp.cleanup)
        topology = os.path.join(tmp.name, f"ring{args.peers}.json")
        gossamer.Topology.generate("ring", args.peers).save(topology)
    n = gossamer.peer_count(topology)
    job = gossamer.InprocJob(n)
    results = [None] * n
    errors = []
    models = [first_model(args.seed) for _ in range(n)]

    def run(r):
        try:
            results[r] = train_peer(r, n, args, train, test, topology, job, slow, models[r])
        except gossamer.Error as e:
            errors.append(f"rank {r}: {e}")

    print(f"{n} peers ({args.algorithm}, {len(train['x'])} training images, {args.epochs} epochs,"
          f" batch {args.batch}{', peer %s %sx slower' % tuple(args.slow.split(':')) if slow else ''})",
          flush=True)
    start = time.monotonic()
    threads = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    model = first_model(args.seed)
    gossamer.torch.flatten(model, PARTITIONS).buffer.copy_(
        torch.stack([b.cpu() for b, _, _ in results]).mean(0))
    tl, acc = evaluate(model, test)
    fast = [s for r, (_, _, s) in enumerate(results) if r not in slow]
    print(f"average model: test loss {tl:.3f}, accuracy {100 * acc:.1f}%; all done after "
          f"{time.monotonic() - start:.1f} s, the fast peers' last steps after {max(fast):.1f} s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except gossamer.ConfigError as e:  # bad input: one line, status 2 (as the CLI)
        print(f"fashion_mnist_torch.py: {e}", file=sys.stderr)
        sys.exit(2)
    except gossamer.Error as e:
        print(f"fashion_mnist_torch.py: {e}", file=sys.stderr)
        sys.exit(1)
