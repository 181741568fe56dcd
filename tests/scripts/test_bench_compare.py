"""scripts/bench_compare.py: a moved figure is printed, one within its band is not, and a
missing, unreadable or ill-formed file is one line and exit status 2 (standard library only:
python3 -m unittest tests/scripts/test_bench_compare.py)."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "bench_compare.py")
SAMPLES = os.path.join(HERE, "bench_samples")


def run(*args):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


class BenchCompare(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.out = os.path.join(self.dir, "bench")
        os.mkdir(self.out)
        for name in os.listdir(SAMPLES):
            with open(os.path.join(SAMPLES, name)) as f:
                self.write(name, f.read())
        self.recorded = os.path.join(self.dir, "recorded.json")

    def tearDown(self):
        self.tmp.cleanup()

    def fresh(self):
        """A new folder of samples and a recorded file made from them."""
        self.tmp.cleanup()
        self.setUp()
        self.record()

    def write(self, name, text, folder=None):
        path = os.path.join(folder or self.out, name)
        with open(path, "w") as f:
            f.write(text if isinstance(text, str) else json.dumps(text))
        return path

    def load(self, name):
        with open(os.path.join(self.out, name)) as f:
            return json.load(f)

    def record(self, *dirs):
        rc, out, err = run("--record", *dirs, "--out-dir", self.out, "--recorded", self.recorded)
        self.assertEqual(rc, 0, err)
        with open(self.recorded) as f:
            return json.load(f)

    def compare(self, *extra):
        return run("--out-dir", self.out, "--recorded", self.recorded, *extra)

    def test_record_takes_every_ratio_and_scale_figure(self):
        doc = self.record()
        figs = doc["figures"]
        for name in ("compute mlp ratio", "compute cnn ratio", "mix k=1 ratio",
                     "transport 1 MiB ratio", "transport latency ratio",
                     "transport-no-peer-errors 16 MiB ratio", "allreduce 2 procs 4 MiB ratio",
                     "sim sgp n=256 x 50 steps seconds", "sim sgp n=512 x 50 steps peak bytes",
                     "sim sgp x 50 steps time exponent", "sim async x 50 steps memory exponent"):
            self.assertIn(name, figs)
        self.assertEqual(figs["compute mlp ratio"]["band"], 0.15)
        self.assertEqual(figs["transport 1 MiB ratio"]["kind"], "transport_tcp_ratio")
        self.assertEqual(figs["transport-no-peer-errors 16 MiB ratio"]["kind"],
                         "transport_shm_ratio")
        for key in ("machine", "commit", "date"):
            self.assertIn(key, doc)
        self.assertFalse(any("calibrate" in n for n in figs))

    def test_same_figures_move_nothing(self):
        self.record()
        rc, out, err = self.compare()
        self.assertEqual(rc, 0, out + err)
        self.assertIn("0 moved", out)
        self.assertNotIn("WORSE", out)

    def test_a_moved_figure_is_printed_and_one_within_its_band_is_not(self):
        self.record()
        compute = self.load("compute.json")
        compute["rows"][0]["ratio"] *= 0.7   # mlp: 30% slower, band 15%
        compute["rows"][1]["ratio"] *= 1.1   # cnn: within 15%
        self.write("compute.json", compute)
        sim = self.load("sim_scaling.json")
        sim["algorithms"][0]["points"][1]["peak_bytes"] *= 1.5  # sgp 512: +50%, band 10%
        sim["algorithms"][0]["time_exponent"] += 0.05            # within ±0.1
        self.write("sim_scaling.json", sim)
        rc, out, err = self.compare()
        self.assertEqual(rc, 1, out + err)
        moved = out.split("within")[0]
        self.assertIn("compute mlp ratio", moved)
        self.assertIn("WORSE", moved)
        self.assertIn("sim sgp n=512 x 50 steps peak bytes", moved)
        self.assertNotIn("compute cnn ratio", out)
        self.assertNotIn("sim sgp x 50 steps time exponent", out)
        self.assertIn("2 moved", out)
        rc, out, _ = self.compare("--all")
        self.assertIn("compute cnn ratio", out.split("within their bands:")[1])

    def test_an_improvement_past_its_band_is_printed_as_better(self):
        self.record()
        sim = self.load("sim_scaling.json")
        sim["algorithms"][0]["points"][0]["seconds"] /= 3
        self.write("sim_scaling.json", sim)
        rc, out, _ = self.compare()
        self.assertEqual(rc, 1)
        self.assertRegex(out, r"sim sgp n=256 x 50 steps seconds .* better")

    def test_new_and_unmeasured_figures_are_listed_not_moved(self):
        self.record()
        os.remove(os.path.join(self.out, "mix.json"))
        compute = self.load("compute.json")
        compute["rows"].append({"model": "resnet", "ratio": 0.5})
        self.write("compute.json", compute)
        rc, out, _ = self.compare()
        self.assertEqual(rc, 0, out)
        self.assertIn("not recorded yet (1): compute resnet ratio", out)
        self.assertIn("recorded but not measured", out)
        self.assertIn("mix k=1 ratio", out)

    def test_bands_from_repeated_runs(self):
        second = os.path.join(self.dir, "run2")
        os.mkdir(second)
        for name in os.listdir(self.out):
            with open(os.path.join(self.out, name)) as f:
                doc = json.load(f)
            if name == "compute.json":
                doc["rows"][0]["ratio"] *= 1.2
                doc["rows"][1]["ratio"] *= 1.01
            self.write(name, doc, second)
        figs = self.record(self.out, second)["figures"]
        self.assertAlmostEqual(figs["compute mlp ratio"]["band"], 0.2, places=3)
        self.assertEqual(figs["compute cnn ratio"]["band"], 0.05)  # the floor
        self.assertEqual(figs["compute cnn ratio"]["band_from"], "spread of 2 runs")
        # A later --record from one folder keeps the measured band.
        self.assertAlmostEqual(self.record()["figures"]["compute mlp ratio"]["band"], 0.2, 3)

    def test_the_shipped_recorded_file_is_well_formed(self):
        shipped = os.path.join(HERE, "..", "..", "bench", "recorded.json")
        rc, out, err = run("--out-dir", self.out, "--recorded", shipped)
        self.assertIn(rc, (0, 1), err)
        self.assertIn("within their bands", out)

    def test_missing_recorded_file_is_one_line_and_exit_2(self):
        rc, out, err = self.compare()
        self.assertEqual(rc, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("recorded.json: cannot be read", err)

    def test_unreadable_and_ill_formed_files_are_one_line_and_exit_2(self):
        self.record()
        cases = [
            (lambda: self.write("compute.json", "{\"rows\": [1, 2"), "compute.json: not JSON"),
            (lambda: self.write("compute.json", {"rows": 3}), "expected an object with a list"),
            (lambda: self.write("mix.json", {"rows": [{"neighbours": 1, "ratio": "fast"}]}),
             "rows[0].ratio must be a number"),
            (lambda: self.write("recorded.json", {"figures": {"x": {"value": 1}}}, self.dir),
             "needs a \"kind\""),
            (lambda: self.write("recorded.json", "[]", self.dir), "expected an object"),
        ]
        for make_bad, expected in cases:
            with self.subTest(expected=expected):
                self.fresh()
                make_bad()
                rc, out, err = self.compare()
                self.assertEqual(rc, 2, out + err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(expected, err)
        if os.geteuid() != 0:  # root reads any file
            self.fresh()
            os.chmod(os.path.join(self.out, "mix.json"), 0)
            rc, _, err = self.compare()
            self.assertEqual(rc, 2)
            self.assertIn("mix.json: cannot be read", err)

    def test_missing_or_empty_out_dir_is_one_line_and_exit_2(self):
        self.record()
        rc, _, err = run("--out-dir", os.path.join(self.dir, "nowhere"), "--recorded",
                         self.recorded)
        self.assertEqual(rc, 2)
        self.assertIn("nowhere: no such folder", err)
        empty = os.path.join(self.dir, "empty")
        os.mkdir(empty)
        rc, _, err = run("--out-dir", empty, "--recorded", self.recorded)
        self.assertEqual(rc, 2)
        self.assertIn("no benchmark figures", err)


if __name__ == "__main__":
    unittest.main()
