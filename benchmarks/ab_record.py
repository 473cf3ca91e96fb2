"""A/B timing of ``record``: this checkout against a git revision, in one process.

As :mod:`ab_render` does for ``make_dot``: the revision's package is imported under
another name (:func:`ab_render.load_base`), both record the same model in alternating
rounds, and each round is timed in thread CPU time (``time.thread_time``), which
waiting for a core does not count.  Prints, per model, the median and best time of
each, their ratio (this checkout / the revision) and the plain forward pass beside them.

    python benchmarks/ab_record.py --base main --rounds 31
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]

import torch  # noqa: E402
from ab_render import ab_parser, load_base  # noqa: E402
from models import build  # noqa: E402

import torchrecorder  # noqa: E402


def interleaved(fns: list[Callable[[], Any]], rounds: int) -> tuple[list[float], list[float]]:
    """Each of ``fns`` once to warm up, then ``rounds`` rounds of each in turn, timed in thread
    CPU time: the median and the best of each, in milliseconds."""
    times: list[list[float]] = [[] for _ in fns]
    for fn in fns:
        fn()  # warm-up
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = time.thread_time()
            fn()
            times[i].append(time.thread_time() - start)
    return [statistics.median(t) * 1e3 for t in times], [min(t) * 1e3 for t in times]


def main() -> None:
    parser = ab_parser(__doc__ or "", "gpt2-w32-L32,gpt2-small,mlp-1000", 31, base=True)
    parser.add_argument("--dot", action="store_true", help="time record + make_dot(...).source")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        base = load_base(args.base, tmp)
        what = "record + make_dot(...).source" if args.dot else "record"
        print(f"{what}, thread CPU time, median (best) of {args.rounds} alternating rounds; "
              f"ratio of medians = this checkout / {args.base}")
        print(f"{'model':14} {'forward ms':>10} {args.base + ' ms':>16} {'this ms':>16} {'ratio':>6}")
        for name in args.models.split(","):
            model, inputs = build(name)

            def run(pkg: Any, model: Any = model, inputs: Any = inputs, name: str = name) -> None:
                rec = pkg.record(model, name, None, input_data=inputs)
                if args.dot:
                    pkg.make_dot(rec).source  # noqa: B018

            fns: list[Callable[[], Any]] = [lambda m=model, i=inputs: m(*i),
                                             lambda: run(base), lambda: run(torchrecorder)]
            med, best = interleaved(fns, args.rounds)
            print(f"{name:14} {med[0]:10.2f} {med[1]:9.2f} ({best[1]:5.1f}) {med[2]:9.2f} ({best[2]:5.1f}) "
                  f"{med[2] / med[1]:6.3f}")


if __name__ == "__main__":
    main()
