"""The torch DDP rows' options (bench/ddp_ref.py, algorithms.ddp; docs/results/benchmarks.md):
"hook": "fp16" is torch's fp16_compress_hook, "post_local" torch's post-local SGD
(PostLocalSGDState + PeriodicModelAverager); each checked against plain ddp through gossamer
launch on 2 ranks, and bad options are one line, exit 2 (from launch and from the script)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gossamer
from conftest import cli
from test_example import free_base_port

# Plain SGD (no momentum, no weight decay), a constant rate: averaging the models after every
# local step is then averaging the gradients, up to float32 rounding.
RANKS = 2
CONFIG = {
    "seed": 3,
    "data": {"name": "logreg_synthetic", "samples": RANKS * 20 * 6, "test_samples": 200,
             "features": 10, "seed": 5},
    "model": {"name": "mlp", "hidden": [8]},
    "optimizer": {"name": "sgd", "lr": 0.2},
    "training": {"epochs": 1, "batch_size": 20},
}
STEPS = 6  # per rank: 120 rows of 20
LR = 0.2


def run(tmp_path, name, options, config=CONFIG):
    """gossamer launch --algorithms ddp on RANKS local ranks with algorithms.ddp = options; returns
    (its row, rank 0's final parameters, rank 0's summary line)."""
    folder = tmp_path / name
    folder.mkdir()
    topo = gossamer.Topology.generate("ring", RANKS, base_port=free_base_port(RANKS))
    topo = topo.save(folder / "ring.json")
    cfg = dict(config, algorithms={"ddp": options})
    (folder / "train.json").write_text(json.dumps(cfg))
    out = folder / "out"
    r = subprocess.run([cli(), "launch", "--topology", topo.source, "--config",
                        str(folder / "train.json"), "--algorithms", "ddp", "--out", str(out),
                        "--no-plots", "--json", "--timeout", "60"],
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)["algorithms"][0]
    assert row["algorithm"] == "ddp" and row["ok"], row
    params = gossamer.load_model(str(out / "ddp" / "model.bin")).params
    lines = (out / "ddp" / "peer0.jsonl").read_text().splitlines()
    return row, np.asarray(params), json.loads(lines[-1])


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    return run(tmp_path_factory.mktemp("plain"), "plain", {})


def test_fp16_hook_is_the_fp32_step_within_fp16_rounding_at_half_the_bytes(tmp_path):
    one = dict(CONFIG, data=dict(CONFIG["data"], samples=RANKS * 20))  # one step per rank
    row32, x32, _ = run(tmp_path, "fp32", {"hook": "none"}, one)
    row16, x16, summary = run(tmp_path, "fp16", {"hook": "fp16"}, one)
    assert summary["hook"] == "fp16" and summary["steps"] == 1
    x0 = gossamer.shard(one, 0, RANKS)["params"]
    g = (x0 - x32) / LR  # the fp32 row's averaged gradient
    assert np.abs(g).max() > 1e-3
    # fp16 keeps 11 bits: the cast, the division and the sums of gloo round at most a few
    # times 2^-11 of the largest partial sum.
    assert np.abs(x16 - x32).max() <= LR * 2 ** -8 * np.abs(g).max(), np.abs(x16 - x32).max()
    assert (x16 != x32).sum() > len(x32) // 4  # the hook is applied: most values moved
    assert row16["mb_sent_per_peer"] == pytest.approx(row32["mb_sent_per_peer"] / 2, rel=1e-9)


def test_post_local_from_the_last_step_on_is_plain_ddp_bit_for_bit(tmp_path, plain):
    row, x, summary = run(tmp_path, "late", {"post_local": {"start": STEPS, "period": 2}})
    assert np.array_equal(x, plain[1])
    assert summary["averagings"] == 0 and summary["post_local"] == f"start={STEPS} period=2"
    assert row["mb_sent_per_peer"] == plain[0]["mb_sent_per_peer"]


def test_post_local_averaging_every_step_is_gradient_averaging(tmp_path, plain):
    # From step 0, models averaged after every step (torch's rule: s >= S, (s - S) % H == 0):
    # mean(x - lr g_i) = x - lr mean(g_i) with plain SGD, so plain ddp to float32 rounding.
    row, x, summary = run(tmp_path, "every", {"post_local": {"start": 0, "period": 1}})
    diff = np.abs(x - plain[1]).max()
    assert 0 < diff <= 1e-5 * np.abs(plain[1]).max(), diff  # the same up to rounding
    assert summary["averagings"] == STEPS and not summary["final_average"]
    assert row["mb_sent_per_peer"] == plain[0]["mb_sent_per_peer"]  # one fp32 vector a step


def test_post_local_counts_torch_s_averagings_and_ends_averaged(tmp_path, plain):
    # S = 1, H = 3 on 6 steps: step 0 all-reduces gradients; averagings after steps 1 and 4
    # (torch's), then after step 5 (the last, to end with one model): 1 + 3 vectors.
    row, x, summary = run(tmp_path, "some", {"post_local": {"start": 1, "period": 3}})
    assert summary["averagings"] == 3 and summary["final_average"]
    assert row["mb_sent_per_peer"] == pytest.approx(plain[0]["mb_sent_per_peer"] * 4 / STEPS,
                                                    rel=1e-9)
    assert np.abs(x - plain[1]).max() > 1e-6  # local steps: another trajectory


BAD = [
    ({"hook": "fp8"}, ".hook: \"fp8\" is not a hook of ddp; use \"none\" or \"fp16\" (torch's "
                      "fp16_compress_hook)"),
    ({"bucket": 1}, ": unknown key \"bucket\"; ddp takes \"hook\" and \"post_local\""),
    ({"post_local": {"start": -1, "period": 2}}, ".post_local.start: -1; give {\"start\": S, "
     "\"period\": H} with S >= 0 and H >= 1 (integers)"),
    ({"post_local": {"start": 0, "period": 0.5}}, ".post_local.period: 0.5; give {\"start\": S, "
     "\"period\": H} with S >= 0 and H >= 1 (integers)"),
    ({"post_local": {"start": 0}}, ".post_local.period: missing; give {\"start\": S, "
     "\"period\": H} with S >= 0 and H >= 1 (integers)"),
    ({"post_local": None}, ".post_local: expected an object; give {\"start\": S, \"period\": H} "
     "with S >= 0 and H >= 1 (integers)"),
    ({"post_local": {"start": True, "period": 2}}, ".post_local.start: true; give {\"start\": S, "
     "\"period\": H} with S >= 0 and H >= 1 (integers)"),
    ({"hook": "fp16", "post_local": {"start": 0, "period": 4}}, ": \"hook\": \"fp16\" with "
     "\"post_local\" is not mirrored; give one of them (two rows)"),
]


def test_bad_options_are_one_line_exit_2_from_launch_and_the_script(tmp_path, capsys):
    sys.path.insert(0, os.path.join(os.environ["GOSSAMER_SOURCE_DIR"], "bench"))
    import ddp_ref
    topo = gossamer.Topology.generate("ring", 4).save(tmp_path / "ring4.json")
    path = tmp_path / "train.json"
    for options, line in BAD:
        path.write_text(json.dumps(dict(CONFIG, algorithms={"ddp": options})))
        r = subprocess.run([cli(), "launch", "--topology", topo.source, "--config", str(path),
                            "--algorithms", "allreduce,ddp", "--out", str(tmp_path / "o")],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2
        assert r.stderr.strip() == f"error: {path}: algorithms.ddp{line}"
        with pytest.raises(SystemExit) as e:
            ddp_ref.ddp_options({"algorithms": {"ddp": options}}, str(path))
        assert e.value.code == 2
        assert capsys.readouterr().err.strip() == f"ddp_ref.py: {path}: algorithms.ddp{line}"
    assert not (tmp_path / "o").exists()


def test_the_arithmetic_is_torch_s_own_ddp_hooks_bit_for_bit():
    # torch's DistributedDataParallel with fp16_compress_hook, and with post_localSGD_hook +
    # PeriodicModelAverager (S = 2, H = 3), against ddp_ref.py's average_gradient and
    # average_parameters on 2 ranks, 7 steps of SGD with momentum: the same parameters after
    # every step. (On 3 ranks gloo sums DDP's bucket, laid out in gradient-ready order, in
    # another order than the flat gradient: fp16's rounding apart, docs/results/benchmarks.md.)
    here = os.path.dirname(os.path.abspath(__file__))
    bench = os.path.join(os.environ["GOSSAMER_SOURCE_DIR"], "bench")
    port = str(free_base_port(1))
    ranks = [subprocess.Popen([sys.executable, os.path.join(here, "torch_ddp_hooks.py"), str(r),
                               "2", port, bench], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in range(2)]
    outs = [p.communicate(timeout=60) for p in ranks]
    for p, (out, err) in zip(ranks, outs):
        assert p.returncode == 0, err
        gaps = json.loads(out.strip().splitlines()[-1])
        assert set(gaps) == {"fp16", "post_local", "fp32"}
        assert len(gaps["fp16"]) == 7 and len(gaps["post_local"]) == 7
        assert all(g == 0 for row in gaps.values() for g in row), gaps
