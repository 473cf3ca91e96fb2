"""Which measure of a drawing predicts how long ``dot`` takes to lay it out.

    python benchmarks/layout_measures.py                       # the stress zoo, a few depths each
    python benchmarks/layout_measures.py --models PointNet2 --depths default --timeout 120

For each model of the stress zoo (``tests/zoo/stress.py``) and each drawing
asked for (``default``: ``make_dot(rec)``; an int: that ``render_depth``,
budget off) it prints the budget's measures of the projection -- drawn nodes,
edges, ranks passed by edges (``budget.edge_spans``), the layout's rank
nodes (``budget.layout_nodes``: boxes, plus one virtual node per rank an edge
passes, ranks doubled as ``dot`` does when edges carry labels) -- next to what
``dot -v`` reports of its slowest phase, the network simplex that places the
nodes left to right (its graph's nodes and iterations), and the wall time of
``dot -Tsvg``.  The measure that tracks the time is the one the budget bounds.

Timings depend on the machine and its load; the script is not a test and exits 0.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torchrecorder  # noqa: E402
from tests.zoo.stress import CASES  # noqa: E402
from torchrecorder.projection import budget  # noqa: E402
from torchrecorder.renderer import GraphvizRenderer  # noqa: E402

SIMPLEX = re.compile(r"network simplex: (\d+) nodes (\d+) edges (\d+) iter")


def _dot(source: str, timeout: float) -> tuple[float, int, int]:
    """``(seconds, nodes, iterations)`` of ``dot -v -Tsvg``'s largest network simplex."""
    start = time.perf_counter()
    try:
        done = subprocess.run(["dot", "-v", "-Tsvg", "-o", os.devnull], input=source.encode(),
                              capture_output=True, check=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return float("inf"), 0, 0
    seconds = time.perf_counter() - start
    runs = [(int(n), int(i)) for n, _, i in SIMPLEX.findall(done.stderr.decode(errors="replace"))]
    nodes, iterations = max(runs, default=(0, 0))
    return seconds, nodes, iterations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(c.name for c in CASES))
    parser.add_argument("--depths", default="default,1,2",
                        help="'default', render depths, or uN: depth N unfolded")
    parser.add_argument("--timeout", type=float, default=90.0)
    args = parser.parse_args()
    cases = {c.name: c for c in CASES}
    print(f"{'model':22} {'depth':>7} {'nodes':>5} {'edges':>5} {'spans':>5} {'layout':>6} | "
          f"{'simplex':>7} {'iter':>6} {'dot -Tsvg':>9}")
    for name in args.models.split(","):
        case = cases[name]
        inputs, kwargs = case.inputs()
        with torch.no_grad():
            rec = torchrecorder.record(case.build(), name, input_data=inputs, input_kwargs=kwargs)
        for depth in args.depths.split(","):
            options: dict[str, object] = {}
            if depth != "default":  # "u3": depth 3 with nothing folded
                options = {"render_depth": int(depth.lstrip("u")), "max_nodes": None}
                if depth.startswith("u"):
                    options["fold_repeats"] = False
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                renderer = GraphvizRenderer(rec, **options)  # type: ignore[arg-type]
                source = renderer.render().source
            p = renderer.projection
            nodes, edges = budget.drawn_size(p)
            spans = budget.edge_spans(p)
            layout = budget.layout_spans(p)
            seconds, simplex, iterations = _dot(source, args.timeout)
            shown = f"{seconds:8.1f}s" if seconds != float("inf") else f">{args.timeout:.0f}s".rjust(9)
            print(f"{name:22} {depth:>7} {nodes:5} {edges:5} {spans:5} {layout:6} | "
                  f"{simplex:7} {iterations:6} {shown}", flush=True)


if __name__ == "__main__":
    main()
