"""Bad input from Python raises a gossamer exception with the CLI's one-line message."""

import subprocess

import numpy as np
import pytest
import torch

import gossamer
import gossamer.torch
from conftest import cli, run_threads


def cli_error(*args):
    """The line the gossamer CLI prints for args (without "error: "), and its exit status."""
    r = subprocess.run([cli(), *args], capture_output=True, text=True, timeout=30)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ")
    return lines[0][len("error: "):], r.returncode


def test_a_missing_topology_file_is_the_cli_line(tmp_path):
    missing = str(tmp_path / "nope.json")
    line, status = cli_error("topo", "show", missing)
    assert status == 2
    with pytest.raises(gossamer.ConfigError) as e:
        gossamer.Topology.load(missing)
    assert str(e.value) == line
    with pytest.raises(gossamer.ConfigError) as e:
        gossamer.Peer(np.zeros(10, np.float32), missing, rank=0, steps=5, transport="inproc",
                      job=gossamer.InprocJob(4))
    assert str(e.value) == line
    assert isinstance(e.value, ValueError)  # ConfigError is also a ValueError


def test_an_unknown_protocol_is_the_cli_line(ring4, tmp_path):
    config = tmp_path / "train.json"
    config.write_text('{"data": {"name": "logreg_synthetic"}, "model": {"name": "softmax"}}')
    line, status = cli_error("peer", "--topology", ring4.source, "--config", str(config),
                             "--rank", "0", "--algorithm", "gosip")
    assert status == 2
    with pytest.raises(gossamer.ConfigError) as e:
        gossamer.Peer(np.zeros(10, np.float32), ring4, rank=0, algorithm="gosip", steps=5,
                      transport="inproc", job=gossamer.InprocJob(4))
    # the option is called --algorithm on the command line and algorithm= in Python
    assert line.startswith("--algorithm: ")
    assert str(e.value) == line[len("--"):]


def test_different_parameter_layouts_on_two_peers_are_refused(tmp_path):
    ring2 = gossamer.Topology.generate("ring", 2).save(tmp_path / "ring2.json")
    job = gossamer.InprocJob(2)
    models = [torch.nn.Linear(4, 2), torch.nn.Linear(4, 3)]  # 10 and 15 parameters

    def peer(rank):
        flat = gossamer.torch.flatten(models[rank])
        gossamer.Peer(flat.buffer, ring2, rank=rank, steps=5, transport="inproc", job=job,
                      join_timeout=10)

    _, errors = run_threads(2, peer)
    for e in errors:
        assert isinstance(e, gossamer.ConfigError), repr(e)
        assert "\n" not in str(e)
    # the C++ API's handshake line (docs/library/api.md), on both peers
    assert [str(e) for e in errors] == [
        "params: rank 1 hands over 15 parameters, rank 0 hands over 10; every peer must hand "
        "over the same parameter vector"] * 2


def test_different_partitions_on_two_peers_are_refused(tmp_path):
    ring2 = gossamer.Topology.generate("ring", 2).save(tmp_path / "ring2.json")
    job = gossamer.InprocJob(2)
    groups = [{"a": ["weight"], "b": ["*"]}, {"a": ["bias"], "b": ["*"]}]

    def peer(rank):
        flat = gossamer.torch.flatten(torch.nn.Linear(4, 2), groups[rank])
        gossamer.Peer(flat.buffer, ring2, rank=rank, steps=5, transport="inproc", job=job,
                      layout=flat.layout, join_timeout=10)

    _, errors = run_threads(2, peer)
    for e in errors:
        assert isinstance(e, gossamer.ConfigError), repr(e)
        assert "\n" not in str(e)


def test_bad_partitions_and_buffers_are_one_line(ring4):
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    with pytest.raises(gossamer.ConfigError, match=r"partitions.fast: its names match no "):
        gossamer.torch.flatten(model, {"fast": ["classifier"], "slow": ["*"]})
    with pytest.raises(gossamer.ConfigError, match=r"parameter 1.weight is in no partition"):
        gossamer.torch.flatten(model, {"fast": ["0"]})
    with pytest.raises(gossamer.ConfigError, match=r"not one contiguous float32 vector"):
        gossamer.Peer(np.zeros(10, np.float64), ring4, rank=0, steps=5, transport="inproc",
                      job=gossamer.InprocJob(4))
    with pytest.raises(gossamer.ConfigError, match=r"unknown transport \"tcp\""):
        gossamer.Peer(np.zeros(10, np.float32), ring4, rank=0, steps=5, transport="tcp")
    with pytest.raises(gossamer.ConfigError, match=r"unknown family \"rign\""):
        gossamer.Topology.generate("rign", 4)


class _FakeCudaTensor:
    """What gossamer.Peer reads of a CUDA tensor, over host memory (no GPU here): the native
    side must refuse it with one line, never touch the pointer."""

    def __init__(self, n):
        self._host = np.zeros(n, np.float32)
        self.device = torch.device("cuda")
        self.dtype = torch.float32

    def data_ptr(self):
        return self._host.ctypes.data

    def numel(self):
        return self._host.size

    def dim(self):
        return 1

    def is_contiguous(self):
        return True


def test_a_bad_device_is_one_line(ring4):
    job = gossamer.InprocJob(4)
    kw = dict(rank=0, steps=5, transport="inproc", job=job)
    with pytest.raises(gossamer.ConfigError, match=r"^device: unknown device \"gpu\""):
        gossamer.Peer(np.zeros(10, np.float32), ring4.source, device="gpu", **kw)
    with pytest.raises(gossamer.ConfigError, match=r"^params: the buffer is in cpu memory but "
                                                   r"device is \"cuda\""):
        gossamer.Peer(np.zeros(10, np.float32), ring4.source, device="cuda", **kw)
    if torch.cuda.is_available():
        return  # the fake tensor below would be taken for real device memory
    with pytest.raises(gossamer.ConfigError) as e:
        gossamer.Peer(_FakeCudaTensor(10), ring4.source, **kw)
    line = str(e.value)
    assert "\n" not in line
    assert line.startswith("PeerOptions::device: ")
    assert "CUDA" in line


def test_flatten_refuses_parameters_outside_cpu_and_cuda():
    model = torch.nn.Linear(3, 2, device="meta")
    with pytest.raises(gossamer.ConfigError, match=r"^parameter weight: torch.float32 on meta"):
        gossamer.torch.flatten(model)


def test_a_bad_eval_interval_from_the_launcher_is_one_line(ring4, monkeypatch):
    monkeypatch.setenv("GOSSAMER_EVAL_INTERVAL", "abc")
    with pytest.raises(gossamer.ConfigError, match=r'^GOSSAMER_EVAL_INTERVAL: "abc" is not a '
                                                   r"number"):
        gossamer.Peer(np.zeros(10, np.float32), ring4.source, rank=0, steps=5,
                      transport="inproc", job=gossamer.InprocJob(4))
    monkeypatch.setenv("GOSSAMER_EVAL_INTERVAL", "-1")
    with pytest.raises(gossamer.ConfigError, match=r"^PeerOptions::eval_interval: -1 s"):
        gossamer.Peer(np.zeros(10, np.float32), ring4.source, rank=0, steps=5,
                      transport="inproc", job=gossamer.InprocJob(4))


def test_an_optimizer_over_another_models_parameters_is_refused(tmp_path):
    ring2 = gossamer.Topology.generate("ring", 2).save(tmp_path / "ring2.json")
    job = gossamer.InprocJob(2)

    def peer(rank):
        torch.manual_seed(0)
        model, other = torch.nn.Linear(4, 2), torch.nn.Linear(4, 2)
        flat = gossamer.torch.flatten(model)
        p = gossamer.Peer(flat.buffer, ring2, rank=rank, steps=2, transport="inproc", job=job,
                          join_timeout=10)
        lines = []
        wrong = torch.optim.SGD(other.parameters(), lr=0.1)
        for args in [(wrong, p, flat), (wrong, p)]:
            with pytest.raises(gossamer.ConfigError) as e:
                gossamer.torch.GossipOptimizer(*args)
            lines.append(str(e.value))
        with pytest.raises(gossamer.ConfigError) as e:  # flat of another model than the peer's
            gossamer.torch.GossipOptimizer(torch.optim.SGD(other.parameters(), lr=0.1), p,
                                           gossamer.torch.flatten(other))
        lines.append(str(e.value))
        # the right parameters, with and without flat, are accepted and train
        gossamer.torch.GossipOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), p)
        opt = gossamer.torch.GossipOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), p, flat)
        while not opt.done:
            opt.zero_grad()
            loss = model(torch.ones(3, 4)).pow(2).mean()
            loss.backward()
            opt.step(loss)
        p.finish()
        return lines

    results, errors = run_threads(2, peer)
    assert errors == [None, None]
    with_flat, without_flat, other_flat = results[0]
    for line in results[0]:
        assert "\n" not in line
    assert with_flat.startswith("optimizer: param_groups[0].params[0] (shape (2, 4)) is not a "
                                "parameter of the model given to gossamer.torch.flatten")
    assert without_flat.startswith("optimizer: param_groups[0].params[0] (shape (2, 4)) does not "
                                   "view the buffer the gossamer.Peer gossips")
    assert other_flat.startswith("flat: its buffer is not the one the gossamer.Peer was built "
                                 "from")


def test_inproc_peers_with_another_algorithm_or_options_are_refused(tmp_path):
    """Issue 16: a mismatched peer used to train alone; the job refuses it up front, and every
    peer raises the same one-line ConfigError naming the field and both values."""
    ring4 = gossamer.Topology.generate("ring", 4).save(tmp_path / "ring4.json")
    cases = [({"algorithm": "async"}, "PeerOptions: algorithm differs: rank 2 has async, rank 0 "
              "has dpsgd; give every peer the same PeerOptions::algorithm"),
             ({"options": {"mode": "cta"}}, 'PeerOptions: algorithm options differ: rank 2 has '
              'dpsgd with {"mode":"cta"}, rank 0 has dpsgd with the defaults; give every peer '
              'the same PeerOptions::algorithm_options')]
    for odd, line in cases:
        job = gossamer.InprocJob(4)

        def peer(rank):
            extra = odd if rank == 2 else {}
            p = gossamer.Peer(np.zeros(10, np.float32), ring4, rank=rank, steps=5,
                              transport="inproc", job=job, join_timeout=10, stall_timeout=3,
                              run_timeout=8, **extra)
            while p.step(0.0):
                pass
            p.finish()

        _, errors = run_threads(4, peer, timeout=30)
        for e in errors:
            assert isinstance(e, gossamer.ConfigError), repr(e)
        assert [str(e) for e in errors] == [line] * 4
