"""The positional and keyword arguments of a recorded call, made from what ``record`` is
given: input shapes (random tensors), ``input_data`` and ``input_kwargs``."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

import torch
from torch import Tensor, nn

__all__ = ["InputShapes", "inputs_listed", "keyword_data", "keyword_inputs", "list_argument_hint",
           "make_inputs", "normalise_shapes"]

Shape = Sequence[int]
InputShapes = Union[None, Shape, list[Shape]]


def normalise_shapes(input_shapes: Any) -> list[tuple[int, ...]]:
    """``(1, 3)`` -> ``[(1, 3)]``; ``[(1, 3), (1, 5)]`` -> itself; a list of ints is one shape,
    as torchinfo reads it (``[1, 3]`` -> ``[(1, 3)]``); anything else is an error.

    >>> normalise_shapes((1, 3)), normalise_shapes([(1, 3), [2]]), normalise_shapes([1, 3])
    ([(1, 3)], [(1, 3), (2,)], [(1, 3)])
    """
    def as_shape(s: Any) -> tuple[int, ...]:
        if isinstance(s, (tuple, list, torch.Size)) and all(
            isinstance(d, int) and not isinstance(d, bool) for d in s
        ):
            if any(d < 0 for d in s):
                raise ValueError(f"input shape {tuple(s)} has a negative dimension")
            return tuple(s)
        if isinstance(s, Tensor):  # data given as shapes: name it without printing its values
            raise TypeError(f"input_shapes holds a tensor ({tuple(s.shape)}): pass tensors as "
                            "input_data=, shapes (tuples of ints) as input_shapes")
        raise TypeError(
            "input_shapes must be a tuple of ints for one input, or a list of such tuples "
            f"for several, got {input_shapes!r}"
        )

    if isinstance(input_shapes, (tuple, torch.Size)) and all(isinstance(d, int) for d in input_shapes):
        return [as_shape(input_shapes)]
    if isinstance(input_shapes, list) and input_shapes and all(
            isinstance(d, int) and not isinstance(d, bool) for d in input_shapes):
        return [as_shape(input_shapes)]  # [1, 3, 32, 32]: one shape, as torchinfo reads it
    if isinstance(input_shapes, (list, tuple)) and input_shapes:
        return [as_shape(s) for s in input_shapes]
    return [as_shape(input_shapes)]


def _default_device_dtype(net: nn.Module) -> tuple[torch.device, torch.dtype]:
    device, dtype = torch.device("cpu"), torch.get_default_dtype()
    for t in (*net.parameters(), *net.buffers()):
        device = t.device
        break
    # the floating dtype that holds most of the parameters' elements (the first one on a tie):
    # a float64 scale registered before float32 layers does not make the input float64
    count: dict[torch.dtype, int] = {}
    for p in net.parameters():
        if p.is_floating_point() and not isinstance(p, nn.parameter.UninitializedParameter):
            count[p.dtype] = count.get(p.dtype, 0) + p.numel()
    if count:
        dtype = max(count, key=count.__getitem__)
    return device, dtype


def make_inputs(net: nn.Module, input_shapes: Any, input_data: Any, device: Any,
                dtype: Optional[torch.dtype], kwargs: Optional[Mapping[str, Any]] = None) -> tuple[Any, ...]:
    """The positional arguments of the recorded call: ``input_data`` as a tuple, or random
    tensors of ``input_shapes`` on the model's device (or ``device``) in its dtype (or ``dtype``).

    A tuple is the arguments; a list is one argument, unless ``forward`` (called with the
    keyword arguments ``kwargs`` too) can take it only item by item, as several positional
    arguments (torchinfo's and torchview's ``input_data=[x, mask]``)."""
    if input_data is not None:
        if isinstance(input_data, list) and _takes_items_only(net, input_data, kwargs or {}):
            return tuple(input_data)
        return input_data if isinstance(input_data, tuple) else (input_data,)
    if input_shapes is None:  # keyword inputs only
        return ()
    shapes = normalise_shapes(input_shapes)
    dev, dt = _default_device_dtype(net)
    dev = torch.device(device) if device is not None else dev
    dt = dtype if dtype is not None else dt
    gen = torch.Generator().manual_seed(0)
    if dev.type == "meta":
        return tuple(torch.empty(s, dtype=dt, device=dev) for s in shapes)
    return tuple(torch.randn(s, generator=gen, dtype=dt).to(dev) for s in shapes)


def _takes_items_only(net: nn.Module, items: list[Any], kwargs: Mapping[str, Any]) -> bool:
    """Whether ``net``'s ``forward`` cannot take the list ``items`` as one positional argument
    (a required argument would be missing) but takes its items as several."""
    try:
        signature = inspect.signature(net.forward)
    except (TypeError, ValueError):  # a forward without a readable signature: one argument
        return False
    try:
        signature.bind(items, **kwargs)
        return False
    except TypeError:
        pass
    try:
        signature.bind(*items, **kwargs)
    except TypeError:
        return False
    return True


def keyword_data(net: nn.Module, input_shapes: Any, input_data: Any,
                 kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``input_data`` and the keyword arguments of the recorded call: a mapping given as
    ``input_data`` (without ``input_shapes``) whose keys all name arguments of ``forward``
    (``{"input_ids": ids, "attention_mask": mask}``, a tokenizer's output) is those keyword
    arguments, as torchinfo and torchview read a dict, and ``input_data`` is then ``None``; any
    other ``input_data`` (a dict of features that ``forward`` takes as its one argument) comes
    back as it is."""
    if input_shapes is not None or not isinstance(input_data, Mapping) or not input_data:
        return input_data, kwargs
    try:
        signature = inspect.signature(net.forward)
    except (TypeError, ValueError):
        return input_data, kwargs
    named = {name for name, p in signature.parameters.items()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    keys = list(input_data)
    if not all(isinstance(k, str) and k in named and k not in kwargs for k in keys):
        return input_data, kwargs
    merged = {**{k: input_data[k] for k in keys}, **kwargs}
    try:
        signature.bind(**merged)
    except TypeError:
        return input_data, kwargs
    return None, merged


class _ListArgumentHint:
    """See :func:`list_argument_hint` (a class, not a contextlib generator: the user's
    exception passes through untouched, also one whose attributes cannot be set)."""

    __slots__ = ("args", "input_data")

    def __init__(self, input_data: Any, args: tuple[Any, ...]) -> None:
        self.input_data, self.args = input_data, args

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: Any, exc: Optional[BaseException], tb: Any) -> None:
        data, args = self.input_data, self.args
        if isinstance(exc, TypeError) and isinstance(data, list) and len(args) == 1 and args[0] is data:
            adder = getattr(exc, "add_note", None)  # (Python 3.11+)
            try:  # (an exception that refuses notes goes on as it is)
                if adder is not None:
                    adder("torchrecorder: input_data is a list, passed to forward as one argument "
                          "(forward can take it as one); for one tensor pass input_data=(x,) or x, "
                          "for several a tuple")
            except Exception:
                pass


def list_argument_hint(input_data: Any, args: tuple[Any, ...]) -> _ListArgumentHint:
    """A ``with`` block in which a ``TypeError`` raised while ``input_data``, a list, is the
    call's one positional argument (``args``) gets a note: torchinfo and torchview read ``[x]``
    as ``x``."""
    return _ListArgumentHint(input_data, args)


def keyword_inputs(input_kwargs: Any) -> dict[str, Any]:
    """``input_kwargs`` (``None`` or a mapping of ``forward``'s argument names to values) as a
    new dict.

    Raises:
        TypeError: ``input_kwargs`` is not a mapping, or one of its keys is not a string.
    """
    if input_kwargs is None:
        return {}
    if not isinstance(input_kwargs, Mapping):
        hint = ("; positional inputs go in input_data" if isinstance(input_kwargs, (Tensor, tuple, list))
                else "")
        raise TypeError("input_kwargs must be a dict of forward's keyword arguments ({'attention_mask': "
                        f"mask}}), got {type(input_kwargs).__name__}{hint}")
    bad = [k for k in input_kwargs if not isinstance(k, str)]
    if bad:
        raise TypeError(f"input_kwargs' keys must be names of forward's arguments (strings), got {bad[0]!r}")
    return dict(input_kwargs)


def inputs_listed(input_shapes: Any, input_data: Any) -> bool:
    """Whether ``record`` was given its positional inputs as a sequence of them, however many:
    ``input_data`` a tuple of tensors, or ``input_shapes`` a list of shapes (a list of ints
    is one shape).  torchrecorder 1.0.3 then named even a single input ``Input-1``."""
    if input_data is not None:
        return isinstance(input_data, tuple)
    return isinstance(input_shapes, list) and not all(
        isinstance(d, int) and not isinstance(d, bool) for d in input_shapes)
