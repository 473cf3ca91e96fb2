"""What a failed recording does to the user's exception: a note and the partial graph, both only
where the exception takes them.  The user always gets their own exception object back."""

from __future__ import annotations

import dis
from collections.abc import Mapping
from types import CodeType
from typing import Any, Optional

from torch import nn

from ..nodes import BaseNode, LayerNode, OpNode
from ._walk import iter_tensors
from .ops import OpMode

__all__ = ["HIGHER_ORDER_HINT", "NOTE_PREFIX", "PARTIAL_RECORDING", "annotate", "call_arguments",
           "exception_text", "draw_failed_op", "failed_operation", "link_unread_inputs", "module_frames",
           "raised_in", "scope_keys"]

# torch.cond, while_loop, scan, ... run eagerly by compiling their branches with fullgraph=True,
# which fails while any torch function mode that dynamo may not trace (the recorder's) is active
#: the end of the note on a failure inside torch.cond and the like
HIGHER_ORDER_HINT = (". torch.cond and torch's other higher-order operators compile their branches "
                      "in one graph, which cannot be done while a recording watches every operation: "
                      "record the model with the branch chosen by a Python `if` (or `while`) instead")

NOTE_PREFIX = "torchrecorder: raised in module"
#: the end of that note, for a caller that gets the exception object (the command line and the
#: Sphinx directive, whose users do not, leave it out)
PARTIAL_RECORDING = "; the partial recording is in the exception's 'recording' attribute"


def exception_text(exc: BaseException) -> str:
    """``"ExcType: message"``; an exception whose ``__str__`` raises is named by its type.

    >>> exception_text(ValueError("bad"))
    'ValueError: bad'
    """
    try:
        text = str(exc)
    except Exception:  # the user's __str__ is broken; their exception still goes on
        text = f"<{type(exc).__name__} whose str() raised>"
    return f"{type(exc).__name__}: {text}"


def annotate(exc: BaseException, graph: Any, note: str = "") -> None:
    """Set ``exc.recording = graph`` and add ``note`` (replacing the note of an earlier
    recording that raised the same object); never raises: an exception that refuses
    attributes, or whose ``__notes__`` is not a list, is left as it is."""
    try:
        exc.recording = graph  # type: ignore[attr-defined]
    except Exception:
        pass
    if not note:
        return
    try:
        notes = getattr(exc, "__notes__", None)
        if isinstance(notes, list):
            notes[:] = [n for n in notes if not (isinstance(n, str) and n.startswith(NOTE_PREFIX))]
        if hasattr(exc, "add_note"):
            exc.add_note(note)
    except Exception:
        pass


def _call_codes() -> tuple[Optional[CodeType], Optional[CodeType], int]:
    """The code of ``nn.Module._call_impl``, of its ``inner`` closure (where hooks and forward run)
    and the line of ``inner`` that calls ``forward`` (0 where this torch differs)."""
    call = getattr(getattr(nn.Module, "_call_impl", None), "__code__", None)
    if not isinstance(call, CodeType):
        return None, None, 0
    inner = next((c for c in call.co_consts if isinstance(c, CodeType) and c.co_name == "inner"), None)
    line = 0
    if inner is not None:
        offset = next((ins.offset for ins in dis.get_instructions(inner) if ins.argval == "forward_call"), -1)
        for start, lineno in dis.findlinestarts(inner):
            if 0 <= start <= offset and lineno is not None:
                line = lineno
    return call, inner, line


_CALL_IMPL, _INNER, _FORWARD_LINE = _call_codes()


def _mode_codes() -> tuple[Optional[CodeType], int]:
    """The code of the op mode's ``__torch_function__`` and the line on which it calls the
    operation (the first that stores ``out``; 0 where that cannot be read)."""
    code = getattr(OpMode.__torch_function__, "__code__", None)
    if not isinstance(code, CodeType):
        return None, 0
    offset = next((ins.offset for ins in dis.get_instructions(code)
                   if ins.opname == "STORE_FAST" and ins.argval == "out"), -1)
    line = 0
    for start, lineno in dis.findlinestarts(code):
        if 0 <= start <= offset and lineno is not None:
            line = lineno
    return code, line


_MODE_CODE, _MODE_CALL_LINE = _mode_codes()


def module_frames(exc: BaseException) -> list[tuple[Any, str]]:
    """The module calls ``exc`` passed through on its way out, outermost first, read from its
    traceback: ``(module, stage)``, where ``stage`` says where in the call it came from:
    ``"pre"`` (the forward pre-hooks), ``"forward"``, ``"post"`` (the forward hooks, after
    ``forward`` returned) or ``""`` (unknown).  Never raises."""
    out: list[tuple[Any, str]] = []
    if _CALL_IMPL is None:
        return out
    try:
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code is _CALL_IMPL:
                module = tb.tb_frame.f_locals.get("self")
                stage = ""
                nxt = tb.tb_next
                if nxt is not None and nxt.tb_frame.f_code is _INNER and _FORWARD_LINE:
                    line = nxt.tb_lineno
                    stage = "pre" if line < _FORWARD_LINE else "forward" if line == _FORWARD_LINE else "post"
                out.append((module, stage))
            tb = tb.tb_next
    except Exception:  # a traceback is only read for the note: never fail over the user's error
        return []
    return out


def raised_in(exc: BaseException, innermost: LayerNode, nodes: Mapping[Any, BaseNode],
              modules: Mapping[int, Any]) -> tuple[LayerNode, Any, str]:
    """The call ``exc`` came from: ``innermost`` (the deepest call still open when it was
    raised), or a call inside it that had returned when one of its forward hooks raised (the
    user's own hook, ``StopForward``), read from the traceback; the
    :class:`~torchrecorder.recording.meta.ModuleInfo` of a module called from there whose
    forward pre-hook raised before its call was opened (else ``None``); and ``"pre"`` where a
    forward pre-hook of the call itself raised, after the call opened and before its ``forward``
    ran, ``"post"`` where one of its forward hooks raised after ``forward`` returned, else ``""``.
    ``modules`` maps ``id(module)`` to its ``ModuleInfo`` (``last``: its latest call)."""
    chain: set[Any] = set()
    node: BaseNode = innermost
    while isinstance(node, LayerNode):
        chain.add(node.key)
        node = nodes[node.parent_key]
    failed, last = innermost, ""
    for module, stage in module_frames(exc):
        info = modules.get(id(module))
        call = info.last if info is not None else None
        if call is None or not (call.key in chain or (stage == "post" and call.parent_key in chain)):
            # a call not opened: a pre-hook run before the recorder's raised
            return failed, (info if stage == "pre" else None), ""
        failed, last = call, stage
    return failed, None, last if last == "post" or (last == "pre" and failed is innermost) else ""


def call_arguments(exc: BaseException, module: Any) -> tuple[Any, ...]:
    """The arguments (``args``, ``kwargs``) of the innermost call of ``module`` that ``exc``
    left, read from the frames of its traceback (``nn.Module._call_impl``'s); ``()`` where
    they cannot be read.  Never raises."""
    found: tuple[Any, ...] = ()
    if _CALL_IMPL is None:
        return found
    try:
        tb = exc.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            if frame.f_code is _CALL_IMPL and frame.f_locals.get("self") is module:
                found = (frame.f_locals.get("args"), frame.f_locals.get("kwargs"))
            tb = tb.tb_next
    except Exception:  # read for the drawing only: never fail over the user's error
        return ()
    return found


def failed_operation(exc: BaseException, module: Any, engine: Any
                     ) -> Optional[tuple[Any, str, tuple[Any, ...], Mapping[str, Any]]]:
    """The torch operation that raised ``exc`` in ``forward`` of the innermost call of
    ``module`` (``torch.cat`` of tensors that do not fit): ``(func, name, args, kwargs)`` as
    ``engine``'s op mode was handed them, read from the traceback; ``None`` where ``exc`` came
    from elsewhere (Python code of the model's own, a hook, a module called inside, the
    recorder).  Never raises."""
    if _CALL_IMPL is None or _MODE_CODE is None or not _MODE_CALL_LINE:
        return None
    try:
        found = None
        tb = exc.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            code = frame.f_code
            if code is _CALL_IMPL:
                found = None  # a module call: what raised below belongs to it
                nxt = tb.tb_next
                if frame.f_locals.get("self") is module and nxt is not None and \
                        nxt.tb_frame.f_code is _INNER and nxt.tb_lineno == _FORWARD_LINE:
                    found = frame  # (in forward, not in one of its hooks)
            elif code is _MODE_CODE and found is not None:
                local = frame.f_locals
                mode = local.get("self")
                if tb.tb_lineno != _MODE_CALL_LINE or getattr(mode, "engine", None) is not engine:
                    return None  # raised by the recorder, or by another recording's mode
                func, info = local.get("func"), local.get("info")
                name = info[0] if isinstance(info, tuple) and info and isinstance(info[0], str) \
                    else getattr(func, "__name__", type(func).__name__)
                args, kwargs = local.get("args"), local.get("kwargs")
                return (func, name, args if isinstance(args, tuple) else (),
                        kwargs if isinstance(kwargs, Mapping) else {})
            tb = tb.tb_next
    except Exception:  # read for the drawing only: never fail over the user's error
        return None
    return None


def scope_keys(call: LayerNode, nodes: Mapping[Any, BaseNode]) -> set[Any]:
    """The keys of every node recorded inside ``call`` (its operations, calls, tensors and
    parameters, at any depth), ``call``'s own key left out."""
    found: set[Any] = set()
    todo = list(call.subnet_keys)
    while todo:
        key = todo.pop()
        if key in found:
            continue
        found.add(key)
        node = nodes.get(key)
        if isinstance(node, LayerNode):
            todo.extend(node.subnet_keys)
    return found


def draw_failed_op(engine: Any, failed: LayerNode, exc: BaseException) -> None:
    """Draw the torch operation that raised inside ``failed``'s ``forward``, if ``engine``'s op
    mode saw it (see :func:`failed_operation`): an operation node in that call with the inputs
    it was given, no outputs and the error, so that what the call computed before it raised
    (and the arguments it had not used yet) do not end nowhere."""
    found = failed_operation(exc, failed._fn, engine)
    if found is None:
        return
    func, opname, args, kwargs = found
    graph, live = engine.graph, engine.live
    srcs = []  # (read first: the node goes in whole or not at all)
    for value in iter_tensors((args, dict(kwargs))):
        entry = live.get(id(value))
        src = entry[1] if entry is not None and entry[0]() is value else engine._source_of(value, failed)
        if src is not None:
            srcs.append(src)
    key = graph.keys(f"{failed.key}/{opname}" if failed.key else opname)
    node = OpNode(opname, func, failed.depth + 1, failed.key, key, opname, [])
    node.error = failed.error
    graph.nodes[key] = node
    failed.subnet_keys.add(key)
    edges = graph.links._items
    for src in srcs:
        edges[(src, key)] = None
        engine._sources.add(src)


def link_unread_inputs(engine: Any, failed: LayerNode, exc: BaseException) -> None:
    """Join each input of the call that raised which nothing recorded inside the call read to
    the call itself (a ``forward`` that raised in its own Python code, a shape check, before it
    used them), so that the picture shows what the call was given, not an edge that ends
    nowhere.  The arguments are read from the traceback (see
    :func:`call_arguments`): nothing is kept per call for a failure that seldom comes."""
    nodes, live = engine.graph.nodes, engine.live
    links = engine.graph.links._items
    inside = scope_keys(failed, nodes)
    read = {a for a, b in links if b in inside}
    for t in iter_tensors(call_arguments(exc, failed._fn)):
        entry = live.get(id(t))
        if entry is None or entry[0]() is not t:
            continue
        src = entry[1]
        if src in inside or src in read or src == failed.key:
            continue  # read (or written in place) inside the call: drawn as it is
        links[(src, failed.key)] = None
        engine._sources.add(src)
        read.add(src)
