#!/usr/bin/python3
"""The built-in GPT's PyTorch twin on text, gossip-trained by Gossamer peers (docs/library/python.md).

    examples/python/gpt_torch.py                                  # examples/train/gpt_tiny.json
    examples/python/gpt_torch.py --config my.json --algorithm allreduce --peers 8 --steps 200

The twin (gossamer.models_torch.Gpt) has the built-in model's parameter layout, and every peer
takes from gossamer.shard what a built-in peer of the training config trains with: the first
parameters, its shard's windows, the rows of every step's batch and the step's learning rate;
the config's optimizer (sgd, adam or adamw, with optimizer.clip_norm) is torch's. By default the
peers are threads of this process (the inproc transport) on a ring of --peers. Started with a
rank (--rank, or GOSSAMER_RANK / OMPI_COMM_WORLD_RANK from a launcher) it is one peer of a job of
processes over UCX, and the topology comes from --topology or GOSSAMER_TOPOLOGY. Started by
`gossamer launch --script` it takes the algorithm, epochs, output folder and training config
from the launcher, ends with the exact average of the survivors' models, and the lowest
surviving rank writes OUT/average.json. It prints the validation loss in nats and bits per
character and a sample the average model writes after --prompt.
"""

import argparse
import json
import os
import sys
import threading
import time

import torch

import gossamer
import gossamer.models_torch as gm
import gossamer.torch

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join(HERE, "..", "train", "gpt_tiny.json")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=None, help="training config with text data and a gpt "
                   "model (default: the launcher's, else examples/train/gpt_tiny.json)")
    p.add_argument("--algorithm", default=None, choices=gossamer.ALGORITHMS,
                   help="default: the launcher's (GOSSAMER_ALGORITHM), else dpsgd")
    p.add_argument("--options", default="", help="the algorithm's options as JSON text "
                   "(default: the config's \"algorithms\" entry for it)")
    p.add_argument("--topology", default=None, help="topology file (default: a ring of --peers)")
    p.add_argument("--peers", type=int, default=4, help="threads when no topology is given")
    p.add_argument("--rank", type=int, default=None, help="run one peer (processes over UCX)")
    p.add_argument("--epochs", type=int, default=None, help="default: the config's")
    p.add_argument("--steps", type=int, default=None, help="stop after this many steps (the "
                   "learning rates stay the config's schedule over all its steps)")
    p.add_argument("--eval-samples", type=int, default=512,
                   help="validation windows evaluated (the first ones)")
    p.add_argument("--prompt", default="And God said", help="the sample's first characters")
    p.add_argument("--sample-chars", type=int, default=200, help="characters generated")
    p.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    p.add_argument("--metrics-dir", default="", help="write DIR/peer<R>.jsonl (metrics)")
    return p.parse_args()


_print_lock = threading.Lock()


def say(line):
    """One whole line on stdout (peers are threads: print's pieces would interleave)."""
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def read_config(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise gossamer.ConfigError(f"{path}: cannot read it ({e.strerror}); give --config PATH")
    except json.JSONDecodeError as e:
        raise gossamer.ConfigError(f"{path}: line {e.lineno}: not JSON ({e.msg}); fix the file")


def bits(loss):
    return loss / gm.LN2


def encode(text, vocabulary):
    """Token ids of text, or ConfigError naming the first character outside the vocabulary."""
    ids = []
    for i, c in enumerate(text):
        k = vocabulary.find(c)
        if k < 0:
            raise gossamer.ConfigError(f"--prompt: character {c!r} (position {i}) is not in the "
                                       "data's vocabulary; use characters of the text")
        ids.append(k)
    return ids


class Job:
    """What every peer shares: the config, its test windows, steps and options."""

    def __init__(self, args, path, cfg, n, launch):
        self.args, self.cfg, self.n, self.launch = args, cfg, n, launch
        data = gossamer.load_data(cfg)
        test = torch.from_numpy(data["test"]["x"])
        self.test = test[:args.eval_samples] if args.eval_samples > 0 else test
        self.vocabulary = data["train"].get("vocabulary")
        if not self.vocabulary:
            raise gossamer.ConfigError(f"{path}: data.name: \"{cfg.get('data', {}).get('name')}\""
                                       " is not text; use bible-kjv or text (docs/modules/data.md)")
        try:  # a model that is no gpt: one line, now
            gm.gpt_from_config(cfg, len(self.vocabulary))
        except gossamer.ConfigError as e:
            raise gossamer.ConfigError(f"{path}: {e}") from None
        self.outer = cfg.get("outer")
        options = json.loads(args.options) if args.options else \
            cfg.get("algorithms", {}).get(args.algorithm)
        self.options = options

    def peer(self, rank, topology, inproc):
        """Peer rank's twin at the built-in first point, its shard and its gossamer.Peer."""
        args = self.args
        sh = gossamer.shard(self.cfg, rank, self.n, epochs=args.epochs)
        net = gm.from_shard(self.cfg, sh)
        flat = gossamer.torch.flatten(net, net.partitions())  # the built-in order and layers
        steps = int(sh["steps"]) if args.steps is None else min(args.steps, int(sh["steps"]))
        metrics = os.path.join(args.metrics_dir, f"peer{rank}.jsonl") if args.metrics_dir else ""
        if self.launch:
            metrics = self.launch.metrics_path
        peer = gossamer.Peer(flat.buffer, topology, rank=rank, algorithm=args.algorithm,
                             options=self.options, partitions=self.cfg.get("multirate"),
                             layout=flat.layout, steps=steps,
                             transport="inproc" if inproc else "ucx", job=inproc,
                             metrics_path=metrics, exact_average=self.launch is not None,
                             outer=self.outer)
        return sh, net, flat, peer, steps


def train_peer(rank, job, topology, inproc=None):
    """One peer: the twin as views into Gossamer's buffer, the config's optimizer wrapped by
    GossipOptimizer, the built-in peer's batches and learning rates. Returns (final buffer,
    metrics, seconds to the last step)."""
    torch.set_num_threads(1)
    sh, net, flat, peer, steps = job.peer(rank, topology, inproc)
    windows = torch.from_numpy(sh["x"])
    scored = None  # evaluation points for gossamer launch's time-to-target column
    launch = job.launch
    if launch and launch.eval_interval > 0:
        k = launch.eval_samples or len(job.test)
        scored = lambda: net.evaluate(job.test[:k])[::-1]  # (accuracy, loss)
    opt = gossamer.torch.GossipOptimizer(gm.optimizer(job.cfg, net.parameters()), peer, flat,
                                         scored, outer=job.outer)
    start = time.monotonic()
    s = 0
    while not opt.done:
        for group in opt.param_groups:
            group["lr"] = float(sh["lr"][s])
        opt.zero_grad()
        loss = net.loss(windows[torch.from_numpy(sh["batches"][s])])
        loss.backward()
        gm.clip_gradients(job.cfg, net.parameters())
        opt.step(loss)
        s += 1
    seconds = time.monotonic() - start
    m = peer.finish()  # waits for the others
    vl, acc = net.evaluate(job.test)
    if launch and launch.write_average(m, vl, acc):
        say(f"rank {rank}: average of ranks {m['average_of']}: validation loss {vl:.4f} nats/char "
            f"({bits(vl):.3f} bits/char); wrote {os.path.join(launch.out, 'average.json')}")
    say(f"rank {rank}: {m['steps']} steps in {seconds:.1f} s (waited {m['wait_seconds']:.1f} s), "
        f"last batch loss {m['loss']:.3f}, validation loss {vl:.3f} nats/char "
        f"({bits(vl):.3f} bits/char), sent {m['bytes_sent'] / 1e6:.1f} MB")
    return flat.buffer.clone(), m, seconds, net


def show_sample(net, job):
    args = job.args
    prompt = encode(args.prompt, job.vocabulary)
    g = torch.Generator().manual_seed(int(job.cfg.get("seed", 1)))
    ids = net.generate(prompt[-net.context:], args.sample_chars, args.temperature, g)
    text = "".join(job.vocabulary[i] for i in ids).encode("latin-1").decode("utf-8", "replace")
    print(f"sample (temperature {args.temperature:g}):\n{text}")


def main():
    args = parse_args()
    launch = gossamer.launched()
    if args.algorithm is None:
        args.algorithm = launch.algorithm if launch else "dpsgd"
    if launch and launch.epochs:
        args.epochs = launch.epochs
    path = args.config or (launch.config if launch and launch.config else DEFAULT_CONFIG)
    cfg = read_config(path)
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
        job = Job(args, path, cfg, gossamer.peer_count(topology), launch)
        train_peer(rank, job, topology)
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
    job = Job(args, path, cfg, n, launch)
    encode(args.prompt, job.vocabulary)  # a bad prompt fails before training
    inproc = gossamer.InprocJob(n)
    results = [None] * n
    errors = []

    def run(r):
        try:
            results[r] = train_peer(r, job, topology, inproc)
        except gossamer.Error as e:
            errors.append(f"rank {r}: {e}")

    print(f"{n} peers ({args.algorithm}, {path}, {len(job.test)} validation windows)",
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
    net = results[0][3]
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(torch.stack([b for b, *_ in results]).mean(0),
                                            net.parameters())
    vl, acc = net.evaluate(job.test)
    print(f"average model: validation loss {vl:.4f} nats/char ({bits(vl):.3f} bits/char), "
          f"last character right {100 * acc:.1f}%; all done after "
          f"{time.monotonic() - start:.1f} s")
    show_sample(net, job)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except gossamer.ConfigError as e:  # bad input: one line, status 2 (as the CLI)
        print(f"gpt_torch.py: {e}", file=sys.stderr)
        sys.exit(2)
    except gossamer.Error as e:
        print(f"gpt_torch.py: {e}", file=sys.stderr)
        sys.exit(1)
