#!/usr/bin/env python3
"""Compressed pseudo-gradients under the outer layer, in the simulator (docs/algorithms/outer.md,
"Compressed pseudo-gradients"; issue 41 item 4).

The Fashion-MNIST MLP of examples/sim/fashion_mlp16.json on 16 peers (one-peer exponential graph,
homogeneous cluster), same seed and sample budget for every row, math mode. Each group is one
`gossamer sim` run of one training config: dpsgd and allreduce are the fp32 rows, choco and
qallreduce the compressed ones under the same "outer" section. Prints one markdown table: final
accuracy of the peers' exact average, MB sent per peer, and each compressed row's byte ratio and
accuracy difference against its fp32 row (gossip: dpsgd; all-reduce: allreduce).

Usage: outer_codecs.py [--gossamer build/ci/cli/gossamer] [--out out/outer_codecs] [--epochs 5]
                       [--only GROUP,...]
"""
import argparse
import json
import os
import subprocess
import sys

BASE = {
    "seed": 1,
    "data": {"name": "fashion-mnist"},
    "model": {"name": "mlp", "hidden": [256, 128]},
    "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True,
                  "weight_decay": 0.0001},
    "schedule": {"schedule": "cosine", "warmup_steps": 50},
    "training": {"epochs": 5, "batch_size": 64, "target_accuracy": 0.85},
    "sharding": {"mode": "iid"},
}
SGD = {"steps": 8}  # local SGD's outer step: lr 1, no momentum (the layer's default)
NESTEROV = {"steps": 8, "optimizer": "nesterov", "lr": 0.7, "momentum": 0.9}  # DiLoCo's
INT4 = {"name": "int4"}

# group: (outer, choco options, qallreduce options, also run the fp32 rows)
GROUPS = {
    "sgd-int4": (SGD, {"gamma": 0.5, "compressor": INT4}, {"compressor": INT4}, True),
    "nesterov-int4": (NESTEROV, {"gamma": 0.5, "compressor": INT4}, {"compressor": INT4}, True),
    # choco has no switch: x - x_hat is its error feedback. qallreduce without it:
    "sgd-int4-noef": (SGD, None, {"compressor": INT4, "error_feedback": False}, False),
    "nesterov-int4-noef": (NESTEROV, None, {"compressor": INT4, "error_feedback": False}, False),
    "sgd-int4-gamma1": (SGD, {"gamma": 1.0, "compressor": INT4}, None, False),
    "nesterov-int4-gamma1": (NESTEROV, {"gamma": 1.0, "compressor": INT4}, None, False),
    # Is the Nesterov rows' gap int4's or choco's? fp16 at gamma 1, and int4 with finer blocks.
    "nesterov-fp16-gamma1": (NESTEROV, {"gamma": 1.0, "compressor": {"name": "fp16"}}, None, False),
    "nesterov-int4b32-gamma1": (NESTEROV, {"gamma": 1.0, "compressor": {"name": "int4", "block": 32}},
                                None, False),
    "sgd-int8-gamma1": (SGD, {"gamma": 1.0, "compressor": {"name": "int8"}}, None, False),
    "sgd-topk-gamma1": (SGD, {"gamma": 1.0, "compressor": {"name": "topk", "fraction": 0.1}},
                        None, False),
    "sgd-int8": (SGD, {"gamma": 0.5, "compressor": {"name": "int8"}},
                 {"compressor": {"name": "int8"}}, False),
    "sgd-fp16": (SGD, {"gamma": 0.5, "compressor": {"name": "fp16"}},
                 {"compressor": {"name": "fp16"}}, False),
    "sgd-topk": (SGD, {"gamma": 0.5, "compressor": {"name": "topk", "fraction": 0.1}},
                 {"compressor": {"name": "topk", "fraction": 0.1}}, False),
    # SparseLoCo's question on top-k, where error feedback matters most: outer momentum or not,
    # error feedback or not.
    "sgd-topk-noef": (SGD, None, {"compressor": {"name": "topk", "fraction": 0.1},
                                  "error_feedback": False}, False),
    "nesterov-topk": (NESTEROV, {"gamma": 0.5, "compressor": {"name": "topk", "fraction": 0.1}},
                      {"compressor": {"name": "topk", "fraction": 0.1}}, False),
    "nesterov-topk-noef": (NESTEROV, None, {"compressor": {"name": "topk", "fraction": 0.1},
                                            "error_feedback": False}, False),
}


def run_group(a, name):
    outer, choco, qar, fp32 = GROUPS[name]
    cfg = dict(BASE)
    cfg["training"] = dict(BASE["training"], epochs=a.epochs)
    cfg["outer"] = outer
    cfg["algorithms"] = {"dpsgd": {"mode": "atc"}, "allreduce": {}}
    algos = []
    for algo, opts in (("choco", choco), ("qallreduce", qar)):
        if opts is not None:
            cfg["algorithms"][algo] = opts
            algos.append(algo)
    algos += ["dpsgd", "allreduce"] if fp32 else []
    os.makedirs(os.path.join(a.out, "configs"), exist_ok=True)
    path = os.path.join(a.out, "configs", name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)
    summary = os.path.join(a.out, name + ".summary.json")
    cmd = [a.gossamer, "sim", "--topology", "examples/topologies/one-peer-exp16.json",
           "--cluster", "examples/clusters/homogeneous16.json", "--config", path,
           "--algorithms", ",".join(algos), "--out", os.path.join(a.out, name), "--json",
           # Only the final evaluation (on the whole test set): the table reads final accuracy.
           "--eval-interval", "1e6", "--peer-eval-samples", "100",
           "--save", summary]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.load(open(summary))["algorithms"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gossamer", default="build/ci/cli/gossamer")
    p.add_argument("--out", default="out/outer_codecs")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--only", default=",".join(GROUPS))
    a = p.parse_args()
    rows = {}
    for name in a.only.split(","):
        summary = os.path.join(a.out, name + ".summary.json")
        if os.path.exists(summary) and os.environ.get("REUSE"):
            rows[name] = json.load(open(summary))["algorithms"]
        else:
            rows[name] = run_group(a, name)
    ref = {}
    for name, results in rows.items():
        for r in results:
            if r["algorithm"] in ("dpsgd", "allreduce"):
                ref[(GROUPS[name][0]["optimizer"] if "optimizer" in GROUPS[name][0] else "sgd",
                     r["algorithm"])] = r
    print("| group | outer | algorithm | options | final accuracy | MB per peer | "
          "fp32 row / this (bytes) | accuracy − fp32 row (points) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, results in rows.items():
        outer, choco, qar, _ = GROUPS[name]
        kind = outer.get("optimizer", "sgd")
        for r in results:
            algo = r["algorithm"]
            opts = {"choco": choco, "qallreduce": qar}.get(algo, {})
            base = ref.get((kind, "dpsgd" if algo in ("choco", "dpsgd") else "allreduce"))
            ratio = diff = ""
            if base and algo in ("choco", "qallreduce"):
                ratio = f"{base['mb_sent_per_peer'] / r['mb_sent_per_peer']:.2f}x"
                diff = f"{100 * (r['final_accuracy'] - base['final_accuracy']):+.2f}"
            print(f"| {name} | {json.dumps(outer)} | {algo} | `{json.dumps(opts)}` | "
                  f"{100 * r['final_accuracy']:.2f}% | {r['mb_sent_per_peer']:.2f} | {ratio} | "
                  f"{diff} |")


if __name__ == "__main__":
    main()
