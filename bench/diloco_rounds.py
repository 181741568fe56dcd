#!/usr/bin/python3
"""Our DiLoCo against the torch row, round by round (docs/results/benchmarks.md, "DiLoCo (torch)").

usage: bench/diloco_rounds.py CONFIG TOPOLOGY OUT [--reference] [--kinks STEPS] [--gossamer PATH]

Runs `gossamer launch --algorithms allreduce,diloco --checkpoint-every 1` on CONFIG (a training
config with an "outer" section) with GOSSAMER_DILOCO_ROUNDS=1, and prints for every round r
||theta - theta_torch|| / ||theta_torch||: our rank 0's OUT/allreduce/checkpoint-0-<r>.bin (under
"outer" checkpoints count rounds; the last round: model.bin) against the torch row's
OUT/diloco/theta-<r>.bin. --reference also runs DiLoCo's formula in this one process with torch,
once in float32 and once in float64 (every rank's shard, batches and learning rates from
gossamer.shard), and prints each side's distance to both: which of two float32 runs that part
sides with float64 tells rounding apart from a wrong formula. --kinks STEPS runs no launch: it
steps the float32 and float64 references side by side for STEPS inner steps and prints their
distance and the smallest |pre-activation| of a hidden layer in the next step (a ReLU near its
kink, where float32 and float64 can go different ways).
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch_job  # noqa: E402  (bench/torch_job.py)


def distance(a, b):
    return float(numpy.linalg.norm(a - b) / numpy.linalg.norm(b))


def reference(cfg, n, dtype, torch, gossamer):
    """theta after every round of DiLoCo on the n ranks' shards, in dtype."""
    return [theta for kind, theta in run_reference(cfg, n, dtype, torch, gossamer)
            if kind == "round"]


def run_reference(cfg, n, dtype, torch, gossamer):
    """DiLoCo on the n ranks' shards in dtype: yields ("step", ranks) after every inner step
    (ranks: [shard, x, y, net, optimizer] each) and ("round", theta) after every round."""
    script = torch_job.Script("diloco_rounds.py", "diloco")
    outer = cfg["outer"]
    h, lr, mu = outer["steps"], outer.get("lr", 1.0), outer.get("momentum", 0.0)
    nesterov = outer.get("optimizer", "sgd") == "nesterov"
    to_vec = torch.nn.utils.parameters_to_vector
    ranks = []
    for r in range(n):
        sh = gossamer.shard(cfg, r, n)
        x = torch.from_numpy(sh["x"]).reshape(len(sh["y"]), -1).to(dtype)
        net = torch_job.build_model(script, cfg, x.shape[1], int(sh["classes"]), torch).to(dtype)
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(torch.from_numpy(sh["params"]).to(dtype),
                                                net.parameters())
        opt = torch_job.build_optimizer(script, cfg, list(net.parameters()), torch)
        ranks.append((sh, x, torch.from_numpy(sh["y"]), net, opt))
    theta = to_vec(ranks[0][3].parameters()).detach().clone()
    m, steps = torch.zeros_like(theta), int(ranks[0][0]["steps"])
    for s in range(steps):
        for sh, x, y, net, opt in ranks:
            rows = torch.from_numpy(sh["batches"][s])
            loss = torch.nn.functional.cross_entropy(net(x[rows]), y[rows])
            opt.zero_grad()
            loss.backward()
            for group in opt.param_groups:
                group["lr"] = float(sh["lr"][s])
            opt.step()
        yield "step", ranks
        if (s + 1) % h == 0 or s + 1 == steps:
            delta = sum(theta - to_vec(rank[3].parameters()).detach() for rank in ranks) / n
            m = mu * m + delta
            theta = theta - lr * (delta + mu * m if nesterov else m)
            for rank in ranks:
                with torch.no_grad():
                    torch.nn.utils.vector_to_parameters(theta.clone(), rank[3].parameters())
            yield "round", theta.double().numpy()


def kinks(cfg, n, steps, torch, gossamer):
    """Steps the float32 and float64 references side by side for `steps` inner steps: after
    each, the largest relative distance between their ranks' x, and the smallest |pre-activation|
    of a hidden layer over the next step's batches (float64): a ReLU that close to its kink can
    go either way in float32."""
    to_vec = torch.nn.utils.parameters_to_vector
    runs = [run_reference(cfg, n, dtype, torch, gossamer)
            for dtype in (torch.float32, torch.float64)]
    s = 0
    for (kind, a), (_, b) in zip(*runs):
        if kind != "step":
            continue
        far = max(float((to_vec(p[3].parameters()).double() - to_vec(q[3].parameters())).norm()
                        / to_vec(q[3].parameters()).norm()) for p, q in zip(a, b))
        near = None
        if s + 1 < len(b[0][0]["batches"]):
            with torch.no_grad():
                for sh, x, _, net, _ in b:
                    h = x[torch.from_numpy(sh["batches"][s + 1])]
                    for layer in list(net)[1:-1]:
                        h = layer(h)
                        if isinstance(layer, torch.nn.Linear):
                            z = float(h.abs().min())
                            near = z if near is None else min(near, z)
        print(f"inner step {s}: f32-f64 {far:.1e}" +
              (f", smallest |pre-activation| of step {s + 1}: {near:.1e}" if near else ""))
        s += 1
        if s == steps:
            return


def main(argv):
    if len(argv) < 4 or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 0 if len(argv) > 1 and argv[1] in ("-h", "--help") else 2
    config, topology, out = argv[1], argv[2], pathlib.Path(argv[3])
    if "--kinks" in argv:  # no launch: the two references, step by step
        import gossamer
        import torch

        torch.set_num_threads(1)
        cfg = json.loads(pathlib.Path(config).read_text())
        kinks(cfg, gossamer.Topology.load(topology).n, int(argv[argv.index("--kinks") + 1]),
              torch, gossamer)
        return 0
    exe = argv[argv.index("--gossamer") + 1] if "--gossamer" in argv else "build/ci/cli/gossamer"
    cfg = json.loads(pathlib.Path(config).read_text())
    if "outer" not in cfg:
        print(f"diloco_rounds.py: {config}: outer: the section is missing; add one",
              file=sys.stderr)
        return 2
    r = subprocess.run([exe, "launch", "--topology", topology, "--config", config, "--algorithms",
                        "allreduce,diloco", "--out", str(out), "--no-plots", "--json",
                        "--checkpoint-every", "1"], capture_output=True, text=True,
                       env=dict(os.environ, GOSSAMER_DILOCO_ROUNDS="1"))
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        return 1
    rows = {x["algorithm"]: x for x in json.loads(r.stdout)["algorithms"]}
    import gossamer

    rounds = sorted(int(p.stem.split("-")[1]) for p in (out / "diloco").glob("theta-*.bin"))
    ours, theirs = [], []
    for k in rounds:
        path = out / "allreduce" / f"checkpoint-0-{k}.bin"
        ours.append(gossamer.load_model(str(path if path.exists() else
                                            out / "allreduce" / "model.bin")).params)
        theirs.append(gossamer.load_model(str(out / "diloco" / f"theta-{k}.bin")).params)
    refs = {}
    if "--reference" in argv:
        import torch

        torch.set_num_threads(1)
        n = gossamer.Topology.load(topology).n
        refs = {name: reference(cfg, n, dtype, torch, gossamer)
                for name, dtype in (("f32", torch.float32), ("f64", torch.float64))}
    for i, k in enumerate(rounds):
        line = f"round {k}: ours-torch {distance(ours[i], theirs[i]):.1e}"
        for name, ref in refs.items():
            line += (f"  ours-{name} {distance(ours[i], ref[i]):.1e}"
                     f"  torch-{name} {distance(theirs[i], ref[i]):.1e}")
        print(line)
    print("final accuracy: ours {:.2f}%, torch {:.2f}%".format(
        100 * rows["allreduce"]["final_accuracy"], 100 * rows["diloco"]["final_accuracy"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
