"""The wall time of each module call of a recording (``record(..., timing=True)``).

A :class:`CallTimer` wraps a recording engine's hooks and its ``record_op``: it notes
when each call's own code starts (after the engine's pre-hook) and ends (before its
post-hook), and how long the engine's own work took in between (the hooks of the calls
inside, the recording of every operation).  A call's time is its wall time less that
work.  What is not subtracted is what the timer cannot see from inside: torch handing
each operation to the recorder's function mode and back (about a microsecond per
operation on a desktop CPU); :attr:`CallTimer.subtracted` says how much was.
"""

from __future__ import annotations

from time import perf_counter
from typing import Any, Optional

from ..graph import Graph
from ..nodes import LayerNode

__all__ = ["CallTimer"]


class CallTimer:
    """Times the module calls an engine records into ``graph.call_times`` (seconds by call key).

    Attributes:
        subtracted: seconds of the recorder's own work subtracted from the calls' times.
    """

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.subtracted = 0.0
        self._own = 0.0  # the recorder's own work so far, in seconds
        self._starts: dict[int, tuple[float, float]] = {}  # id(call) -> (start, own work then)
        graph.call_times = {}
        graph.timing_subtracted = 0.0

    def install(self, engine: Any) -> None:
        """Wrap ``engine``'s hooks and ``record_op`` (before its hooks are registered)."""
        record_op, pre_hook, post_hook = engine.record_op, engine._pre_hook, engine._global_post_hook
        stack: list[LayerNode] = engine._stack
        times = self.graph.call_times
        starts = self._starts

        def timed_record_op(*args: Any) -> None:
            t = perf_counter()
            try:
                record_op(*args)
            finally:
                self._own += perf_counter() - t

        def timed_pre_hook(module: Any, args: Any, kwargs: Any, script: bool = False) -> None:
            t = perf_counter()
            depth = len(stack)
            try:
                pre_hook(module, args, kwargs, script)
            finally:
                now = perf_counter()
                self._own += now - t
                if len(stack) > depth:  # a call opened: its own code runs from now
                    starts[id(stack[-1])] = (now, self._own)

        def timed_post_hook(module: Any, args: Any, outputs: Any) -> Any:
            t = perf_counter()
            call: Optional[LayerNode] = stack[-1] if stack else None
            try:
                return post_hook(module, args, outputs)
            finally:
                if call is not None and call.fn is module and times is not None:
                    start = starts.pop(id(call), None)
                    if start is not None:
                        inside = self._own - start[1]
                        times[call.key] = max(0.0, t - start[0] - inside)
                        if call.depth == 0:
                            self.subtracted += inside
                            self.graph.timing_subtracted = self.subtracted
                self._own += perf_counter() - t

        engine.record_op = timed_record_op
        engine._pre_hook = timed_pre_hook
        engine._global_post_hook = timed_post_hook
