"""Models named by text: ``package.module:factory`` or ``path/to/file.py:factory``.

The command line and the Sphinx directive (:mod:`torchrecorder.sphinxext`) both
take a model as such a string, with input shapes such as ``1,3,224,224`` and a
dtype name such as ``int64``; this module turns that text into a module, shapes
and a dtype, and raises :class:`ModelSpecError` (a ``ValueError``) with a
message a person can act on when it cannot.  Both own the model they build, so
:func:`initialize_lazy` may run it once to give its lazy modules their shapes
(:func:`torchrecorder.record` refuses a user's model that has not run yet).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from typing import Any, Optional

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from .recording import InputShapes, integer_inputs, is_integer_dtype, make_inputs

__all__ = ["ModelSpecError", "initialize_lazy", "load_model", "match_input_dtype", "parse_dtype",
           "parse_shape"]


class ModelSpecError(ValueError):
    """A model, shape or dtype given as text that names nothing usable."""


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1,3,224,224"`` (or ``"1x3x224x224"``, ``"(1, 3)"``, ``"(8,)"``) -> ``(1, 3, 224, 224)``.

    Each dimension is a non-negative integer, and one separator (a comma, ``x``, ``×``
    or spaces) stands between two of them: ``"4,x"`` and ``"4,,16"`` are not shapes.

    >>> parse_shape("1,3,224,224"), parse_shape("2x16"), parse_shape("(1, 8)"), parse_shape("(8,)")
    ((1, 3, 224, 224), (2, 16), (1, 8), (8,))

    Raises:
        ModelSpecError: ``text`` is not such a shape.
    """
    body = text.strip().strip("()[]").strip()
    body = body[:-1].rstrip() if body.endswith(",") else body  # a 1-tuple: (8,)
    dims = re.split(r"\s*[,x×]\s*|\s+", body)
    if not all(re.fullmatch(r"[0-9]+", d) for d in dims):
        raise ModelSpecError(f"{text!r} is not a shape such as 1,3,224,224")
    return tuple(int(d) for d in dims)


def parse_dtype(text: Optional[str]) -> Optional[torch.dtype]:
    """``"int64"`` or ``"torch.int64"`` -> ``torch.int64``; ``None`` -> ``None``.

    >>> parse_dtype("float16"), parse_dtype("torch.long")
    (torch.float16, torch.int64)
    """
    if text is None:
        return None
    name = text.strip()
    name = name[len("torch."):] if name.startswith("torch.") else name
    dtype = getattr(torch, name, None) if name.isidentifier() else None
    if not isinstance(dtype, torch.dtype):
        raise ModelSpecError(f"{text!r} is not a torch dtype (such as float32, bfloat16, int64, bool)")
    return dtype


def _import_file(path: str) -> Any:
    """Import the Python file at ``path`` as a module (its folder importable while it runs)."""
    if not os.path.isfile(path):
        raise ModelSpecError(f"no such file: {path}")
    stem = os.path.splitext(os.path.basename(path))[0]
    name = f"_torchrecorder_model_{re.sub(r'[^0-9A-Za-z_]', '_', stem)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelSpecError(f"cannot import {path} as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    return module


def load_model(spec: str) -> nn.Module:
    """Build the model named by ``module.path:attr`` or ``path/to/file.py:attr``.

    ``attr`` (dotted for a nested attribute) may be a module instance, or a
    callable (class or factory function) that takes no arguments and returns
    one.  Modules are imported as by ``python -c "import module.path"``: the
    caller decides what is on ``sys.path`` (the command line puts the current
    directory first).

    Raises:
        ModelSpecError: ``spec`` is malformed, the module cannot be imported,
            has no such attribute, or the factory returned no ``nn.Module``.
        Exception: whatever the imported module or the factory raised while
            running (with a note naming ``spec``).
    """
    if not isinstance(spec, str):
        raise ModelSpecError(f"model must be a str such as 'package.module:factory', got {spec!r}")
    target, sep, attr = spec.strip().rpartition(":")
    if not sep or not target or not attr:
        raise ModelSpecError(f"model {spec!r} must look like 'package.module:factory' or 'file.py:factory'")
    if target.endswith(".py") or os.sep in target or (os.altsep and os.altsep in target):
        module = _import_file(target)
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name is None or not (target == exc.name or target.startswith(exc.name + ".")):
                raise  # the module exists but imports something missing: its own error is clearer
            raise ModelSpecError(
                f"cannot import {target!r} (from {spec!r}): {exc}; run from the folder that holds "
                "it, add that folder to PYTHONPATH, or give a file path such as models.py:factory"
            ) from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ModelSpecError(f"{target} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if callable(obj) and not isinstance(obj, nn.Module):
        try:
            obj = obj()
        except Exception as exc:
            if hasattr(exc, "add_note"):  # Python 3.11+
                exc.add_note(f"while calling {spec} to build the model")
            raise
    if not isinstance(obj, nn.Module):
        raise ModelSpecError(f"{spec} gave {type(obj).__name__} {obj!r:.60}, not a torch.nn.Module")
    return obj


def _lazy_tensors(net: nn.Module) -> list[str]:
    """Dotted names of the uninitialized parameters and buffers of ``net``."""
    return [name for name, t in (*net.named_parameters(remove_duplicate=False),
                                 *net.named_buffers(remove_duplicate=False)) if is_lazy(t)]


def match_input_dtype(net: nn.Module, dtype: Optional[torch.dtype]) -> None:
    """Convert ``net``'s floating parameters and buffers to a floating ``dtype`` given for its
    inputs (``float16``, ``bfloat16``, ``float64``); other dtypes (token ids, masks) leave it.

    Only for models the caller built itself (the command line and the directive): asked for
    half-precision inputs, they draw the model in half precision, where a model left in
    ``float32`` would refuse them (``Input type (c10::Half) and bias type (float)``).
    """
    if dtype is not None and dtype.is_floating_point:
        net.to(dtype)


def initialize_lazy(net: nn.Module, input_shapes: InputShapes, *, dtype: Optional[torch.dtype] = None,
                    device: Any = None) -> bool:
    """Run ``net`` once on inputs of ``input_shapes`` when it holds lazy modules (``nn.LazyLinear``,
    ``nn.LazyConv2d``, ...), so that their parameters get their shapes before recording.

    Only for models the caller built itself (the command line and the directive): it changes
    the model as its first call would.  The pass runs under :func:`torch.no_grad` in ``eval()``
    mode, on the inputs :func:`torchrecorder.record` would make (``dtype``, ``device`` as there);
    afterwards each module's training flag and the values of the parameters and buffers
    that existed before are put back, so only the lazy ones change (they are initialized as
    their first call initializes them).

    Returns:
        whether the model ran (``False``: it held no lazy parameter or buffer).

    Raises:
        RuntimeError: the model still holds uninitialized tensors after the pass.
        Exception: whatever the forward pass raised, with a note saying it was this pass.
    """
    if not _lazy_tensors(net):
        return False
    if is_integer_dtype(dtype) and input_shapes is not None:
        args = integer_inputs(net, input_shapes, dtype, device)  # type: ignore[arg-type]
    else:
        args = make_inputs(net, input_shapes, None, device, dtype)
    modes = [(m, m.training) for m in net.modules()]
    kept = [(t, t.detach().clone()) for t in (*net.parameters(), *net.buffers()) if not is_lazy(t)]
    try:
        with torch.no_grad():
            net.eval()
            net(*args)
    except Exception as exc:
        if hasattr(exc, "add_note"):  # Python 3.11+
            exc.add_note("while running the model once to initialize its lazy modules")
        raise
    finally:
        for module, training in modes:
            module.training = training
        with torch.no_grad():
            for tensor, value in kept:
                if tensor.shape == value.shape:
                    tensor.copy_(value)
    left = _lazy_tensors(net)
    if left:
        raise RuntimeError(f"the model still holds uninitialized tensors after one forward pass: "
                           f"{', '.join(left[:5])} (a lazy module that this input does not reach)")
    return True
