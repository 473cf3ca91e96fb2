"""The cyclic garbage collector during a recording: it runs, over the objects the pass makes.

A recording creates some ten thousand tracked objects on a model of a few thousand
operations (nodes, edges, their dicts), all kept until the graph is done.  Every
so often those allocations trigger a full collection, and a full collection walks
every object of the process: in a process that has imported torch (and perhaps
transformers) that is hundreds of thousands of objects, about 100 ms a time, for
nothing, since the objects that existed before the pass are not the pass's garbage.

So, while a recording is active, the objects that existed before it are set aside
with :func:`gc.freeze` and put back with :func:`gc.unfreeze` when the last active
recording ends.  The collector stays on (or off) as the caller left it and still
collects everything the pass makes, reference cycles that ``forward`` leaves behind
included, so memory stays bounded however many cycles the pass makes; garbage among
the objects set aside waits until the recording ends, and it cannot grow during
the pass, since every object the pass makes is a new one.

The collector's thresholds are left as they are: garbage that ``forward`` leaves in
reference cycles (holding tensors, often) is collected at least as soon as in a plain
call (the recording's own objects count towards the thresholds too), so a recording's
peak memory is a plain call's plus its graph.  (Collecting the youngest generation ten
times less often, as an earlier version did, saved at most a few per cent of the
recording's time and let that garbage pile up ten times higher.)

What a recording is sure to keep until it ends can be made just before the old objects are
set aside (``prepare``, run with the collector paused): it is set aside with them, and never
scanned during the pass (:mod:`~torchrecorder.recording.pool`, the nodes of a model recorded
before).  Its allocations do not count towards the thresholds, so the forward's own
allocations trigger collections as they do in a plain call, or sooner.

Nothing is set aside when the process has frozen objects of its own (``gc.freeze``
called before the recording): unfreezing at the end would put theirs back too.  Objects
that code frozen *during* a recording are put back with the rest when it ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Optional

__all__ = ["old_objects_aside", "old_objects_back"]

_lock = threading.Lock()
_active = 0  # recordings active, in every thread
_froze = False  # whether the first of them set the old objects aside


def old_objects_aside(prepare: Optional[Callable[[], None]] = None) -> None:
    """Called when a recording starts: the first active one freezes the existing objects.

    Args:
        prepare: called just before they are frozen, with the collector paused, when they
            are (not otherwise): what it makes is set aside with them.  What it raises goes
            on, with nothing set aside.
    """
    global _active, _froze
    with _lock:
        if _active == 0:
            froze = gc.get_freeze_count() == 0
            if froze:
                enabled = gc.isenabled()
                gc.disable()  # (the collector back on once prepare's objects are set aside)
                try:
                    if prepare is not None:
                        prepare()
                    gc.freeze()
                finally:
                    if enabled:
                        gc.enable()
            _froze = froze
        _active += 1


def old_objects_back() -> None:
    """Called when a recording ends, whatever happened: the last one unfreezes what it froze."""
    global _active, _froze
    with _lock:
        if _active == 0:
            return
        _active -= 1
        if _active == 0 and _froze:
            _froze = False
            gc.unfreeze()
