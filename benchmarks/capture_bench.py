"""What capturing operations costs, against the plain forward pass and against TorchLens.

    python benchmarks/capture_bench.py [--repeats 7] [--model gpt2-small] [--no-peers]

Prints, measured in one process with the calls interleaved (``bench.timed``: medians over
rounds that take turns), each ratio to the plain forward pass of the same model in ``eval()``
under ``torch.no_grad()``:

* ``capture(model, ops="transformer.h.*.attn/softmax")``: the attention probabilities of every
  layer (target: within 10 % of the forward pass);
* ``capture(model, ops="*")``: every operation's output (target: at most 3x);
* ``capture(model, "transformer.h.*.attn")``: the attention modules, for scale;
* with TorchLens installed: ``torchlens.trace(model, x, save=tl.func("softmax"))`` and
  ``save="all"``, the same two selections.

Each ``with`` block (hooks on and off) is inside the timed call.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench import timed
from models import build

import torchrecorder

TARGETS = {"one softmax per layer": 1.10, "every operation": 3.0}


def _fns(model: torch.nn.Module, args: tuple[Any, ...], peers: bool) -> dict[str, Callable[[], Any]]:
    def plain() -> Any:
        return model(*args)

    def ours(**kw: Any) -> Callable[[], Any]:
        def run() -> Any:
            with torchrecorder.capture(model, **kw):
                return model(*args)
        return run

    fns: dict[str, Callable[[], Any]] = {
        "forward": plain,
        "one softmax per layer": ours(ops="transformer.h.*.attn/softmax"),
        "every operation": ours(ops="*"),
        "attention modules": ours(names="transformer.h.*.attn"),
    }
    if peers:
        try:
            import torchlens as tl
        except ImportError:
            print("torchlens is not installed: no peer figures (pip install torchlens)")
        else:
            fns["torchlens: softmax"] = lambda: tl.trace(model, list(args), save=tl.func("softmax"))
            # trace() saves every layer's output by default
            fns["torchlens: every operation"] = lambda: tl.trace(model, list(args))
    return fns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gpt2-small", help="a GPT-2 model of benchmarks/models.py")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-peers", action="store_true", help="leave TorchLens out")
    opts = parser.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    model, args = build(opts.model, hf=True)
    model.eval()
    with torch.no_grad():
        fns = _fns(model, args, not opts.no_peers)
        times = timed(fns, opts.repeats)
    base = times["forward"]
    print(f"{opts.model}: plain forward {1000 * base:.1f} ms (median of {opts.repeats}, interleaved)")
    print(f"{'what':32} {'ms':>9} {'x forward':>10}  target")
    for name in fns:
        if name == "forward":
            continue
        ratio = times[name] / base
        target = TARGETS.get(name)
        verdict = "" if target is None else f"<= {target:.2f}  {'PASS' if ratio <= target else 'FAIL'}"
        print(f"{name:32} {1000 * times[name]:9.1f} {ratio:10.2f}  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
