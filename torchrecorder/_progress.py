"""Progress of long work, shown only where someone watches it: on a terminal a ``tqdm`` bar
where ``tqdm`` is installed (lines on standard error otherwise), in a notebook a ``tqdm``
widget; where standard error goes to a pipe, a file or a CI log, one line per stage at most,
when it ends; nothing for short work.

Drawing work counts as long from :data:`LONG` items (drawn nodes and edges, or
DOT statements to lay out).  A recording counts as long once it has run
:data:`RECORD_AFTER` seconds: one daemon thread, shared by every recording of
the process, watches it then and reads its counters a few times a second (see
:func:`watch`); the recording itself does no work for it on any module call or
operation.  :data:`ENABLED` forces progress on (``True``: shown from the start,
whatever the size or time) or off (``False``) for both; where it is ``None``, the
environment variable ``TORCHRECORDER_PROGRESS`` does (``1`` / ``0``).  :data:`INTERACTIVE`
says whether someone watches (``None``: a notebook, or a standard error that is a terminal).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Optional, TypeVar

__all__ = ["ENABLED", "ENV", "IDLE_EXIT", "INTERACTIVE", "LINE_EVERY", "LONG", "LONG_LAYOUT", "POLL",
           "RECORD_AFTER", "Counts", "Watch", "bar", "forced", "hold", "interactive", "plural", "stage",
           "unwatch", "watch"]

T = TypeVar("T")

#: work of this many items or more shows its progress
LONG = 20_000
#: ``None``: by size (drawing) or time (recording), unless :data:`ENV` says; ``True`` /
#: ``False``: always / never
ENABLED: Optional[bool] = None
#: the environment variable that forces progress on (``1``, ``true``, ``yes``, ``on``) or off
#: (``0``, ``false``, ``no``, ``off``) where :data:`ENABLED` is ``None``
ENV = "TORCHRECORDER_PROGRESS"
#: ``None``: bars where someone watches (a notebook, a terminal); ``True`` / ``False``: as if
#: standard error were a terminal / a file
INTERACTIVE: Optional[bool] = None

_ON = frozenset(("1", "true", "yes", "on"))
_OFF = frozenset(("0", "false", "no", "off"))
_warned_env: set[str] = set()


def forced() -> Optional[bool]:
    """:data:`ENABLED`, or what ``TORCHRECORDER_PROGRESS`` says where it is ``None`` (a value
    it does not know is warned about once and ignored)."""
    if ENABLED is not None:
        return ENABLED
    value = os.environ.get(ENV, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    if value and value not in _warned_env:
        _warned_env.add(value)
        import warnings

        warnings.warn(f"{ENV}={os.environ[ENV]!r} is neither 1 nor 0 (nor true/false, yes/no, on/off): "
                      "progress is shown as if it were not set", RuntimeWarning, stacklevel=3)
    return None


def interactive() -> bool:
    """Whether someone watches standard error: :data:`INTERACTIVE` if set, else whether this
    is a Jupyter kernel (``tqdm.auto`` draws a widget there) or standard error is a terminal."""
    if INTERACTIVE is not None:
        return INTERACTIVE
    shell = sys.modules.get("IPython")
    if shell is not None and "ipykernel" in sys.modules:
        try:
            ip = shell.get_ipython()
        except Exception:
            ip = None
        if ip is not None and type(ip).__name__ == "ZMQInteractiveShell":
            return True
    try:
        return bool(sys.stderr.isatty())
    except Exception:  # no stderr, or a closed one
        return False


#: a layout of this many DOT statements may take Graphviz long (the drawing budget's size)
LONG_LAYOUT = 2_500


def _on(size: int, long: int = LONG) -> bool:
    force = forced()
    return force if force is not None else size >= long


def _tqdm() -> Optional[type]:
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


_bar_class: Optional[type] = None


def _bar_cls() -> Optional[type]:
    """``tqdm.auto.tqdm`` without its monitor thread (progress is updated from here), or ``None``."""
    global _bar_class
    tqdm = _tqdm()
    if tqdm is None:
        return None
    if _bar_class is None or _bar_class.__bases__[0] is not tqdm:
        _bar_class = type("RecordingBar", (tqdm,), {"monitor_interval": 0})
    return _bar_class


@contextmanager
def stage(what: str, size: int, long: int = LONG) -> Iterator[None]:
    """Say that ``what`` (of ``size`` items) starts and how long it took, when ``size`` is at
    least ``long``: two lines where someone watches (:func:`interactive`), one at the end
    elsewhere."""
    if not _on(size, long):
        yield
        return
    watched = interactive()
    if watched:
        _line(f"{what} ({size:,} items) ...")
    start = time.perf_counter()
    yield
    items = "" if watched else f" ({size:,} items)"
    _line(f"{what}{items}: done in {time.perf_counter() - start:.1f} s")


def bar(items: Iterable[T], total: int, what: str, size: Optional[int] = None) -> Iterable[T]:
    """``items`` (``total`` of them), with a progress bar (or a line at the start and the end)
    when ``size`` (default: ``total``), the measure of the whole work, is long."""
    if not _on(total if size is None else size):
        return items
    tqdm = _tqdm() if interactive() else None
    if tqdm is not None:
        return tqdm(items, total=total, desc=f"torchrecorder: {what}", leave=False)
    return _lines(items, total, what)


def _lines(items: Iterable[T], total: int, what: str) -> Iterator[T]:
    with stage(what, total):
        yield from items


# ---------------------------------------------------------------- long recordings
#: a recording shows its progress once it has run this many seconds (``ENABLED=True``: from the start)
RECORD_AFTER = 1.5
#: seconds between two progress lines of a long recording where ``tqdm`` is not installed
LINE_EVERY = 10.0
#: seconds between two reads of a watched job's counters (longer where reading takes long)
POLL = 0.25
#: seconds the progress thread waits for the next job before it ends (the next job starts another)
IDLE_EXIT = 10.0

#: what a watched job's ``read`` gives: work done, the total expected (``None``: unknown) and
#: a few words on the rest
Counts = tuple[int, Optional[int], str]


class Watch:
    """One piece of work that the progress thread watches (see :func:`watch`).

    Attributes:
        what: what is being done (``"recording 'gpt2'"``).
        read: gives the :data:`Counts` so far; called from the progress thread, it must
            only read counters (no torch call, no lock of the work).
        unit: what ``done`` counts, singular (``"module"``).
        start: when the work began (``time.perf_counter()``).
        finished: set by :func:`unwatch`; nothing of the job is shown after it.
        held: set by :func:`hold`: the counts shown no longer change.
        quiet: nobody watches (:func:`interactive` was false): no bar and no line while the
            work runs, one line when it ends.
    """

    __slots__ = ("bar", "finished", "held", "last", "next_line", "orphan", "poll", "quiet", "read", "shown",
                 "start", "unit", "what")

    def __init__(self, what: str, read: Callable[[], Counts], unit: str) -> None:
        self.what, self.read, self.unit = what, read, unit
        self.start = time.perf_counter()
        self.finished = False
        self.shown = False  # a bar is open or a first line was printed
        self.bar: Any = None
        self.next_line = 0.0
        self.poll = POLL
        self.orphan = False  # finished but still watched at a poll: unwatch was interrupted
        self.held = False  # see hold()
        self.quiet = False
        self.last: Counts = (0, None, "")


_cond = threading.Condition(threading.Lock())  # guards everything below and all output of jobs
_jobs: list[Watch] = []
_worker: Optional[threading.Thread] = None
_wake_at = float("inf")  # when the progress thread next looks at the jobs


def watch(what: str, read: Callable[[], Counts], unit: str = "item") -> Optional[Watch]:
    """Watch a piece of work that has just begun: if it runs :data:`RECORD_AFTER` seconds
    (or at once where :data:`ENABLED` is ``True``), show its progress from ``read()`` until
    :func:`unwatch`.  Costs a lock and a list append; ``None`` where progress is off."""
    force = forced()
    if force is False:
        return None
    job = Watch(what, read, unit)
    job.quiet = not interactive()
    with _cond:
        _jobs.append(job)
        try:
            if force:
                _show(job, job.start)
            _start_worker()
        except Exception:  # no thread to be had (at exit, or a limit): the work goes on unwatched
            job.finished = True
            _end(job, None, quiet=True)
            return None
        except BaseException:  # an interrupt meanwhile: nobody would end the job
            job.finished = True
            _end(job, None, quiet=True)
            raise
        if job.start + (job.poll if job.shown else RECORD_AFTER) < _wake_at:
            _cond.notify()
    return job


def unwatch(job: Optional[Watch], error: Optional[BaseException] = None) -> None:
    """End ``job``: close its bar or print its last line (``error``: the work stopped on it).
    Nothing of ``job`` is printed after this returns; an interrupt meanwhile leaves the progress
    thread to clear its bar (silently where there is none)."""
    if job is None:
        return
    job.finished = True  # first: the progress thread shows no more of it, lock or not
    with _cond:
        _end(job, error)


def hold(job: Optional[Watch]) -> None:
    """The work of ``job`` is done but for tidying up, which may clear its counters: show the
    counts as they are now until :func:`unwatch` (a job not shown yet is not shown at all)."""
    if job is None:
        return
    with _cond:
        job.held = True
        if job.shown:
            counts = _read(job)
            job.read = lambda: counts


def _start_worker() -> None:  # under _cond
    global _worker
    if _worker is None or not _worker.is_alive():
        _worker = threading.Thread(target=_run, name="torchrecorder-progress", daemon=True)
        _worker.start()


def _run() -> None:
    """The progress thread: waits for a job to run long, then updates it every ``poll`` s.
    It reads counters and writes to standard error only; it never calls torch."""
    global _worker, _wake_at
    with _cond:
        while True:
            if not _jobs:
                _wake_at = float("inf")
                _cond.wait(IDLE_EXIT)
                if not _jobs:
                    if _worker is threading.current_thread():
                        _worker = None
                    return
            _wake_at = wake = _visit()
            _cond.wait(max(0.0, wake - time.perf_counter()))


def _visit() -> float:  # under _cond
    """Show or update each job that is due; when the next is due.  (A function of its own: the
    thread keeps no job, nor the recording it reads, alive while it waits.)"""
    now = time.perf_counter()
    wake = now + IDLE_EXIT
    for job in list(_jobs):
        if job.finished:  # unwatch is taking the lock; or could not (an interrupt)
            if job.orphan:
                _end(job, None, quiet=True)
            job.orphan = True
            wake = min(wake, now + job.poll)
            continue
        if not job.shown:
            if job.held:  # tidying up: over in a moment
                continue
            due = job.start + RECORD_AFTER
            if now < due:
                wake = min(wake, due)
                continue
            _show(job, now)
        else:
            _update(job, now)
        wake = min(wake, time.perf_counter() + job.poll)
    return wake


def _read(job: Watch) -> Counts:
    """``job.read()``, timed (a read that takes long is made less often); where it raises (a
    counter changed size while read), the counts read before."""
    start = time.perf_counter()
    try:
        counts = job.read()
    except Exception:
        return job.last
    job.poll = max(POLL, 50 * (time.perf_counter() - start))  # reading takes at most 2 %
    job.last = counts
    return counts


def plural(n: int, word: str) -> str:
    """``"1 module"``, ``"1,204 modules"``."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _text(job: Watch, counts: Counts) -> str:
    done, total, detail = counts
    head = f"{done:,}/{plural(total, job.unit)}" if total is not None else plural(done, job.unit)
    return f"{head}, {detail}" if detail else head


def _line(text: str) -> None:
    try:
        print(f"torchrecorder: {text}", file=sys.stderr, flush=True)
    except Exception:  # a closed or broken stream: progress is not worth an error
        pass


def _show(job: Watch, now: float) -> None:  # under _cond
    job.shown = True
    if job.quiet:  # its one line comes at the end
        return
    counts = _read(job)
    cls = _bar_cls()
    if cls is not None:
        done, total, detail = counts
        try:
            bar = cls(total=total, initial=done, desc=f"torchrecorder: {job.what}", unit=job.unit,
                      leave=False, postfix=detail or None)
            bar.initial = 0  # the rate counts from the start of the work,
            bar.start_t -= now - job.start  # which began before the bar appeared
        except Exception:
            bar = None
        if bar is not None:
            job.bar = bar
            return
    _line(f"{job.what}: {now - job.start:.1f} s, {_text(job, counts)} ...")
    job.next_line = now + LINE_EVERY


def _update(job: Watch, now: float) -> None:  # under _cond
    if job.quiet:
        return
    counts = _read(job)
    bar = job.bar
    if bar is None:
        if now >= job.next_line:
            _line(f"{job.what}: {now - job.start:.1f} s, {_text(job, counts)} ...")
            job.next_line = now + LINE_EVERY
        return
    done, total, detail = counts
    try:
        if total != bar.total:
            bar.total = total
        bar.n = done
        bar.set_postfix_str(detail, refresh=False)
        bar.refresh()
    except Exception:
        pass


def _end(job: Watch, error: Optional[BaseException], quiet: bool = False) -> None:  # under _cond
    if job in _jobs:
        _jobs.remove(job)
    if not job.shown:
        return
    job.shown = False
    bar, job.bar = job.bar, None
    if bar is not None:
        try:
            bar.close()
        except Exception:
            pass
        return
    if quiet:
        return
    seconds = time.perf_counter() - job.start
    how = f"done in {seconds:.1f} s" if error is None else \
        f"stopped by {type(error).__name__} after {seconds:.1f} s"
    _line(f"{job.what}: {how}, {_text(job, _read(job))}")


def _after_fork() -> None:
    """A forked child has no progress thread, its lock may have been held by one, and the work
    being watched is the parent's: the child shows none of it (its bar is the parent's)."""
    global _cond, _worker, _wake_at
    _cond = threading.Condition(threading.Lock())
    _worker = None
    _wake_at = float("inf")
    for job in _jobs:
        job.finished, job.shown, job.bar = True, False, None
    _jobs.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
