"""How drawing and the layer table grow with hostile sizes (issue 24, item 15).

    python benchmarks/text_scale.py                # 4,000 / 8,000 backslashes, depth 1,500 / 3,000
    python benchmarks/text_scale.py --names 20000 --depth 3000

Two measurements, each at a size N and at 2N in one run, printing the time (and the size)
at both and their ratio: about 2 for linear growth, about 4 for quadratic.

* ``names``: a network whose two modules are named by N backslashes (one ending in a
  quote); ``make_dot(...).source`` and ``make_html(...)``;
* ``depth``: a recording of N nested modules (read from JSON, so that no deep Python stack
  is needed); the length of ``str(rec)``, the layer table, and the time to make it.

A plain script, not a test: it prints what it measures and exits 0.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

import torchrecorder


def _names(n: int) -> tuple[float, int]:
    net = torch.nn.Sequential()
    net.add_module("\\" * n, torch.nn.Linear(2, 2))
    net.add_module("\\" * (n - 1) + '"', torch.nn.ReLU())
    rec = torchrecorder.record(net, "net", (1, 2))
    start = time.perf_counter()
    size = len(torchrecorder.make_dot(rec, 3).source) + len(torchrecorder.make_html(rec).text)
    return time.perf_counter() - start, size


def _chain(depth: int) -> str:
    nodes, parent = [], None
    for d in range(depth):
        key = "net" if d == 0 else ".".join(["0"] * d)
        kids = [".".join(["0"] * (d + 1))] if d + 1 < depth else []
        nodes.append({"key": key, "kind": "layer", "name": "net" if d == 0 else "0", "depth": d,
                      "parent": parent, "type": "Sequential" if kids else "Linear",
                      "path": key if d else "", "subnets": kids})
        parent = key
    return json.dumps({"format": "torchrecorder.graph", "version": 1, "name": "net",
                       "context": ["net"], "nodes": nodes, "edges": []})


def _depth(n: int) -> tuple[float, int]:
    rec = torchrecorder.loads_json(_chain(n))
    start = time.perf_counter()
    size = len(str(rec))
    return time.perf_counter() - start, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", type=int, default=4000, help="backslashes in a name (N)")
    parser.add_argument("--depth", type=int, default=1500, help="nesting depth (N)")
    args = parser.parse_args()
    for label, fn, n in (("names", _names, args.names), ("depth", _depth, args.depth)):
        (t1, s1), (t2, s2) = fn(n), fn(2 * n)
        print(f"{label:6} N={n:>7,}: {t1:8.3f} s {s1:>12,} chars | 2N: {t2:8.3f} s {s2:>12,} chars"
              f" | time x{t2 / max(t1, 1e-9):.2f}, size x{s2 / max(s1, 1):.2f}")


if __name__ == "__main__":
    main()
