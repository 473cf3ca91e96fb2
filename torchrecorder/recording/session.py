"""The ``with`` block of one recording (:meth:`~torchrecorder.recording.engine.Engine.active`).

A class, not a ``contextlib.contextmanager`` generator: contextlib sets ``__traceback__`` on
an exception that passes through a generator, and an exception that refuses attributes (a
frozen dataclass) would then be replaced.  The user gets their own exception object back.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from types import TracebackType
from typing import Any, Generic, Optional, Protocol, TypeVar

import torch
from torch import nn

from .. import _progress
from .collector import old_objects_aside, old_objects_back
from .ops import OpMode, OpSink, op_mode

__all__ = ["Session", "SessionEngine"]

T = TypeVar("T")

_mode_stack = getattr(torch.overrides, "_get_current_function_mode_stack", None)


def _on_stack(mode: OpMode) -> bool:
    """Whether ``mode`` is on torch's function-mode stack (``True`` where torch cannot say)."""
    if _mode_stack is None:
        return True
    try:
        return any(m is mode for m in _mode_stack())
    except Exception:
        return True


class SessionEngine(OpSink, Protocol):
    """What a :class:`Session` drives (the recording engine)."""

    closed: bool

    def register_hooks(self, net: nn.Module, name: str) -> None: ...
    def fill_pool(self) -> None: ...
    def remove_hooks(self) -> None: ...
    def finish(self) -> None: ...
    def fail(self, exc: BaseException) -> None: ...
    def restore_mode(self) -> None: ...


class Session(Generic[T]):
    """Hooks and the op mode on entering; on leaving, whatever happened, the op mode off, the
    failure marked (never raising over the user's exception), every hook removed (also when a
    second interrupt comes meanwhile) and the live objects forgotten.  ``with`` gives ``value``.

    A recording that runs long shows its progress (:func:`torchrecorder._progress.watch`:
    modules called so far of the model's modules, module calls and nodes recorded), read by
    the progress thread from the engine's counters, from before the hooks go on until the
    engine has tidied up."""

    def __init__(self, engine: SessionEngine, net: nn.Module, name: str, value: T) -> None:
        self.engine, self.net, self.name, self.value = engine, net, name, value
        self.mode: Optional[OpMode] = None
        self.progress: Optional[_progress.Watch] = None
        self.error: Optional[BaseException] = None

    def __enter__(self) -> T:
        engine = self.engine
        # watched from here: hooking a model of many modules takes a while too
        self.progress = _progress.watch(f"recording '{self.name}'", _counter(engine), "module")
        try:
            # the collector scans only what the pass makes (see ``collector``), less the nodes
            # made ahead for it (see ``pool``)
            old_objects_aside(engine.fill_pool)
            try:
                engine.register_hooks(self.net, self.name)
            except BaseException:
                old_objects_back()
                raise
        except BaseException as exc:
            progress, self.progress = self.progress, None
            _progress.unwatch(progress, exc)
            raise
        try:
            mode = op_mode(engine)
            mode.__enter__()
            self.mode = mode
        except BaseException as exc:
            self.error = exc
            self._close()
            raise
        return self.value

    def __exit__(self, typ: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        try:
            try:
                if self.mode is not None:
                    mode, self.mode = self.mode, None
                    try:
                        self.engine.restore_mode()  # back on the stack before it leaves it
                    finally:
                        if _on_stack(mode):  # (a RecursionError inside torch's mode switch drops it)
                            mode.__exit__(typ, exc, tb)
            finally:
                if exc is not None:
                    self.error = exc
                    with suppress(Exception):
                        self.engine.fail(exc)
        finally:
            self._close()

    def _close(self) -> None:
        engine = self.engine
        engine.closed = True  # first: from here on no hook of this engine records
        progress, self.progress = self.progress, None
        try:
            try:
                _progress.hold(progress)  # the counts the pass left, shown while it is tidied up
            finally:
                try:
                    engine.remove_hooks()
                finally:
                    try:
                        engine.finish()
                    finally:
                        old_objects_back()
        finally:
            _progress.unwatch(progress, self.error)  # last: nothing of it shows after the recording


def _counter(engine: Any) -> Callable[[], _progress.Counts]:
    """What the progress thread reads of ``engine`` (:data:`torchrecorder._progress.Counts`):
    the modules called so far of the model's modules, then module calls and nodes recorded
    (the graph's root, key ``None``, left out).  Plain reads of counters the engine keeps
    anyway; nothing is added to its calls."""

    def read() -> _progress.Counts:
        graph_nodes = engine.graph.nodes
        nodes = len(graph_nodes) - (None in graph_nodes)  # not the graph's root
        # one C-level copy: the pass may index more modules meanwhile
        infos = list(getattr(engine, "_modules", {}).values())
        called = calls = 0
        for info in infos:
            n = info.calls
            if n:
                called += 1
                calls += n
        plural = _progress.plural
        return called, len(infos) or None, f"{plural(calls, 'module call')}, {plural(nodes, 'node')}"

    return read
