"""Which measure of a drawing predicts how long ``dot`` takes to lay it out.

    python benchmarks/layout_measures.py                       # the stress zoo, a few depths each
    python benchmarks/layout_measures.py --models PointNet2 --depths default --timeout 120

For each model of the stress zoo (``tests/zoo/stress.py``) and each drawing
asked for (``default``: ``make_dot(rec)``; an int: that ``render_depth``,
budget off; ``uN``: depth N with nothing folded) it prints the budget's
measures of the projection -- drawn nodes, edges, the ranks the drawn edges
pass (``budget.edge_spans``) and the ranks passed once the invisible edges
that rank each cluster's title are counted too (``budget.layout_spans``) --
next to what ``dot -v`` reports of its slowest phase, the network simplex that
places the nodes left to right (its graph's nodes and iterations), and the
wall time of ``dot -Tsvg``.  The measure that tracks the time is the one the
budget bounds.

Run once on 2026-11-27 on the loaded 2-core machine (``--depths default,1,2``
and ``--models DartsSupernet,Transformer48,YoloStyle --depths u2,u3,3``)::

    model          depth nodes edges spans layout | simplex   iter  dot -Tsvg
    PointNet2    default   197   270  1271   8690 |   19687   8434     24.3s
    PointNet2          2   238   354  2745  12978 |       -      -      >60s
    DartsSupernet     u3   788  1196  7940   4723 |   21088  10913     27.8s
    Transformer48     u3   776   822   720    913 |    7675   4236      1.5s
    YoloStyle    default   362   303   631   1040 |    6705   3648      1.1s
    DartsSupernet     u2    76   124   306    605 |    2040    504      0.4s

(``layout`` as the budget now counts it; the PointNet2 rows were taken before
its default drawing was reduced, the default being full depth then.)  Boxes
and drawn edges alone do not separate the 24 s PointNet++ from the 1.5 s
transformer; the ranks passed with the title edges do, as the drawn edges'
spans do for the DARTS cells.

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
