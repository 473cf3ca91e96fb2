"""The torch function mode that sees every operation run while a recording is active.

:class:`OpMode` hands each torch call that produced new tensors (or changed one
in place) to :meth:`~torchrecorder.recording.engine.Engine.record_op`; calls
that made nothing new (``x.to(x.dtype)``, dropout in eval) are left out, so
that other holders of the same tensor keep their producer.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from threading import get_ident
from typing import Any, Optional, Protocol, TypeVar

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from .meta import Memo
from .untraced import TO_PYTHON_OPS

__all__ = ["OpMode", "OpSink", "eager", "op_info", "op_mode"]

F = TypeVar("F", bound=Callable[..., Any])


def eager(fn: F) -> F:
    """``fn``, never compiled by ``torch.compile``: the recorder's hooks and mode run eagerly.

    Left to dynamo, they are traced into a compiled model's frames, where dynamo caches
    them for one call and replays them for another (a ``torch.compile(model,
    backend="eager")`` model with batch norm and dropout then fails under recording).
    Without dynamo loaded (it is once anything was compiled) nothing is compiled, and
    ``fn`` is returned as it is: loading dynamo takes seconds.
    """
    if "torch._dynamo" not in sys.modules:
        return fn
    return torch.compiler.disable(fn)


class OpSink(Protocol):
    """What :class:`OpMode` hands operations to (the recording engine)."""

    paused: int
    thread: int
    # called before every operation (see recording.state.ModelState.before_write), or None
    write_guard: Optional[Callable[[Any, tuple[Any, ...], dict[str, Any]], None]]

    def record_op(self, func: Any, opname: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                  outs: list[Tensor], inplace: bool) -> None: ...

    def to_python(self, opname: str) -> None: ...

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
    the position of its ``inplace`` flag (``F.relu(x, inplace=True)``), if it has one.

    >>> import torch
    >>> op_info(torch.Tensor.__iadd__), op_info(torch.nn.functional.relu)[:2]
    (('add', True, None), ('relu', False))
    """
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


def _is_argument(t: Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether the tensor object ``t`` is one of the (top-level) arguments of a call."""
    for a in args:
        if a is t:
            return True
    if kwargs:
        for a in kwargs.values():
            if a is t:
                return True
    return False


# func -> op_info(func); shared by all recordings (torch callables live as long as the process)
_OP_INFO: Memo[Any, tuple[str, bool, Optional[int]]] = Memo(8192)


class OpMode(TorchFunctionMode):
    """Hands every torch operation that runs while the engine is active to the engine."""

    def __init__(self, engine: OpSink) -> None:
        super().__init__()
        self.engine = engine

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: Optional[dict[str, Any]] = None,
    ) -> Any:
        # torch takes this mode off its stack while this method runs: the torch calls
        # below (func itself, .shape, ._base) do not come back here
        if kwargs is None:
            kwargs = {}
        engine = self.engine
        if engine.write_guard is not None:  # record() copies what the op may write first
            engine.write_guard(func, args, kwargs)
        out = func(*args, **kwargs)
        if engine.paused or engine.thread != get_ident():
            return out
        info = _OP_INFO.get(func)
        if info is None:
            info = _OP_INFO.put(func, op_info(func))
        inplace = info[1]
        if info[2] is not None:  # F.relu(x, inplace=True) returns x, changed
            flag = kwargs.get("inplace", args[info[2]] if info[2] < len(args) else False)
            inplace = flag is True
        if isinstance(out, Tensor):
            if not inplace and _is_argument(out, args, kwargs):
                # x.to(x.dtype), x.contiguous(), dropout in eval: the op handed back its
                # own argument and made nothing new.  Rebinding the object to this op
                # would make every other holder of the tensor (a residual branch, say)
                # look as if it came from here.
                return out
            outs: list[Tensor] = [out]
        elif isinstance(out, (tuple, list)):
            outs = [o for o in out if isinstance(o, Tensor)]
            if not inplace:
                outs = [o for o in outs if not _is_argument(o, args, kwargs)]
        else:
            outs = []
        if inplace and args and isinstance(args[0], Tensor):
            target = args[0]
            if isinstance(target, nn.Parameter):
                return out  # parameter initialisation, not dataflow
            if not any(o is target for o in outs):
                outs.append(target)
        if outs:
            engine.record_op(func, info[0], args, kwargs, outs, inplace)
        elif info[0] in TO_PYTHON_OPS:  # .item(), .tolist(): values leave the tensors
            engine.to_python(info[0])
        return out


_EAGER_MODES: list[type[OpMode]] = []


def op_mode(engine: OpSink) -> OpMode:
    """A new :class:`OpMode` for ``engine``; once dynamo is loaded, of a subclass whose
    ``__torch_function__`` dynamo never compiles (see :func:`eager`)."""
    if "torch._dynamo" not in sys.modules:
        return OpMode(engine)
    if not _EAGER_MODES:
        _EAGER_MODES.append(type("EagerOpMode", (OpMode,),
                                 {"__torch_function__": eager(OpMode.__torch_function__)}))
    return _EAGER_MODES[0](engine)
