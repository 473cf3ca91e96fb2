"""How drawing time grows with the graph: each stage timed at size n and 2n, and the ratio.

    python benchmarks/drawing_scale.py                 # every shape, n = 5000
    python benchmarks/drawing_scale.py --n 10000 --shapes fanout,loop

Graphs are built by hand with the :class:`~torchrecorder.graph.Graph` API
(no model runs), so only drawing is measured:

==========  ==============================================================
``fanout``  one input feeding ``n`` operations that a ``cat`` joins
``chain``   ``n`` operations in a row at the top level, in no repeating order
``nested``  ``n // 25`` modules nested in one another, each running two ops
``loop``    a loop of ``n // 3`` iterations (``mul, add, pow``): folded
==========  ==============================================================

Stages: ``make_dot`` (``make_dot(g, render_depth=None-like full depth,
max_nodes=None)``: the projection and the DOT text), ``html`` (the page data
of ``make_html``) and ``mermaid``.  A ratio near 2 for a doubled size is
linear; near 4 is quadratic.  The script prints what it measures and exits 0.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torchrecorder  # noqa: E402
from torchrecorder.graph import Graph  # noqa: E402
from torchrecorder.nodes import LayerNode, OpNode, TensorNode  # noqa: E402
from torchrecorder.renderer import GraphvizRenderer, MermaidRenderer  # noqa: E402
from torchrecorder.renderer.html import HtmlRenderer  # noqa: E402

FULL = 1_000_000  # a render_depth deeper than any graph here


def _root(name: str) -> tuple[Graph, LayerNode, TensorNode]:
    g = Graph(name)
    x = g.insert(TensorNode("x", depth=0, parent=None, shape=(1, 8), dtype="float32", role="input"),
                 "input:x")
    root = g.insert(LayerNode(name, depth=0, parent=None, type_name="Net", path=""), name)
    assert isinstance(root, LayerNode) and isinstance(x, TensorNode)
    return g, root, x


def _op(g: Graph, parent: LayerNode, op: str, *inputs: object) -> OpNode:
    node = g.insert(OpNode(op, depth=parent.depth + 1, parent=parent.key, op=op, output_shapes=[(1, 8)]),
                    f"{parent.key}/{op}")
    for a in inputs:
        g.connect(a.key, node.key)  # type: ignore[attr-defined]
    assert isinstance(node, OpNode)
    return node


def _out(g: Graph, last: object) -> None:
    out = g.insert(TensorNode("out", depth=0, parent=None, shape=(1, 8), dtype="float32", role="output"),
                   "output:out")
    g.connect(last.key, out.key)  # type: ignore[attr-defined]


def fanout(n: int) -> Graph:
    g, root, x = _root("fanout")
    heads = [_op(g, root, "relu", x) for _ in range(n)]
    _out(g, _op(g, root, "cat", *heads))
    return g


def chain(n: int) -> Graph:
    g, root, x = _root("chain")
    last: object = x
    pick = random.Random(0)  # no period: nothing folds
    for _ in range(n):
        last = _op(g, root, pick.choice(("mul", "add", "sin", "exp", "cos", "tanh")), last)
    _out(g, last)
    return g


def nested(n: int) -> Graph:
    g, root, x = _root("nested")
    last: object = x
    parent = root
    for i in range(max(n // 25, 1)):
        layer = g.insert(LayerNode(f"m{i}", depth=parent.depth + 1, parent=parent.key, type_name="Block",
                                   path=f"{parent.path}.m{i}".lstrip(".")), f"m{i}")
        assert isinstance(layer, LayerNode)
        last = _op(g, layer, "mul", last)
        last = _op(g, layer, "add", last)
        parent = layer
    _out(g, last)
    return g


def loop(n: int) -> Graph:
    g, root, x = _root("loop")
    acc: object = x
    for _ in range(max(n // 3, 1)):
        m = _op(g, root, "mul", x)
        p = _op(g, root, "pow", m)
        acc = _op(g, root, "add", acc, p)
    _out(g, acc)
    return g


SHAPES: dict[str, Callable[[int], Graph]] = {"fanout": fanout, "chain": chain, "nested": nested, "loop": loop}


def _everything() -> dict[str, object]:
    """``max_nodes=None`` (no drawing budget) where this version of torchrecorder has one."""
    try:
        GraphvizRenderer(Graph("probe"), 1, max_nodes=None)
    except TypeError:
        return {}
    return {"max_nodes": None}


def stages(g: Graph) -> dict[str, float]:
    out: dict[str, float] = {}
    opts = _everything()
    t = time.perf_counter()
    torchrecorder.make_dot(g, FULL, **opts).source  # noqa: B018
    out["make_dot"] = time.perf_counter() - t
    t = time.perf_counter()
    MermaidRenderer(g, FULL, **opts).render()
    out["mermaid"] = time.perf_counter() - t
    t = time.perf_counter()
    HtmlRenderer(g, 1, **opts).page_data()
    out["html"] = time.perf_counter() - t
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="the smaller size (default 5000)")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes")
    args = parser.parse_args()
    print(f"{'shape':8} {'stage':9} {'n':>7} {'2n':>7} {'ratio':>6}")
    for name in args.shapes.split(","):
        small = stages(SHAPES[name](args.n))
        large = stages(SHAPES[name](2 * args.n))
        for stage, a in small.items():
            b = large[stage]
            print(f"{name:8} {stage:9} {a:6.2f}s {b:6.2f}s {b / max(a, 1e-9):6.2f}")


if __name__ == "__main__":
    main()
