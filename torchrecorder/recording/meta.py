"""What the recording engine reads off live objects: tensor metadata, argument names, op names."""

from __future__ import annotations

import inspect
from typing import Any, Generic, TypeVar

from torch import Tensor, nn

from ..nodes import shape_str

__all__ = ["Memo", "bind_arguments", "grad_fn_op_name", "shape_name", "tensor_meta"]

K = TypeVar("K")
V = TypeVar("V")


class Memo(dict[K, V], Generic[K, V]):
    """A process-wide memo of what is the same in every recording (names of dtypes, shapes,
    torch callables, signatures).  One rule bounds them all: a memo that reaches ``limit``
    entries starts over.

    >>> m: Memo[int, str] = Memo(2)
    >>> m.put(1, "a"), m.put(2, "b"), m.put(3, "c"), sorted(m)
    ('a', 'b', 'c', [3])
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: K, value: V) -> V:
        """Remember ``value`` under ``key`` (starting over when full) and return it."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


_DTYPE_NAMES: Memo[Any, str] = Memo(256)
_DEVICE_NAMES: Memo[Any, str] = Memo(256)
_SHAPE_NAMES: Memo[tuple[int, ...], str] = Memo(4096)


def tensor_meta(t: Tensor) -> tuple[tuple[int, ...], str, str]:
    """Shape, dtype name and device name of ``t`` (the names are cached: str() is slow)."""
    dtype, device = t.dtype, t.device
    dname = _DTYPE_NAMES.get(dtype)
    if dname is None:
        dname = _DTYPE_NAMES.put(dtype, str(dtype).replace("torch.", ""))
    devname = _DEVICE_NAMES.get(device)
    if devname is None:
        devname = _DEVICE_NAMES.put(device, str(device))
    return tuple(t.shape), dname, devname


def shape_name(shape: tuple[int, ...]) -> str:
    """``shape_str(shape)``, remembered (a recording names many tensors of the same shape)."""
    name = _SHAPE_NAMES.get(shape)
    if name is None:
        name = _SHAPE_NAMES.put(shape, shape_str(shape))
    return name


def grad_fn_op_name(classname: str) -> str:
    """``AddmmBackward0`` -> ``addmm``; ``NativeLayerNormBackward0`` -> ``native_layer_norm``.

    >>> grad_fn_op_name("NativeLayerNormBackward0")
    'native_layer_norm'
    """
    base = classname
    for suffix in ("Backward0", "Backward1", "Backward"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    out = []
    for i, ch in enumerate(base):
        boundary = base[i - 1].islower() or (i + 1 < len(base) and base[i + 1].islower())
        if ch.isupper() and i > 0 and boundary:
            out.append("_")
        out.append(ch.lower())
    return "".join(out) or classname


# forward function -> its signature (inspect.signature takes longer than recording a small module)
_SIGNATURES: Memo[Any, inspect.Signature] = Memo(1024)


def _signature(forward: Any) -> inspect.Signature:
    """``inspect.signature(forward)``, remembered per function for bound methods."""
    func = getattr(forward, "__func__", None)
    if func is None or getattr(forward, "__self__", None) is None:
        return inspect.signature(forward)
    sig = _SIGNATURES.get(func)
    if sig is None:
        # the signature of the function less its first (self) parameter, as for the bound method
        sig = _SIGNATURES.put(func, inspect.signature(forward))
    return sig


def bind_arguments(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Name the root module's arguments after its ``forward`` signature."""
    try:
        bound = _signature(module.forward).bind(*args, **kwargs)
    except (TypeError, ValueError):
        named: dict[str, Any] = {f"input{i}" if len(args) > 1 else "input": a for i, a in enumerate(args)}
        named.update(kwargs)
        return named
    out: dict[str, Any] = {}
    for pname, value in bound.arguments.items():
        param = bound.signature.parameters[pname]
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        elif param.kind is inspect.Parameter.VAR_POSITIONAL:
            out.update({f"{pname}[{i}]": v for i, v in enumerate(value)})
        else:
            out[pname] = value
    return out
