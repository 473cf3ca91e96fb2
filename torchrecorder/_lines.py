"""A line of code, named cheaply while a recording runs and resolved when first read.

The recording engine finds the first frame outside torch and torchrecorder for every
module call and operation, and keeps only what names that frame's line: its code object
and the offset of the instruction it was running, the pair ``(code, offset)`` (an
:data:`At`).  No frame is kept (a frame holds its locals: the activations).  The line
number, file and function (a :class:`~torchrecorder.nodes.Source`) are worked out when
someone reads ``node.source``, by :func:`resolve`, once per instruction of the process:
most nodes of a recording are never asked, and those that are share one ``Source`` per
line.
"""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType
from typing import Any, Optional

__all__ = ["At", "line_of", "resolve", "resolved"]

#: ``(code object, byte offset of an instruction in it)``: a line of code not resolved yet
At = tuple[CodeType, int]

_LIMIT = 65536  # entries of each memo before it starts over
# (id of a code object, offset) -> (the code object, the Source of its line)
_AT: dict[tuple[int, int], tuple[CodeType, Any]] = {}
# (file name, line, function) -> the one Source of that line
_LINES: dict[tuple[str, int, str], Any] = {}


def line_of(code: CodeType, offset: int) -> int:
    """The line of the instruction at byte ``offset`` in ``code`` (what ``frame.f_lineno`` says
    of a frame stopped there); the code's first line where the table gives none.

    >>> def f():
    ...     return 1
    >>> line_of(f.__code__, 0) == f.__code__.co_firstlineno
    True
    """
    for start, end, line in code.co_lines():
        if start <= offset < end:
            return line if line is not None else code.co_firstlineno
    return code.co_firstlineno


def resolve(at: At, make: Callable[[str, int, str], Any]) -> Any:
    """The line ``at`` names, made by ``make(file, line, function)`` once per line: every
    instruction of one line gives the same object."""
    code, offset = at
    memo = (id(code), offset)
    hit = _AT.get(memo)
    if hit is not None and hit[0] is code:
        return hit[1]
    key = (code.co_filename, line_of(code, offset), code.co_name)
    found = _LINES.get(key)
    if found is None:
        if len(_LINES) >= _LIMIT:
            _LINES.clear()
        found = _LINES[key] = make(*key)
    if len(_AT) >= _LIMIT:
        _AT.clear()
    _AT[memo] = (code, found)  # the code object held: its id stays its own
    return found


def resolved(value: Optional[Any], make: Callable[[str, int, str], Any]) -> Any:
    """``value`` itself, or the line it names where it is an :data:`At`."""
    return resolve(value, make) if type(value) is tuple and type(value[0]) is CodeType else value
