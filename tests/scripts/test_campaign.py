"""scripts/lab/campaign.py, campaign_spec.py, campaign_table.py and campaign_tune.py (issue 43,
docs/results/campaign.md): the committed campaign file loads and every row's config is its
workload's with the row's patches merged in; bad campaign files and flags are one line and exit
status 2; the table's time to the target carries each peer's latest evaluation forward and leaves
CPU-bound runs out (standard library only: python3 -m unittest tests/scripts/test_campaign.py)."""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LAB = ROOT / "scripts" / "lab"
sys.path.insert(0, str(LAB))
import campaign_spec  # noqa: E402
import campaign_table  # noqa: E402

CAMPAIGN = ROOT / "examples" / "lab" / "campaign" / "campaign.json"


def run(script, *args):
    p = subprocess.run([sys.executable, str(LAB / script), *map(str, args)],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


class Spec(unittest.TestCase):
    def test_the_committed_campaign_loads_and_merges(self):
        camp = campaign_spec.load(CAMPAIGN)
        self.assertEqual(set(camp.clusters), {"uneven8", "homogeneous8", "racks8"})
        jobs = camp.jobs(pathlib.Path("/nonexistent"), "time", camp.clusters,
                         list(camp.workloads), [r["label"] for r in camp.rows], [3], self.fail)
        by = {j.name: j for j in jobs}
        j = by["time/uneven8/mlp/seed3/timed_int8"]
        self.assertEqual(j.config["seed"], 3)
        self.assertEqual(j.config["outer"]["seconds"], 2.96)  # set_cluster
        self.assertNotIn("steps", j.config["outer"])  # null removes the key
        self.assertEqual(j.config["outer"]["lr"], 0.7)  # set
        self.assertEqual(j.algorithm, "qallreduce")
        g = by["time/racks8/gpt/seed3/diloco16"]
        self.assertEqual(g.config["outer"]["momentum"], 0.6)  # the MLP grid's, for the GPT too
        self.assertEqual(g.config["training"]["target_loss"], 1.8)
        self.assertNotIn("time/uneven8/gpt/seed3/choco", by)  # "workloads": ["mlp"]
        t = by["time/racks8/gpt/seed3/timed_int8"]
        self.assertEqual(t.config["outer"]["seconds"], 4.32)  # set_cluster "racks8/gpt"
        self.assertEqual(t.config["outer"]["reference_steps"], 14)
        t2 = by["time/uneven8/gpt/seed3/timed2_int8"]
        self.assertEqual((t2.config["outer"]["seconds"], t2.config["outer"]["reference_steps"]),
                         (3.0, 10))
        self.assertEqual(by["time/racks8/mlp/seed3/timed_int8"].config["outer"]["seconds"], 2.88)
        f = by["time/uneven8/mlp/seed3/ddp_fp16"]
        self.assertEqual(f.config["algorithms"]["ddp"], {"hook": "fp16"})
        self.assertEqual(f.sim_algorithm, "qallreduce")
        self.assertFalse(f.sim_config["algorithms"]["qallreduce"]["error_feedback"])

    def test_set_workload_is_merged_before_set_cluster(self):
        good = json.loads(CAMPAIGN.read_text())
        row = next(r for r in good["rows"] if r["label"] == "timed_int8")
        row["set_workload"] = {"gpt": {"outer": {"momentum": 0.9, "seconds": 1.0}}}
        with tempfile.TemporaryDirectory() as d:
            path = pathlib.Path(d) / "c.json"
            path.write_text(json.dumps(good))
            camp = campaign_spec.load(path)
            jobs = camp.jobs(pathlib.Path(d), "time", ["uneven8"], ["mlp", "gpt"],
                             ["timed_int8"], [1], self.fail)
        by = {j.name: j.config for j in jobs}
        gpt, mlp = by["time/uneven8/gpt/seed1/timed_int8"], by["time/uneven8/mlp/seed1/timed_int8"]
        self.assertEqual(gpt["outer"]["momentum"], 0.9)  # set_workload over set
        self.assertEqual(gpt["outer"]["seconds"], 4.8)  # "uneven8/gpt" over set_workload
        self.assertEqual(mlp["outer"]["momentum"], 0.6)  # other workloads untouched

    def test_bad_campaign_files_are_one_line(self):
        good = json.loads(CAMPAIGN.read_text())
        cases = [
            ({"rows": good["rows"] + [dict(good["rows"][0])]}, "rows[16].label"),
            ({"rows": [dict(good["rows"][0], family="jax")]}, "rows[0].family"),
            ({"rows": [dict(good["rows"][0], sets={})]}, "rows[0].sets"),
            ({"rows": [dict(good["rows"][0], set_cluster={"uneven9": {}})]},
             "rows[0].set_cluster.uneven9"),
            ({"rows": [dict(good["rows"][0], set_cluster={"uneven8/text": {}})]},
             "rows[0].set_cluster.uneven8/text"),
            ({"rows": [dict(good["rows"][0], set_workload={"gtp": {}})]},
             "rows[0].set_workload.gtp"),
            ({"workloads": {"mlp": dict(good["workloads"]["mlp"], target={})}},
             "workloads.mlp.target"),
            ({"workloads": {"mlp": dict(good["workloads"]["mlp"], config="nope.json")}},
             "workloads.mlp.config"),
            ({"eval_interval": 0}, "eval_interval"),
            ({"colour": 1}, "colour"),
        ]
        with tempfile.TemporaryDirectory() as d:
            for patch, where in cases:
                path = pathlib.Path(d) / "c.json"
                path.write_text(json.dumps(dict(good, **patch)))
                rc, _, err = run("campaign.py", "--out", d, "--campaign", path, "--dry-run")
                self.assertEqual(rc, 2, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(f"{path}: {where}", err)
            path = pathlib.Path(d) / "broken.json"
            path.write_text("{")
            rc, _, err = run("campaign.py", "--out", d, "--campaign", path)
            self.assertEqual((rc, len(err.strip().splitlines())), (2, 1), err)
            self.assertIn("not JSON", err)

    def test_bad_flags_are_one_line(self):
        for args, what in ((["--measure", "fast"], "--measure"), (["--rows", "ddp,xyz"], "xyz"),
                           (["--seeds", "a"], "--seeds"), (["--bogus"], "--bogus"),
                           ([], "--out is required")):
            out = [] if what == "--out is required" else ["--out", "/tmp/campaign-test-out"]
            rc, _, err = run("campaign.py", *out, *args, "--dry-run")
            self.assertEqual((rc, len(err.strip().splitlines())), (2, 1), (args, err))
            self.assertIn(what, err)
        rc, _, err = run("campaign_tune.py", "--out", "/tmp/x", "nosuchrow")
        self.assertEqual((rc, len(err.strip().splitlines())), (2, 1), err)
        rc, _, err = run("campaign_table.py", "/nonexistent/folder")
        self.assertEqual((rc, len(err.strip().splitlines())), (2, 1), err)

    def test_measure_c_needs_the_time_runs(self):
        with tempfile.TemporaryDirectory() as d:
            rc, _, err = run("campaign.py", "--out", d, "--measure", "wall", "--clusters",
                             "uneven8", "--workloads", "mlp", "--rows", "diloco16", "--dry-run")
            self.assertEqual(rc, 2)
            self.assertIn("ddp has no time to the target", err)

    def test_measure_c_budgets(self):
        """W = 2 x ddp's time; each row's samples are what its time run trained in W: images
        through train_limit and epochs, text through whole epochs and the windows' stride."""
        camp = campaign_spec.load(CAMPAIGN)
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            for workload, ddp_t, own in (("mlp", 100.0, 80.0), ("gpt", 300.0, 240.0)):
                for row, t, secs in (("ddp", ddp_t, 900.0), ("timed_int8", 20.0, own)):
                    launch = d / "time" / "uneven8" / workload / "seed1" / row / "launch"
                    launch.mkdir(parents=True)
                    (launch / "result.json").write_text(json.dumps({"algorithms": [
                        {"time_to_target": t, "train_seconds": secs}]}))
            jobs = camp.jobs(d, "wall", ["uneven8"], ["mlp", "gpt"], ["timed_int8"], [1],
                             self.fail)
            by = {j.name.split("/")[2]: j for j in jobs}
            m, g = by["mlp"], by["gpt"]
            # MLP: W = 200 s, 2.5 of the time run's 2 epochs of 60,000 = 300,000 samples
            self.assertEqual(m.wall, 200.0)
            self.assertEqual(m.config["training"]["epochs"], 5)
            self.assertEqual(m.config["data"]["train_limit"], 60000)
            # GPT: W = 600 s, 2.5 epochs of windows 64 apart = 2 epochs of windows 51 apart
            self.assertEqual(g.wall, 600.0)
            self.assertEqual(g.config["training"]["epochs"], 2)
            self.assertEqual(g.config["data"]["stride"], 51)
            self.assertEqual(g.sim_config["data"]["stride"], 51)
            self.assertEqual(g.config["data"]["chars"], 2000000)  # the validation split stays

    def test_a_stopped_runs_rate_is_extrapolated_from_its_slowest_peer(self):
        with tempfile.TemporaryDirectory() as d:
            row = pathlib.Path(d)
            (row / "launch" / "ddp").mkdir(parents=True)
            (row / "launch.log").write_text("[ 30.0s] ddp: 2/2 peers running, 8/~40 steps\n")
            for rank, per_step in ((0, 1.0), (1, 2.0)):  # 20 steps a peer; 5 done
                with open(row / "launch" / "ddp" / f"peer{rank}.jsonl", "w") as f:
                    for s in range(5):
                        f.write(json.dumps({"rank": rank, "step": s,
                                            "time": (s + 1) * per_step}) + "\n")
                    f.write(json.dumps({"rank": rank, "eval": 9, "time": 99.0}) + "\n")
            self.assertAlmostEqual(campaign_spec._extrapolated_seconds(row), 40.0)
            (row / "launch.log").write_text("no progress line\n")
            self.assertIsNone(campaign_spec._extrapolated_seconds(row))


def peer_file(path, rank, evals, sent=8e6, steps=4):
    with open(path, "w") as f:
        for s in range(steps):
            f.write(json.dumps({"rank": rank, "step": s, "time": s + 0.5}) + "\n")
        for t, a in evals:
            f.write(json.dumps({"rank": rank, "eval": int(t), "time": t, "at": t,
                                "accuracy": a, "loss": 1 - a}) + "\n")
        f.write(json.dumps({"summary": True, "rank": rank, "bytes_sent": sent,
                            "end_time": steps, "steps": steps}) + "\n")


class Table(unittest.TestCase):
    def test_the_peers_mean_carries_each_latest_evaluation_forward(self):
        with tempfile.TemporaryDirectory() as d:
            d = pathlib.Path(d)
            peer_file(d / "peer0.jsonl", 0, [(1, 0.5), (2, 0.9), (3, 0.9)])
            peer_file(d / "peer1.jsonl", 1, [(1, 0.7)])  # skipped ticks 2 and 3
            curve, gap = campaign_table.curve_of(d, "accuracy")
            self.assertEqual([round(v, 4) for _, v, _ in curve], [0.6, 0.8, 0.8])
            self.assertEqual(campaign_table.reached(curve, 0.8, False), 2)
            self.assertIsNone(campaign_table.reached(curve, 0.85, False))
            self.assertEqual(campaign_table.reached(curve, 0.35, True), None)
            self.assertEqual(gap, 1)

    def test_cpu_bound_runs_do_not_count(self):
        with tempfile.TemporaryDirectory() as d:
            root = pathlib.Path(d)
            for label, share in (("ddp", 0.5), ("diloco16", 0.95)):
                run_dir = lab_run(root, label, 0.86 if label == "ddp" else 0.9, final=0.88)
                (run_dir / "cpu.json").write_text(json.dumps(
                    {"samples": 10, "train_share": share, "eval_share": 0.01,
                     "cpu_bound": share >= 0.9}))
            rc, out, err = run("campaign_table.py", root)
            self.assertEqual(rc, 0, err)
            self.assertIn("| ddp | torch | 2 |", out)
            self.assertIn("diloco16 (CPU-bound: 1 of 1 runs left out)", out)
            self.assertNotIn("best of ours", out)  # no run of ours counts
            self.assertNotIn("no row of ours reached", out)  # ... so nothing is judged
            self.assertTrue((root / "uneven8-mlp-time.svg").exists())

    def test_no_row_of_ours_at_the_target_is_a_miss(self):
        with tempfile.TemporaryDirectory() as d:
            root = pathlib.Path(d)
            for label, last in (("ddp", 0.86), ("diloco16", 0.84)):
                lab_run(root, label, last, final=0.86)
            rc, out, err = run("campaign_table.py", root)
            self.assertEqual(rc, 0, err)
            self.assertIn("no row of ours reached the target in its budget (ddp, the best torch "
                          "row, did at 2.0 s): **missed**", out)


def lab_run(root, label, last, final):
    """A finished uneven8/mlp seed-1 run of `label` (ddp: torch's, else our allreduce) by 2
    peers, evaluated at 0.5 then `last`; returns its folder."""
    run_dir = root / "time" / "uneven8" / "mlp" / "seed1" / label
    algo = "ddp" if label == "ddp" else "allreduce"
    (run_dir / "launch" / algo).mkdir(parents=True)
    for r in range(2):
        peer_file(run_dir / "launch" / algo / f"peer{r}.jsonl", r, [(1, 0.5), (2, last)])
    (run_dir / "launch" / "result.json").write_text(json.dumps(
        {"algorithms": [{"algorithm": algo, "ok": True, "final_accuracy": final,
                         "mb_sent_per_peer": 8.0, "idle_share": 0.5}]}))
    return run_dir

if __name__ == "__main__":
    unittest.main()
