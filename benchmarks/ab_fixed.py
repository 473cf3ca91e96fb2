"""A/B timing of ``record``'s fixed set-up costs: this checkout against a git revision, in one process.

The parts that every recording pays whatever its model does, timed apart from the pass
(which scatters by far more than they cost): the model check (``check_model``: one walk,
the model's stamp compared with its memo's) and the model state kept and restored
(``model_state_kept`` on the check's walk, with no pass inside).  The revision's package
is imported under another name (:func:`ab_render.load_base`); each round times, in thread
CPU time, a check followed by a state kept and restored, for the revision and for this
checkout in turn.  Prints the medians of each part and their ratio (this / revision).

    python benchmarks/ab_fixed.py --base main --models gpt2-w32-L32,mlp-1000 --rounds 301
"""

from __future__ import annotations

import importlib
import os
import statistics
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]

import torch  # noqa: E402
from ab_render import ab_parser, load_base  # noqa: E402
from models import build  # noqa: E402

import torchrecorder  # noqa: E402
from torchrecorder.recording import meta, state  # noqa: E402


def _parts(pkg_meta: Any, pkg_state: Any, model: Any) -> tuple[float, float]:
    """Thread CPU seconds of one model check and of one state kept and restored."""
    start = time.thread_time()
    walk = pkg_meta.check_model(model)
    mid = time.thread_time()
    with pkg_state.model_state_kept(model, walk):
        pass
    return mid - start, time.thread_time() - mid


def main() -> None:
    parser = ab_parser(__doc__ or "", "gpt2-w32-L32,mlp-1000", 301, base=True)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        base = load_base(args.base, tmp)
        sides = [(importlib.import_module(f"{base.__name__}.recording.meta"),
                  importlib.import_module(f"{base.__name__}.recording.state")), (meta, state)]
        print(f"check and state, thread CPU time, median of {args.rounds} alternating rounds, "
              f"microseconds; ratio = this checkout / {args.base}")
        print(f"{'model':14} {'check base':>10} {'this':>8} {'ratio':>6} {'state base':>11} {'this':>8} "
              f"{'ratio':>6}")
        for name in args.models.split(","):
            model, inputs = build(name)
            base.record(model, name, None, input_data=inputs)  # each side's memo made
            torchrecorder.record(model, name, None, input_data=inputs)
            times: list[list[tuple[float, float]]] = [[], []]
            for _ in range(args.rounds):
                for i, (m, s) in enumerate(sides):
                    times[i].append(_parts(m, s, model))
            med = [[statistics.median(t[k] for t in side) * 1e6 for k in (0, 1)] for side in times]
            print(f"{name:14} {med[0][0]:10.1f} {med[1][0]:8.1f} {med[1][0] / med[0][0]:6.3f} "
                  f"{med[0][1]:11.1f} {med[1][1]:8.1f} {med[1][1] / med[0][1]:6.3f}")


if __name__ == "__main__":
    main()
