"""What keeping the FLOP arguments costs ``record``: with and without, in one process.

:func:`torchrecorder.cost` counts FLOPs from what the engine keeps of each operation torch
has a FLOP formula for (``Graph.op_args``).  This times ``record`` in alternating rounds
with that on (this checkout as it is) and off (the engine's set of counted operation names
emptied for the round, so it keeps nothing), in thread CPU time, as :mod:`ab_record` does.
The ratio (on / off) is what recording pays when no cost is asked for.

    python benchmarks/ab_opargs.py --rounds 21 --models mlp-1000,gpt2-w32-L32
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
from torchrecorder.recording import engine  # noqa: E402


def main() -> None:
    args = ab_parser(__doc__ or "", "mlp-1000,gpt2-w32-L32", 21).parse_args()
    torch.set_num_threads(args.threads)
    counted = engine.COUNTED_OPS
    print(f"record, thread CPU time, median (best) of {args.rounds} alternating rounds")
    print(f"{'model':14} {'forward ms':>10} {'args off ms':>16} {'args on ms':>16} {'ratio':>6} {'us/op':>6}")
    for name in args.models.split(","):
        model, inputs = build(name)

        def run(keep: bool, model: Any = model, inputs: Any = inputs, name: str = name) -> Any:
            engine.COUNTED_OPS = counted if keep else frozenset()  # type: ignore[misc]
            try:
                return torchrecorder.record(model, name, None, input_data=inputs)
            finally:
                engine.COUNTED_OPS = counted  # type: ignore[misc]

        kept = len(run(True).op_args or {})
        fns: list[Callable[[], Any]] = [lambda m=model, i=inputs: m(*i),
                                         lambda: run(False), lambda: run(True)]
        med, best = interleaved(fns, args.rounds)
        per_op = (med[2] - med[1]) * 1e3 / kept if kept else 0.0
        print(f"{name:14} {med[0]:10.2f} {med[1]:9.2f} ({best[1]:5.1f}) {med[2]:9.2f} ({best[2]:5.1f}) "
              f"{med[2] / med[1]:6.3f} {per_op:6.2f}")


if __name__ == "__main__":
    main()
