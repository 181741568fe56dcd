"""gossamer launch --algorithms allreduce,diloco: torch DiLoCo over gloo (bench/diloco_ref.py)
trains the built-in job round for round as a built-in `allreduce` peer with the config's "outer"
section (DiLoCo) and lands in the same table, result.json and per-peer files; on loopback (inner
steps padded from a cluster file) and in the network-namespace lab; bad input is one line, exit
2."""

import json
import os
import subprocess

import numpy
import pytest

import gossamer
from conftest import cli, need
from test_ddp import BASE_TIME, lab_missing, launch, write_job

PARTITION = "fc2"  # a layer of the mlp (docs/modules/models.md)
OUTER = {"steps": 8, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9}
# test_ddp's job (an mlp, SGD with Nesterov momentum, weight decay, a cosine schedule with
# warm-up) under DiLoCo's outer loop.
CONFIG = {
    "seed": 2,
    "data": {"name": "logreg_synthetic", "samples": 3200, "test_samples": 800, "features": 10,
             "seed": 4},
    "model": {"name": "mlp", "hidden": [16]},
    "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True,
                  "weight_decay": 0.0001},
    "schedule": {"schedule": "cosine", "warmup_steps": 5},
    "training": {"epochs": 2, "batch_size": 20, "target_accuracy": 0.7},
    "outer": OUTER,
}


def with_samples(samples, epochs=1, **outer):
    """CONFIG with `samples` training rows (T = samples / 4 / 20 x epochs inner steps a peer)."""
    data = dict(CONFIG["data"], samples=samples)
    return dict(CONFIG, data=data, training=dict(CONFIG["training"], epochs=epochs),
                outer=dict(OUTER, **outer))


def run(tmp_path, config, algorithms="allreduce,diloco", *extra, env=None):
    topo, train, cluster = write_job(tmp_path, config)
    out = tmp_path / "out"
    r = launch_env(env, "--topology", topo, "--config", train, "--cluster", cluster, "--algorithms",
               algorithms, "--out", str(out), "--no-plots", "--json", "--timeout", "120",
               "--eval-interval", "0.2", *extra)
    assert r.returncode == 0, r.stderr
    rows = {row["algorithm"]: row for row in json.loads(r.stdout)["algorithms"]}
    for row in rows.values():
        assert row["ok"] and row["failed_peers"] == 0, row
    return out, rows


def launch_env(env, *args):
    if env is None:
        return launch(*args)
    return subprocess.run([cli(), "launch", *args], capture_output=True, text=True, timeout=150,
                          env=dict(os.environ, **env))


def distance(a, b):
    return float(numpy.linalg.norm(a - b) / numpy.linalg.norm(b))


def relative_distance(out):
    """||theta - theta_torch|| / ||theta_torch|| of the two rows' final models (OUT/model.bin:
    the exact average of the peers' anchors, and rank 0's theta of the torch row)."""
    ours = gossamer.load_model(str(out / "allreduce" / "model.bin")).params
    torch = gossamer.load_model(str(out / "diloco" / "model.bin")).params
    assert ours.shape == torch.shape
    return float(numpy.linalg.norm(ours - torch) / numpy.linalg.norm(torch))


def peer_lines(out, rank):
    return [json.loads(x) for x in (out / "diloco" / f"peer{rank}.jsonl").read_text().splitlines()]


def test_first_round_matches_ours_to_1e_5(tmp_path):
    # 640 rows: 8 inner steps a peer, one round of H = 8, so each side's final model is theta
    # after the first outer step (Nesterov, lr 0.7, momentum 0.9: theta - 0.7 (1 + 0.9) Delta).
    out, rows = run(tmp_path, with_samples(640))
    d = relative_distance(out)
    assert d <= 1e-5, d
    summary = peer_lines(out, 1)[-1]  # a step is a round, as for a built-in peer with "outer"
    assert summary["algorithm"] == "diloco" and summary["steps"] == 1
    assert summary["inner_steps"] == 8
    first = gossamer.shard(with_samples(640), 0, 4)["params"]
    theta = gossamer.load_model(str(out / "diloco" / "model.bin")).params
    assert numpy.linalg.norm(theta - first) > 1e-3  # the round moved it


def test_rounds_of_unequal_length_and_sgd_match_ours_round_by_round(tmp_path):
    # 20 inner steps a peer, H = 8: rounds of 8, 8 and 4 steps; plain outer SGD with momentum.
    # Theta after every round from both sides: our peers' checkpoints (under "outer" they
    # count rounds) and the torch row's theta-<r>.bin (GOSSAMER_DILOCO_ROUNDS).
    out, _ = run(tmp_path, with_samples(1600, optimizer="sgd", lr=1.3, momentum=0.6),
                 "allreduce,diloco", "--checkpoint-every", "1",
                 env={"GOSSAMER_DILOCO_ROUNDS": "1"})
    for r in (1, 2):  # the last round's theta is the final model.bin
        ours = gossamer.load_model(str(out / "allreduce" / f"checkpoint-0-{r}.bin")).params
        theirs = gossamer.load_model(str(out / "diloco" / f"theta-{r}.bin")).params
        assert distance(ours, theirs) <= 1e-5, (r, distance(ours, theirs))
    final = gossamer.load_model(str(out / "diloco" / "theta-3.bin")).params
    assert distance(gossamer.load_model(str(out / "diloco" / "model.bin")).params, final) == 0
    assert relative_distance(out) <= 1e-5
    for rank in range(4):
        summary = peer_lines(out, rank)[-1]
        assert summary["steps"] == 3 and summary["inner_steps"] == 20


def test_diloco_matches_ours_on_a_longer_job_with_padded_steps(tmp_path):
    out, rows = run(tmp_path, CONFIG)
    steps = 3200 // 4 // 20 * 2  # 80 inner steps a peer: 10 rounds
    assert set(rows) == {"allreduce", "diloco"}
    assert abs(rows["diloco"]["final_accuracy"] - rows["allreduce"]["final_accuracy"]) <= 0.003, \
        rows
    assert rows["diloco"]["final_accuracy"] > 0.6
    assert rows["diloco"]["time_to_target"] is not None, rows["diloco"]
    # 10 all-reduces of the model (the ring's 2 (n - 1) / n each), as ours, whose figure also
    # counts its messages' headers (60 of them here, on 210-byte chunks).
    size = gossamer.shard(CONFIG, 0, 4)["params"].size
    assert rows["diloco"]["mb_sent_per_peer"] == pytest.approx(10 * 2 * 3 / 4 * 4 * size / 1e6)
    assert 0 <= rows["allreduce"]["mb_sent_per_peer"] - rows["diloco"]["mb_sent_per_peer"] \
        <= 60 * 128 / 1e6, rows
    for rank in range(4):
        lines = peer_lines(out, rank)
        assert [x["step"] for x in lines if "step" in x] == list(range(10))  # a line a round
        summary = lines[-1]
        assert summary["summary"] and summary["steps"] == 10 and summary["inner_steps"] == steps
        assert bool([x for x in lines if "eval" in x]) == (rank == 0)  # one theta on every rank
        # Every inner step padded to the cluster file's (peer 0: 2 x BASE_TIME): 8 a round.
        factor = 2 if rank == 0 else 1
        assert min(x["step_seconds"] for x in lines if "step" in x) >= \
            8 * factor * BASE_TIME * 0.99
    assert rows["diloco"]["train_seconds"] >= steps * 2 * BASE_TIME
    average = json.loads((out / "diloco" / "average.json").read_text())
    assert average["algorithm"] == "diloco" and average["survivors"] == [0, 1, 2, 3]
    # The outer counts and options in the words of a built-in peer's under "outer".
    assert (average["steps"], average["rounds"], average["inner_steps"]) == (10, 10, steps)
    ours = [json.loads(x) for x in (out / "allreduce" / "peer1.jsonl").read_text().splitlines()]
    options = "H=8 nesterov lr=0.7 momentum=0.9"
    assert peer_lines(out, 1)[-1]["outer"] == ours[-1]["outer"] == options
    # The torch row is judged on theta: its final evaluation is model.bin's.
    theta = gossamer.load_model(str(out / "diloco" / "model.bin"))
    assert theta.step == 10
    report = subprocess.run([cli(), "report", str(out)], capture_output=True, text=True,
                            timeout=60)
    assert report.returncode == 0, report.stderr
    page = (out / "report.html").read_text()  # its Outer rounds table has the torch row too
    assert f"<td>diloco</td><td>{options}</td><td>10</td><td>80</td>" in page
    # scripts/lab/experiment_table.py takes the torch row and a labelled row of ours.
    seed = tmp_path / "lab" / "uneven8" / "seed1"
    seed.mkdir(parents=True)
    for label in ("diloco", "ours8"):
        (seed / f"real-{label}").symlink_to(out)
    (seed / "config.json").write_text(json.dumps(CONFIG))  # its target, 70%
    table = subprocess.run(
        ["/usr/bin/python3", os.path.join(os.environ["GOSSAMER_SOURCE_DIR"], "scripts", "lab",
                                          "experiment_table.py"),
         str(tmp_path / "lab"), "--seeds", "1", "--algorithms", "diloco,ours8=allreduce"],
        capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    acc = f"{100 * rows['diloco']['final_accuracy']:.2f} / —"
    assert "| diloco (torch; sim: ours) | " in table.stdout and acc in table.stdout, table.stdout
    assert "| ours8 (allreduce) | " in table.stdout, table.stdout
    assert "- ours8 reaches the target " in table.stdout, table.stdout


def test_diloco_in_the_lab(tmp_path):
    need("netns", lab_missing())
    out, rows = run(tmp_path, with_samples(1600), "allreduce,diloco", "--hosts", "netns")
    assert relative_distance(out) <= 1e-5
    log = (out / "diloco" / "peer0.log").read_text()
    assert "rank 0:" in log, log  # gloo ran on the lab's veths


def one_line_exit_2(r, expected=None, contains=None):
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    if expected is not None:
        assert r.stderr.strip() == expected
    if contains is not None:
        assert contains in r.stderr, r.stderr


def test_diloco_bad_input_is_one_line_exit_2(tmp_path):
    topo, train, _ = write_job(tmp_path, CONFIG)

    def config(name, doc):
        (tmp_path / name).write_text(json.dumps(doc))
        return str(tmp_path / name)

    plain = config("plain.json", {k: v for k, v in CONFIG.items() if k != "outer"})
    r = launch("--topology", topo, "--config", plain, "--algorithms", "allreduce,diloco",
               "--out", str(tmp_path / "o1"))
    one_line_exit_2(r, f"error: {plain}: outer: diloco (bench/diloco_ref.py) is DiLoCo's outer "
                    "loop, and the config has no \"outer\" section; add one, e.g. \"outer\": "
                    "{\"steps\": 8, \"optimizer\": \"nesterov\", \"lr\": 0.7, \"momentum\": 0.9}, "
                    "or leave diloco out of --algorithms")
    assert not (tmp_path / "o1").exists()
    r = launch("--topology", topo, "--config", train, "--algorithms", "allreduce,ddp",
               "--out", str(tmp_path / "o2"))
    one_line_exit_2(r, f"error: {train}: outer: ddp (bench/ddp_ref.py) all-reduces the "
                    "gradients at every step and has no outer loop; list diloco in --algorithms "
                    "for torch DiLoCo, or remove \"outer\"")
    assert not (tmp_path / "o2").exists()
    r = launch("--topology", topo, "--config", train, "--algorithms", "diloco", "--inproc",
               "--out", str(tmp_path / "o3"))
    one_line_exit_2(r, "error: --algorithms: diloco runs torch processes (bench/diloco_ref.py), "
                    "not --inproc threads; leave out --inproc or diloco")
    cnn = config("cnn.json", dict(
        CONFIG, data={"name": "fashion-mnist", "train_limit": 800, "test_limit": 100},
        model={"name": "cnn", "channels": [4, 8], "kernel": 5}))
    r = launch("--topology", topo, "--config", cnn, "--algorithms", "allreduce,diloco",
               "--out", str(tmp_path / "o4"))
    one_line_exit_2(r, f"error: {cnn}: model.name: diloco (bench/diloco_ref.py) has torch twins "
                    "of softmax, mlp and gpt, not \"cnn\"; leave diloco out of --algorithms or use "
                    "one of those models")
    r = launch("--topology", topo, "--config", train, "--algorithms", "diloco,ddpx")
    one_line_exit_2(r, contains="unknown algorithm \"ddpx\"; use allreduce, dpsgd, sgp, async, "
                    "choco, lsgd, gadmm, qallreduce, ddp, diloco")
    env = dict(os.environ, GOSSAMER_DILOCO_SCRIPT=str(tmp_path / "none.py"))
    r = subprocess.run([cli(), "launch", "--topology", topo, "--config", train, "--algorithms",
                        "diloco"], capture_output=True, text=True, timeout=60, env=env)
    one_line_exit_2(r, f"error: --algorithms: diloco needs its script {tmp_path / 'none.py'}, "
                    "which is not a file; set GOSSAMER_DILOCO_SCRIPT to bench/diloco_ref.py of "
                    "the source tree")
    churn = tmp_path / "churn.json"
    churn.write_text(json.dumps({"version": 1, "defaults": {"base_time": BASE_TIME},
                                 "peers": [{"rank": 3, "join_at": 0.5}],
                                 "network": {"latency": 2e-5, "bandwidth": 1.25e9}}))
    r = launch("--topology", topo, "--config", train, "--cluster", str(churn), "--algorithms",
               "diloco", "--out", str(tmp_path / "o6"))
    one_line_exit_2(r, contains="diloco (torch DiLoCo, bench/diloco_ref.py) cannot join, leave "
                    "or rejoin a running job")
    assert not any((tmp_path / f"o{k}").exists() for k in range(3, 7))


def test_diloco_refuses_outer_partitions(tmp_path):
    topo, _, _ = write_job(tmp_path, CONFIG)
    parts = dict(CONFIG, outer=dict(OUTER, partitions=[PARTITION]))
    (tmp_path / "parts.json").write_text(json.dumps(parts))
    r = launch("--topology", topo, "--config", str(tmp_path / "parts.json"), "--algorithms",
               "allreduce,diloco", "--out", str(tmp_path / "o"))
    one_line_exit_2(r, f"error: {tmp_path / 'parts.json'}: outer.partitions: diloco "
                    "(bench/diloco_ref.py) takes the outer step on the whole model; remove "
                    "outer.partitions or leave diloco out of --algorithms")
    assert not (tmp_path / "o").exists()


def test_diloco_refuses_rounds_by_time(tmp_path):
    topo, _, _ = write_job(tmp_path, CONFIG)
    timed = dict(CONFIG, outer={"seconds": 1.0, "reference_steps": 4})
    (tmp_path / "timed.json").write_text(json.dumps(timed))
    r = launch("--topology", topo, "--config", str(tmp_path / "timed.json"), "--algorithms",
               "allreduce,diloco", "--out", str(tmp_path / "o"))
    one_line_exit_2(r, f"error: {tmp_path / 'timed.json'}: outer.seconds: diloco "
                    "(bench/diloco_ref.py) is torch's DiLoCo, rounds of a fixed step count; give "
                    "the torch row a config with \"steps\": H or leave diloco out of --algorithms")
    assert not (tmp_path / "o").exists()


def test_the_script_by_hand_is_one_line_exit_2():
    script = os.path.join(os.environ["GOSSAMER_SOURCE_DIR"], "bench", "diloco_ref.py")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    r = subprocess.run(["/usr/bin/python3", script], capture_output=True, text=True, timeout=60,
                       env=env)
    one_line_exit_2(r, "diloco_ref.py: RANK is not set; gossamer launch --algorithms diloco "
                    "sets it")


def test_a_config_the_shard_refuses_is_one_line_per_peer(tmp_path):
    # What only the built-in job finds (a warm-up longer than the run's 8 inner steps): each
    # torch rank says it in one line, exit 2, as gossamer peer does, not with a traceback.
    bad = dict(with_samples(640), schedule={"schedule": "cosine", "warmup_steps": 50})
    topo, train, _ = write_job(tmp_path, bad)
    r = launch("--topology", topo, "--config", train, "--algorithms", "diloco", "--out",
               str(tmp_path / "out"), "--no-plots")
    # The first rank to exit 2 "could not start" (exit 2) or failed (exit 1), as it falls.
    assert r.returncode in (1, 2), r.stderr
    assert "exit status 2" in r.stderr, r.stderr
    line = (f"diloco_ref.py: {train}: schedule.warmup_steps: warmup_steps 50 is not below the "
            "run's 8 steps (a cosine schedule without total_steps spans the whole run); lower "
            "warmup_steps, or give total_steps")
    logs = [(tmp_path / "out" / "diloco" / f"peer{k}.log").read_text().strip() for k in range(4)]
    said = [log for log in logs if log]  # a rank stopped before it spoke has said nothing
    assert said and all(log == line for log in said), logs
