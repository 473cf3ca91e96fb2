"""Progress of long drawing work: a ``tqdm`` bar where ``tqdm`` is installed, a line per stage
on standard error otherwise; nothing for short work.

Work counts as long from :data:`LONG` items (drawn nodes and edges, or DOT
statements to lay out); :data:`ENABLED` forces progress on (``True``) or off
(``False``) whatever the size.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Optional, TypeVar

__all__ = ["ENABLED", "LONG", "LONG_LAYOUT", "bar", "stage"]

T = TypeVar("T")

#: work of this many items or more shows its progress
LONG = 20_000
#: ``None``: by size; ``True`` / ``False``: always / never
ENABLED: Optional[bool] = None


#: a layout of this many DOT statements may take Graphviz long (the drawing budget's size)
LONG_LAYOUT = 2_500


def _on(size: int, long: int = LONG) -> bool:
    return ENABLED if ENABLED is not None else size >= long


def _tqdm() -> Optional[type]:
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


@contextmanager
def stage(what: str, size: int, long: int = LONG) -> Iterator[None]:
    """Say that ``what`` (of ``size`` items) starts and how long it took, when ``size`` is at
    least ``long``."""
    if not _on(size, long):
        yield
        return
    print(f"torchrecorder: {what} ({size:,} items) ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    yield
    print(f"torchrecorder: {what}: done in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


def bar(items: Iterable[T], total: int, what: str) -> Iterable[T]:
    """``items``, with a progress bar (or a line at the start and the end) when ``total`` is long."""
    if not _on(total):
        return items
    tqdm = _tqdm()
    if tqdm is not None:
        return tqdm(items, total=total, desc=f"torchrecorder: {what}", leave=False)
    return _lines(items, total, what)


def _lines(items: Iterable[T], total: int, what: str) -> Iterator[T]:
    with stage(what, total):
        yield from items
