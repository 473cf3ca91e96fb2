"""What the progress of long recordings costs a recording that is not long.

Run ``python benchmarks/progress_cost.py [--repeats 15] [--models tiny,gpt2-w32-L32,mlp-1000]``.

Every recording hands itself to the progress thread (``torchrecorder._progress.watch``) and
takes itself back on leaving; nothing happens on a module call or an operation.  This
script times ``record`` in one process with progress as it is by default
(``_progress.ENABLED = None``: shown only once a recording has run
``RECORD_AFTER`` seconds) against progress off (``ENABLED = False``: no watch at
all), alternating round by round, and prints the medians and their ratio (1.00: no
cost).  ``tiny`` is one ``Linear(4, 4)``: where the fixed cost of a recording weighs most.
It exits 0 whatever it measures.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,gpt2-w32-L32,mlp-1000")
    parser.add_argument("--repeats", type=int, default=15)
    opts = parser.parse_args(argv)
    sys.path[:0] = [HERE, ROOT]
    import torch
    from bench import timed
    from models import build

    import torchrecorder
    from torchrecorder import _progress

    torch.set_num_threads(1)
    print(f"{'model':<14} {'modules':>8} {'default ms':>11} {'off ms':>8} {'default/off':>12}")
    for name in opts.models.split(","):
        if name == "tiny":
            model: Any = torch.nn.Linear(4, 4)
            args: tuple[Any, ...] = (torch.randn(1, 4),)
        else:
            model, args = build(name)

        def run(enabled: bool | None, model: Any = model, args: tuple[Any, ...] = args,
                name: str = name) -> Callable[[], Any]:
            def go() -> Any:
                _progress.ENABLED = enabled
                try:
                    return torchrecorder.record(model, name, input_data=args)
                finally:
                    _progress.ENABLED = None
            return go

        # many short recordings per timed call for the tiny model: a recording is ~0.3 ms
        inner = 200 if name == "tiny" else 1

        def many(fn: Callable[[], Any], n: int = inner) -> Callable[[], None]:
            def go() -> None:
                for _ in range(n):
                    fn()
            return go

        t = timed({"default": many(run(None)), "off": many(run(False))}, opts.repeats)
        modules = sum(1 for _ in model.modules())
        print(f"{name:<14} {modules:>8} {t['default'] / inner * 1e3:>11.3f} {t['off'] / inner * 1e3:>8.3f} "
              f"{t['default'] / t['off']:>12.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
