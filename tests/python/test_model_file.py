"""gossamer.load_model and gossamer.torch.load_model: a model that gossamer train wrote, read
back in Python, gives the test accuracy `gossamer eval` reports; bad files raise ConfigError
with the CLI's one-line message."""

import json
import subprocess

import numpy as np
import pytest
import torch

import gossamer
import gossamer.torch
from conftest import cli

CONFIG = {"seed": 3,
          "data": {"name": "logreg_synthetic", "samples": 600, "test_samples": 200,
                   "features": 10, "seed": 5},
          "model": {"name": "mlp", "hidden": [8]},
          "optimizer": {"name": "sgd", "lr": 0.2},
          "training": {"epochs": 3, "batch_size": 20}}


def run_cli(*args):
    return subprocess.run([cli(), *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def trained(tmp_path):
    """(config path, model.bin path, eval --json) of a small mlp trained by gossamer train."""
    config = tmp_path / "train.json"
    config.write_text(json.dumps(CONFIG))
    out = tmp_path / "out"
    r = run_cli("train", "--config", str(config), "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    e = run_cli("eval", "--model", str(out / "model.bin"), "--config", str(config), "--json")
    assert e.returncode == 0, e.stderr
    return config, out / "model.bin", json.loads(e.stdout)


def torch_mlp():
    return torch.nn.Sequential(torch.nn.Linear(10, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_load_model_reads_what_train_wrote(trained):
    _, path, ev = trained
    m = gossamer.load_model(path)
    assert isinstance(m.params, np.ndarray) and m.params.dtype == np.float32
    assert m.params.size == ev["parameters"] == 10 * 8 + 8 + 8 * 2 + 2
    assert m.step == ev["step"] and m.model == ev["model"]
    assert sum(size for _, _, size in m.layout) == m.params.size
    assert [offset for _, offset, _ in m.layout] == sorted(offset for _, offset, _ in m.layout)


def test_a_torch_model_loaded_from_the_file_has_the_accuracy_of_gossamer_eval(trained):
    config, path, ev = trained
    model = torch_mlp()
    gossamer.torch.load_model(model, path)
    test = gossamer.load_data(CONFIG)["test"]
    with torch.no_grad():
        logits = model(torch.as_tensor(test["x"], dtype=torch.float32).reshape(len(test["y"]), -1))
    y = torch.as_tensor(test["y"]).long()
    accuracy = (logits.argmax(1) == y).float().mean().item()
    loss = torch.nn.functional.cross_entropy(logits, y).item()
    # BLAS and torch sum in different orders: at most one near-tie may flip.
    assert abs(accuracy - ev["test_accuracy"]) <= 1 / ev["test_samples"] + 1e-12
    assert loss == pytest.approx(ev["test_loss"], rel=1e-4)
    # The flat buffer of gossamer.torch.flatten takes the same vector as it is.
    flat = gossamer.torch.flatten(torch_mlp())
    gossamer.torch.load_model(flat, gossamer.load_model(path))
    assert torch.equal(flat.buffer, torch.as_tensor(gossamer.load_model(path).params))


def test_a_model_of_other_sizes_is_refused_naming_both_counts(trained):
    _, path, _ = trained
    with pytest.raises(gossamer.ConfigError) as e:
        gossamer.torch.load_model(torch.nn.Linear(10, 2), path)
    assert "holds 106 parameters" in str(e.value) and "has 22" in str(e.value)


def test_bad_files_raise_the_line_gossamer_eval_prints(trained, tmp_path):
    config, path, _ = trained
    data = path.read_bytes()
    corrupt = bytearray(data)
    corrupt[len(data) // 2] ^= 0xFF
    cases = {"folder": tmp_path, "missing": tmp_path / "nope.bin",
             "truncated": data[:len(data) - 9], "corrupt": bytes(corrupt),
             "not a model": b"hello, world", "trailing": data + b"\0"}
    for name, content in cases.items():
        if isinstance(content, (bytes, bytearray)):
            target = tmp_path / (name.replace(" ", "_") + ".bin")
            target.write_bytes(content)
        else:
            target = content
        r = run_cli("eval", "--model", str(target), "--config", str(config))
        assert r.returncode == 2, (name, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (name, r.stderr)
        with pytest.raises(gossamer.ConfigError) as e:
            gossamer.load_model(target)
        assert str(e.value) == lines[0][len("error: "):], name
