"""Where ``torch.compile`` breaks a model into pieces, placed on the module calls that cause it.

:func:`compile_breaks` runs ``torch._dynamo.explain`` on the model (dynamo traces it; nothing
is compiled by a backend) and records the same call, then places each graph break on the
innermost module call whose code holds the break's line (found through the lines of code
the recording keeps, :attr:`~torchrecorder.nodes.BaseNode.source`).
``make_dot(rec, breaks=...)`` and :func:`~torchrecorder.make_html` mark those calls.

This module is imported only when asked for (``torchrecorder.compile_breaks``): importing
dynamo takes seconds.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import torch
from torch import nn

from .graph import Graph
from .nodes import Key, LayerNode
from .recording.source import internal_file

__all__ = ["CompileBreaks", "GraphBreak", "compile_breaks", "place_breaks"]


@dataclass(frozen=True)
class GraphBreak:
    """One place where dynamo stops a graph and goes back to Python.

    Attributes:
        reason: dynamo's reason, its first line (``Unsupported Tensor.item() call ...``).
        filename: the file of the line that breaks the graph.
        lineno: that line.
        module: key of the innermost module call of the recording whose code holds the
            line (``None`` when no recorded call's code does).
        detail: dynamo's whole text about the break (explanation, hints).
        stack: ``(filename, lineno)`` of the frames dynamo gives for it, outermost first.
    """

    reason: str
    filename: str
    lineno: int
    module: Optional[str] = None
    detail: str = field(default="", repr=False, compare=False)
    stack: tuple[tuple[str, int], ...] = field(default=(), repr=False, compare=False)

    def where(self) -> str:
        """``model.py:12``."""
        return f"{os.path.basename(self.filename)}:{self.lineno}"

    @property
    def explanation(self) -> str:
        """Dynamo's explanation of the break (its ``Explanation:`` line), or ``""``."""
        for line in self.detail.splitlines():
            if line.strip().startswith("Explanation:"):
                return _no_address(line.strip()[len("Explanation:"):].strip())
        return ""


class CompileBreaks(list[GraphBreak]):
    """The graph breaks of one model (a list of :class:`GraphBreak`), in the order dynamo met them.

    Attributes:
        graph_count: the graphs dynamo made (``explain``'s ``graph_count``).
        graph_break_count: ``explain``'s ``graph_break_count`` (graphs minus one).
        recording: the recording of the same call; :attr:`GraphBreak.module` are its keys.
    """

    def __init__(self, breaks: list[GraphBreak], graph_count: int, graph_break_count: int,
                 recording: Graph) -> None:
        super().__init__(breaks)
        self.graph_count = graph_count
        self.graph_break_count = graph_break_count
        self.recording = recording

    def summary(self) -> str:
        """One line per break: ``module  file:line  reason``."""
        lines = [f"{len(self)} graph break{'s' if len(self) != 1 else ''} "
                 f"({self.graph_count} graph{'s' if self.graph_count != 1 else ''})"]
        lines.extend(f"  {b.module or '?'}  {b.where()}  {b.reason}" for b in self)
        return "\n".join(lines)


def compile_breaks(model: nn.Module, input_shapes: Any = None, input_data: Any = None, *,
                   input_kwargs: Optional[dict[str, Any]] = None,
                   device: Union[str, torch.device, None] = None, dtype: Optional[torch.dtype] = None,
                   recording: Optional[Graph] = None, name: str = "net") -> CompileBreaks:
    """The ``torch.compile`` graph breaks of one forward call of ``model``, each on the module
    call that causes it.

    Runs ``torch._dynamo.explain(model)(*inputs)`` (dynamo traces the model; no backend
    compiles anything) and :func:`~torchrecorder.record` on the same inputs, then places
    each break on the innermost module call whose code holds its line (see
    :func:`place_breaks`).  Dynamo's caches are reset before and after
    (``torch._dynamo.reset()``: what the process compiled before compiles again on its next
    call); the model's parameters, buffers, flags and the random state are put back as
    :func:`~torchrecorder.record` puts them back, and dynamo's log settings are left as
    they were.  The forward pass runs twice (traced, then recorded): its side effects (a
    ``print``) show twice.

    Args:
        model: the module.
        input_shapes, input_data, input_kwargs, device, dtype: the inputs, as for
            :func:`~torchrecorder.record`.
        recording: a recording of the same call to place the breaks on (default: made here).
        name: the recording's name, when made here.

    Returns:
        a :class:`CompileBreaks` list: one :class:`GraphBreak` per place where dynamo broke
        the graph (a line that breaks twice, traced once inline and once as its own frame,
        counts once), with ``graph_count``, ``graph_break_count`` and ``recording``.

    >>> import torch, torchrecorder
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         print("shape", x.shape)  # a graph break
    ...         return x.relu()
    >>> breaks = torchrecorder.compile_breaks(Net(), (1, 3))  # doctest: +SKIP
    """
    from .api import record  # (api imports the renderers; this module is imported on demand)
    from .recording import (
        gc_paused,
        integer_inputs,
        is_integer_dtype,
        keyword_data,
        keyword_inputs,
        make_inputs,
        model_state_kept,
    )
    from .recording.meta import check_model

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    kwargs = keyword_inputs(input_kwargs)
    if input_shapes is None and input_data is None and not kwargs:
        raise ValueError("compile_breaks() needs input_shapes or input_data (as record() does)")
    input_data, kwargs = keyword_data(model, input_shapes, input_data, kwargs)
    if input_data is None and input_shapes is not None and is_integer_dtype(dtype):
        input_data = integer_inputs(model, input_shapes, dtype, device)  # type: ignore[arg-type]
    args = make_inputs(model, input_shapes, input_data, device, dtype, kwargs)
    import torch._dynamo as dynamo  # seconds: only here

    walk = check_model(model)
    with model_state_kept(model, walk), _graph_break_log() as logged, gc_paused():
        dynamo.reset()
        try:
            out = dynamo.explain(model)(*args, **kwargs)
        finally:
            dynamo.reset()
    rec = recording if recording is not None else record(model, name, input_data=args, input_kwargs=kwargs)
    found: dict[tuple[str, int], GraphBreak] = {}
    for reason in out.break_reasons:  # the breaks that ended a graph, with dynamo's frames
        stack = tuple((f.filename, int(f.lineno or 0)) for f in reason.user_stack)
        if stack:
            _add(found, GraphBreak(_first_line(reason.reason), *stack[-1], None, reason.reason, stack))
    for b in logged:  # and those after which no graph was left to end (a print at the end)
        _add(found, b)
    return CompileBreaks(place_breaks(rec, list(found.values())), out.graph_count,
                         out.graph_break_count, rec)


def _add(found: dict[tuple[str, int], GraphBreak], b: GraphBreak) -> None:
    key = (b.filename, b.lineno)
    got = found.get(key)
    if got is None:
        found[key] = b
    elif len(b.stack) > len(got.stack):  # the same break, with more of its frames
        found[key] = GraphBreak(got.reason, got.filename, got.lineno, None, got.detail, b.stack)


def _first_line(text: str) -> str:
    """Dynamo's reason without the wrapper it puts around a break in a call."""
    text = str(text).strip()
    if text.startswith("Encountered graph break") and "\n\n" in text:
        text = text.split("\n\n", 1)[1].strip()
    return _no_address(text.splitlines()[0].strip()) if text else ""


def _no_address(text: str) -> str:
    """``text`` without the memory addresses dynamo names objects by (``<function f at
    0x7f...>``), which differ from run to run: the pictures and the summary stay the same."""
    return _ADDRESS.sub("", text)


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


_AT = re.compile(r"in user code at (.+):(\d+)\s*$")
_FRAME = re.compile(r'^\s*File "(.+)", line (\d+), in ')


@contextmanager
def _graph_break_log() -> Iterator[list[GraphBreak]]:
    """The graph breaks dynamo logs meanwhile (its ``graph_breaks`` log, as ``TORCH_LOGS``
    shows it), caught by a handler of its own; the logger's settings are put back after."""
    logger = logging.getLogger("torch._dynamo.symbolic_convert.__graph_breaks")
    caught: list[GraphBreak] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                got = _parse(record.getMessage())
            except Exception:  # a message of another shape: explain's own list still counts
                return
            if got is not None:
                caught.append(got)

    handler = Catch(logging.DEBUG)
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # not onto the user's console
    try:
        yield caught
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def _parse(message: str) -> Optional[GraphBreak]:
    """A break from one message of dynamo's ``graph_breaks`` log."""
    head, _, rest = message.partition("\n")
    at = _AT.search(head)
    if at is None:
        return None
    reason_text = rest.partition("Graph Break Reason:")[2].partition("\nUser code traceback:")[0]
    stack = tuple((m.group(1), int(m.group(2))) for line in rest.splitlines()
                  if (m := _FRAME.match(line)) and not internal_file(m.group(1)))
    return GraphBreak(_first_line(reason_text), at.group(1), int(at.group(2)), None,
                      reason_text.strip(), stack)


# ------------------------------------------------------------------ placing the breaks
def place_breaks(rec: Graph, breaks: list[GraphBreak]) -> list[GraphBreak]:
    """``breaks`` with ``module`` set: the key of the innermost module call of ``rec`` whose
    code holds the break's line.

    A call holds a line when an operation or a module call recorded with that line of code
    (``node.source``) runs in it, or ran in a call of a module of torch's own inside it (an
    ``nn.Linear`` called there, a ``Sequential``); else when the line lies in a method of
    the call's module class (a ``.item()`` or a ``print`` makes no node).  A line no call
    holds is tried again for each outer frame dynamo gives for the break.  Of the calls that
    hold a line, one inside another stands for it (the innermost), and the first one run
    stands for later ones (another call of the module, or of another instance of its class,
    shallower or deeper): dynamo meets the break there first.
    """
    nodes = rec.nodes
    holders: dict[tuple[str, int], list[LayerNode]] = {}
    for node in nodes.values():
        src = node.source
        if src is None or node.key is None:
            continue
        holder = _user_scope(rec, node.parent_key)
        if holder is not None:
            holders.setdefault((_norm(src.filename), src.lineno), []).append(holder)
    calls = [n for n in rec.layers() if n.key is not None and n.fn is not None]
    spans: dict[type, list[tuple[str, int, int]]] = {}
    out = []
    for b in breaks:
        frames = [(b.filename, b.lineno)] + [f for f in reversed(b.stack) if f != (b.filename, b.lineno)]
        key: Key = None
        for filename, lineno in frames:
            got = holders.get((_norm(filename), lineno))
            if not got:
                got = [c for c in calls if _in_class(c.fn, _norm(filename), lineno, spans)]
            if got:
                key = _first_innermost(rec, got)
                break
        out.append(GraphBreak(b.reason, b.filename, b.lineno, key, b.detail, b.stack))
    return out


def _first_innermost(rec: Graph, calls: list[LayerNode]) -> Key:
    """The key of the first of ``calls`` (in the order they ran) that holds none of the others."""
    nodes = rec.nodes
    outer: set[Key] = set()
    for call in calls:
        key = call.parent_key
        while key is not None and key not in outer:
            outer.add(key)
            parent = nodes.get(key)
            key = parent.parent_key if isinstance(parent, LayerNode) else None
    return next(c.key for c in calls if c.key not in outer)


def _norm(path: str) -> str:
    return os.path.normcase(os.path.abspath(path)) if not path.startswith("<") else path


def _user_scope(rec: Graph, key: Key) -> Optional[LayerNode]:
    """The call ``key``, or the nearest call around it whose module is not one of torch's own
    (whose code does not run a line of the user's)."""
    nodes = rec.nodes
    while key is not None:
        node = nodes.get(key)
        if not isinstance(node, LayerNode):
            return None
        if node.fn is None or not _torch_class(type(node.fn)):
            return node
        key = node.parent_key
    return None


def _torch_class(cls: type) -> bool:
    forward = getattr(cls, "forward", None)
    code = getattr(forward, "__code__", None)
    return code is not None and internal_file(code.co_filename)


def _in_class(module: Any, filename: str, lineno: int, spans: dict[type, list[tuple[str, int, int]]]) -> bool:
    """Whether ``filename:lineno`` lies in a function of ``module``'s class (or a base class
    below ``nn.Module``)."""
    cls = type(module)
    got = spans.get(cls)
    if got is None:
        got = spans[cls] = []
        for klass in cls.__mro__:
            if klass is nn.Module or klass is object or (_has_file(klass)
                                                         and internal_file(inspect.getfile(klass))):
                continue
            for value in vars(klass).values():
                fn = getattr(value, "__func__", value)
                try:
                    fn = inspect.unwrap(fn) if callable(fn) else fn
                except ValueError:  # a cycle of __wrapped__
                    pass
                code = getattr(fn, "__code__", None)
                if code is None:
                    continue
                lines = [line for _, _, line in code.co_lines() if line is not None]
                if lines:
                    got.append((_norm(code.co_filename), code.co_firstlineno, max(lines)))
    return any(f == filename and first <= lineno <= last for f, first, last in got)


def _has_file(cls: type) -> bool:
    try:
        inspect.getfile(cls)
    except (TypeError, OSError):
        return False
    return True
