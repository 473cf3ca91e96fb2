"""What a failed recording does to the user's exception: a note and the partial graph, both only
where the exception takes them.  The user always gets their own exception object back."""

from __future__ import annotations

from typing import Any

__all__ = ["NOTE_PREFIX", "annotate", "exception_text"]

NOTE_PREFIX = "torchrecorder: raised in module"


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
