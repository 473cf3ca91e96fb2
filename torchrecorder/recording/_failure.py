"""What a failed recording does to the user's exception: a note and the partial graph, both only
where the exception takes them.  The user always gets their own exception object back."""

from __future__ import annotations

import dis
from collections.abc import Mapping
from types import CodeType
from typing import Any, Optional

from torch import nn

from ..nodes import BaseNode, LayerNode

__all__ = ["NOTE_PREFIX", "PARTIAL_RECORDING", "annotate", "call_arguments", "exception_text",
           "module_frames", "raised_in"]

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
              modules: Mapping[int, Any]) -> tuple[LayerNode, Any, bool]:
    """The call ``exc`` came from: ``innermost`` (the deepest call still open when it was
    raised), or a call inside it that had returned when one of its forward hooks raised (the
    user's own hook, ``StopForward``), read from the traceback; the
    :class:`~torchrecorder.recording.meta.ModuleInfo` of a module called from there whose
    forward pre-hook raised before its call was opened (else ``None``); and whether a forward
    pre-hook of the call itself raised, after the call opened and before its ``forward`` ran.
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
            return failed, (info if stage == "pre" else None), False
        failed, last = call, stage
    return failed, None, last == "pre" and failed is innermost


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
