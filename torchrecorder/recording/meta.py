"""What the recording engine reads off live objects: tensor metadata, argument names, op names."""

from __future__ import annotations

import inspect
from typing import Any

from torch import Tensor, nn

from ..nodes import shape_str

__all__ = ["bind_arguments", "grad_fn_op_name", "shape_name", "tensor_meta"]

_DTYPE_NAMES: dict[Any, str] = {}
_DEVICE_NAMES: dict[Any, str] = {}
_SHAPE_NAMES: dict[tuple[int, ...], str] = {}


def tensor_meta(t: Tensor) -> tuple[tuple[int, ...], str, str]:
    """Shape, dtype name and device name of ``t`` (the names are cached: str() is slow)."""
    dtype, device = t.dtype, t.device
    dname = _DTYPE_NAMES.get(dtype)
    if dname is None:
        dname = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    devname = _DEVICE_NAMES.get(device)
    if devname is None:
        devname = _DEVICE_NAMES[device] = str(device)
    return tuple(t.shape), dname, devname


def shape_name(shape: tuple[int, ...]) -> str:
    """``shape_str(shape)``, remembered (a recording names many tensors of the same shape)."""
    name = _SHAPE_NAMES.get(shape)
    if name is None:
        if len(_SHAPE_NAMES) >= 4096:
            _SHAPE_NAMES.clear()
        name = _SHAPE_NAMES[shape] = shape_str(shape)
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
_SIGNATURES: dict[Any, inspect.Signature] = {}


def _signature(forward: Any) -> inspect.Signature:
    """``inspect.signature(forward)``, remembered per function for bound methods."""
    func = getattr(forward, "__func__", None)
    if func is None or getattr(forward, "__self__", None) is None:
        return inspect.signature(forward)
    sig = _SIGNATURES.get(func)
    if sig is None:
        # the signature of the function less its first (self) parameter, as for the bound method
        sig = inspect.signature(forward)
        if len(_SIGNATURES) >= 1024:
            _SIGNATURES.clear()
        _SIGNATURES[func] = sig
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
