"""gossamer launch --script: the example as 2 peer processes per algorithm, and the launcher's
table, result.json and per-peer files come out as for gossamer peer processes."""

import json
import os
import subprocess

import pytest

import gossamer
from conftest import cli, fashion_mnist_dir
from test_example import EXAMPLE, SRC, free_base_port


def test_launch_runs_python_peers(tmp_path):
    data = fashion_mnist_dir()
    topo = gossamer.Topology.generate("ring", 2, base_port=free_base_port(2))
    topo = topo.save(tmp_path / "ring2.json")
    cfg = json.loads(open(os.path.join(SRC, "examples", "python", "fashion_launch.json")).read())
    cfg["data"].update(train_limit=1280, test_limit=300)
    cfg["training"]["epochs"] = 1
    (tmp_path / "train.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    r = subprocess.run([cli(), "launch", "--topology", topo.source, "--config",
                        str(tmp_path / "train.json"), "--script", EXAMPLE, "--algorithms",
                        "allreduce,async", "--out", str(out), "--no-plots", "--json",
                        "--timeout", "90", "--eval-interval", "0.3", "--eval-samples", "200"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert [row["algorithm"] for row in summary["algorithms"]] == ["allreduce", "async"]
    for row in summary["algorithms"]:
        assert row["ok"] and row["final_accuracy"] > 0.3, row
        assert row["mb_sent_per_peer"] > 0
        for rank in range(2):
            lines = (out / row["algorithm"] / f"peer{rank}.jsonl").read_text().splitlines()
            assert sum('"step"' in x for x in lines) == 20
            # The script's evaluation points (GossipOptimizer(evaluate=...) at the launcher's
            # --eval-interval), tick 0 first, each tick once, on 200 samples.
            evals = [json.loads(x) for x in lines if '"eval"' in x]
            assert evals and evals[0]["eval"] == 0, lines
            ticks = [e["eval"] for e in evals]
            assert ticks == sorted(set(ticks))
            assert all(e["rank"] == rank and 0 <= e["accuracy"] <= 1 for e in evals)
            assert all(abs(e["time"] - 0.3 * e["eval"]) < 1e-9 for e in evals)
            assert "rank" in (out / row["algorithm"] / f"peer{rank}.log").read_text()


def test_launch_refuses_a_missing_script(tmp_path, ring4):
    r = subprocess.run([cli(), "launch", "--topology", ring4.source, "--config",
                        os.path.join(SRC, "examples", "python", "fashion_launch.json"),
                        "--script", str(tmp_path / "nope.py")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip() == (f"error: --script: {tmp_path / 'nope.py'} is not a file; give "
                                "the path of a Python training script")
