"""Where in the user's code a module call or an operation comes from, read off the call stack.

A recording asks once per module call and once per operation; the answer is the first
Python frame outside torch and torchrecorder.  Nothing here reads source files, builds
``inspect`` frame records or works out line numbers: :func:`caller` walks ``f_back`` from
the frame it is given, tells torch's and torchrecorder's own files by a prefix test
remembered per file name, and names the line by the frame's code object and instruction
offset (a :data:`~torchrecorder._lines.At`), which ``node.source`` turns into the shared
:class:`~torchrecorder.nodes.Source` of that line when first read.  No frame is kept.
"""

from __future__ import annotations

import os
from types import FrameType
from typing import Any, Optional

import torch
from torch import nn

from .._lines import At
from .meta import Memo

__all__ = ["CALL_CODE", "INTERNAL", "caller", "internal_file"]

#: the code of ``nn.Module.__call__`` (``_wrapped_call_impl``), which calls the module's hooks
#: through frames of its own: the engine's pre-hook starts its walk at the frame that called
#: it, and so never makes Python objects of the frames in between (a frame read from Python
#: costs an allocation, and a copy when it returns)
CALL_CODE = getattr(nn.Module.__call__, "__code__", None)


def _roots() -> tuple[str, ...]:
    """The directories of torch and of torchrecorder, as imported and with links resolved."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the torchrecorder package
    roots: list[str] = []
    for path in (os.path.dirname(os.path.abspath(torch.__file__)), here):
        for variant in (path, os.path.realpath(path)):
            root = variant.rstrip(os.sep) + os.sep
            if root not in roots:
                roots.append(root)
    return tuple(roots)


_ROOTS = _roots()
#: file name -> whether it belongs to torch or torchrecorder (the same for every recording;
#: the engine reads it to name the line of an operation called straight from the user's code)
INTERNAL: Memo[str, bool] = Memo(16384)


def internal_file(filename: str) -> bool:
    """Whether ``filename`` is a file of torch or of torchrecorder."""
    inside = INTERNAL.get(filename)
    if inside is None:
        inside = INTERNAL.put(filename, filename.startswith(_ROOTS))
    return inside


def caller(frame: Optional[FrameType], module: Any = None) -> Optional[At]:
    """The first frame from ``frame`` outwards that is outside torch and torchrecorder.

    Args:
        frame: where to start (``sys._getframe()`` in the engine's hook or mode).
        module: for a module call, the module: a ``__call__`` of the module's own class
            (a subclass that overrides ``__call__`` and calls ``super().__call__``, as
            Hugging Face's gradient-checkpointing layers do) is part of calling it, so
            the line is the one that called that ``__call__``.

    Returns:
        ``(code object, instruction offset)`` of that frame, which a node keeps as its
        ``source`` until read (see :mod:`torchrecorder._lines`), or ``None`` when every
        frame is inside torch or torchrecorder.
    """
    internal = INTERNAL
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename
        inside = internal.get(filename)
        if inside is None:
            inside = internal_file(filename)
        if not inside and (module is None or code.co_name != "__call__" or not _own_call(frame, module)):
            return code, frame.f_lasti
        frame = frame.f_back
    return None


def _own_call(frame: FrameType, module: Any) -> bool:
    """Whether ``frame`` runs ``module.__call__`` (its first argument is ``module``)."""
    code = frame.f_code
    if not code.co_argcount:
        return False
    return frame.f_locals.get(code.co_varnames[0]) is module
