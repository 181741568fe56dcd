#!/usr/bin/env python3
"""The cluster file `gossamer sim` should get to predict a `gossamer launch` run on this machine
(docs/results/experiments.md, "Real peers beside the simulator").

A launched peer's step lasts max(measured, declared) (launch pads each step to the cluster file's
time), and each send is first paced by the declared link, then carried by the real transport. So
the prediction takes the declared cluster file and:
  - base_time = max(declared base_time, calibrated step x max(1, peers / cores)): the calibrated
    step is one peer alone; n peers share the cores;
  - network latency = declared + calibrated; bandwidth = 1 / (1/declared + 1/calibrated) (the
    emulated link and the real one in series).
Usage: calibrated_cluster.py CLUSTER CALIBRATED --peers N --cores C > predicted.json
"""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cluster")
    p.add_argument("calibrated")
    p.add_argument("--peers", type=int, required=True)
    p.add_argument("--cores", type=int, required=True)
    a = p.parse_args()
    try:
        declared = json.load(open(a.cluster))
        measured = json.load(open(a.calibrated))
        step = measured["defaults"]["base_time"]
        link = measured["network"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"calibrated_cluster.py: {e}")
    out = dict(declared)
    out["name"] = declared.get("name", "cluster") + "-predicted"
    defaults = dict(declared.get("defaults", {}))
    contended = step * max(1.0, a.peers / max(1, a.cores))
    defaults["base_time"] = max(defaults.get("base_time", 0.0), contended)
    out["defaults"] = defaults
    net = dict(declared.get("network", {}))
    net["latency"] = net.get("latency", 0.0) + link["latency"]
    bw = net.get("bandwidth")
    net["bandwidth"] = link["bandwidth"] if not bw else 1.0 / (1.0 / bw + 1.0 / link["bandwidth"])
    out["network"] = net
    out["description"] = (
        f"{a.cluster} as launch runs it here: base_time max(declared, calibrated {step:.6f} s x "
        f"{a.peers}/{a.cores} cores), links in series with the calibrated UCX link "
        f"({link['bandwidth'] / 1e9:.3f} GB/s, {link['latency'] * 1e6:.1f} us)")
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
