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
from torch import Tensor
from torch.overrides import TorchFunctionMode

from ..opnames import is_argument, op_info, op_outputs, out_tensors
from .meta import Memo
from .untraced import TO_PYTHON_OPS

__all__ = ["OpMode", "OpSink", "eager", "op_info", "op_mode",
           "write_info", "writes_arguments"]

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

    def lookup(self, obj: Any) -> Any: ...

    def bind(self, obj: Any, key: Any) -> None: ...

    def unlink(self, value: Any, out: Any) -> None: ...

    def counted_op(self, out: Any, flops: int) -> None: ...


# ``x.view_as(x)``: what autograd makes of a tensor that a custom autograd Function returns
# as it got it (torch's own BackwardHookFunction, which a module with a full backward hook
# runs around each call): the same values under a new object, not an operation of the model
_VIEW_AS = Tensor.view_as

_MHA_FORWARD = torch.nn.functional.multi_head_attention_forward

# a backward pass that ``forward`` runs itself (MAML's inner step): its kernels run below any
# function mode, so it is counted while it runs, as FlopCounterMode counts it
_AUTOGRAD_GRAD = torch.autograd.grad
_MHA_SIGNATURE: list[Any] = []  # (inspect.signature of it, read on first use)


def unread_attention_mask(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[Tensor]:
    """The ``attn_mask`` that a call of ``F.multi_head_attention_forward`` is given but does
    not read, else ``None``.

    With ``is_causal`` set, no ``key_padding_mask`` and ``need_weights`` off (as
    ``nn.TransformerDecoderLayer`` calls it with ``tgt_is_causal=True``), torch drops the
    mask and hands ``scaled_dot_product_attention`` its causal flag alone
    (``torch/nn/functional.py``): the output does not depend on the mask's values, so no
    edge runs from it.  The operation keeps it among its arguments (its cost is counted with
    them).
    """
    if not _MHA_SIGNATURE:
        import inspect

        _MHA_SIGNATURE.append(inspect.signature(_MHA_FORWARD))
    try:
        bound = _MHA_SIGNATURE[0].bind(*args, **kwargs).arguments
    except TypeError:
        return None
    mask = bound.get("attn_mask")
    if (isinstance(mask, Tensor) and bound.get("is_causal", False) is True
            and bound.get("key_padding_mask") is None and bound.get("need_weights", True) is False):
        return mask
    return None


#: the operations that read only the shape of their second tensor (``x.reshape_as(other)``,
#: ``view_as``, ``expand_as``): no value flows from ``other``, so no edge is drawn from it
SHAPE_OF_OTHER = frozenset({"reshape_as", "view_as", "expand_as"})


def _unlink_shape_argument(engine: OpSink, args: tuple[Any, ...], kwargs: dict[str, Any],
                           out: Tensor) -> None:
    """Take back the edge from the ``other`` of a :data:`SHAPE_OF_OTHER` operation, which
    only gives the result its shape (LeViT's ``batch_norm(h.flatten(0, 1)).reshape_as(h)``
    does not read ``h``'s values), unless ``other`` is also the tensor reshaped."""
    other = args[1] if len(args) > 1 else kwargs.get("other")
    if isinstance(other, Tensor) and args and args[0] is not other \
            and engine.lookup(other) != engine.lookup(args[0]):  # (not one node under two names)
        engine.unlink(other, out)


# torch callables that write tensors they are given without a trailing ``_`` or ``out=``,
# unless one argument says not to: name -> (its position, its keyword, the value that turns the
# write off, whether they write when it is not given).  The batch-norm kernels update the
# running statistics unless ``training`` / ``use_input_stats`` is false; an embedding lookup
# with ``max_norm`` renormalises the rows of its weight that it reads.
WriteRule = tuple[int, str, Any, bool]
_CONDITIONAL_WRITES: dict[str, WriteRule] = {
    "batch_norm": (5, "training", False, True),
    "instance_norm": (5, "use_input_stats", False, True),
    "embedding": (3, "max_norm", None, False),
    "embedding_bag": (3, "max_norm", None, False),
}

# func -> (positions of arguments it may write, position of its ``inplace`` flag, the rule
# under which it writes its tensor arguments); () / None / None for the many that write nothing
_WRITE_INFO: Memo[Any, tuple[tuple[int, ...], Optional[int], Optional[WriteRule]]] = Memo(8192)


def write_info(func: Any) -> tuple[tuple[int, ...], Optional[int], Optional[WriteRule]]:
    """What ``func`` may write in place: the positions of the arguments it writes, the position
    of its ``inplace`` flag (``F.relu(x, inplace=True)``) and the rule under which it writes
    its tensor arguments (:func:`writes_arguments`: ``batch_norm`` in training, ``embedding``
    with ``max_norm``); besides these, any call can write its ``out=``."""
    got = _WRITE_INFO.get(func)
    if got is not None:
        return got
    name, inplace, flag = op_info(func)
    positions: tuple[int, ...] = (0,) if inplace else ()
    schema = getattr(func, "_schema", None)  # torch.ops.*.overload: the schema says what it writes
    if schema is not None:
        try:
            positions = tuple(i for i, a in enumerate(schema.arguments)
                              if a.alias_info is not None and a.alias_info.is_write)
        except Exception:
            pass
    return _WRITE_INFO.put(func, (positions, flag, _CONDITIONAL_WRITES.get(name)))


def writes_arguments(rule: WriteRule, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a call of a function with this :data:`_CONDITIONAL_WRITES` rule may write its
    tensor arguments, by the argument that switches the write."""
    position, keyword, off, default = rule
    if len(args) > position:
        value = args[position]
    elif keyword in kwargs:
        value = kwargs[keyword]
    else:
        return default
    return value is not off


def _call_info(func: Any) -> tuple[str, bool, Optional[int], bool]:
    """``op_info(func)`` and whether ``func`` can write an argument other than ``out=``."""
    positions, flag, stats = write_info(func)
    return (*op_info(func), bool(positions) or flag is not None or stats is not None)


# func -> _call_info(func); shared by all recordings (torch callables live as long as the process)
_OP_INFO: Memo[Any, tuple[str, bool, Optional[int], bool]] = Memo(8192)
# the keyword arguments of a call made without any: one dict, which nothing writes (the call
# itself gets a copy), rather than a new one per operation
_NO_KWARGS: dict[str, Any] = {}


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
            kwargs = _NO_KWARGS
        engine = self.engine
        info = _OP_INFO.get(func)
        if info is None:
            info = _OP_INFO.put(func, _call_info(func))
        guard = engine.write_guard
        if guard is not None and (info[3] or (kwargs and "out" in kwargs)):
            guard(func, args, kwargs)  # record() copies what the op may write first
        if func is _AUTOGRAD_GRAD:
            return _counted_grad(engine, func, info, args, kwargs)
        out = func(*args, **kwargs)
        if engine.paused or engine.thread != get_ident():
            return out
        if kwargs and kwargs.get("out") is not None:  # torch.add(a, b, out=buf) returns buf, which it wrote
            if _record_into_out(engine, func, info[0], args, kwargs):
                return out
        if type(out) is Tensor and not info[1]:
            # the common case, op_outputs inlined: one new tensor (unless an argument came
            # back), from a call that does not write its first argument (no trailing ``_``,
            # its ``inplace`` flag, where it has one, off)
            flag = info[2]
            if flag is None or (kwargs.get("inplace", args[flag] if flag < len(args) else False)
                                is not True):
                if not is_argument(out, args, kwargs):
                    if func is _VIEW_AS and len(args) == 2 and args[0] is args[1]:
                        key = engine.lookup(args[0])
                        if key is not None:  # the new object stands for the same node
                            engine.bind(out, key)
                            return out
                    engine.record_op(func, info[0], args, kwargs, [out], False)
                    if info[0] in SHAPE_OF_OTHER:
                        _unlink_shape_argument(engine, args, kwargs, out)
                return out
        outs, inplace = op_outputs(info[:3], args, kwargs, out)
        if outs:
            engine.record_op(func, info[0], args, kwargs, outs, inplace)
            if info[0] in SHAPE_OF_OTHER:
                _unlink_shape_argument(engine, args, kwargs, outs[0])
            elif func is _MHA_FORWARD:  # (returns a tuple: never on the common path above)
                mask = unread_attention_mask(args, kwargs)
                if mask is not None:
                    engine.unlink(mask, outs[0])
        elif info[0] in TO_PYTHON_OPS:  # .item(), .tolist(): values leave the tensors
            engine.to_python(info[0])
        return out


def _counted_grad(engine: OpSink, func: Any, info: tuple[str, bool, Optional[int], bool],
                  args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run and record ``torch.autograd.grad`` called inside the recording, with the FLOPs that
    :class:`~torch.utils.flop_counter.FlopCounterMode` counts for the backward kernels it runs
    (which no function mode sees) kept as its count for :func:`torchrecorder.cost`."""
    from torch.utils.flop_counter import FlopCounterMode  # (imported when a model does this)

    counter = FlopCounterMode(display=False)
    with counter:
        out = func(*args, **kwargs)
    if engine.paused or engine.thread != get_ident():
        return out
    outs, inplace = op_outputs(info[:3], args, kwargs, out)
    if outs:
        engine.record_op(func, info[0], args, kwargs, outs, inplace)
        engine.counted_op(outs[0], counter.get_total_flops())
    return out


def _record_into_out(engine: OpSink, func: Any, opname: str, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> bool:
    """Record a call that wrote its result into the tensors given as ``out=``.

    The call returns those tensors, which are its own arguments, so the rule that leaves out a
    call handing back an argument (``x.to(x.dtype)``) would drop it and with it the dataflow
    into ``out``.  The tensors stand for the operation from now on.  What ``out`` held before
    is not an input of the operation, as it is overwritten, unless ``out`` is a view: then the
    rest of the tensor it views keeps its old values, which later readers of it still see.
    Whether the call is dealt with (else it is recorded as any other: ``out`` holds no tensor).
    """
    if not out_tensors(kwargs):
        return False
    outs, _ = op_outputs((opname, False, None), args, kwargs, None)
    if outs:  # (none: a parameter written, an initialisation, not dataflow)
        if all(t._base is None for t in outs):
            kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        engine.record_op(func, opname, args, kwargs, outs, True)
    return True


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
