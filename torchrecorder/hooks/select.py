"""Choose layers of a live module by the names the graph and the summary show.

One rule serves :func:`torchrecorder.capture` and the recorders of
:mod:`torchrecorder.hooks.recorders`:

* ``names``: dotted paths as ``model.named_modules()`` gives them
  (``"encoder.layer.0.attention"``; ``""`` is the model itself), or glob
  patterns matched one dotted component at a time (``"encoder.layer.*.attention"``;
  ``*``, ``?`` and ``[...]`` within a component, ``**`` for any number of
  components, at least one at the end: ``"encoder.**"`` is everything inside ``encoder``);
* ``labels``: the ``depth-idx`` labels of the summary (``"1-3"``), read from a
  recording when one is given, else numbered over the module tree in
  definition order (torchinfo's numbers: the same whenever each module is
  called once, from its parent, in that order);
* ``types``: a class or tuple of classes (``isinstance``);
* ``indices``: positions in the iteration (``net.modules()``, where 0 is the
  model itself, or ``net.children()``), as in torchfunc.

A module is chosen when any given criterion chooses it; with none, all are (an empty
list given, ``names=[]``, is a criterion that chooses nothing).
Unknown names, patterns that match nothing, unknown labels and indices out of
range raise before anything is registered.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Sequence
from fnmatch import fnmatchcase
from typing import Any, Optional, Union

from torch import Tensor, nn
from torch.jit import ScriptModule

from .._fused import checks_hooks
from ..graph import Graph
from ..summary import label_paths

__all__ = ["UnknownLayerError", "call_numbers", "canonical_call", "check_types", "is_pattern", "match_names",
           "module_labels", "modules_above", "select_modules"]

Names = Union[str, Iterable[str], None]
_CALL = re.compile(r"^(.*)#([0-9]+)$")


class UnknownLayerError(KeyError, ValueError):
    """A name, pattern or label that names no layer; the message lists the nearest existing ones.

    It is a :class:`KeyError` (for ``cap[name]``) and a :class:`ValueError` (a bad argument).
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def nearest(name: str, available: Sequence[str], n: int = 5) -> str:
    """``"did you mean 'a', 'b'?"``, or a few of the available names when none is close."""
    shown = [repr(a) if a else "'' (the model itself)" for a in available]
    close = difflib.get_close_matches(name, list(available), n=n, cutoff=0.5)
    if close:
        return "nearest: " + ", ".join(repr(c) for c in close)
    if not available:
        return "there are no layers to choose from"
    more = f", ... ({len(available)} in all)" if len(available) > n else ""
    return "available: " + ", ".join(shown[:n]) + more


def is_pattern(name: str) -> bool:
    """Whether ``name`` is a glob pattern rather than a dotted path."""
    return any(ch in name for ch in "*?[")


def _glob(parts: list[str], path: list[str]) -> bool:
    if not parts:
        return not path
    head, rest = parts[0], parts[1:]
    if head == "**":  # any number of components; at the end, at least one (what is inside)
        return any(_glob(rest, path[i:]) for i in range(0 if rest else 1, len(path) + 1))
    return bool(path) and fnmatchcase(path[0], head) and _glob(rest, path[1:])


def glob_match(pattern: str, path: str) -> bool:
    """Match a dotted ``path`` against ``pattern`` one component at a time (``**``: any number).

    >>> glob_match("encoder.layer.*.attention", "encoder.layer.11.attention")
    True
    >>> glob_match("encoder.*", "encoder.layer.0"), glob_match("encoder.**", "encoder.layer.0")
    (False, True)
    """
    return _glob(pattern.split(".") if pattern else [], path.split(".") if path else [])


def as_names(names: Names, what: str = "names") -> list[str]:
    """``names`` as a list of strings (one string is one name)."""
    if names is None:
        return []
    if isinstance(names, str):
        return [names]
    if not isinstance(names, Iterable) or isinstance(names, (type, nn.Module, bytes, bytearray)):
        raise TypeError(f"{what} must be a string or a list of strings (dotted paths or glob "
                        f"patterns), got {_what_it_is(names)}" + _hint(names, what))
    out = list(names)
    bad = [n for n in out if not isinstance(n, str)]
    if bad:
        raise TypeError(f"{what} must be strings (dotted paths or glob patterns), got "
                        + ("a tensor: the model's inputs go to the model, called inside the block: "
                           "`with capture(model, names) as cap: model(x)`"
                           if isinstance(names, Tensor) or isinstance(bad[0], Tensor)
                           else _what_it_is(bad[0]) + _hint(bad[0], what)))
    return out


def _what_it_is(value: Any) -> str:
    if isinstance(value, type):
        return f"the class {value.__qualname__}"
    if isinstance(value, nn.Module):
        return f"a module ({type(value).__name__})"
    if isinstance(value, (bytes, bytearray)):  # iterated, it would read as numbers
        return f"{value!r} (bytes)"
    return f"{value!r}" if isinstance(value, (int, float)) else f"a {type(value).__name__}"


def _hint(value: Any, what: str) -> str:
    """How to say with a string what a user meant by ``value``."""
    if isinstance(value, type):
        return f": choose layers by class with types={value.__qualname__}"
    if isinstance(value, nn.Module):
        return ": name it by its dotted path, as model.named_modules() gives it"
    if isinstance(value, (bytes, bytearray)):
        return f": pass it as a str ({what}={value.decode(errors='replace')!r})"
    if callable(value):
        return (f": to filter names with a function, pass "
                f"{what}=[p for p, _ in model.named_modules() if f(p)]")
    return ""


def match_names(names: Iterable[str], available: Sequence[str], what: str = "layer") -> list[str]:
    """The names of ``available`` that ``names`` (paths or patterns) choose, in ``available``'s order.

    Raises:
        UnknownLayerError: a path is not available or a pattern matches nothing.
    """
    chosen: set[str] = set()
    known = set(available)
    for name in names:
        if name in known:
            chosen.add(name)
        elif is_pattern(name):
            hits = [a for a in available if glob_match(name, a)]
            if not hits:
                raise UnknownLayerError(f"no {what} matches the pattern {name!r}; "
                                        + nearest(name, available))
            chosen.update(hits)
        else:
            raise UnknownLayerError(f"no {what} named {name!r}; " + nearest(name, available))
    return [a for a in available if a in chosen]


def call_numbers(names: list[str], paths: Sequence[str]) -> tuple[list[str], dict[str, set[int]]]:
    """``names`` without their call numbers (``"blk#2"`` -> ``"blk"``), and for each path that
    only names with a number chose, those numbers (``{"blk": {2}}``: its second call in a pass).

    Raises:
        ValueError: a call number below 1 (``"blk#0"``).
    """
    bases: list[str] = []
    numbered: dict[str, set[int]] = {}
    whole: set[str] = set()
    known = set(paths)
    for name in names:
        m = None if name in known else _CALL.match(name)  # a module may be named "blk#2" itself
        base = m.group(1) if m else name
        if m and int(m.group(2)) < 1:
            raise ValueError(f"{name!r}: calls are numbered from 1 ({base!r} or {base + '#1'!r} is the "
                             "first call in a pass)")
        bases.append(base)
        for path in ([p for p in paths if glob_match(base, p)] if is_pattern(base) else [base]):
            if m:
                numbered.setdefault(path, set()).add(int(m.group(2)))
            else:
                whole.add(path)
    return bases, {p: ns for p, ns in numbered.items() if p not in whole}


def split_call(name: str) -> tuple[str, int]:
    """``"enc.0#2"`` -> ``("enc.0", 2)``; ``"enc.0"`` -> ``("enc.0", 1)``."""
    m = _CALL.match(name)
    if m is None:
        return name, 1
    return m.group(1), int(m.group(2))


def canonical_call(name: str) -> str:
    """A call's name as the graph writes it: the first call without ``#1`` (``"enc#1"`` ->
    ``"enc"``, ``"attn#1/softmax"`` -> ``"attn/softmax"``); ``"enc#2"`` stays."""
    return re.sub(r"#1(?=/|$)", "", name)


def module_labels(net: nn.Module, rec: Optional[Graph] = None) -> dict[str, str]:
    """``depth-idx`` label -> dotted path of the module it names, as torchinfo numbers them.

    From ``rec`` (a recording of ``net``) when given: the summary's labels
    exactly (:func:`~torchrecorder.summary.label_paths`).  Else as torchinfo
    numbers a model it does not run: every module of ``net``'s tree in
    definition order, at its depth in the tree, containers (``ModuleList``,
    ``ModuleDict``) included.
    """
    if rec is not None:
        return label_paths(rec)
    out: dict[str, str] = {}
    counters: dict[int, int] = {}
    for path, _module in net.named_modules(remove_duplicate=False):
        depth = path.count(".") + 1 if path else 0
        n = counters[depth] = counters.get(depth, 0) + 1
        out[f"{depth}-{n}"] = path
    return out


def _check_recorded_type(rec: Graph, label: str, path: str, module: nn.Module) -> None:
    """Raise :class:`UnknownLayerError` when ``rec``'s layer at ``path`` is of another class
    than ``module``: ``rec`` is a recording of another model, whose labels would choose
    layers of this one silently."""
    if isinstance(module, ScriptModule):  # recorded under its original class name
        return
    recorded = next((layer.type_name for layer in rec.layers() if layer.path == path), None)
    if recorded is not None and recorded != type(module).__name__:
        raise UnknownLayerError(f"the label {label!r} of rec names {path!r}, a {recorded} there, but "
                                f"the model's {path!r} is a {type(module).__name__}: pass a recording "
                                "of this model as rec")


def _types(types: Any) -> Optional[tuple[type, ...]]:
    if types is None:
        return None
    tup = tuple(types) if isinstance(types, (list, tuple, set, frozenset)) else (types,)
    bad = [t for t in tup if not isinstance(t, type)]
    if bad:
        raise TypeError(f"types must be classes (such as torch.nn.Linear), got {bad[0]!r}")
    return tup


def check_types(net: nn.Module, types: Any) -> None:
    """Raise :class:`UnknownLayerError` for a class of ``types`` that no module of ``net`` is an
    instance of (``types=int``, ``types=nn.Conv2d`` for an MLP), as for a name that names no layer."""
    type_tuple = _types(types)
    if type_tuple is None:
        return
    modules = list(net.modules())
    for cls in type_tuple:
        if not any(isinstance(m, cls) for m in modules):
            present = sorted({type(m).__name__ for m in modules})
            raise UnknownLayerError(f"types={cls.__name__} chooses no layer: no module of the model is "
                                    "one; its types: " + ", ".join(present[:20])
                                    + (", ..." if len(present) > 20 else ""))


def _indices(indices: Any, count: int, where: str) -> Optional[set[int]]:
    if indices is None:
        return None
    items = [indices] if isinstance(indices, int) else list(indices)
    out: set[int] = set()
    for i in items:
        if isinstance(i, bool) or not isinstance(i, int):
            raise TypeError(f"indices must be ints, got {i!r}")
        if not -count <= i < count:
            raise IndexError(f"index {i} is out of range: {where} has {count} "
                             f"module{'s' if count != 1 else ''} (indices 0 to {count - 1})")
        out.add(i % count)
    return out


def select_modules(net: nn.Module, *, names: Names = None, types: Any = None, indices: Any = None,
                   labels: Names = None, rec: Optional[Graph] = None,
                   children: bool = False) -> list[tuple[str, nn.Module]]:
    """The ``(dotted path, module)`` pairs of ``net`` chosen by any of the criteria (see the module
    docstring), in iteration order: ``net.named_modules()``, or ``net.named_children()`` when
    ``children``.  With no criterion, every module; an empty one (``names=[]``) chooses none.

    Raises:
        TypeError: ``net`` is not a module, or a criterion has the wrong type.
        UnknownLayerError: a name, pattern or label names no module.
        IndexError: an index is out of range.
    """
    if not isinstance(net, nn.Module):
        raise TypeError(f"expected a torch.nn.Module, got {type(net).__name__}")
    pairs = list(net.named_children() if children else net.named_modules())
    paths = [p for p, _ in pairs]
    where = f"{type(net).__name__}.{'children' if children else 'modules'}()"
    type_tuple = _types(types)
    index_set = _indices(indices, len(pairs), where)
    wanted_names = as_names(names)
    wanted_labels = as_names(labels, "labels")
    chosen: set[str] = set()
    if wanted_names:
        what = "child" if children else "layer"
        _refuse_second_names(net, wanted_names, pairs, children)
        chosen.update(match_names(wanted_names, paths, what))
    if wanted_labels:
        by_label = module_labels(net, rec)
        for label in wanted_labels:
            path = by_label.get(label)
            if path is None:
                raise UnknownLayerError(f"no layer has the label {label!r}; "
                                        + nearest(label, list(by_label)))
            if path not in paths:
                raise UnknownLayerError(f"the label {label!r} names {path!r}, which is not one of "
                                        f"{where}")
            if rec is not None:
                _check_recorded_type(rec, label, path, pairs[paths.index(path)][1])
            chosen.add(path)
    if names is None and labels is None and type_tuple is None and index_set is None:
        return pairs  # no criterion (an empty list given is one that chooses nothing)
    out = []
    for i, (path, module) in enumerate(pairs):
        if (path in chosen or (type_tuple is not None and isinstance(module, type_tuple))
                or (index_set is not None and i in index_set)):
            out.append((path, module))
    return out


def _refuse_second_names(net: nn.Module, names: list[str], pairs: list[tuple[str, nn.Module]],
                         children: bool) -> None:
    """A module registered under two names (``self.dec = self.enc``) is one module, which
    ``named_modules()`` lists once, under its first name; a hook on it cannot tell the two apart.
    Its second name is refused, naming the first, rather than as a layer that does not exist."""
    known = {p for p, _ in pairs}
    missing = [n for n in names if n not in known and not is_pattern(n)]
    if not missing:
        return
    first = {id(m): p for p, m in pairs}
    every = net._modules.items() if children else net.named_modules(remove_duplicate=False)
    seconds = {p: first[id(m)] for p, m in every if m is not None and id(m) in first and p not in known}
    for name in missing:
        if name in seconds:
            raise UnknownLayerError(
                f"{name!r} is the module {seconds[name]!r} registered under a second name (the same "
                f"object, one hook for both): choose it as {seconds[name]!r}; its calls under either "
                f"name are kept as {seconds[name]!r}, {seconds[name] + '#2'!r}, ...")


def modules_above(model: nn.Module, paths: list[str],
                  watched: Optional[Callable[[nn.Module], bool]] = None) -> list[nn.Module]:
    """The modules above ``paths`` (and above the modules ``watched`` says yes to) that are
    none of them, nor ``model`` itself, nor inside a fused fast path that a hook would turn
    off (``nn.TransformerEncoderLayer``): where a capture notes a call made outside a pass."""
    mods = dict(model.named_modules())
    if watched is not None:
        paths = paths + [p for p, m in mods.items() if watched(m)]
    above = {".".join(p.split(".")[:i]) for p in paths for i in range(1, p.count(".") + 1)}
    def at(path: str) -> nn.Module:  # not ``mods.get(p) or ...``: a module may define __len__/__bool__
        found = mods.get(path)
        return model.get_submodule(path) if found is None else found

    skip = {id(at(p)) for p in paths} | {id(model)}
    for a in mods.values():
        if checks_hooks(a):
            skip.update(id(m) for m in a.modules())
    out = {id(m): m for m in map(at, sorted(above))}
    return [m for i, m in out.items() if i not in skip]
