"""The GPT's PyTorch twin (gossamer.models_torch.Gpt) against the built-in gpt: the same layout,
the same loss and gradient on the same batch and parameters to 1e-4 relative (per layer,
relative to the layer's gradient norm); text data in gossamer.load_data / gossamer.shard;
gossamer.loss_and_gradient itself (checked on the MLP too) and its bad input; the example
examples/python/gpt_torch.py in a short run."""

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import torch  # skips the file without torch
import gossamer  # noqa: E402
import gossamer.models_torch as gm  # noqa: E402
import gossamer.torch  # noqa: E402

SOURCE = os.environ.get("GOSSAMER_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
TOLERANCE = 1e-4  # the issue's: relative, per parameter group


def write_text(path):
    """About 6 KB of English-like prose with a 40-odd character vocabulary."""
    words = ("and the lord said unto moses in the land of egypt where the people dwelt "
             "Behold, I will send you bread from heaven; gather it every day. ").split()
    rng = np.random.default_rng(7)
    lines, line = [], []
    for _ in range(1100):
        line.append(words[rng.integers(len(words))])
        if len(line) > 9:
            lines.append(" ".join(line).capitalize() + ".")
            line = []
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text


def gpt_config(tmp_path, context=8, layers=2, heads=2, width=16, **extra):
    text = tmp_path / "text.txt"
    if not text.exists():
        write_text(text)
    cfg = {"seed": 3, "data": {"name": "text", "file": str(text)},
           "model": {"name": "gpt", "layers": layers, "heads": heads, "width": width,
                     "context": context},
           "optimizer": {"name": "adamw", "lr": 3e-3, "weight_decay": 0.01},
           "training": {"epochs": 1, "batch_size": 6}}
    cfg.update(extra)
    return cfg


def group_errors(twin, builtin, layers):
    """{layer: |twin - builtin| / |builtin|} over each layer's range of the flat vectors."""
    return {name: float(np.linalg.norm(twin[o:o + k] - builtin[o:o + k]) /
                        max(np.linalg.norm(builtin[o:o + k]), 1e-30))
            for name, o, k in layers}


def twin_loss_and_gradient(net, windows):
    net.zero_grad(set_to_none=False)
    loss = net.loss(torch.from_numpy(windows))
    loss.backward()
    grad = torch.nn.utils.parameters_to_vector([p.grad for p in net.parameters()])
    return float(loss), grad.detach().numpy()


def test_text_data_are_windows_of_token_ids(tmp_path):
    cfg = gpt_config(tmp_path)
    text = (tmp_path / "text.txt").read_text()
    d = gossamer.load_data(cfg)
    train, test = d["train"], d["test"]
    vocab = train["vocabulary"]
    assert vocab == "".join(sorted(set(text))) == test["vocabulary"]
    assert train["classes"] == len(vocab)
    assert train["x"].dtype == np.int64 and train["x"].shape[1] == 9  # context + 1
    # Windows at stride context over the first 90%: window i is text[8 i : 8 i + 9].
    for i in (0, 1, len(train["x"]) - 1):
        assert "".join(vocab[k] for k in train["x"][i]) == text[8 * i:8 * i + 9]
        assert train["y"][i] == train["x"][i][-1]
    assert len(train["x"]) == (len(text) * 9 // 10 - 1) // 8
    sh = gossamer.shard(cfg, 1, 2)
    assert sh["vocabulary"] == vocab and sh["x"].dtype == np.int64
    assert sh["batches"].shape == (sh["steps"], 6) and sh["model"].startswith("gpt")


def test_twin_has_the_builtin_layout(tmp_path):
    cfg = gpt_config(tmp_path, layers=3)
    sh = gossamer.shard(cfg, 0, 2)
    net = gm.from_shard(cfg, sh)
    flat = gossamer.torch.flatten(net, net.partitions())
    assert [tuple(x) for x in flat.layout] == [tuple(x) for x in sh["layers"]]
    assert [x[0] for x in sh["layers"]] == ["embed", "block1", "block2", "block3", "head"]
    assert np.array_equal(flat.buffer.numpy(), sh["params"])  # the built-in first point
    assert gossamer.model_layers(cfg) == sh["layers"]
    with pytest.raises(gossamer.ConfigError, match="twin has .* parameters, the built-in"):
        gm.from_shard(dict(cfg, model=dict(cfg["model"], width=24)), sh)


@pytest.mark.parametrize("sizes", [dict(layers=2, heads=2, width=16, context=8),
                                   dict(layers=1, heads=4, width=32, context=16)])
def test_twin_loss_and_gradient_equal_the_builtin(tmp_path, sizes):
    cfg = gpt_config(tmp_path, **sizes)
    sh = gossamer.shard(cfg, 1, 2)
    rng = np.random.default_rng(11)
    # The first point (zero biases, unit LayerNorm) and a point away from it, where every
    # parameter matters: the built-in's init scaled up and shifted by noise.
    away = (sh["params"] * 3 + rng.normal(0, 0.05, sh["params"].size)).astype(np.float32)
    for params, rows in ((sh["params"], sh["batches"][0]), (away, sh["batches"][1])):
        loss, grad = gossamer.loss_and_gradient(cfg, params, rows, rank=1, n=2)
        net = gm.from_shard(cfg, dict(sh, params=params))
        twin_loss, twin_grad = twin_loss_and_gradient(net, sh["x"][rows])
        assert abs(twin_loss - loss) <= TOLERANCE * abs(loss), (twin_loss, loss)
        errors = group_errors(twin_grad, grad, sh["layers"])
        assert max(errors.values()) <= TOLERANCE, errors
        assert min(np.linalg.norm(grad[o:o + k]) for _, o, k in sh["layers"]) > 0
    # A twin that differs slightly is caught: GELU's tanh approximation instead of erf.
    net = gm.from_shard(cfg, dict(sh, params=away))
    for block in net.blocks:
        block.mlp.gelu = torch.nn.GELU(approximate="tanh")
    _, near_grad = twin_loss_and_gradient(net, sh["x"][sh["batches"][1]])
    assert max(group_errors(near_grad, grad, sh["layers"]).values()) > 2 * TOLERANCE


def test_loss_and_gradient_of_the_mlp_equal_torch():
    cfg = {"seed": 2, "data": {"name": "logreg_synthetic", "samples": 400, "test_samples": 100,
                               "features": 10, "seed": 4},
           "model": {"name": "mlp", "hidden": [16]}, "optimizer": {"name": "sgd", "lr": 0.1},
           "training": {"epochs": 1, "batch_size": 20}}
    sh = gossamer.shard(cfg, 1, 4)
    rows = sh["batches"][2]
    loss, grad = gossamer.loss_and_gradient(cfg, sh["params"], rows, rank=1, n=4)
    net = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    torch.nn.utils.vector_to_parameters(torch.from_numpy(sh["params"]).clone(), net.parameters())
    out = torch.nn.functional.cross_entropy(net(torch.from_numpy(sh["x"][rows])),
                                            torch.from_numpy(sh["y"][rows]))
    out.backward()
    g = torch.nn.utils.parameters_to_vector([p.grad for p in net.parameters()]).numpy()
    assert abs(float(out) - loss) <= 1e-6 * loss
    assert np.linalg.norm(g - grad) <= 1e-5 * np.linalg.norm(grad)
    # Rows of the whole split (no rank): the training set's own samples.
    data = gossamer.load_data(cfg)["train"]
    whole, _ = gossamer.loss_and_gradient(cfg, sh["params"], [0, 5])
    net.zero_grad()
    ref = torch.nn.functional.cross_entropy(net(torch.from_numpy(data["x"][[0, 5]])),
                                            torch.from_numpy(data["y"][[0, 5]]))
    assert abs(float(ref) - whole) <= 1e-6 * whole


def test_loss_and_gradient_bad_input_is_one_config_error(tmp_path):
    cfg = gpt_config(tmp_path)
    sh = gossamer.shard(cfg, 0, 2)
    cases = [
        (dict(rows=[10 ** 6]), "rows[0]: row 1000000 is out of range: the train split has"),
        (dict(rows=[0], rank=0, n=2, split="test"), "split: a peer's shard is of the training"),
        (dict(rows=[0], rank=0), "n: rank and n come together"),
        (dict(rows=[0], split="valid"), "split: unknown split \"valid\""),
        (dict(rows=[0], rank=2, n=2), "rank: rank 2 is out of range for 2 peers"),
        (dict(rows=[]), "rows: 1 dimension(s), 0 rows"),
    ]
    for kw, line in cases:
        with pytest.raises(gossamer.ConfigError) as e:
            gossamer.loss_and_gradient(cfg, sh["params"], **kw)
        assert line in str(e.value) and "\n" not in str(e.value), (kw, str(e.value))
    with pytest.raises(gossamer.ConfigError, match="params: 3 values, but the model .gpt"):
        gossamer.loss_and_gradient(cfg, sh["params"][:3], [0])


def run_example(*args):
    script = os.path.join(SOURCE, "examples", "python", "gpt_torch.py")
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, OMP_NUM_THREADS="1"))


def example_config(tmp_path):
    import json
    cfg = gpt_config(tmp_path, optimizer={"name": "adamw", "lr": 1e-2, "clip_norm": 1.0})
    (tmp_path / "gpt.json").write_text(json.dumps(cfg))
    return str(tmp_path / "gpt.json")


def test_example_trains_the_twin_with_gossip(tmp_path):
    r = run_example("--config", example_config(tmp_path), "--peers", "2", "--steps", "20",
                    "--algorithm", "allreduce", "--prompt", "And the", "--sample-chars", "20")
    assert r.returncode == 0, r.stderr
    assert "rank 1: 20 steps" in r.stdout and "bits/char" in r.stdout, r.stdout
    loss = float(r.stdout.split("average model: validation loss ")[1].split()[0])
    vocab = len(set((tmp_path / "text.txt").read_text()))
    assert loss < np.log(vocab) - 0.5, r.stdout  # learnt something in 20 steps
    assert "sample (temperature 0):\nAnd the" in r.stdout


def test_example_bad_input_is_one_line_exit_2(tmp_path):
    import json
    r = run_example("--config", example_config(tmp_path), "--prompt", "And~")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--prompt: character '~' (position 3) is not in the data's vocabulary" in r.stderr
    mlp = tmp_path / "mlp.json"
    mlp.write_text(json.dumps(gpt_config(tmp_path, model={"name": "mlp", "hidden": [8]})))
    r = run_example("--config", str(mlp))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{mlp}: model.name: \"mlp\" is not \"gpt\"" in r.stderr


def torch_row(tmp_path, cfg, algorithm):
    """Our allreduce (gossamer.train_builtin: the built-in peers as threads) and the torch row
    `algorithm` of gossamer launch on the same 2-peer job: (our final loss, the row)."""
    import json
    from conftest import cli
    from test_example import free_base_port

    (tmp_path / "gpt.json").write_text(json.dumps(cfg))
    topo = gossamer.Topology.generate("ring", 2, base_port=free_base_port(2))
    topo = topo.save(tmp_path / "ring2.json")
    ours = gossamer.train_builtin(cfg, topo, "allreduce")
    assert not any(ours["errors"]), ours
    out = tmp_path / "out"
    r = subprocess.run([cli(), "launch", "--topology", topo.source, "--config",
                        str(tmp_path / "gpt.json"), "--algorithms", algorithm, "--out", str(out),
                        "--no-plots", "--json", "--timeout", "60"],
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)["algorithms"][0]
    assert row["ok"] and row["algorithm"] == algorithm, row
    log = (out / algorithm / "peer0.log").read_text()
    assert "nats/char" in log and "bits/char" in log, log
    return ours["loss"], row


ROW_OPTIMIZER = {"name": "adamw", "lr": 1e-2, "weight_decay": 0.01, "clip_norm": 0.5}


def test_ddp_row_trains_the_twin(tmp_path):
    """--algorithms ddp on a GPT: the twin from the built-in first point on the built-in batches
    (AdamW, clip_norm), gradients all-reduced; it ends where our allreduce does."""
    cfg = gpt_config(tmp_path, optimizer=ROW_OPTIMIZER, training={"epochs": 1, "batch_size": 8})
    ours, row = torch_row(tmp_path, cfg, "ddp")
    vocab = len(gossamer.load_data(cfg)["train"]["vocabulary"])
    assert row["final_loss"] < np.log(vocab) - 0.3, row  # it learnt
    assert abs(row["final_loss"] - ours) <= 1e-3 * ours, (ours, row["final_loss"])


def test_diloco_row_trains_the_twin(tmp_path):
    """--algorithms diloco on a GPT (AdamW inner steps, Nesterov outer): ends where our
    allreduce with the same "outer" section does."""
    cfg = gpt_config(tmp_path, optimizer=ROW_OPTIMIZER, training={"epochs": 1, "batch_size": 8},
                     outer={"steps": 4, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9})
    ours, row = torch_row(tmp_path, cfg, "diloco")
    assert abs(row["final_loss"] - ours) <= 1e-3 * ours, (ours, row["final_loss"])
    # Rank 0's model file names the built-in model (description, vocabulary digest, layers).
    theta = gossamer.load_model(str(tmp_path / "out" / "diloco" / "model.bin"))
    sh = gossamer.shard(cfg, 0, 2)
    assert theta.model == sh["model"] and theta.step == 10, theta.model
    assert [tuple(x) for x in theta.layout] == [tuple(x) for x in sh["layers"]]
