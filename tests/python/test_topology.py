"""gossamer.Topology gives the numbers of `gossamer topo show` and `gossamer topo matrix`."""

import json
import os
import subprocess

import pytest

import gossamer
from conftest import cli


def cli_json(*args):
    r = subprocess.run([cli(), *args], capture_output=True, text=True, timeout=60, check=True)
    return r.stdout


def assert_same(ours, theirs):
    """Equal, except the last bits of eigenvalues (LAPACK's order of operations may differ)."""
    assert ours.keys() == theirs.keys()
    for k, v in theirs.items():
        if isinstance(v, dict):
            assert_same(ours[k], v)
        elif isinstance(v, float):
            assert ours[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k
        else:
            assert ours[k] == v, k


@pytest.mark.parametrize("family,n", [("ring", 8), ("exponential", 8),
                                      ("one_peer_exponential", 8), ("torus", 9)])
def test_analysis_equals_topo_show(tmp_path, family, n):
    t = gossamer.Topology.generate(family, n, weights="uniform")
    t = t.save(tmp_path / f"{family}.json")
    shown = json.loads(cli_json("topo", "show", t.source, "--json", "--model-bytes", "1000"))
    shown.pop("file")
    assert_same(t.analyse(model_bytes=1000), shown)
    assert t.n == n and t.description == shown["description"]
    text = subprocess.run([cli(), "topo", "show", t.source], capture_output=True, text=True,
                          timeout=60).stdout
    assert text == f"{t.source}: " + t.analyse(text=True)


def test_a_file_and_its_matrix(tmp_path):
    src = os.environ.get("GOSSAMER_SOURCE_DIR", "")
    if not src:
        pytest.skip("GOSSAMER_SOURCE_DIR is not set (run through ctest)")
    path = os.path.join(src, "examples", "topologies", "one-peer-exp16.json")  # time-varying
    t = gossamer.Topology.load(path)
    csv = cli_json("topo", "matrix", path, "--round", "1").strip().splitlines()
    rows = [[float(v) for v in line.split(",")] for line in csv]
    assert len(rows) == t.n == 16
    ours = t.matrix(1)
    assert [len(r) for r in ours] == [len(r) for r in rows]
    assert sum(ours, []) == pytest.approx(sum(rows, []), abs=1e-12)
    assert ours != t.matrix(0)
    assert "torus" in gossamer.Topology.families()
