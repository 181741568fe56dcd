"""examples/python/fashion_mnist_torch.py runs (a small subset) with async and allreduce."""

import os
import re
import subprocess
import sys

import pytest
from conftest import fashion_mnist_dir

SRC = os.environ.get("GOSSAMER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(SRC, "examples", "python", "fashion_mnist_torch.py")


def test_the_example_refuses_cuda_without_a_gpu_in_one_line():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: --device cuda is valid here")
    r = subprocess.run([sys.executable, EXAMPLE, "--device", "cuda"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "fashion_mnist_torch.py: --device cuda: PyTorch sees no CUDA device here; use --device cpu"]


@pytest.mark.parametrize("algorithm", ["async", "allreduce"])
def test_the_example_trains(algorithm):
    data = fashion_mnist_dir()
    r = subprocess.run([sys.executable, EXAMPLE, "--algorithm", algorithm, "--train", "3200",
                        "--test", "500", "--epochs", "2", "--slow", "0:2"],
                       capture_output=True, text=True, timeout=100)
    assert r.returncode == 0, r.stderr
    ranks = re.findall(r"rank (\d): 50 steps done after [\d.]+ s .* accuracy ([\d.]+)%", r.stdout)
    assert sorted(int(k) for k, _ in ranks) == [0, 1, 2, 3], r.stdout
    acc = float(re.search(r"average model: test loss [\d.]+, accuracy ([\d.]+)%", r.stdout)[1])
    assert acc > 45, r.stdout  # 10 classes: chance is 10%
    if algorithm == "allreduce":  # every peer ends with the same model
        assert len({a for _, a in ranks}) == 1, r.stdout


def free_base_port(n):
    """A port p with p .. p+n-1 free on the loopback interface now."""
    import socket
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        try:
            socks = []
            for k in range(n):
                t = socket.socket()
                socks.append(t)
                t.bind(("127.0.0.1", base + k))
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    pytest.skip("no free loopback ports")


def test_the_example_as_processes_started_like_gossamer_launch(tmp_path):
    """2 processes over UCX with the environment `gossamer launch --script` gives a peer: they
    write OUT/peer<r>.jsonl, and the lowest rank writes OUT/average.json of the exact average."""
    import gossamer
    data = fashion_mnist_dir()
    topo = gossamer.Topology.generate("ring", 2, base_port=free_base_port(2))
    topo = topo.save(tmp_path / "ring2.json")
    env = dict(os.environ, GOSSAMER_TOPOLOGY=topo.source, GOSSAMER_OUT=str(tmp_path),
               GOSSAMER_ALGORITHM="dpsgd", GOSSAMER_EPOCHS="1", GOSSAMER_JOB_TOKEN="t0ken",
               GOSSAMER_JOB_ID="7")
    procs = [subprocess.Popen([sys.executable, EXAMPLE, "--train", "1280", "--test", "300"],
                              env=dict(env, GOSSAMER_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=100) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    import json
    avg = json.loads((tmp_path / "average.json").read_text())
    assert avg["survivors"] == [0, 1] and avg["algorithm"] == "dpsgd" and avg["steps"] == 20
    assert avg["accuracy"] > 0.3
    for r in range(2):
        lines = (tmp_path / f"peer{r}.jsonl").read_text().splitlines()
        steps = [json.loads(x) for x in lines if '"step"' in x]
        assert len(steps) == 20 and json.loads(lines[-1]).get("summary")
    # both processes ended with the same (averaged) model
    accs = {re.search(r"accuracy ([\d.]+)%", o)[1] for o, _ in outs}
    assert len(accs) == 1, outs
