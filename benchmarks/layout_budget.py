"""Where Graphviz's ``dot`` stops laying out in seconds: the measurement behind the drawing budget.

    python benchmarks/layout_budget.py                    # every shape, sizes 250 ... 4000
    python benchmarks/layout_budget.py --sizes 500,1000,2000 --shapes loop --timeout 60

For drawings of growing size it prints the drawn nodes and edges and the
time ``dot -Tsvg`` takes (killed after ``--timeout`` seconds), and then the
largest size of each shape that laid out in under ``--limit`` seconds (5 by
default) next to the budget in force
(:data:`torchrecorder.projection.budget.MAX_NODES` / ``MAX_EDGES``).

The drawings are ``make_dot(..., max_nodes=None)`` of recorded models, so the
labels, clusters and edge labels are those of real drawings:

==========  ==================================================================
``loop``    a series evaluated in a Python loop (``mul, pow, add``), unfolded
``mlp``     an MLP of ``Linear, ReLU`` pairs inside ``Sequential`` blocks of 8
``decoder`` transformer decoder layers (attention and MLP) at full depth, unfolded
==========  ==================================================================

Timings depend on the machine and its load: run it on a quiet machine before
changing the budget.  The script is not a test; it exits 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torchrecorder  # noqa: E402
from torchrecorder.projection.budget import MAX_EDGES, MAX_NODES, MAX_SPANS  # noqa: E402


class Series(nn.Module):
    """``acc += (x * c) ** 2`` evaluated ``n`` times in a loop."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        acc = torch.zeros_like(x)
        for _ in range(self.n):
            acc = acc + (x * 0.5) ** 2
        return acc


class Decoder(nn.Module):
    """``n`` pre-norm decoder layers (attention and MLP), written out."""

    def __init__(self, n: int, d: int = 16) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(d, 2, 32, batch_first=True, norm_first=True)
                                    for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def _loop(nodes: int) -> tuple[nn.Module, tuple[int, ...]]:
    return Series(max(nodes // 3, 1)), (1, 4)


def _mlp(nodes: int) -> tuple[nn.Module, tuple[int, ...]]:
    blocks = max(nodes // 18, 1)
    return nn.Sequential(*[nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(8, 8), nn.ReLU())])
                           for _ in range(blocks)]), (1, 8)


def _decoder(nodes: int) -> tuple[nn.Module, tuple[int, ...]]:
    return Decoder(max(nodes // 30, 1)).eval(), (1, 4, 16)


SHAPES: dict[str, Callable[[int], tuple[nn.Module, tuple[int, ...]]]] = {
    "loop": _loop, "mlp": _mlp, "decoder": _decoder}


def measure(shape: str, size: int, timeout: float) -> tuple[int, int, int, float]:
    """``(drawn nodes, drawn edges, ranks the edges pass, seconds of dot -Tsvg)`` (``inf`` past
    ``timeout``)."""
    net, shapes = SHAPES[shape](size)
    with torch.no_grad():
        rec = torchrecorder.record(net, shape, shapes, unfuse_fast_paths=True)
    renderer = torchrecorder.renderer.GraphvizRenderer(rec, None, fold_repeats=False, max_nodes=None)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        source = renderer.render().source
    budget = renderer.budget
    nodes, edges = budget.size if budget is not None else (0, 0)
    spans = budget.spans if budget is not None else 0
    start = time.perf_counter()
    try:
        subprocess.run(["dot", "-Tsvg", "-o", os.devnull], input=source.encode(), check=True,
                       timeout=timeout)
    except subprocess.TimeoutExpired:
        return nodes, edges, spans, float("inf")
    return nodes, edges, spans, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="250,500,1000,1500,2000,3000,4000",
                        help="approximate drawn nodes, comma-separated")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before dot is stopped")
    parser.add_argument("--limit", type=float, default=5.0, help="the layout time the budget aims at")
    args = parser.parse_args()
    print(f"{'shape':8} {'nodes':>6} {'edges':>6} {'spans':>7} {'dot -Tsvg':>10}")
    largest: dict[str, tuple[int, int, int]] = {}
    for shape in args.shapes.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            nodes, edges, spans, seconds = measure(shape, size, args.timeout)
            print(f"{shape:8} {nodes:6} {edges:6} {spans:7} {seconds:9.2f}s", flush=True)
            if seconds <= args.limit:
                largest[shape] = (nodes, edges, spans)
            elif seconds == float("inf"):
                break
    for shape, (nodes, edges, spans) in largest.items():
        print(f"{shape}: laid out in under {args.limit:g} s up to {nodes} nodes, {edges} edges, "
              f"{spans} ranks passed")
    print(f"budget in force: {MAX_NODES} nodes, {MAX_EDGES} edges, {MAX_SPANS} ranks passed "
          "(budget.edge_spans)")


if __name__ == "__main__":
    main()
