"""What the engine keeps of an operation torch counts FLOPs for (see :mod:`torchrecorder.opargs`).

Called for each recorded operation whose name is in
:data:`~torchrecorder.opargs.COUNTED_OPS`, inside the recorder's hottest code: one tuple is
made and kept per operation, shapes are the shared tuples of
:func:`~torchrecorder.recording.meta.shape_tuple` (the graph's own), and a tensor's
``requires_grad`` is read only when the backward graph is recorded (only the backward count
needs it).  A parameter is kept as itself, not read at all (the graph holds it already, and
its parameter node has its shape and dtype: :func:`torchrecorder.cost` reads them there).
Arguments other than data tensors, parameters and plain values (lists of tensors, integer
tensors whose values are kept) go through :func:`~torchrecorder.opargs.spec_of`.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor
from torch.nn import Parameter

from ..opargs import DATA_DTYPES, TENSOR, Kept, spec_of
from .meta import shape_tuple

__all__ = ["keep"]


def keep(scope: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grad: bool) -> Kept:
    """The :data:`~torchrecorder.opargs.Kept` tuple of ``func(*args, **kwargs)`` run in the
    call ``scope`` (``grad``: keep whether each tensor requires gradients)."""
    flat: list[Any] = [scope, func, spec_of(kwargs) if kwargs else None]
    for v in args:
        if type(v) is Parameter:  # (isinstance would run Parameter's Python __instancecheck__)
            flat.append(v)
        elif isinstance(v, Tensor):
            dtype = v.dtype
            if dtype in DATA_DTYPES:  # (a nested tensor's ragged dimensions are -1: see unpack)
                flat += (TENSOR, shape_tuple(v), dtype, v.requires_grad if grad else False)
                continue
            flat.append(spec_of(v))
        elif isinstance(v, (tuple, list, dict)):
            flat.append(spec_of(v))
        else:
            flat.append(v)
    return tuple(flat)
