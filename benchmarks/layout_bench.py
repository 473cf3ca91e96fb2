"""Layout time of the default drawing of the zoo's largest and loop-heavy models.

    python benchmarks/layout_bench.py                 # the five stress models of tests/zoo/stress.py
    python benchmarks/layout_bench.py --models SeriesDecoder,FarthestPointSampling --unfolded

For each model it records one forward pass and prints the recorded nodes, the
drawn nodes and edges of ``make_dot(rec)`` (the default: full depth, within the
drawing budget), whether the budget reduced it, the time to write the DOT and
the time ``dot -Tsvg`` takes to lay it out.  ``--unfolded`` also times the
drawing as it was before loops folded (``fold_repeats=False``, every module
open, no budget), stopping ``dot`` after ``--timeout`` seconds.

This is the drawing half of the benchmarks (``bench.py`` measures recording).
The script is not a test; it prints what it measures and exits 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torchrecorder  # noqa: E402
from tests.zoo.stress import CASES  # noqa: E402
from torchrecorder.errors import LargeDrawingWarning  # noqa: E402
from torchrecorder.renderer import GraphvizRenderer  # noqa: E402


def _dot(source: str, timeout: float) -> float:
    start = time.perf_counter()
    try:
        subprocess.run(["dot", "-Tsvg", "-o", os.devnull], input=source.encode(), check=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return float("inf")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(c.name for c in CASES))
    parser.add_argument("--unfolded", action="store_true", help="also time the unfolded, unbudgeted drawing")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    cases = {c.name: c for c in CASES}
    print(f"{'model':22} {'recorded':>8} {'drawn':>12} {'reduced':>7} {'DOT':>7} {'dot -Tsvg':>10}")
    for name in args.models.split(","):
        case = cases[name]
        net = case.build()
        inputs, kwargs = case.inputs()
        with torch.no_grad():
            rec = torchrecorder.record(net, name, input_data=inputs, input_kwargs=kwargs)
        variants = [("default", {})]
        if args.unfolded:
            variants.append(("unfolded", {"render_depth": None, "fold_repeats": False, "max_nodes": None}))
        for label, options in variants:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", LargeDrawingWarning)
                start = time.perf_counter()
                renderer = GraphvizRenderer(rec, **options)  # type: ignore[arg-type]
                source = renderer.render().source
                write = time.perf_counter() - start
            budget = renderer.budget
            nodes, edges = budget.size if budget is not None else (0, 0)
            reduced = "yes" if budget is not None and budget.reduced else "no"
            seconds = _dot(source, args.timeout)
            shown = f"{seconds:9.2f}s" if seconds != float("inf") else f">{args.timeout:.0f}s".rjust(10)
            print(f"{name + ('' if label == 'default' else ' ' + label):22} {len(rec.nodes):8} "
                  f"{nodes:5}n {edges:5}e {reduced:>7} {write:6.2f}s {shown}", flush=True)


if __name__ == "__main__":
    main()
