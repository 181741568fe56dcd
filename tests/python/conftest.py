"""Helpers of the Python tests: 4 peers as threads of this process over the inproc transport."""

import os
import threading

import pytest

torch = pytest.importorskip("torch")
import gossamer  # noqa: E402
import gossamer.torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture
def ring4(tmp_path):
    return gossamer.Topology.generate("ring", 4).save(tmp_path / "ring4.json")


def run_threads(n, body, timeout=60):
    """Runs body(rank) on n threads; returns the results, re-raising the first error."""
    results = [None] * n
    errors = [None] * n

    def run(r):
        try:
            results[r] = body(r)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors[r] = e

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), f"a peer thread still runs after {timeout} s"
    return results, errors


def need(component, missing):
    """Optional components (docs/operations/testing.md): returns when `missing` is empty; otherwise skips the
    test with "skipped (optional): COMPONENT: REASON" (ctest then reports the file skipped), or
    fails it when GOSSAMER_REQUIRE names the component."""
    if not missing:
        return
    required = [c.strip() for c in os.environ.get("GOSSAMER_REQUIRE", "").split(",")]
    if component in required:
        pytest.fail(f"required component {component} (GOSSAMER_REQUIRE) is missing: {missing}")
    pytest.skip(f"skipped (optional): {component}: {missing}")


def fashion_mnist_dir():
    """The Fashion-MNIST folder, or a skip (a failure where fashion-mnist is required)."""
    data = os.environ.get("GOSSAMER_DATA_DIR", "/usr/share/datasets/fashion-mnist")
    need("fashion-mnist", "" if os.path.isdir(data) else
         f"Fashion-MNIST is not installed at {data} (scripts/deps.sh installs it)")
    return data


def cli():
    """The gossamer binary of this build (CTest passes its path)."""
    path = os.environ.get("GOSSAMER_CLI", "")
    if not path or not os.path.exists(path):
        pytest.skip("GOSSAMER_CLI is not set to the gossamer binary (run through ctest)")
    return path
