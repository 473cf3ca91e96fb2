"""What the recording engine reads off live objects: tensor metadata, argument names, op names,
what it knows of each module, and which modules and buffers need care."""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from contextlib import nullcontext
from itertools import chain
from typing import Any, Generic, Optional, TypeVar

import torch
from torch import Tensor, nn
from torch.nn.parameter import is_lazy

from ..nodes import shape_str
from .memo import ModelMemo, kept_memo, new_memo

__all__ = ["Memo", "ModelWalk", "ModuleInfo", "ParamFacts", "bind_arguments", "check_model", "dtype_names",
           "grad_fn_op_name", "lazy_error", "own_tensors", "picker", "shape_name", "shape_of", "shape_tuple",
           "tensor_meta", "type_name"]

# the walk is the recorder's own: kept from the caller's function modes and tensor subclasses
_NO_TORCH_FUNCTION: Callable[[], Any] = getattr(torch._C, "DisableTorchFunction", nullcontext)

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
# torch.Size -> the equal plain tuple: one tuple per shape for all the nodes that have it
_SHAPES: Memo[Any, tuple[int, ...]] = Memo(4096)


def shape_tuple(t: Tensor) -> tuple[int, ...]:
    """``shape_of(t)``, one shared tuple per shape: a recording stores thousands of shapes,
    most of them equal, and a tuple made per node is one more object for the collector to scan.

    >>> shape_tuple(torch.zeros(2, 3)) is shape_tuple(torch.ones(2, 3))
    True
    """
    if type(t) is not Tensor and t.is_nested:  # a jagged nested tensor (a class of its own)
        return shape_of(t)
    try:
        size = t.shape
        got = _SHAPES.get(size)
    except (RuntimeError, TypeError):  # a strided nested tensor (no sizes), a symbolic size
        return shape_of(t)
    if got is None:
        got = _SHAPES.put(size, tuple(size))
    return got


def shape_of(t: Tensor) -> tuple[int, ...]:
    """``tuple(t.shape)``; a ragged dimension of a nested tensor is ``-1``.

    A nested tensor of the strided layout has no ``shape`` at all, one of the jagged layout
    has a symbolic size (``j1``) in its ragged dimension.

    >>> nt = torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(4, 3)])
    >>> shape_of(nt), shape_of(torch.zeros(2, 3))
    ((2, -1, 3), (2, 3))
    """
    if not t.is_nested:
        return tuple(t.shape)
    dims = []
    for i in range(t.dim()):
        try:
            d = t.size(i)
        except RuntimeError:  # "Given dimension 1 is irregular and does not have a size"
            d = -1
        dims.append(d if type(d) is int else -1)
    return tuple(dims)


def tensor_meta(t: Tensor) -> tuple[tuple[int, ...], str, str]:
    """Shape, dtype name and device name of ``t`` (the names are cached: str() is slow)."""
    return (shape_tuple(t), *dtype_names(t))


def dtype_names(t: Tensor) -> tuple[str, str]:
    """Dtype name and device name of ``t``, as :func:`tensor_meta` gives them."""
    dtype, device = t.dtype, t.device
    dname = _DTYPE_NAMES.get(dtype)
    if dname is None:
        dname = _DTYPE_NAMES.put(dtype, str(dtype).replace("torch.", ""))
    devname = _DEVICE_NAMES.get(device)
    if devname is None:
        devname = _DEVICE_NAMES.put(device, str(device))
    return dname, devname


def type_name(module: nn.Module) -> str:
    """The class name shown for ``module``: a scripted module's original class (``Linear``),
    not ``RecursiveScriptModule``."""
    if isinstance(module, torch.jit.ScriptModule):
        return str(getattr(module, "original_name", "") or type(module).__name__)
    return type(module).__name__


#: what a parameter node needs of a parameter that its model's stamp (:class:`ModelWalk`)
#: holds fixed: its name in its module, its shape (:func:`shape_tuple`) and its element count
ParamFacts = tuple[str, tuple[int, ...], int]


class ModuleInfo:
    """What the engine knows of one module: path, display name, parameters, calls so far."""

    __slots__ = ("buffers", "calls", "last", "name", "num_params", "params", "path", "total", "type_name")

    def __init__(self, path: str, name: str, type_name: str,
                 params: tuple[tuple[str, nn.Parameter, ParamFacts], ...] = (), num_params: int = 0,
                 total: int = 0,
                 buffers: int = 0) -> None:
        self.path = path
        self.name = name
        self.type_name = type_name
        # own (dotted path, parameter, its facts), read when the module was indexed (kept with
        # the index while the model's stamp holds, which fixes them); a tuple, the shared empty
        # one for most modules: fewer objects
        self.params = params
        self.num_params = num_params  # own parameter elements
        self.total = total  # parameter elements below it, itself included
        self.buffers = buffers  # own buffer elements
        self.calls = 0
        self.last: Any = None  # the module's latest call (a LayerNode) in the recording


def own_tensors(tensors: Any, module: nn.Module, path: str,
                checked: bool = False) -> tuple[list[tuple[str, Any]], int]:
    """The (name, tensor) pairs of a module's ``_parameters``/``_buffers`` dict, and their
    element count (a tensor registered under two names counts once).  ``checked``: the
    tensors are known to be initialized (:func:`check_model` passed).

    Raises:
        TypeError: a parameter or buffer is uninitialized (a lazy module not called yet).
    """
    pairs = [(n, t) for n, t in tensors.items() if t is not None]
    if not checked:
        for n, t in pairs:
            if is_lazy(t):
                raise lazy_error(module, path, n)
    if len(pairs) == 1:
        return pairs, pairs[0][1].numel()
    return pairs, sum({id(t): t.numel() for _, t in pairs}.values())


def lazy_error(module: nn.Module, path: str, tensor_name: str) -> TypeError:
    """The error for a module whose ``tensor_name`` is uninitialized (a lazy module)."""
    return TypeError(
        f"cannot record module '{path or type(module).__name__}' ({type(module).__name__}): its "
        f"{tensor_name!r} is uninitialized (a lazy module that has not run yet). Recording would "
        "initialize it, which changes the model: run one forward pass first, then record")


class ModelWalk(list[tuple[str, nn.Module]]):
    """``list(net.named_modules(remove_duplicate=False))``, with the model's *stamp* read in
    the same pass: ``objects``, each module in walk order, then each of their parameters and
    buffers (``None`` slots left out), ``ids``, the ids of the modules and of every slot's
    object (``None`` included), and ``facts``, the modules' paths and classes, the names in
    each module's ``_parameters`` and ``_buffers``, and every tensor's class and shape.  Two
    walks with equal ids (of objects alive since the first) and equal facts are of a model
    that has not changed in anything the module index and the model state's layout read
    (see :mod:`~torchrecorder.recording.memo`).  ``memo``: what recordings of the model keep
    between them, valid for this stamp (:func:`~torchrecorder.recording.memo.kept_memo`;
    ``None`` until :func:`check_model` looks it up, or for a model that takes no weak
    references)."""

    __slots__ = ("facts", "ids", "memo", "objects")

    def __init__(self, items: Any = ()) -> None:
        super().__init__(items)
        self.objects: list[Any] = []
        self.ids: list[int] = []
        self.facts: list[Any] = []
        self.memo: Optional[ModelMemo] = None


_NAMED_MODULES = nn.Module.named_modules


def _walk(net: nn.Module) -> list[tuple[str, nn.Module]]:
    """``list(net.named_modules(remove_duplicate=False))``, without torch's recursive
    generators (one generator per module and level); a model with a module that walks its
    own way (overrides ``named_modules``) is walked by its own method."""
    out: list[tuple[str, nn.Module]] = []
    stack: list[tuple[str, nn.Module]] = [("", net)]
    pop, push, add = stack.pop, stack.extend, out.append
    while stack:
        path, module = pop()
        if type(module).named_modules is not _NAMED_MODULES:
            return list(net.named_modules(remove_duplicate=False))
        add((path, module))
        children = module._modules
        if children:
            prefix = f"{path}." if path else ""
            push([(prefix + n, c) for n, c in reversed(children.items()) if c is not None])
    return out


_PARAMETERS = operator.attrgetter("_parameters")
_BUFFERS = operator.attrgetter("_buffers")
_PATH = operator.itemgetter(0)
_MODULE = operator.itemgetter(1)
_SHAPE = operator.attrgetter("shape")
_NONE_ID = id(None)


def _slots(dicts: list[Any]) -> tuple[list[Any], list[str]]:
    """The objects and the names in ``dicts`` (each module's ``_parameters`` or ``_buffers``),
    each in one flat list."""
    try:  # plain dicts: one C pass each
        return list(chain.from_iterable(map(dict.values, dicts))), list(chain.from_iterable(dicts))
    except TypeError:  # a ScriptModule's wrappers of its dicts
        return [t for d in dicts if d for t in d.values()], [k for d in dicts if d for k in d.keys()]


def _refuse_lazy(walk: list[tuple[str, nn.Module]], tensors: list[Any]) -> None:
    """Raise :func:`lazy_error` for the first uninitialized one of ``tensors`` (the tensors of
    the modules of ``walk``), if any."""
    if any(map(is_lazy, tensors)):
        for path, module in walk:
            for tensor_dict in (module._parameters, module._buffers):
                for tname, t in tensor_dict.items():
                    if t is not None and is_lazy(t):
                        raise lazy_error(module, path, tname)


def check_model(net: nn.Module) -> ModelWalk:
    """Fail before anything runs on a model that cannot be recorded as it is.

    The stamp (:class:`ModelWalk`) is read in a few passes over flat lists, each one C call
    (``map`` of an attribute or ``id`` over the walk's modules or their tensors), and compared
    with the memo's as lists of ids, names, classes and shapes (see
    :func:`~torchrecorder.recording.memo.kept_memo`).  Uninitialized tensors are looked for
    only when the stamp is not the memo's: a stamp made of a model without any (a memo
    is made only then) holds each tensor's class, and materializing a lazy tensor changes it.

    Returns:
        ``list(net.named_modules(remove_duplicate=False))``, for the rest of the recording's
        set-up to walk again without torch's recursive generators, with the model's stamp
        and the memo of the model valid for that stamp (:class:`ModelWalk`).

    Raises:
        TypeError: a parameter or buffer is uninitialized (a lazy module not called yet).
    """
    with _NO_TORCH_FUNCTION():  # the caller's function modes and tensor subclasses see none of it
        return _checked(net)


def _checked(net: nn.Module) -> ModelWalk:
    walk = ModelWalk(_walk(net))
    modules: list[Any] = list(map(_MODULE, walk))
    pdicts = list(map(_PARAMETERS, modules))
    bdicts = list(map(_BUFFERS, modules))
    tensors, pnames = _slots(pdicts)
    buffers, bnames = _slots(bdicts)
    tensors += buffers
    ids = list(map(id, modules))
    ids += map(id, tensors)  # (a ``None`` slot is id(None): where the ``None``\ s are is stamped)
    present = [t for t in tensors if t is not None] if _NONE_ID in ids else tensors
    try:
        shapes = list(map(_SHAPE, present))
    except RuntimeError:  # an uninitialized tensor has no shape
        _refuse_lazy(walk, present)
        raise
    facts: list[Any] = [list(map(_PATH, walk)), list(map(type, modules)), list(map(len, pdicts)), pnames,
                        list(map(len, bdicts)), bnames, list(map(type, present)), shapes]
    objects = modules
    objects += present
    walk.objects, walk.ids, walk.facts = objects, ids, facts
    memo = kept_memo(net, ids, facts)
    if memo is None:
        _refuse_lazy(walk, present)
        memo = new_memo(net, objects, ids, facts)
    walk.memo = memo
    return walk


def picker(positions: list[int]) -> Callable[[list[Any]], list[Any]]:
    """A function of a list that gives its items at ``positions`` as a list, in one C call
    (``operator.itemgetter``): how what is kept by positions in a model's stamp is read back.

    >>> picker([2, 0])(["a", "b", "c"]), picker([1])(["a", "b"]), picker([])(["a"])
    (['c', 'a'], ['b'], [])
    """
    if not positions:
        return lambda objects: []
    get = operator.itemgetter(*positions)
    if len(positions) == 1:
        return lambda objects: [get(objects)]
    return lambda objects: list(get(objects))


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
