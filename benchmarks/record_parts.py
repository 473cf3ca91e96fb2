"""Where ``record``'s per-event time goes: the inclusive thread CPU time of the engine's methods
that run once per operation or module call.

Each method below is wrapped (in this process only) by a timer that adds its inclusive thread CPU
time and its calls; a few warm-up recordings come first.  The wrappers cost about a microsecond
per call (printed), so the per-call figures are upper bounds; compare methods with each other,
not with ``ab_record.py``'s totals.

    python benchmarks/record_parts.py [--model gpt2-w32-L32] [--rounds 5]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]

import torch  # noqa: E402
from models import build  # noqa: E402

import torchrecorder  # noqa: E402
from torchrecorder.recording import calls as module_calls  # noqa: E402
from torchrecorder.recording import engine, live  # noqa: E402

#: (owner, attribute name) of what is timed: the engine's per-operation and per-call methods, the
#: node makers they call, and the module-level helpers the engine calls by name
TIMED: tuple[tuple[Any, str], ...] = (
    (engine.Engine, "record_op"), (engine.Engine, "_pre_hook"), (engine.Engine, "_enter"),
    (engine.Engine, "_global_post_hook"), (engine.Engine, "_exit"), (engine.Engine, "finish"),
    (engine.Engine, "_index_modules"), (live.LiveObjects, "param_node"),
    (live.LiveObjects, "tensor_node"), (engine, "caller"), (engine, "shape_tuple"),
    (engine, "keep"), (live, "tensor_meta"), (module_calls, "caller"), (module_calls, "shape_tuple"),
    (module_calls, "tensor_meta"),
)


def timed(fn: Callable[..., Any], name: str, spent: collections.Counter[str],
          calls: collections.Counter[str]) -> Callable[..., Any]:
    """``fn``, adding its inclusive thread CPU time (ns) and each call to ``spent`` and ``calls``."""
    clock = time.thread_time_ns

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += clock() - t0
            calls[name] += 1

    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gpt2-w32-L32", help="a name from benchmarks/models.py")
    parser.add_argument("--rounds", type=int, default=5, help="timed recordings (default 5)")
    parser.add_argument("--threads", type=int, default=1, help="torch's intra-op threads (default 1)")
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    model, args = build(opts.model, False)
    spent: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    for owner, name in TIMED:
        if hasattr(owner, name):
            setattr(owner, name, timed(getattr(owner, name), name, spent, calls))
    for _ in range(2):
        torchrecorder.record(model, opts.model, input_data=args)
    spent.clear()
    calls.clear()
    t0 = time.thread_time_ns()
    for _ in range(opts.rounds):
        torchrecorder.record(model, opts.model, input_data=args)
    total = (time.thread_time_ns() - t0) / opts.rounds
    probe = timed(lambda: None, "probe", collections.Counter(), collections.Counter())
    t0 = time.thread_time_ns()
    for _ in range(10000):
        probe()
    overhead = (time.thread_time_ns() - t0) / 10000
    print(f"{opts.model}: record {total / 1e6:.1f} ms thread CPU time (timers included), mean of "
          f"{opts.rounds}; a timed call costs about {overhead / 1e3:.2f} us more")
    print(f"{'method':20s} {'ms/record':>10s} {'calls':>7s} {'us/call':>8s}")
    for name, ns in spent.most_common():
        n = calls[name] / opts.rounds
        print(f"{name:20s} {ns / opts.rounds / 1e6:10.2f} {n:7.0f} {ns / calls[name] / 1e3:8.2f}")


if __name__ == "__main__":
    main()
