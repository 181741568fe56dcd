"""Every protocol, multirate partitions and straggler-aware weights are selectable from Python."""

import re
import subprocess

import pytest
import torch

import gossamer
import gossamer.torch
from conftest import cli, run_threads


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(6, 8)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


def train(topology, algorithm, options=None, partitions=None, steps=24):
    n = topology.n
    job = gossamer.InprocJob(n)
    torch.manual_seed(0)
    first = Net()
    models = [Net() for _ in range(n)]
    for m in models:
        m.load_state_dict(first.state_dict())

    def peer(rank):
        torch.set_num_threads(1)
        model = models[rank]
        flat = gossamer.torch.flatten(model, {"head": ["head"], "body": ["*"]})
        p = gossamer.Peer(flat.buffer, topology, rank=rank, algorithm=algorithm, options=options,
                          partitions=partitions, layout=flat.layout, steps=steps,
                          transport="inproc", job=job, join_timeout=20, step_timeout=20,
                          stall_timeout=20, run_timeout=60)
        opt = gossamer.torch.GossipOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), p, flat)
        g = torch.Generator().manual_seed(rank)
        x, y = torch.randn(64, 6, generator=g), torch.randint(0, 3, (64,), generator=g)
        losses = []
        while not opt.done:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            losses.append(float(loss))
            opt.step(loss)
        return p.finish(), losses, flat.buffer.clone()

    results, errors = run_threads(n, peer)
    assert errors == [None] * n
    return results


@pytest.mark.parametrize("algorithm,options", [
    ("allreduce", None), ("dpsgd", None), ("sgp", None), ("choco", None),
    ("async", {"straggler_aware": True}), ("async", {"straggler_aware": False})])
def test_each_protocol_trains(ring4, algorithm, options):
    results = train(ring4, algorithm, options)
    for metrics, losses, _ in results:
        assert metrics["algorithm"] == algorithm
        assert metrics["steps"] == 24 and metrics["rounds"] > 0 and metrics["bytes_sent"] > 0
        assert losses[-1] < losses[0]
    if algorithm == "allreduce":
        assert all(torch.equal(b, results[0][2]) for _, _, b in results)


def test_multirate_partitions_gossip_less(ring4):
    every = train(ring4, "dpsgd")
    slow = train(ring4, "dpsgd", partitions={"partitions": {"body": {"gossip_period": 4}}})
    # layout order: head [0, 27), body [27, 83)
    m = every[0][0]
    header = m["bytes_sent"] / m["messages_sent"] - 4 * 83  # bytes per message beyond the floats
    head4, body4 = slow[0][0]["partition_bytes_sent"]
    head_messages, body_messages = head4 / (4 * 27 + header), body4 / (4 * 56 + header)
    assert head_messages == m["messages_sent"]  # the head still gossips every round
    assert body_messages == m["messages_sent"] / 4  # the body every 4th


def test_algorithms_are_the_registry():
    """gossamer.ALGORITHMS and DEFAULT_ALGORITHM come from the C++ registry: the CLI's own list
    (gossamer peer --help, --algorithm) names the same algorithms in the same order."""
    out = subprocess.run([cli(), "peer", "--help"], capture_output=True, text=True,
                         check=True).stdout
    line = re.search(r"--algorithm NAME\s+(.*) \(default (\w+)\)", out)
    assert line, out
    assert tuple(line.group(1).split(", ")) == gossamer.ALGORITHMS
    assert line.group(2) == gossamer.DEFAULT_ALGORITHM
    assert gossamer.ALGORITHMS[:2] == ("allreduce", "dpsgd") and len(gossamer.ALGORITHMS) >= 8
