"""What Python's cyclic garbage collector costs a recording, and what the recording leaves it.

For one model of ``models.py`` (``gpt2-w32-L32`` by default), after a few warm-up recordings:

* the collections that run during each ``record`` (counted and timed per generation through
  :data:`gc.callbacks`), beside those of the plain forward pass (none on the small models: its
  own objects never reach the youngest generation's threshold);
* ``record`` alternating with ``record`` run with the collector off (``gc.disable()`` around it,
  thread CPU time, medians): the most any change to the recording's objects could save.  This
  is a measurement, not an option: ``recording/collector.py`` explains why the recording leaves
  the collector on and its thresholds alone;
* the objects the collector tracks that a finished recording keeps, by type (its graph).

Every tracked object the pass creates and keeps until it ends (nodes, their lists, the live-
object entries, edges, kept ``grad_fn`` s) counts towards the youngest generation's threshold,
so the collections follow the size of the recording; removing a thousand of them saves about
one collection of the youngest generation (see the README's notes on issue 38).

    python benchmarks/gc_cost.py [--model gpt2-w32-L32] [--rounds 15]

Like every script here it asserts nothing and exits 0 whatever it measures.
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import statistics
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]

import torch  # noqa: E402
from models import build  # noqa: E402

import torchrecorder  # noqa: E402


class Collections:
    """Counts and times the collections of each generation while installed in ``gc.callbacks``."""

    def __init__(self) -> None:
        self.started = 0
        self.times: dict[int, list[float]] = collections.defaultdict(list)

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = time.perf_counter_ns()
        else:
            self.times[info["generation"]].append((time.perf_counter_ns() - self.started) / 1e6)

    def watch(self, fn: Any, rounds: int) -> dict[int, list[float]]:
        """Run ``fn`` ``rounds`` times with this callback installed; the times by generation."""
        self.times.clear()
        gc.callbacks.append(self)
        try:
            for _ in range(rounds):
                fn()
        finally:
            gc.callbacks.remove(self)
        return dict(self.times)


def _without_collector(fn: Any) -> Any:
    """``fn`` run with the collector off (put back as it was)."""
    def run() -> Any:
        was = gc.isenabled()
        gc.disable()
        try:
            return fn()
        finally:
            if was:
                gc.enable()
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gpt2-w32-L32")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1, help="torch's intra-op threads (default 1)")
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    model, args = build(opts.model)

    def record() -> Any:
        return torchrecorder.record(model, opts.model, input_data=args)

    for _ in range(3):
        record()
    watcher = Collections()
    print(f"{opts.model}, {opts.rounds} recordings; collector thresholds {gc.get_threshold()}")
    for what, fn in (("record", record), ("plain forward", lambda: model(*args))):
        times = watcher.watch(fn, opts.rounds)
        parts = [f"gen {g}: {len(t) / opts.rounds:.1f} x {statistics.median(t):.3f} ms"
                 for g, t in sorted(times.items())] or ["no collection"]
        total = sum(sum(t) for t in times.values()) / opts.rounds
        print(f"  {what:14s} {total:6.2f} ms collecting per call ({'; '.join(parts)})")

    runs: dict[str, list[float]] = {"collector on": [], "collector off": []}
    fns = {"collector on": record, "collector off": _without_collector(record)}
    for _ in range(opts.rounds):
        for name, fn in fns.items():
            start = time.thread_time()
            fn()
            runs[name].append(time.thread_time() - start)
    on, off = (statistics.median(runs[k]) * 1e3 for k in ("collector on", "collector off"))
    print(f"  record, thread CPU medians: collector on {on:.2f} ms, off {off:.2f} ms "
          f"(the collector's share {100 * (on - off) / on:.1f} %)")

    gc.collect()
    before = collections.Counter(type(o).__name__ for o in gc.get_objects())
    rec = record()
    gc.collect()
    after = collections.Counter(type(o).__name__ for o in gc.get_objects())
    kept = after - before
    top = ", ".join(f"{name} {n}" for name, n in kept.most_common(8))
    print(f"  tracked objects a recording keeps: {sum(kept.values())} ({top}); "
          f"{len(rec.nodes)} nodes, {len(rec.links)} edges")


if __name__ == "__main__":
    main()
