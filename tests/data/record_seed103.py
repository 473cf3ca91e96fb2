"""Record what the original torchrecorder 1.0.3 drew of ``tests/seed_models.py`` into
``tests/data/seed103.json``, for ``tests/test_seed_view.py`` to compare against.

Run it with torchrecorder 1.0.3 first on the path, from the repository root::

    pip install --no-deps torchrecorder==1.0.3 --target /tmp/tr103
    PYTHONPATH=/tmp/tr103:. python tests/data/record_seed103.py

For each model and ``render_depth`` 1-3 it keeps what a flat dict exporter (a
``BaseRenderer`` whose ``render_recursive_node`` draws a layer as one node) got
from 1.0.3's ``renderer(dest)``, the recorder's ``fn_types`` and edges, and the
answers of the post-processing programs of ``tests/seed_programs.py`` (module
tree from ``subnets``, ``ParamNode.parent``, layer counts).
"""

from __future__ import annotations

import json
import os
import sys

import torch

import torchrecorder
from torchrecorder.nodes import LayerNode
from torchrecorder.renderer.base import BaseRenderer

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.seed_models import MODELS
from tests.seed_programs import run_all


class Flat(BaseRenderer):
    """A flat exporter in 1.0.3 style: every node by id, layers as single nodes."""

    def _add(self, dest, node):
        dest["nodes"][str(id(node))] = {"kind": type(node).__name__, "name": node.name,
                                        "fn": type(node.fn).__name__, "depth": node.depth}

    def render_node(self, dest, node):
        if isinstance(node, LayerNode) and node.depth < self.render_depth:
            self.render_recursive_node(dest, node)
        else:
            self._add(dest, node)

    def render_recursive_node(self, dest, node):
        self._add(dest, node)

    def render_edge(self, dest, fnode, tnode):
        dest["edges"].append([str(id(fnode)), str(id(tnode))])


def main() -> None:
    if torchrecorder.__version__ != "1.0.3":
        raise SystemExit("run this with torchrecorder 1.0.3 first on PYTHONPATH")
    out = {}
    for name, (factory, shape) in MODELS.items():
        torch.manual_seed(0)
        net = factory()
        rec = torchrecorder.record(net, name, shape)
        entry = {"fn_types": rec.fn_types, "num_edges": len(rec.edges), "depths": {},
                 "programs": run_all(rec, net)}
        for depth in (1, 2, 3):
            got = Flat(rec, depth)({"nodes": {}, "edges": []})
            nodes = got["nodes"]
            entry["depths"][str(depth)] = {
                "nodes": sorted((n["kind"], n["name"], n["fn"], n["depth"]) for n in nodes.values()),
                "edges": sorted([nodes[a]["name"], nodes[b]["name"]] for a, b in got["edges"]),
            }
        out[name] = entry
    path = os.path.join(os.path.dirname(__file__), "seed103.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
