"""gossamer.Peer(..., outer={...}) and GossipOptimizer(..., outer=...): the user's torch optimizer
is the inner one (docs/library/python.md, "Outer rounds")."""

import pytest
import torch

import gossamer
import gossamer.torch
from conftest import run_threads


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(6, 8)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


def train(topology, algorithm="allreduce", options=None, outer=None, steps=24):
    """4 peers as threads, each with torch SGD (momentum 0.5: state the rounds must keep) on its
    own batch; returns [(metrics, losses, final flat parameters, step() calls)]."""
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
        flat = gossamer.torch.flatten(model)
        p = gossamer.Peer(flat.buffer, topology, rank=rank, algorithm=algorithm, options=options,
                          steps=steps, transport="inproc", job=job, join_timeout=20,
                          step_timeout=20, stall_timeout=20, run_timeout=60, outer=outer)
        opt = gossamer.torch.GossipOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5), p, flat, outer=outer)
        g = torch.Generator().manual_seed(rank)
        x, y = torch.randn(64, 6, generator=g), torch.randint(0, 3, (64,), generator=g)
        losses, calls = [], 0
        while not opt.done:
            assert p.steps_left == steps - calls
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            losses.append(float(loss))
            opt.step(loss)
            calls += 1
        return p.finish(), losses, flat.buffer.clone(), calls

    results, errors = run_threads(n, peer)
    assert errors == [None] * n
    return results


def relative(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def test_outer_sgd_lr1_is_allreduce_period(ring4):
    plain = train(ring4, options={"period": 4})
    rounds = train(ring4, outer={"steps": 4, "optimizer": "sgd", "lr": 1.0, "momentum": 0.0})
    for (m, losses, b, calls), (_, _, want, _) in zip(rounds, plain):
        assert calls == 24 and m["steps"] == 24 and m["rounds"] == 6
        assert 0 < relative(b, want) < 1e-6  # theta - (theta - y) is not y in floating point
        assert losses[-1] < losses[0]


def test_outer_nesterov_keeps_allreduce_peers_identical(ring4):
    outer = {"steps": 5, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9}
    results = train(ring4, outer=outer)
    for m, losses, b, calls in results:
        assert calls == 24 and m["steps"] == 24
        assert m["rounds"] == 5  # ceil(24 / 5): a last round of 4 inner steps
        assert torch.equal(b, results[0][2])
        assert torch.isfinite(b).all()
    plain = train(ring4)
    assert relative(results[0][2], plain[0][2]) > 1e-4  # the outer step did something


def refused(ring4, **kw):
    params = torch.zeros(8)
    with pytest.raises(gossamer.ConfigError) as e:
        gossamer.Peer(params, ring4, rank=0, steps=10, transport="inproc",
                      job=gossamer.InprocJob(4), join_timeout=5, **kw)
    assert isinstance(e.value, ValueError)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_bad_outer_options_are_one_line(ring4):
    assert refused(ring4, outer={"steps": 0}).startswith(
        "outer.steps: 0 inner steps per round; a round takes at least one")
    assert refused(ring4, outer={"steps": 4, "lr": -1}).startswith("outer.lr: outer learning rate")
    assert refused(ring4, outer={"steps": 4, "momentum": 1}).startswith(
        "outer.momentum: outer momentum 1 is outside [0, 1)")
    assert refused(ring4, outer={"steps": 4, "optimizer": "adam"}).startswith("outer.optimizer")
    assert "\"step\"" in refused(ring4, outer={"step": 4})
    assert "Nesterov's outer step needs momentum > 0" in refused(
        ring4, outer={"steps": 4, "optimizer": "nesterov"})
    assert "PeerOptions::outer: gadmm" in refused(ring4, algorithm="gadmm", outer={"steps": 4})
    assert "allreduce with \"period\" > 1" in refused(
        ring4, algorithm="allreduce", options={"period": 4}, outer={"steps": 4})
    assert "outer: a list is not a JSON object" in refused(ring4, outer=[4])


def test_gossip_optimizer_outer_must_be_the_peers(ring4):
    model = Net()
    flat = gossamer.torch.flatten(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    # A stand-in for the peer (a real one would wait for the other three to join): what
    # gossamer.Peer keeps of its outer= and its buffer.
    class Stub:
        outer = gossamer._native.outer_describe('{"steps": 4}')
        _params = flat.buffer

    gossamer.torch.GossipOptimizer(opt, Stub(), flat, outer={"steps": 4, "lr": 1.0})
    with pytest.raises(gossamer.ConfigError, match="the gossamer.Peer was built with H=4"):
        gossamer.torch.GossipOptimizer(opt, Stub(), flat, outer={"steps": 8})
    with pytest.raises(gossamer.ConfigError, match="outer.steps"):
        gossamer.torch.GossipOptimizer(opt, Stub(), flat, outer={"steps": -1})
    Stub.outer = None
    with pytest.raises(gossamer.ConfigError, match="built with no outer"):
        gossamer.torch.GossipOptimizer(opt, Stub(), flat, outer={"steps": 4})
