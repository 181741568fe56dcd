"""examples/python/fashion_mnist_torch.py runs (a small subset) with async and allreduce."""

import os
import re
import subprocess
import sys

import pytest

SRC = os.environ.get("GOSSAMER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(SRC, "examples", "python", "fashion_mnist_torch.py")


@pytest.mark.parametrize("algorithm", ["async", "allreduce"])
def test_the_example_trains(algorithm):
    data = os.environ.get("GOSSAMER_DATA_DIR", "/usr/share/datasets/fashion-mnist")
    if not os.path.isdir(data):
        pytest.skip(f"Fashion-MNIST is not installed at {data} (scripts/deps.sh installs it)")
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
