"""gossamer.torch: parameters stay views into the flat buffer Gossamer writes into (no copy per
round); gradients, optimizer state and state_dict() survive every round."""

import pytest
import torch

import gossamer
import gossamer.torch
from conftest import run_threads


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)  # every peer starts from the same point
        self.features = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU())
        self.classifier = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.classifier(self.features(x))


def pointers(model):
    return [p.data_ptr() for p in model.parameters()]


def test_partitions_order_the_buffer_by_group():
    model = Net()
    before = [p.detach().clone() for p in model.parameters()]
    flat = gossamer.torch.flatten(model, {"fast": ["classifier"], "slow": ["*"]})
    assert flat.layout == [("fast", 0, 27), ("slow", 27, 56)]
    assert flat.slices["classifier.weight"] == (0, 24)
    assert flat.slices["features.0.weight"] == (27, 48)
    for p, b in zip(model.parameters(), before):
        assert torch.equal(p, b)  # the values moved into the buffer unchanged
    base = flat.buffer.data_ptr()
    for name, p in model.named_parameters():
        assert p.data_ptr() == base + 4 * flat.slices[name][0]
    flat.check()
    model.classifier.bias.data = torch.zeros(3)  # a replaced .data is found, not missed
    with pytest.raises(gossamer.ConfigError, match="no longer views gossamer's flat buffer"):
        flat.check()


@pytest.mark.parametrize("algorithm,optimizer", [("dpsgd", "momentum"), ("async", "adam")])
def test_views_grads_and_optimizer_state_survive_rounds(ring4, algorithm, optimizer):
    n, steps = 4, 12
    job = gossamer.InprocJob(n)
    models = [Net() for _ in range(n)]  # the same first point (threads share torch's generator)

    def peer(rank):
        torch.set_num_threads(1)
        model = models[rank]
        flat = gossamer.torch.flatten(model, {"fast": ["classifier"], "slow": ["*"]})
        ptrs = pointers(model)
        if optimizer == "adam":
            inner = torch.optim.Adam(model.parameters(), lr=0.01)
        else:
            inner = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        p = gossamer.Peer(flat.buffer, ring4, rank=rank, algorithm=algorithm, steps=steps,
                          layout=flat.layout, transport="inproc", job=job, exact_average=True,
                          join_timeout=20, step_timeout=20, stall_timeout=20, run_timeout=60)
        opt = gossamer.torch.GossipOptimizer(inner, p, flat)
        g = torch.Generator().manual_seed(rank)  # different data on every peer
        x, y = torch.randn(32, 6, generator=g), torch.randint(0, 3, (32,), generator=g)
        while not opt.done:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            grads = [q.grad.clone() for q in model.parameters()]
            grad_ptrs = [q.grad.data_ptr() for q in model.parameters()]
            before = flat.buffer.clone()
            opt.step(loss)
            # the round changed the parameters through the buffer, and nothing else
            assert pointers(model) == ptrs
            assert [q.grad.data_ptr() for q in model.parameters()] == grad_ptrs
            assert all(torch.equal(q.grad, gq) for q, gq in zip(model.parameters(), grads))
            assert not torch.equal(flat.buffer, before)
            state = inner.state_dict()["state"]
            assert len(state) == 4 and all(state[i] for i in range(4))
        saved = opt.state_dict()
        fresh = type(inner)(model.parameters(), **inner.defaults)
        fresh.load_state_dict(saved)  # a state_dict after gossip rounds loads back
        p.finish()
        return [q.detach().clone() for q in model.parameters()], saved

    results, errors = run_threads(n, peer)
    assert errors == [None] * n
    # exact_average: every peer ends with the same model, read through the parameter views
    for params, _ in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(params, results[0][0]))
    steps_key = "step" if optimizer == "adam" else "momentum_buffer"
    assert steps_key in results[0][1]["state"][0]
