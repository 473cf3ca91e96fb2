"""What a hook keeps of the values it sees: tensors detached, copied, moved; reductions part by part.

A value is a tensor or any nesting of containers holding tensors: tuples
(named tuples and ``torch.return_types`` such as ``torch.max``'s keep their
type), lists, dicts and other mappings, and dataclasses (``transformers``'
``ModelOutput`` included).  :func:`keep_value` rebuilds every container as a
new object of its own type, so nothing the model does to its output later
reaches what was kept; other objects (``None``, numbers, strings, a cache
object) are kept as they are.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, Optional, Union

import torch

__all__ = ["Device", "ReductionError", "add_note", "check_device", "check_edit_result", "inputs_value",
           "keep_value", "leaves", "reduce_values"]

Device = Union[str, torch.device, None]


class ReductionError(ValueError):
    """A layer's value changed structure between two calls, so ``reduction`` cannot merge them."""


def check_device(to: Device) -> Optional[torch.device]:
    """``to`` as a :class:`torch.device` (``None`` stays ``None``); a clear error if it is none."""
    if to is None:
        return None
    try:
        device = torch.device(to)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"to= must be a device such as 'cpu' or 'cuda:0', got {to!r}") from exc
    try:  # one this torch cannot use fails here, before the model runs, not after a layer
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as exc:
        raise ValueError(f"to={to!r} is not a device this torch can use: {exc}") from exc
    return device


def _is_structseq(value: Any) -> bool:
    """Whether ``value`` is a ``torch.return_types`` result (``torch.max(x, 1)``), a struct sequence."""
    return isinstance(value, tuple) and hasattr(type(value), "n_sequence_fields")


def _is_dataclass(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _rebuild_tuple(value: tuple[Any, ...], items: list[Any]) -> tuple[Any, ...]:
    if _is_structseq(value):
        return type(value)(items)
    if hasattr(value, "_fields"):  # a named tuple
        return type(value)(*items)
    if type(value) is tuple:
        return tuple(items)
    try:
        return type(value)(items)
    except TypeError:
        return tuple(items)


def _rebuild_dataclass(value: Any, fields: dict[str, Any]) -> Any:
    """A new instance of ``value``'s dataclass with ``fields`` (name -> new value).

    Built through ``__init__`` (so that ``ModelOutput`` rebuilds its mapping);
    fields that ``__init__`` does not take, or a class whose ``__init__`` refuses
    them, are set on a shallow copy instead.
    """
    init = {f.name: fields[f.name] for f in dataclasses.fields(value) if f.init}
    try:
        new = dataclasses.replace(value, **init)
        rest = [n for n in fields if n not in init]
    except (TypeError, ValueError):
        new = copy.copy(value)
        rest = list(fields)
    for name in rest:
        object.__setattr__(new, name, fields[name])
    return new


def _rebuild_mapping(value: Mapping[Any, Any], items: dict[Any, Any]) -> Mapping[Any, Any]:
    if type(value) is dict:
        return items
    if isinstance(value, MutableMapping):  # a copy keeps what the type holds (a default factory)
        try:
            new = copy.copy(value)
            new.clear()
            new.update(items)
            return new
        except (TypeError, AttributeError, RuntimeError):
            pass
    try:
        return type(value)(items)  # type: ignore[call-arg]
    except TypeError:
        return items


def _map(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """``value`` rebuilt with ``fn`` applied to each tensor (containers new, other objects as they are)."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if _is_dataclass(value):
        return _rebuild_dataclass(value, {f.name: _map(getattr(value, f.name), fn)
                                          for f in dataclasses.fields(value)})
    if isinstance(value, tuple):
        return _rebuild_tuple(value, [_map(v, fn) for v in value])
    if isinstance(value, list):
        items = [_map(v, fn) for v in value]
        return items if type(value) is list else _rebuild_list(value, items)
    if isinstance(value, Mapping):
        return _rebuild_mapping(value, {k: _map(v, fn) for k, v in value.items()})
    return value


def _rebuild_list(value: list[Any], items: list[Any]) -> list[Any]:
    try:
        return type(value)(items)
    except TypeError:
        return items


def keep_value(value: Any, *, detach: bool = True, to: Optional[torch.device] = None,
               clone: bool = True) -> Any:
    """``value`` with each tensor detached (``detach``), moved to ``to`` and copied (``clone``), in
    new containers of the same types, so that later changes in the model cannot reach what was kept.
    A tensor on ``meta`` stays there (it has no data to move: shapes only)."""

    def one(t: torch.Tensor) -> torch.Tensor:
        if detach:
            t = t.detach()
        if to is not None and t.device != to and not t.is_meta:
            return t.to(to)  # a copy already
        return t.clone() if clone else t

    return _map(value, one)


def leaves(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value``, in order."""
    out: list[torch.Tensor] = []
    _map(value, out.append)
    return out


def _kind(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, torch.Tensor):
        return "a tensor"
    if isinstance(value, (tuple, list)) and not _is_dataclass(value):
        return f"a {type(value).__name__} of {len(value)}"
    if isinstance(value, Mapping) and not _is_dataclass(value):
        return f"a {type(value).__name__} with keys {list(value)!r}"
    return f"a {type(value).__name__}"


def reduce_values(acc: Any, new: Any, fn: Callable[[Any, Any], Any], name: str = "") -> Any:
    """Merge ``new`` into ``acc`` part by part: ``fn(a, b)`` for each pair of tensors at the same
    place; ``None`` stays ``None``; other parts (numbers, strings, a cache object) are kept as the
    latest call gave them.

    Both must have one structure (the same container types, lengths and keys,
    a tensor where the other has one).

    Raises:
        ReductionError: the structures differ; the message names the layer ``name`` and where.
        Exception: what ``fn`` raised, with a note naming the layer and the part.
    """
    return _reduce(acc, new, fn, name, "")


def _reduce(acc: Any, new: Any, fn: Callable[[Any, Any], Any], name: str, where: str) -> Any:
    def mismatch() -> ReductionError:
        at = f" at {where}" if where else ""
        return ReductionError(
            f"cannot reduce the value of layer {name!r}: its structure changed between calls{at} "
            f"(kept: {_kind(acc)}, new: {_kind(new)}); reduction needs the same structure every "
            "call (record without reduction= to keep each call's value)")

    if acc is None or new is None:
        if acc is None and new is None:
            return None
        raise mismatch()
    if isinstance(acc, torch.Tensor) or isinstance(new, torch.Tensor):
        if not (isinstance(acc, torch.Tensor) and isinstance(new, torch.Tensor)):
            raise mismatch()
        return _apply(fn, acc, new, name, where)
    if _is_dataclass(acc) or _is_dataclass(new):
        if type(acc) is not type(new):
            raise mismatch()
        return _rebuild_dataclass(acc, {f.name: _reduce(getattr(acc, f.name), getattr(new, f.name), fn,
                                                        name, f"{where}.{f.name}")
                                        for f in dataclasses.fields(acc)})
    if isinstance(acc, (tuple, list)) or isinstance(new, (tuple, list)):
        if type(acc) is not type(new) or len(acc) != len(new):
            raise mismatch()
        pairs = enumerate(zip(acc, new, strict=True))
        items = [_reduce(a, b, fn, name, f"{where}[{i}]") for i, (a, b) in pairs]
        return _rebuild_tuple(acc, items) if isinstance(acc, tuple) else _rebuild_list(acc, items)
    if isinstance(acc, Mapping) or isinstance(new, Mapping):
        if not (isinstance(acc, Mapping) and isinstance(new, Mapping)) or list(acc) != list(new):
            raise mismatch()
        return _rebuild_mapping(acc, {k: _reduce(acc[k], new[k], fn, name, f"{where}[{k!r}]")
                                      for k in acc})
    return new  # not a tensor: kept, the latest value


def _apply(fn: Callable[[Any, Any], Any], a: Any, b: Any, name: str, where: str) -> Any:
    try:
        return fn(a, b)
    except Exception as exc:
        shapes = (f" (shapes {tuple(a.shape)} and {tuple(b.shape)})"
                  if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) else "")
        add_note(exc, f"torchrecorder: reduction= failed on layer {name!r}"
                 + (f" at {where}" if where else "") + shapes)
        raise


def add_note(exc: BaseException, note: str) -> None:
    """``exc.add_note(note)`` where Python has it (3.11+); an exception that refuses notes
    (an ``add_note`` of its own that raises) goes on without one."""
    adder = getattr(exc, "add_note", None)
    if adder is not None:
        try:
            adder(note)
        except Exception:  # the caller re-raises ``exc`` as it is
            pass


def inputs_value(args: tuple[Any, ...], kwargs: Optional[Mapping[str, Any]]) -> Any:
    """What a module received: the argument itself if it got one positional argument, a tuple of
    them if several; ``(args, kwargs)`` when it got keyword arguments too."""
    if kwargs:
        return (tuple(args), dict(kwargs))
    return args[0] if len(args) == 1 else tuple(args)


def _signature(value: Any) -> str:
    """``(2, 7, 32) float32``, or the shapes of every tensor in a structure, for messages."""
    parts = [f"{'nested' if t.is_nested else tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"
             for t in leaves(value)]
    if not parts:
        return f"a {type(value).__name__} (no tensor)"
    return parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"


def reshaped(old: Any, new: Any) -> Optional[str]:
    """How an edit's replacement ``new`` differs from the output ``old`` in its tensors' shapes
    and dtypes (``"(2, 7, 32) float32 to (2, 7, 5) float32"``), or ``None`` where it keeps them."""
    was, now = _signature(old), _signature(new)
    return None if was == now else f"{was} to {now}"


def sync(*values: Any) -> None:
    """Wait for an accelerator that holds any of ``values`` (so a timing measures the work)."""
    for t in leaves(values):
        if t.device.type == "cuda":
            torch.cuda.synchronize(t.device)
            return


def check_edit_result(name: str, output: Any, replaced: Any, module: bool = True) -> None:
    """What ``edit(name, output)`` returned, checked: a string is refused (an edit written for
    baukit's ``edit_output(output, layer)``), and one of the output's own tensors handed back
    in place of a container (``lambda name, out: out[0].mul_(2)``, the result of an in-place
    change of one item) is warned of: it replaces the whole output, and a model that unpacks
    ``a, b = layer(...)`` from a batch of two reads on without error.  (An operation's edit,
    ``module=False``, must keep the output's structure: it is refused there instead.)"""
    if isinstance(replaced, str):
        raise TypeError(f"edit returned a str for {name!r}, not a new output: capture calls "
                        "edit(name, output) with the name first (baukit's edit_output takes "
                        "output, layer)")
    if not module or not isinstance(replaced, torch.Tensor) or isinstance(output, torch.Tensor) \
            or replaced is output:
        return
    if _is_dataclass(output):
        items: Any = ((f.name, getattr(output, f.name)) for f in dataclasses.fields(output))
    else:
        items = output.items() if isinstance(output, Mapping) else \
            enumerate(output) if isinstance(output, (tuple, list)) else ()
    where = next((f"item {k!r}" for k, v in items if v is replaced), None)
    if where is None and any(t is replaced for t in leaves(output)):
        where = "a tensor"
    if where is not None:
        warnings.warn(f"edit returned {where} of the output of {name!r} ({_kind(output)}), which "
                      "replaces the whole output with that one tensor: an edit that changes the "
                      "output in place returns None (or the output); to replace the output with "
                      "one of its tensors, return a copy of it", RuntimeWarning, stacklevel=2)
