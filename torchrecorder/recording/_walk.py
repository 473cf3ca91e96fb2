"""Find the tensors inside the arguments and results of a forward call, and swap some.

The recorder reads tensors out of arbitrary containers: tuples (named or not),
lists, dicts (``ModelOutput`` is one), dataclasses, and anything else, which is
left alone.  The one thing it ever replaces is a tensor that a module returned
although it existed before the call (its input, a parameter, a buffer): the
module's output then gets its own alias (see
:meth:`~torchrecorder.recording.engine.Engine.register_hooks`), and
:func:`replace_tensors` rebuilds the containers on the way to it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator, Mapping
from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType
from typing import Any

from torch import Tensor
from torch.nn import Module, Parameter

__all__ = ["iter_tensors", "named_tensors", "replace_tensors"]

_MAX_ITEMS = 100_000  # containers larger than this are not searched further


def _children(obj: Any) -> Any:
    """The items of a container worth searching, or ``None`` for a leaf."""
    if isinstance(obj, (list, tuple)):
        return obj
    if type(obj) is dict:  # the common case, before the slower ABC check
        return list(obj.values())
    if isinstance(obj, Mapping):
        return list(obj.values())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [getattr(obj, f.name, None) for f in dataclasses.fields(obj)]
    return None


def iter_tensors(obj: Any) -> Iterator[Tensor]:
    """Yield every tensor in ``obj``, depth first, each object once.

    >>> import torch
    >>> [t.shape for t in iter_tensors({"a": (torch.zeros(2), None), "b": [torch.ones(1, 3)]})]
    [torch.Size([2]), torch.Size([1, 3])]
    """
    if isinstance(obj, Tensor):
        yield obj
        return
    seen: set[int] = set()
    stack = [obj]
    budget = _MAX_ITEMS
    while stack and budget > 0:
        item = stack.pop()
        budget -= 1
        if isinstance(item, Tensor):
            if id(item) not in seen:
                seen.add(id(item))
                yield item
            continue
        if item is None or isinstance(item, (int, float, bool, str, bytes)):
            continue
        children = _children(item)
        if children is None or id(item) in seen:
            continue
        seen.add(id(item))
        stack.extend(reversed(children))


def _attributes(obj: Any) -> Any:
    """The instance attributes of a plain object worth searching, or ``None``: not of a
    module, a class, a function or anything without a ``__dict__``.  Parameters are left
    out: an object that holds the model's weights hands them on, they are not inputs."""
    if isinstance(obj, (Module, type, FunctionType, MethodType, BuiltinFunctionType, ModuleType)):
        return None
    attrs = getattr(obj, "__dict__", None)
    if type(attrs) is not dict:
        return None
    return {k: v for k, v in attrs.items() if not isinstance(v, Parameter)}


def named_tensors(obj: Any, prefix: str, objects: bool = False,
                  join: bool = False) -> Iterator[tuple[str, Tensor]]:
    """Yield ``(name, tensor)`` for every tensor in ``obj``, once; names show where it sits.

    With ``objects``, the attributes of other objects are searched too (a key/value
    cache such as transformers' ``DynamicCache`` holds its tensors as attributes).  With
    ``join``, a tensor found at several places of the containers (``return h, h * 2, h``)
    is named after them (``out[0], out[2]``; the first three and a count), where it was
    found first; one found again among an object's attributes keeps the name it had.
    Without ``join``, only the first place names it.

    >>> import torch
    >>> [n for n, _ in named_tensors({"logits": torch.zeros(1), "past": (torch.zeros(1),)}, "out")]
    ['out.logits', 'out.past[0]']
    >>> h = torch.zeros(1)
    >>> [n for n, _ in named_tensors((h, h + 1, h), "out", join=True)]
    ['out[0], out[2]', 'out[1]']
    >>> [n for n, _ in named_tensors((h, h + 1, h), "out")]
    ['out[0]', 'out[1]']
    """
    seen: set[int] = set()
    found: dict[int, tuple[list[str], Tensor, bool]] = {}  # id -> names, tensor, found in an object
    stack: list[tuple[str, Any, bool]] = [(prefix, obj, False)]
    budget = _MAX_ITEMS
    while stack and budget > 0:
        name, item, in_object = stack.pop()
        budget -= 1
        if isinstance(item, Tensor):
            got = found.get(id(item))
            if got is None:
                found[id(item)] = ([name], item, in_object)
            elif join and not (in_object or got[2]):
                got[0].append(name)
            continue
        if id(item) in seen:
            continue
        if isinstance(item, (list, tuple)):
            seen.add(id(item))
            stack.extend((f"{name}[{i}]", v, in_object) for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, Mapping):
            seen.add(id(item))
            stack.extend((f"{name}.{k}", v, in_object) for k, v in reversed(list(item.items())))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            seen.add(id(item))
            fields = [(f"{name}.{f.name}", getattr(item, f.name, None), in_object)
                      for f in dataclasses.fields(item)]
            stack.extend(reversed(fields))
        elif objects and item is not None and not isinstance(item, (int, float, bool, str, bytes)):
            attrs = _attributes(item)
            if attrs is not None:
                seen.add(id(item))
                stack.extend((f"{name}.{k}", v, True) for k, v in reversed(list(attrs.items())))
    for names, tensor, _ in found.values():
        more = len(names) - _MAX_NAMES
        yield ", ".join(names[:_MAX_NAMES]) + (f" and {more} more" if more > 0 else ""), tensor


_MAX_NAMES = 3  # a tensor returned at more places is named after its first three and a count


_MAX_DEPTH = 64  # containers nested deeper than this are not rebuilt (replace_tensors raises)


def replace_tensors(obj: Any, subst: dict[int, Tensor]) -> Any:
    """``obj`` with every tensor whose ``id`` is in ``subst`` replaced by ``subst[id]``.

    Only the containers on the way to a replaced tensor are rebuilt, as objects of
    the same type: tuples, namedtuples (``_replace``), lists, dicts, other
    mappings and dataclasses (a shallow copy with the entries or fields set
    again).  Everything else is returned as it is, so the caller's own objects
    (a module's list attribute, say) are never changed.

    Raises:
        TypeError: a container on the way cannot be copied (the caller then
            keeps the original outputs).

    >>> import torch
    >>> a, b = torch.zeros(1), torch.ones(1)
    >>> out = replace_tensors({"x": (a, 3), "y": [b]}, {id(a): b})
    >>> out["x"][0] is b, out["x"][1], out["y"][0] is b
    (True, 3, True)
    """
    return _replace(obj, subst, 0)


def _replace(obj: Any, subst: dict[int, Tensor], depth: int) -> Any:
    if isinstance(obj, Tensor):
        return subst.get(id(obj), obj)
    if obj is None or isinstance(obj, (int, float, bool, str, bytes)):
        return obj
    if depth > _MAX_DEPTH:
        raise TypeError(f"outputs nested more than {_MAX_DEPTH} containers deep")
    if isinstance(obj, (list, tuple)):
        items = [_replace(v, subst, depth + 1) for v in obj]
        if all(a is b for a, b in zip(items, obj, strict=True)):
            return obj
        if type(obj) is tuple:
            return tuple(items)
        if type(obj) is list:
            return items
        if isinstance(obj, tuple) and hasattr(obj, "_replace") and hasattr(obj, "_fields"):
            return obj._replace(**dict(zip(obj._fields, items, strict=True)))
        try:
            return type(obj)(items)
        except Exception as exc:
            raise TypeError(f"cannot rebuild a {type(obj).__name__}: {exc}") from exc
    children = _children(obj)
    if children is None:
        return obj
    if isinstance(obj, Mapping):
        changed = {k: new for k, v in obj.items() if (new := _replace(v, subst, depth + 1)) is not v}
        if not changed:
            return obj
        if type(obj) is dict:
            return {k: changed.get(k, v) for k, v in obj.items()}
        try:
            out: Any = copy.copy(obj)
            for k, v in changed.items():
                out[k] = v
        except Exception as exc:
            raise TypeError(f"cannot rebuild a {type(obj).__name__}: {exc}") from exc
        return out
    # a dataclass instance
    fields = {f.name: getattr(obj, f.name, None) for f in dataclasses.fields(obj)}
    changed = {k: new for k, v in fields.items() if (new := _replace(v, subst, depth + 1)) is not v}
    if not changed:
        return obj
    try:
        copied = copy.copy(obj)
        for k, v in changed.items():
            object.__setattr__(copied, k, v)
    except Exception as exc:
        raise TypeError(f"cannot rebuild a {type(obj).__name__}: {exc}") from exc
    return copied
