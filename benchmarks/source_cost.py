"""What recording the line of code of every node costs: ``record(..., source=True)`` (the
default) against ``source=False``, in one process, in alternating rounds.

Each round is timed in thread CPU time (``time.thread_time``), which waiting for a core does
not count.  Prints, per model, the plain forward pass, both recordings (median and best), the
record / forward ratio of each, and how much the ratio moves with the lines on.

    python benchmarks/source_cost.py --rounds 15 --models gpt2-small,gpt2-w32-L32
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]

import torch  # noqa: E402
from ab_record import interleaved  # noqa: E402
from ab_render import ab_parser  # noqa: E402
from models import build  # noqa: E402

import torchrecorder  # noqa: E402


def main() -> None:
    args = ab_parser(__doc__ or "", "gpt2-small,gpt2-w32-L32", 15).parse_args()
    torch.set_num_threads(args.threads)
    print(f"thread CPU time, median (best) of {args.rounds} alternating rounds")
    print(f"{'model':14} {'forward ms':>10} {'source=False ms':>18} {'source=True ms':>18} "
          f"{'ratio off':>9} {'ratio on':>9} {'moves':>7}")
    for name in args.models.split(","):
        model, inputs = build(name)
        fns: list[Callable[[], Any]] = [
            lambda m=model, i=inputs: m(*i),
            lambda m=model, i=inputs: torchrecorder.record(m, "net", None, input_data=i, source=False),
            lambda m=model, i=inputs: torchrecorder.record(m, "net", None, input_data=i, source=True),
        ]
        med, best = interleaved(fns, args.rounds)
        off, on = med[1] / med[0], med[2] / med[0]
        print(f"{name:14} {med[0]:10.2f} {med[1]:10.2f} ({best[1]:5.1f}) {med[2]:10.2f} ({best[2]:5.1f}) "
              f"{off:9.3f} {on:9.3f} {(on / off - 1) * 100:+6.1f}%")


if __name__ == "__main__":
    main()
