"""What a torch call is called in the graph, and which tensors it made: shared by the recording's
function mode and :func:`torchrecorder.capture`'s operation capture, so that both name and
count the same operations.

>>> import torch
>>> op_info(torch.Tensor.__iadd__), op_info(torch.nn.functional.relu)[:2]
(('add', True, None), ('relu', False))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from torch import Tensor, nn

__all__ = ["is_argument", "op_info", "op_outputs", "out_tensors"]

_INPLACE_DUNDERS = frozenset(
    {
        "__setitem__",
        "__iadd__",
        "__isub__",
        "__imul__",
        "__itruediv__",
        "__ifloordiv__",
        "__imod__",
        "__ipow__",
        "__iand__",
        "__ior__",
        "__ixor__",
        "__ilshift__",
        "__irshift__",
        "__imatmul__",
    }
)

_ARITH = frozenset(
    {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
     "lshift", "rshift", "matmul", "div"}
)


def op_info(func: Callable[..., Any]) -> tuple[str, bool, Optional[int]]:
    """The display name of a torch callable, whether it mutates its first argument, and
    the position of its ``inplace`` flag (``F.relu(x, inplace=True)``), if it has one."""
    name = getattr(func, "__name__", None) or type(func).__name__
    if name == "__get__":  # a property such as Tensor.T
        name = getattr(getattr(func, "__self__", None), "__name__", "getattr")
    inplace = name in _INPLACE_DUNDERS or (name.endswith("_") and not name.endswith("__"))
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]
        if name.startswith(("i", "r")) and name[1:] in _ARITH:
            name = name[1:]
    if "." in name:  # torch.ops.aten.add.Tensor -> add
        name = name.split(".")[0]
    return name or "op", inplace, _inplace_position(func)


def _inplace_position(func: Callable[..., Any]) -> Optional[int]:
    """Where a Python-level function such as ``F.dropout`` takes its ``inplace`` flag."""
    code = getattr(func, "__code__", None)
    if code is None or "inplace" not in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]:
        return None
    return list(code.co_varnames).index("inplace")


def is_argument(t: Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether the tensor object ``t`` is one of the (top-level) arguments of a call."""
    for a in args:
        if a is t:
            return True
    if kwargs:
        for a in kwargs.values():
            if a is t:
                return True
    return False


def out_tensors(kwargs: dict[str, Any]) -> list[Tensor]:
    """The tensors a call was given as ``out=`` to write its result into (``torch.add(a, b,
    out=buf)``, ``torch.max(x, 1, out=(values, indices))``); none without ``out`` or with
    ``out=None``."""
    written = kwargs.get("out") if kwargs else None
    if written is None:
        return []
    return [t for t in (written if isinstance(written, (tuple, list)) else (written,))
            if isinstance(t, Tensor)]


def op_outputs(info: tuple[str, bool, Optional[int]], args: tuple[Any, ...], kwargs: dict[str, Any],
               out: Any) -> tuple[list[Tensor], bool]:
    """The tensors a call (described by ``op_info``) made or changed, and whether in place.

    Empty for a call that made nothing new: ``x.to(x.dtype)``, ``x.contiguous()``, dropout
    in ``eval()`` hand back their own argument, and a parameter written in place (or as
    ``out=``) is an initialisation, not dataflow.  A call given ``out=`` made the tensors it
    wrote there, "in place".
    """
    written = out_tensors(kwargs)
    if written:  # the call returns the tensors it was given as out=, written
        if any(isinstance(t, nn.Parameter) for t in written):
            return [], False
        return written, True
    inplace = info[1]
    if info[2] is not None:  # F.relu(x, inplace=True) returns x, changed
        flag = kwargs.get("inplace", args[info[2]] if info[2] < len(args) else False)
        inplace = flag is True
    if isinstance(out, Tensor):
        if not inplace and is_argument(out, args, kwargs):
            return [], False
        outs: list[Tensor] = [out]
    elif isinstance(out, (tuple, list)):
        outs = [o for o in out if isinstance(o, Tensor)]
        if not inplace:
            outs = [o for o in outs if not is_argument(o, args, kwargs)]
    else:
        outs = []
    if inplace:
        if any(isinstance(o, nn.Parameter) for o in outs):
            return [], False  # nn.init.uniform_(tensor=w) hands its parameter by keyword
        if args and isinstance(args[0], Tensor):
            target = args[0]
            if isinstance(target, nn.Parameter):
                return [], False
            if not any(o is target for o in outs):
                outs.append(target)
    return outs, inplace
