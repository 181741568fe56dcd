"""scripts/sim/lognormal_cluster.py and scripts/sim/outer_time_rows.py (docs/results/outer_time.md):
the committed 256-peer cluster is what the script draws from its seed, the draws have mean 1, and
bad flags are one line and exit status 2 (standard library only:
python3 -m unittest tests/scripts/test_sim_setups.py)."""
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
CLUSTER = os.path.join(ROOT, "scripts", "sim", "lognormal_cluster.py")
ROWS = os.path.join(ROOT, "scripts", "sim", "outer_time_rows.py")
RACK_SCHEDULE = os.path.join(ROOT, "scripts", "sim", "rack_schedule.py")


def run(script, *args):
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


class LognormalCluster(unittest.TestCase):
    def test_the_example_is_the_seeded_draw(self):
        rc, out, _ = run(CLUSTER, "--n", "256", "--seed", "1")
        self.assertEqual(rc, 0)
        with open(os.path.join(ROOT, "examples", "clusters", "lognormal256.json")) as f:
            self.assertEqual(json.loads(out), json.load(f))

    def test_static_lognormal_speeds_with_mean_one(self):
        rc, out, _ = run(CLUSTER, "--n", "4096", "--seed", "7", "--sigma-compute", "0.5",
                         "--sigma-link", "0.3", "--bandwidth", "1e8")
        self.assertEqual(rc, 0)
        c = json.loads(out)
        self.assertEqual(c["n"], 4096)
        self.assertEqual([p["rank"] for p in c["peers"]], list(range(4096)))
        f = [p["factor"] for p in c["peers"]]
        up = [p["uplink"] / 1e8 for p in c["peers"]]
        self.assertTrue(all(p["uplink"] == p["downlink"] for p in c["peers"]))
        self.assertAlmostEqual(sum(f) / len(f), 1.0, delta=0.03)
        self.assertAlmostEqual(sum(up) / len(up), 1.0, delta=0.03)
        # sigma of log(factor) and log(link)
        for xs, sigma in ((f, 0.5), (up, 0.3)):
            logs = [math.log(x) for x in xs]
            m = sum(logs) / len(logs)
            sd = math.sqrt(sum((v - m) ** 2 for v in logs) / len(logs))
            self.assertAlmostEqual(sd, sigma, delta=0.02)
        rc2, out2, _ = run(CLUSTER, "--n", "4096", "--seed", "8")
        self.assertNotEqual(json.loads(out2)["peers"], c["peers"])

    def test_racks_add_a_section_and_keep_the_draws(self):
        rc, out, _ = run(CLUSTER, "--n", "40", "--seed", "3", "--rack-size", "8",
                         "--slow-racks", "4", "--bandwidth", "1e7")
        self.assertEqual(rc, 0)
        c = json.loads(out)
        _, plain, _ = run(CLUSTER, "--n", "40", "--seed", "3", "--bandwidth", "1e7")
        self.assertEqual(c["peers"], json.loads(plain)["peers"])
        racks = c["network"]["racks"]
        self.assertEqual([r["range"] for r in racks], [[0, 7], [8, 15], [16, 23], [24, 31],
                                                       [32, 39]])
        self.assertEqual([r["uplink"] for r in racks], [4e7, 4e7, 4e7, 4e6, 4e7])
        self.assertTrue(all(r["downlink"] == r["uplink"] for r in racks))
        rc, out, _ = run(CLUSTER, "--n", "10", "--rack-size", "4", "--slow-racks", "0",
                         "--rack-uplink", "5e6")
        self.assertEqual([(r["range"], r["uplink"]) for r in json.loads(out)["network"]["racks"]],
                         [([0, 3], 5e6), ([4, 7], 5e6), ([8, 9], 5e6)])

    def test_bad_flags_are_one_line_and_exit_2(self):
        for args in (["--n", "0"], ["--n", "4", "--sigma-compute", "4"], ["--n", "4", "--x"],
                     ["--n", "4", "--bandwidth", "0"], ["--n", "4", "--slow-racks", "2"],
                     ["--n", "4", "--rack-size", "5"], ["--n", "4", "--rack-size", "2",
                                                         "--rack-uplink", "0"]):
            rc, out, err = run(CLUSTER, *args)
            self.assertEqual(rc, 2, args)
            self.assertEqual(out, "")
            self.assertEqual(len(err.strip().splitlines()), 1, err)


class RackSchedule(unittest.TestCase):
    def test_matchings_mostly_in_rack_and_exact_mean_after_a_period(self):
        rc, out, _ = run(RACK_SCHEDULE, "--n", "64", "--rack-size", "8")
        self.assertEqual(rc, 0)
        rounds = json.loads(out)["graph"]["schedule"]
        self.assertEqual(len(rounds), 3 * 4)  # log2(8) cycles of 3 in-rack rounds + 1 across
        x = [float(r * r % 17) for r in range(64)]
        mean = sum(x) / 64
        for t, edges in enumerate(rounds):
            self.assertEqual(sorted(r for e in edges for r in e), list(range(64)))  # matching
            across = [a // 8 != b // 8 for a, b in edges]
            self.assertTrue(all(across) if t % 4 == 3 else not any(across), t)
            y = list(x)
            for a, b in edges:
                y[a] = y[b] = (x[a] + x[b]) / 2
            x = y
        self.assertTrue(all(abs(v - mean) < 1e-9 for v in x))
        with open(os.path.join(ROOT, "examples", "topologies", "rack-hypercube256.json")) as f:
            self.assertEqual(json.loads(run(RACK_SCHEDULE, "--n", "256", "--rack-size", "8")[1]),
                             json.load(f))
        for args in (["--n", "48", "--rack-size", "8"], ["--n", "8", "--rack-size", "8"],
                     ["--n", "64"]):
            rc, out, err = run(RACK_SCHEDULE, *args)
            self.assertEqual(rc, 2, args)
            self.assertEqual(len(err.strip().splitlines()), 1, err)


class OuterTimeRows(unittest.TestCase):
    def test_list_and_bad_flags(self):
        rc, out, _ = run(ROWS, "--list")
        self.assertEqual(rc, 0)
        self.assertIn("diloco-H8", out)
        self.assertIn("(--time-rows)", out)
        for args in (["--rows", "nope"], ["--sets", "nope"], ["--bogus"],
                     ["--clip-norm", "-1"]):
            rc, out, err = run(ROWS, *args)
            self.assertEqual(rc, 2, args)
            self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_clip_norm_reaches_the_rows_config(self):
        with tempfile.TemporaryDirectory() as d:
            rc, _, err = run(ROWS, "--sets", "racks1024", "--rows", "dpsgd-T", "--time-rows",
                             "--clip-norm", "1", "--dry-run", "--out", d)
            self.assertEqual(rc, 0, err)
            cfg = json.loads(pathlib.Path(d, "racks1024", "dpsgd-T", "config.json").read_text())
            self.assertEqual(cfg["optimizer"]["clip_norm"], 1.0)
            self.assertEqual(cfg["outer"]["seconds"], 0.4)


if __name__ == "__main__":
    unittest.main()
