"""4 peers in Python (torch softmax regression, torch.optim.SGD, gossamer.torch) reach the same
test loss as the built-in C++ peers on the same synthetic data, seed and protocol, within 1%."""

import pytest
import torch

import gossamer
import gossamer.torch
from conftest import run_threads

CONFIG = {
    "seed": 2,
    "data": {"name": "logreg_synthetic", "samples": 1600, "test_samples": 400, "features": 10,
             "seed": 4},
    "model": {"name": "softmax"},
    "optimizer": {"name": "sgd", "lr": 0.2},
    "schedule": {"schedule": "constant"},
    # full batches (400 samples per shard): the batch order cannot differ from the C++ loader's
    "training": {"epochs": 40, "batch_size": 400},
}


def python_loss(topology, algorithm, options=None):
    n = topology.n
    job = gossamer.InprocJob(n)
    data = gossamer.load_data(CONFIG)

    def peer(rank):
        s = gossamer.shard(CONFIG, rank, n)
        x, y = torch.from_numpy(s["x"]), torch.from_numpy(s["y"])
        model = torch.nn.Linear(x.shape[1], s["classes"])  # weight [classes, features], bias
        flat = gossamer.torch.flatten(model)
        flat.buffer.copy_(torch.from_numpy(s["params"]))  # the C++ model's first point
        p = gossamer.Peer(flat.buffer, topology, rank=rank, algorithm=algorithm, options=options,
                          steps=s["steps"], transport="inproc", job=job, join_timeout=20,
                          step_timeout=20, stall_timeout=20, run_timeout=60)
        opt = gossamer.torch.GossipOptimizer(torch.optim.SGD(model.parameters(), lr=0.2), p, flat)
        while not opt.done:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step(loss)
        p.finish()
        return flat.buffer.clone()

    results, errors = run_threads(n, peer)
    assert errors == [None] * n
    first = torch.from_numpy(gossamer.shard(CONFIG, 0, n)["params"])
    return eval_loss(data, torch.stack(results).mean(0)), eval_loss(data, first)


def eval_loss(data, params):
    model = torch.nn.Linear(data["test"]["x"].shape[1], data["test"]["classes"])
    gossamer.torch.flatten(model).buffer.copy_(params)
    with torch.no_grad():
        return float(torch.nn.functional.cross_entropy(
            model(torch.from_numpy(data["test"]["x"])), torch.from_numpy(data["test"]["y"])))


@pytest.mark.parametrize("algorithm", ["dpsgd", "allreduce", "sgp"])
def test_python_peers_match_the_builtin_peers(ring4, algorithm):
    builtin = gossamer.train_builtin(CONFIG, ring4, algorithm)
    assert builtin["errors"] == [""] * 4
    ours, first = python_loss(ring4, algorithm)
    print(f"{algorithm}: first point {first:.6f}, C++ peers {builtin['loss']:.6f}, "
          f"Python peers {ours:.6f}")
    assert ours == pytest.approx(builtin["loss"], rel=0.01)
    assert builtin["loss"] < 0.8 * first  # it trained
