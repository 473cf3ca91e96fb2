"""What the progress of long recordings costs a recording, shown or not.

Run ``python benchmarks/progress_cost.py [--repeats 15] [--models tiny,gpt2-w32-L32,mlp-1000,mlp-20k]``.

Every recording hands itself to the progress thread (``torchrecorder._progress.watch``) and
takes itself back on leaving; nothing happens on a module call or an operation.  This
script times ``record`` in one process, alternating round by round:

* ``default``: progress as it is by default (``_progress.ENABLED = None``: shown only once
  a recording has run ``RECORD_AFTER`` seconds, which none of these does);
* ``off``: progress off (``ENABLED = False``: no watch at all);
* ``shown``: the bar shown from the start and updated every ``POLL`` seconds
  (``RECORD_AFTER = 0``; written to ``os.devnull``), for every model but ``tiny``;

and prints the medians and the ratios to ``off`` (1.00: no cost), and ``off/off``: ``off``
timed a second time, against itself, which says how far the machine's noise goes.  ``tiny`` is one
``Linear(4, 4)`` (where the fixed cost of a recording weighs most, timed 200 recordings at a
time); ``mlp-20k`` is a ``Sequential`` of 10,000 ``(Linear(8, 8), ReLU)`` pairs (20,001
modules, seconds to record; a third of the repeats).  It exits 0 whatever it measures.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,gpt2-w32-L32,mlp-1000,mlp-20k")
    parser.add_argument("--repeats", type=int, default=15)
    opts = parser.parse_args(argv)
    sys.path[:0] = [HERE, ROOT]
    import torch
    from bench import timed
    from models import build

    import torchrecorder
    from torchrecorder import _progress

    torch.set_num_threads(1)
    after = _progress.RECORD_AFTER
    print(f"{'model':<14} {'modules':>8} {'default ms':>11} {'off ms':>9} {'shown ms':>9} "
          f"{'default/off':>12} {'shown/off':>10} {'off/off':>10}")
    for name in opts.models.split(","):
        repeats = opts.repeats
        if name == "tiny":
            model: Any = torch.nn.Linear(4, 4)
            args: tuple[Any, ...] = (torch.randn(1, 4),)
        elif name == "mlp-20k":
            model = torch.nn.Sequential(*[m for _ in range(10_000)
                                          for m in (torch.nn.Linear(8, 8), torch.nn.ReLU())])
            args = (torch.randn(1, 8),)
            repeats = max(3, repeats // 3)
        else:
            model, args = build(name)

        def run(enabled: bool | None, record_after: float, model: Any = model,
                args: tuple[Any, ...] = args, name: str = name) -> Callable[[], Any]:
            def go() -> Any:
                _progress.ENABLED, _progress.RECORD_AFTER = enabled, record_after
                try:
                    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
                        return torchrecorder.record(model, name, input_data=args)
                finally:
                    _progress.ENABLED, _progress.RECORD_AFTER = None, after
            return go

        inner = 200 if name == "tiny" else 1  # a tiny recording takes about 0.2 ms

        def many(fn: Callable[[], Any], n: int = inner) -> Callable[[], None]:
            def go() -> None:
                for _ in range(n):
                    fn()
            return go

        fns = {"off": many(run(False, after)), "default": many(run(None, after)),
               "off2": many(run(False, after))}
        if name != "tiny":
            fns["shown"] = run(None, 0.0)
        t = {k: v / inner * 1e3 for k, v in timed(fns, repeats).items()}
        modules = sum(1 for _ in model.modules())
        shown = f"{t['shown']:>9.3f}" if "shown" in t else f"{'':>9}"
        ratio = f"{t['shown'] / t['off']:>10.3f}" if "shown" in t else f"{'':>10}"
        print(f"{name:<14} {modules:>8} {t['default']:>11.3f} {t['off']:>9.3f} {shown} "
              f"{t['default'] / t['off']:>12.3f} {ratio} {t['off2'] / t['off']:>10.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
