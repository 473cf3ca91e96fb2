"""The arguments of the operations torch counts FLOPs for, kept without their tensors.

:func:`torchrecorder.cost` counts an operation's FLOPs by running it again, alone, on
``meta`` tensors of the recorded shapes, under :class:`torch.utils.flop_counter.FlopCounterMode`.
For that the recording keeps, for each operation whose name is in :data:`COUNTED_OPS`,
its torch callable and its arguments with every tensor replaced by a :class:`TensorSpec`
(shape and dtype): no activation is kept alive, and nothing is kept for the many
operations (``add``, ``view``, ``softmax``) that torch's counter gives no FLOPs.  The
values of small integer (not boolean) tensors on the CPU (a packed sequence's ``batch_sizes``) are
kept too: they decide how much work a call does.

So that recording pays next to nothing for it when no cost is asked for, the engine keeps
each operation as one flat tuple (:data:`Kept`): a tensor of data among the positional
arguments is written in place as :data:`TENSOR` followed by its shape, dtype and whether
it requires gradients, with no object made for it, and a parameter is kept as itself (the
recording holds it anyway); :func:`unpack` makes the :class:`TensorSpec` s when
:func:`torchrecorder.cost` reads it.

>>> import torch
>>> spec_of((torch.zeros(2, 3), [torch.ones(4)], 1))
(TensorSpec((2, 3), torch.float32), [TensorSpec((4,), torch.float32)], 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import torch
from torch import Tensor

__all__ = ["COUNTED_OPS", "DATA_DTYPES", "MAX_KEPT_VALUES", "MEASURED", "TENSOR", "Kept", "TensorSpec",
           "spec_of", "unpack"]

#: the operations (by the names the graph gives them) that reach one of
#: ``torch.utils.flop_counter``'s formulas (``mm``, ``addmm``, ``bmm``, ``baddbmm``, the
#: convolutions, the attention kernels): matrix products, linear and convolution layers,
#: attention, recurrent layers, and the functions torch composes of them
COUNTED_OPS = frozenset({
    "linear", "bilinear", "matmul", "mm", "bmm", "addmm", "addmm_", "baddbmm", "baddbmm_",
    "addbmm", "addbmm_", "einsum", "tensordot", "inner", "chain_matmul", "linalg_multi_dot",
    "matrix_power", "linalg_matrix_power", "cdist", "_scaled_mm",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "_convolution", "conv_tbc",
    "scaled_dot_product_attention", "multi_head_attention_forward",
    "lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
})


#: integer CPU tensors of at most this many elements keep their values (lengths, batch sizes)
MAX_KEPT_VALUES = 1024

#: the dtypes of data, whose values change no count
DATA_DTYPES = frozenset(d for d in vars(torch).values() if isinstance(d, torch.dtype)
                        and (d.is_floating_point or d.is_complex or d is torch.bool))

#: an operation as the engine keeps it: ``(key of the call that ran it, the torch callable,
#: keyword arguments as spec_of gives them or None, *positional arguments)``, each positional
#: tensor of data written as the four items ``TENSOR, shape, dtype, requires_grad``, a
#: parameter kept as itself
Kept = tuple[Any, ...]


class _Mark:
    """A mark among the values of a :data:`Kept` tuple: one object per name, also after a copy
    or a pickle (which stores the name of the module's global)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __reduce__(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return self._name


#: in a :data:`Kept` tuple, the mark before the shape, dtype and gradient flag of a tensor
TENSOR = _Mark("TENSOR")


#: in place of the torch callable of a :data:`Kept` tuple, ``(scope, MEASURED, None, flops)``:
#: an operation counted while it ran, as ``FlopCounterMode`` counts it, since it cannot run
#: again alone (``torch.autograd.grad`` inside ``forward``: a backward pass through the graph
#: the forward pass built)
MEASURED = _Mark("MEASURED")


def unpack(kept: Kept, known: Optional[Mapping[int, TensorSpec]] = None
           ) -> tuple[Any, Any, tuple[Any, ...], Optional[dict[str, Any]]]:
    """``(key of the call, callable, args, kwargs)`` of an operation the engine kept, each
    tensor argument a :class:`TensorSpec`: a parameter's from ``known`` (by ``id``: what the
    recording saw of it), else read from the parameter now.

    >>> unpack(("lin", "linear", None, TENSOR, (2, 3), torch.float32, False, 1))
    ('lin', 'linear', (TensorSpec((2, 3), torch.float32), 1), None)
    """
    args: list[Any] = []
    i, n = 3, len(kept)
    while i < n:
        v = kept[i]
        if v is TENSOR:
            shape = kept[i + 1]
            if any(d < 0 for d in shape):  # a nested tensor: no one shape, as spec_of says
                shape = None
            args.append(TensorSpec(shape, kept[i + 2], None, kept[i + 3]))
            i += 4
        elif isinstance(v, Tensor):
            spec = known.get(id(v)) if known is not None else None
            args.append(spec if spec is not None else spec_of(v))
            i += 1
        else:
            args.append(v)
            i += 1
    return kept[0], kept[1], tuple(args), kept[2]


class TensorSpec:
    """A tensor argument as the recording keeps it: its shape and dtype.

    Attributes:
        shape: the tensor's shape (``None`` for a nested tensor, which has no one shape).
        dtype: the tensor's dtype.
        values: the elements, flattened, of a small integer tensor on the CPU, else ``None``.
        requires_grad: whether the tensor required gradients (what a backward pass computes).
    """

    __slots__ = ("dtype", "requires_grad", "shape", "values")

    def __init__(self, shape: Optional[tuple[int, ...]], dtype: torch.dtype,
                 values: Optional[tuple[int, ...]] = None, requires_grad: bool = False) -> None:
        self.shape = shape
        self.dtype = dtype
        self.values = values
        self.requires_grad = requires_grad

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TensorSpec) and self.shape == other.shape and self.dtype == other.dtype
                and self.values == other.values and self.requires_grad == other.requires_grad)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.values, self.requires_grad))

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"TensorSpec({self.shape!r}, {self.dtype}{grad})"


def spec_of(value: Any) -> Any:
    """``value`` with every tensor in it (in tuples, lists and dicts) replaced by its
    :class:`TensorSpec`."""
    if isinstance(value, Tensor):
        dtype = value.dtype
        try:
            shape = tuple(value.shape)
        except RuntimeError:  # a nested tensor: no one shape
            return TensorSpec(None, dtype)
        if dtype.is_floating_point or dtype.is_complex or dtype is torch.bool:
            # the common case: data, whose values change no count
            return TensorSpec(shape, dtype, None, value.requires_grad)
        values = None
        if value.device.type == "cpu" and value.numel() <= MAX_KEPT_VALUES:
            values = tuple(value.reshape(-1).tolist())
        return TensorSpec(shape, dtype, values)
    if isinstance(value, tuple):
        return tuple([spec_of(v) for v in value])
    if isinstance(value, list):
        return [spec_of(v) for v in value]
    if isinstance(value, dict):
        return {k: spec_of(v) for k, v in value.items()}
    return value
