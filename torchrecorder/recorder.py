"""Record the execution graph of an ``nn.Module`` during a forward pass.

Two mechanisms work together while a :class:`Recorder` is active:

* a forward pre-hook on every module opens a *call scope*, and a forward hook
  closes it (one process-wide forward hook where torch supports it, see
  :meth:`Recorder.register_hooks`):
  each call becomes a :class:`~torchrecorder.nodes.LayerNode`, the tensors it
  receives and returns become :class:`~torchrecorder.nodes.TensorNode` s, and
  its parameters :class:`~torchrecorder.nodes.ParamNode` s;
* a :class:`torch.overrides.TorchFunctionMode` sees every torch operation that
  runs in between (inside a module, or between modules) and records it as an
  :class:`~torchrecorder.nodes.OpNode` in the scope of the module that ran it,
  with edges from whatever produced its inputs.

The second mechanism replaces the original torchrecorder's walk of ``grad_fn``:
it sees operations on tensors that autograd never sees (integer token ids,
boolean masks, anything under ``torch.no_grad()`` or ``inference_mode``), never
detaches or replaces a tensor, and needs no gradients, so the model and its
outputs stay exactly as they would be without recording.  The ``grad_fn`` walk
survives as :func:`op_acc`, an iterative walker for autograd graphs.

Nothing here patches torch: the hooks are registered through torch's hook API and
removed when recording ends, whatever happens, and the mode is active only inside
the recording context.
"""

from __future__ import annotations

import inspect
import sys
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from threading import get_ident
from typing import Any, Optional

import torch
from torch import Tensor, nn
from torch.nn.modules.module import register_module_forward_hook as _register_module_forward_hook
from torch.overrides import TorchFunctionMode

from ._walk import iter_tensors, named_tensors
from .nodes import (
    BaseNode,
    ContextNode,
    Key,
    LayerNode,
    OpNode,
    OrderedSet,
    ParamNode,
    TensorNode,
    shape_str,
)

__all__ = [
    "Recorder",
    "leaf_dummy",
    "op_acc",
    "param_acc",
    "posthook",
    "prehook",
    "recording",
    "tensor_acc",
]

# Inside the hooks every ``t.shape``, ``t.dtype`` or ``p.numel()`` would otherwise go
# through _OpMode.__torch_function__ (about 10 calls per module call) just to be
# ignored.  torch._C.DisableTorchFunction has existed since torch 1.x; without it
# recording still works, only slower.
_no_torch_function: Callable[[], Any] = getattr(torch._C, "DisableTorchFunction", nullcontext)

_INPLACE_DUNDERS = frozenset(
    {
        "__setitem__",
        "__iadd__",
        "__isub__",
        "__imul__",
        "__itruediv__",
        "__ifloordiv__",
        "__imod__",
        "__ipow__",
        "__iand__",
        "__ior__",
        "__ixor__",
        "__ilshift__",
        "__irshift__",
        "__imatmul__",
    }
)


def _op_info(func: Callable[..., Any]) -> tuple[str, bool, Optional[int]]:
    """The display name of a torch callable, whether it mutates its first argument, and
    the position of its ``inplace`` flag (``F.relu(x, inplace=True)``), if it has one."""
    name = getattr(func, "__name__", None) or type(func).__name__
    if name == "__get__":  # a property such as Tensor.T
        name = getattr(getattr(func, "__self__", None), "__name__", "getattr")
    inplace = name in _INPLACE_DUNDERS or (name.endswith("_") and not name.endswith("__"))
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]
        if name.startswith(("i", "r")) and name[1:] in _ARITH:
            name = name[1:]
    if "." in name:  # torch.ops.aten.add.Tensor -> add
        name = name.split(".")[0]
    return name or "op", inplace, _inplace_position(func)


def _inplace_position(func: Callable[..., Any]) -> Optional[int]:
    """Where a Python-level function such as ``F.dropout`` takes its ``inplace`` flag."""
    code = getattr(func, "__code__", None)
    if code is None or "inplace" not in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]:
        return None
    return list(code.co_varnames).index("inplace")


_ARITH = frozenset(
    {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
     "lshift", "rshift", "matmul", "div"}
)


_DTYPE_NAMES: dict[Any, str] = {}
_DEVICE_NAMES: dict[Any, str] = {}


def _tensor_meta(t: Tensor) -> tuple[tuple[int, ...], str, str]:
    """Shape, dtype name and device name of ``t`` (the names are cached: str() is slow)."""
    dtype, device = t.dtype, t.device
    dname = _DTYPE_NAMES.get(dtype)
    if dname is None:
        dname = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    devname = _DEVICE_NAMES.get(device)
    if devname is None:
        devname = _DEVICE_NAMES[device] = str(device)
    return tuple(t.shape), dname, devname


_SHAPE_NAMES: dict[tuple[int, ...], str] = {}


def _shape_name(shape: tuple[int, ...]) -> str:
    """``shape_str(shape)``, remembered (a recording names many tensors of the same shape)."""
    name = shape_str(shape)
    if len(_SHAPE_NAMES) >= 4096:
        _SHAPE_NAMES.clear()
    _SHAPE_NAMES[shape] = name
    return name


class _Namespace:
    """Hands out unique, readable keys: ``add``, ``add_1``, ``add_2``, ..."""

    __slots__ = ("_used",)

    def __init__(self) -> None:
        self._used: dict[str, int] = {}

    def __call__(self, candidate: str) -> str:
        n = self._used.get(candidate)
        if n is None:
            self._used[candidate] = 0
            return candidate
        while True:
            n += 1
            name = f"{candidate}_{n}"
            if name not in self._used:
                self._used[candidate] = n
                self._used[name] = 0
                return name


def _is_argument(t: Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether the tensor object ``t`` is one of the (top-level) arguments of a call."""
    for a in args:
        if a is t:
            return True
    if kwargs:
        for a in kwargs.values():
            if a is t:
                return True
    return False


def _global_post_hook_support() -> bool:
    """Whether torch's global forward hooks can be called when forward raises (``always_call``)."""
    try:
        params = inspect.signature(_register_module_forward_hook).parameters
    except (TypeError, ValueError):
        return False
    return "always_call" in params


# Calls are closed by ONE global forward hook (run for every module call while recording,
# returning at once for modules that are not being recorded) instead of a forward hook per
# module: adding and removing two hooks per module is a large part of recording a model with
# many small modules.  The pre-hooks stay per module: global pre-hooks do not get keyword
# arguments.  A global forward hook runs before the module's own forward hooks, so a call
# closes on the output the module's forward returned.
_GLOBAL_POST_HOOK = _global_post_hook_support()

# func -> (name, mutates its first argument, position of its ``inplace`` flag); shared by
# all recordings (torch callables live as long as the process), bounded in size
_OP_INFO: dict[Any, tuple[str, bool, Optional[int]]] = {}
_OP_INFO_MAX = 8192


class _OpMode(TorchFunctionMode):
    """Records every torch operation that runs while the recorder is active."""

    def __init__(self, rec: Recorder) -> None:
        super().__init__()
        self.rec = rec

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: Optional[dict[str, Any]] = None,
    ) -> Any:
        # torch takes this mode off its stack while this method runs: the torch calls
        # below (func itself, .shape, ._base) do not come back here
        if kwargs is None:
            kwargs = {}
        out = func(*args, **kwargs)
        rec = self.rec
        if rec._paused or rec._thread != get_ident():
            return out
        info = _OP_INFO.get(func)
        if info is None:
            if len(_OP_INFO) >= _OP_INFO_MAX:
                _OP_INFO.clear()
            info = _OP_INFO[func] = _op_info(func)
        inplace = info[1]
        if info[2] is not None:  # F.relu(x, inplace=True) returns x, changed
            flag = kwargs.get("inplace", args[info[2]] if info[2] < len(args) else False)
            inplace = flag is True
        if isinstance(out, Tensor):
            if not inplace and _is_argument(out, args, kwargs):
                # x.to(x.dtype), x.contiguous(), dropout in eval: the op handed back its
                # own argument and made nothing new.  Rebinding the object to this op
                # would make every other holder of the tensor (a residual branch, say)
                # look as if it came from here.
                return out
            outs: list[Tensor] = [out]
        elif isinstance(out, (tuple, list)):
            outs = [o for o in out if isinstance(o, Tensor)]
            if not inplace:
                outs = [o for o in outs if not _is_argument(o, args, kwargs)]
        else:
            outs = []
        if inplace and args and isinstance(args[0], Tensor):
            target = args[0]
            if isinstance(target, nn.Parameter):
                return out  # parameter initialisation, not dataflow
            if not any(o is target for o in outs):
                outs.append(target)
        if outs:
            rec._record_op(func, info[0], args, kwargs, outs, inplace)
        return out


class _ModuleInfo:
    """What the recorder knows of one module: path, display name, parameters, calls so far."""

    __slots__ = ("buffers", "calls", "name", "num_params", "params", "path", "total", "type_name")

    def __init__(self, path: str, name: str, type_name: str) -> None:
        self.path = path
        self.name = name
        self.type_name = type_name
        self.params: list[tuple[str, nn.Parameter]] = []  # own (dotted path, parameter)
        self.num_params = 0
        self.total = 0
        self.buffers = 0
        self.calls = 0


def _own_tensors(tensors: Any) -> tuple[list[tuple[str, Any]], int]:
    """The (name, tensor) pairs of a module's ``_parameters``/``_buffers`` dict, and their
    element count (a tensor registered under two names counts once)."""
    pairs = [(n, t) for n, t in tensors.items() if t is not None]
    if len(pairs) == 1:
        return pairs, pairs[0][1].numel()
    return pairs, sum({id(t): t.numel() for _, t in pairs}.values())


class Recorder:
    """Record and store execution graph information.

    A ``Recorder`` is the graph: ``nodes`` maps keys to nodes, ``edges`` holds
    ``(from_key, to_key)`` pairs in the order they were recorded.  Build one with
    :func:`torchrecorder.record` or the :func:`recording` context manager.

    Attributes:
        name: the name given to the root module.
        nodes: dict from key to :class:`~torchrecorder.nodes.BaseNode`; the
            context node has the key ``None``.
        edges: ordered set of ``(from_key, to_key)`` pairs.
        fn_types: how many nodes of each node class the graph holds.
        keep_tensors: whether tensor nodes keep the tensors in ``fn``.
        error: ``"ExcType: message"`` when the recorded forward pass raised.
        failed_key: key of the innermost module call that raised, if any.
    """

    def __init__(self, name: str = "net", *, keep_tensors: bool = False) -> None:
        self.name = name
        self.keep_tensors = keep_tensors
        self.nodes: dict[Key, BaseNode] = {}
        self.edges: OrderedSet[tuple[Key, Key]] = OrderedSet()
        self.error: Optional[str] = None
        self.failed_key: Key = None
        self._names = _Namespace()
        self._used = self._names._used
        self._sources: set[Key] = set()
        # recording-time state, emptied when recording ends
        self._live: dict[int, tuple[Any, Key]] = {}
        self._stack: list[LayerNode] = []
        # the exception being handled when each open call began (see _exit)
        self._stack_exc: list[Optional[BaseException]] = []
        # (exception, innermost call it escaped from), while an exception unwinds
        self._failure: Optional[tuple[BaseException, LayerNode]] = None
        self._popped_exc: Optional[BaseException] = None
        self._modules: dict[int, _ModuleInfo] = {}
        self._params: dict[int, tuple[nn.Parameter, str]] = {}
        self._handles: list[Any] = []
        self._paused = 0
        self._thread = get_ident()
        self._create_context()

    # ------------------------------------------------------------------ graph
    @property
    def context(self) -> ContextNode:
        """The node that holds the whole recording (key ``None``)."""
        node = self.nodes[None]
        assert isinstance(node, ContextNode)
        return node

    @property
    def fn_types(self) -> dict[str, int]:
        """How many nodes of each node class the graph holds (the context not counted)."""
        counts: dict[str, int] = {}
        for key, node in self.nodes.items():
            if key is not None:
                name = type(node).__name__
                counts[name] = counts.get(name, 0) + 1
        return counts

    @property
    def fn_set(self) -> Any:
        """The keys of all recorded nodes (a set-like view)."""
        return self.nodes.keys()

    def layers(self) -> Iterator[LayerNode]:
        """Every recorded module call, in call order."""
        for node in self.nodes.values():
            if isinstance(node, LayerNode) and not isinstance(node, ContextNode):
                yield node

    def calls_of(self, module: nn.Module) -> list[LayerNode]:
        """The recorded calls of ``module``, in order (empty if never called)."""
        return [n for n in self.layers() if n.fn is module]

    def _create_context(self) -> None:
        self._ctx = self.nodes[None] = ContextNode()

    def _insert(self, node: BaseNode, candidate: str) -> BaseNode:
        node.key = self._names(candidate)
        self.nodes[node.key] = node
        parent = self.nodes[node.parent]
        assert isinstance(parent, LayerNode), f"parent {node.parent!r} is not a layer"
        parent.subnets.add(node.key)
        return node

    def _key_of(self, obj: Any) -> Key:
        if obj is None or isinstance(obj, str):
            return obj
        if isinstance(obj, BaseNode):
            return obj.key
        entry = self._live.get(id(obj))
        if entry is None:
            raise KeyError(f"{type(obj).__name__} object is not part of this recording")
        return entry[1]

    def _lookup(self, obj: Any) -> Key:
        """The key of the node that currently stands for the live object ``obj``."""
        entry = self._live.get(id(obj))
        if entry is not None:
            ref = entry[0]
            target = ref() if isinstance(ref, weakref.ref) else ref
            if target is obj:
                return entry[1]
        return None

    def _bind(self, obj: Any, key: Key) -> None:
        try:
            ref: Any = weakref.ref(obj)
        except TypeError:
            ref = obj
        self._live[id(obj)] = (ref, key)

    def add_node(
        self, net: Any, depth: int = 0, parent: Any = None, name: Optional[str] = None
    ) -> BaseNode:
        """Construct a node of the recording graph for the object ``net``.

        Args:
            net: a module (gives a :class:`~.nodes.LayerNode`), a parameter
                (:class:`~.nodes.ParamNode`), a tensor
                (:class:`~.nodes.TensorNode`) or an autograd node such as a
                ``grad_fn`` (:class:`~.nodes.OpNode`).
            depth: the scope depth at which ``net`` is found.
            parent: the key, node or recorded object in whose scope ``net`` runs.
            name: display name; defaults to the class name.

        Returns:
            The new node; ``net`` now maps to it (see :meth:`add_dummy`).
        """
        classname = type(net).__name__
        label = name if name is not None else classname
        pkey = self._key_of(parent)
        node: BaseNode
        if isinstance(net, nn.Module):
            node = LayerNode(name=label, fn=net, depth=depth, parent=pkey, type_name=classname)
        elif isinstance(net, nn.Parameter):
            shape, dtype, device = _tensor_meta(net)
            node = ParamNode(name=label, fn=net, depth=depth, parent=pkey, shape=shape,
                             dtype=dtype, device=device, numel=net.numel(),
                             requires_grad=net.requires_grad)
        elif isinstance(net, Tensor):
            shape, dtype, device = _tensor_meta(net)
            node = TensorNode(name=label, fn=net if self.keep_tensors else None, depth=depth,
                              parent=pkey, shape=shape, dtype=dtype, device=device)
        elif hasattr(net, "next_functions"):
            opname = _grad_fn_op_name(classname)
            node = OpNode(name=name or opname, fn=net, depth=depth, parent=pkey, op=opname)
        else:
            raise TypeError(f"cannot create a node for {classname} object {net!r}")
        parent_key = pkey if pkey is not None else ""
        self._insert(node, f"{parent_key}/{label}" if parent_key else label)
        self._bind(net, node.key)
        return node

    def add_dummy(self, dummy: Any, fn: Any) -> None:
        """Point the object ``dummy`` at the node already recorded for ``fn``.

        Instead of creating a separate node, later lookups of ``dummy`` (a dummy
        tensor, a ``grad_fn``) find the node of ``fn``.  Used by
        :func:`leaf_dummy` and for ``AccumulateGrad`` nodes in :func:`op_acc`.
        """
        self._bind(dummy, self._key_of(fn))

    def add_edge(self, _from: Any, _to: Any) -> None:
        """Record an edge between two recorded nodes (given as keys, nodes or objects)."""
        a, b = self._key_of(_from), self._key_of(_to)
        if a not in self.nodes or b not in self.nodes:
            raise KeyError(f"cannot draw an edge involving unrecorded nodes {(a, b)!r}")
        self.edges.add((a, b))
        self._sources.add(a)

    # ------------------------------------------------------------------ hooks
    def register_hooks(
        self, net: nn.Module, depth: int = 0, parent: Any = None, name: Optional[str] = None
    ) -> None:
        """Register the recorder's hooks on ``net`` and every module inside it.

        Each module gets a forward pre-hook with keyword arguments (the work of
        :func:`prehook`); a module reachable by two paths is hooked once.  Calls
        are closed (the work of :func:`posthook`) by one global forward hook
        (``torch.nn.modules.module.register_module_forward_hook``) that ignores
        modules not being recorded, or, on a torch whose global hooks lack
        ``always_call``, by a forward hook on each module: adding and removing two
        hooks per module is a large share of recording a model made of many
        small modules.  A global forward hook runs before a module's own forward
        hooks, so a call closes on what ``forward`` returned; what a user's hook
        then does to the output is recorded in the caller's scope.
        :meth:`remove_hooks` takes all of them off.

        Args:
            net: the root module.
            depth: unused; kept for compatibility (depths follow the calls).
            parent: unused; kept for compatibility.
            name: display name of the root module (defaults to ``self.name``).
        """
        del depth, parent
        root_name = name if name is not None else self.name
        try:
            self._index_modules(net, root_name, "", hook=True)
        except BaseException:
            self.remove_hooks()
            raise

    def remove_hooks(self) -> None:
        """Remove every hook this recorder registered; safe to call twice."""
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()

    def _index_modules(self, net: nn.Module, root_name: str, prefix: str, hook: bool) -> None:
        """One walk of ``net``: each module's path, name, own parameters and the parameter
        and buffer counts of :class:`~.nodes.LayerNode`, hooks on each module (if ``hook``),
        and every parameter's first path (for parameters used outside their module).

        The counts equal ``module.parameters(recurse=False)``, ``module.parameters()``
        and ``module.buffers(recurse=False)`` summed (a shared tensor counts once per
        module), without three generator walks per module call.
        """
        modules, params, handles = self._modules, self._params, self._handles
        pre, post = self._pre_hook, self._post_hook
        # dotted module path -> {id(parameter): numel} of the subtree below it
        subtree: dict[str, dict[int, int]] = {}
        first_path: list[tuple[str, _ModuleInfo]] = []
        for path, module in net.named_modules(prefix=prefix, remove_duplicate=False):
            info = modules.get(id(module))
            if info is None:
                info = _ModuleInfo(path, path.rpartition(".")[2] if path else root_name,
                                   type(module).__name__)
                modules[id(module)] = info
                if module._parameters:
                    own, info.num_params = _own_tensors(module._parameters)
                    info.params = [(f"{path}.{pname}" if path else pname, p) for pname, p in own]
                if module._buffers:
                    info.buffers = _own_tensors(module._buffers)[1]
                first_path.append((path, info))
                if hook:
                    handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
                    if not _GLOBAL_POST_HOOK:
                        handles.append(module.register_forward_hook(post, with_kwargs=True,
                                                                    always_call=True))
            for pname, param in module._parameters.items():
                if param is None:
                    continue
                ppath = f"{path}.{pname}" if path else pname
                if id(param) not in params:
                    params[id(param)] = (param, ppath)
                numel = param.numel()
                owner = path
                while True:
                    ids = subtree.get(owner)
                    if ids is None:
                        ids = subtree[owner] = {}
                    ids[id(param)] = numel
                    if not owner:
                        break
                    owner = owner.rpartition(".")[0]
        for path, info in first_path:
            ids = subtree.get(path)
            info.total = sum(ids.values()) if ids else 0
        if hook and _GLOBAL_POST_HOOK:
            # without with_kwargs: torch's handle would leave the with_kwargs entry behind, and
            # closing a call reads only the outputs
            handles.append(_register_module_forward_hook(self._global_post_hook, always_call=True))

    def _module_info(self, module: nn.Module, path: str = "", name: str = "") -> _ModuleInfo:
        """Info of a module met outside the recorded root (hooked through :func:`prehook`)."""
        info = self._modules.get(id(module))
        if info is None:
            self._index_modules(module, name or type(module).__name__, path, hook=False)
            info = self._modules[id(module)]
        return info

    def _pre_hook(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self._paused or self._thread != get_ident():
            return
        self._paused += 1
        try:
            with _no_torch_function():  # hooks read shapes and dtypes: keep that out of _OpMode
                self._enter(module, args if isinstance(args, tuple) else (args,), kwargs or {})
        finally:
            self._paused -= 1

    def _global_post_hook(self, module: nn.Module, args: Any, outputs: Any) -> None:
        # called for every module call in the process while recording (torch passes no
        # outputs when forward raised): modules not being recorded are not on the stack
        if self._paused or self._thread != get_ident() or not self._stack:
            return
        self._paused += 1
        try:
            with _no_torch_function():
                self._exit(module, outputs)
        finally:
            self._paused -= 1

    def _post_hook(self, module: nn.Module, args: Any, kwargs: Any, outputs: Any) -> None:
        self._global_post_hook(module, args, outputs)

    # --------------------------------------------------------------- recording
    def _unique(self, candidate: str) -> str:
        """A new key: ``candidate`` itself if unused (the usual case, one dict lookup), else
        the next free ``candidate_N``."""
        used = self._used
        if candidate in used:
            return self._names(candidate)
        used[candidate] = 0
        return candidate

    def _tensor_node(self, t: Tensor, scope: LayerNode, candidate: str, name: str = "",
                     role: str = "") -> TensorNode:
        shape, dtype, device = _tensor_meta(t)
        key = self._unique(candidate)
        if not name:
            name = _SHAPE_NAMES.get(shape) or _shape_name(shape)
        node = TensorNode(name, t if self.keep_tensors else None,
                          scope.depth + 1, scope.key, key, shape=shape, dtype=dtype,
                          device=device, role=role)
        self.nodes[key] = node
        scope.subnets._items[key] = None
        self._live[id(t)] = (weakref.ref(t), key)
        return node

    def _param_node(self, param: nn.Parameter, scope: LayerNode, path: str) -> ParamNode:
        shape, dtype, device = _tensor_meta(param)
        key = self._unique(path)
        node = ParamNode(path.rpartition(".")[2], param, scope.depth + 1, scope.key, key,
                         shape=shape, dtype=dtype, device=device, path=path,
                         numel=param.numel(), requires_grad=param.requires_grad)
        self.nodes[key] = node
        scope.subnets._items[key] = None
        self._live[id(param)] = (weakref.ref(param), key)
        return node

    def _source_of(self, t: Tensor, scope: LayerNode) -> Key:
        """Key of the node that produced ``t``; creates a parameter node on first use."""
        entry = self._live.get(id(t))
        if entry is not None and entry[0]() is t:
            return entry[1]
        found = self._params.get(id(t))
        if found is not None and found[0] is t:
            return self._param_node(t, scope, found[1]).key
        return None

    def _record_op(self, func: Any, opname: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                   outs: list[Tensor], inplace: bool) -> None:
        # runs inside _OpMode.__torch_function__, where torch calls do not come back to the mode
        stack = self._stack
        scope = stack[-1] if stack else self._ctx
        skey = scope.key
        key = self._unique(f"{skey}/{opname}" if skey else opname)
        node = OpNode(opname, func, scope.depth + 1, skey, key, op=opname,
                      output_shapes=[tuple(outs[0].shape)] if len(outs) == 1
                      else [tuple(o.shape) for o in outs])
        self.nodes[key] = node
        scope.subnets._items[key] = None
        live = self._live
        edges = self.edges._items
        sources = self._sources
        for value in (args if not kwargs else (*args, *kwargs.values())):
            if isinstance(value, Tensor):
                entry = live.get(id(value))
                if entry is not None and entry[0]() is value:
                    src = entry[1]
                else:
                    src = self._source_of(value, scope)
                    if src is None:
                        continue
                edges[(src, key)] = None
                sources.add(src)
            elif isinstance(value, (list, tuple)):
                for item in value:
                    if isinstance(item, Tensor):
                        src = self._source_of(item, scope)
                        if src is not None:
                            edges[(src, key)] = None
                            sources.add(src)
        for o in outs:
            live[id(o)] = (weakref.ref(o), key)
        if inplace:
            base = outs[-1]._base
            if base is not None:
                self._bind(base, key)

    def _enter(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        stack = self._stack
        scope = stack[-1] if stack else self._ctx
        info = self._modules.get(id(module)) or self._module_info(module)
        info.calls += 1
        count = info.calls
        base = info.path or info.name
        key = self._unique(base if count == 1 else f"{base}#{count}")
        call = LayerNode(info.name, module, scope.depth + 1, scope.key, key, type_name=info.type_name,
                         path=info.path, call_index=count)
        nodes, live = self.nodes, self._live
        nodes[key] = call
        scope.subnets._items[key] = None
        if count == 1:
            call.num_params, call.num_params_total, call.num_buffers = (
                info.num_params, info.total, info.buffers)
        for ppath, param in info.params:
            entry = live.get(id(param))
            if entry is None or entry[0]() is not param:
                self._param_node(param, call, ppath)
        if scope is self._ctx:
            tensors: Any = named_tensors(_bind_arguments(module, args, kwargs), "")
        elif not kwargs and len(args) == 1 and type(args[0]) is Tensor:  # the common case
            tensors = ((None, args[0]),)
        elif not kwargs and all(type(a) is Tensor for a in args):
            tensors = [(None, t) for t in dict.fromkeys(args)]
        else:
            tensors = [(None, t) for t in iter_tensors((args, kwargs))]
        shapes = call.input_shapes
        for argname, t in tensors:
            shapes.append(tuple(t.shape))
            entry = live.get(id(t))
            src = entry[1] if entry is not None and entry[0]() is t else None
            if src is not None and isinstance(nodes[src], TensorNode):
                continue
            if argname is not None:
                label = argname.lstrip(".")
                node = self._tensor_node(t, scope, f"input:{label}", name=label, role="input")
            else:
                node = self._tensor_node(t, scope, f"{key}:in")
            if src is not None:
                self.edges._items[(src, node.key)] = None
                self._sources.add(src)
        stack.append(call)
        self._stack_exc.append(sys.exc_info()[1])

    def _exit(self, module: nn.Module, outputs: Any) -> None:
        stack = self._stack
        if not stack:
            return
        if stack[-1].fn is not module:
            if all(c.fn is not module for c in stack):
                return
            while stack[-1].fn is not module:
                self._pop()  # left open by an exception that was handled inside the model
        exc = sys.exc_info()[1]
        call = self._pop()
        if exc is not None and exc is not self._popped_exc:
            # forward raised (the hook is registered with always_call=True): close the
            # call with no outputs, and remember the innermost call the exception left
            call.error = f"{type(exc).__name__}: {exc}"
            if self._failure is None or self._failure[0] is not exc:
                self._failure = (exc, call)
            return
        self._failure = None  # a normal return: any exception seen so far was handled
        nodes, live = self.nodes, self._live
        scope = nodes[call.parent]
        assert isinstance(scope, LayerNode)
        at_root = scope is self._ctx
        if at_root:
            tensors: Any = named_tensors(outputs, "output")
        elif type(outputs) is Tensor:
            tensors = ((None, outputs),)
        else:
            tensors = ((None, t) for t in iter_tensors(outputs))
        ckey = call.key
        for outname, t in tensors:
            shape = tuple(t.shape)
            call.output_shapes.append(shape)
            entry = live.get(id(t))
            src = entry[1] if entry is not None and entry[0]() is t else None
            node = nodes[src] if src is not None else None
            if node is None or not (node.parent == ckey or self._inside(node, call)):
                # returned unchanged (or from nowhere): show the pass-through inside the call
                ident = OpNode("identity", None, call.depth + 1, ckey, self._unique(f"{ckey}/identity"),
                               op="identity", output_shapes=[shape])
                nodes[ident.key] = ident
                call.subnets._items[ident.key] = None
                if src is not None:
                    self.edges._items[(src, ident.key)] = None
                    self._sources.add(src)
                src, node = ident.key, ident
            if isinstance(node, TensorNode) and not isinstance(node, ParamNode) \
                    and node.parent == ckey and src not in self._sources:
                self._promote(node, call, scope)
                out_node = node
            else:
                out_node = self._tensor_node(t, scope, f"{ckey}:out")
                self.edges._items[(src, out_node.key)] = None
                self._sources.add(src)
            if at_root:
                out_node.role = "output"
                if outname is not None and out_node.name == shape_str(out_node.shape):
                    out_node.name = outname

    def _inside(self, node: BaseNode, call: LayerNode) -> bool:
        """Whether ``node`` was recorded inside the scope of ``call``."""
        while node.depth > call.depth:
            if node.parent == call.key:
                return True
            node = self.nodes[node.parent]
        return False

    def _promote(self, node: TensorNode, call: LayerNode, scope: LayerNode) -> None:
        """Move a child's output tensor out of ``call``: it is also ``call``'s output."""
        call.subnets.discard(node.key)
        node.parent = scope.key
        node.depth = call.depth
        scope.subnets.add(node.key)

    def _prune(self) -> None:
        """Drop op nodes whose results nothing used (``x.sum().item()`` checks and the like)."""
        removable = [k for k, n in self.nodes.items() if isinstance(n, OpNode) and k not in self._sources]
        if not removable:
            return
        indegree_from: dict[Key, list[Key]] = {}
        for a, b in self.edges:
            indegree_from.setdefault(b, []).append(a)
        outdeg: dict[Key, int] = {}
        for a, _ in self.edges:
            outdeg[a] = outdeg.get(a, 0) + 1
        dead: set[Key] = set()
        while removable:
            k = removable.pop()
            if k in dead:
                continue
            dead.add(k)
            for src in indegree_from.get(k, ()):
                outdeg[src] -= 1
                if outdeg[src] == 0 and isinstance(self.nodes[src], OpNode):
                    removable.append(src)
        for k in dead:
            node = self.nodes.pop(k)
            parent = self.nodes.get(node.parent)
            if isinstance(parent, LayerNode):
                parent.subnets.discard(k)
        self.edges = OrderedSet(e for e in self.edges if e[0] not in dead and e[1] not in dead)
        self._sources = {a for a, _ in self.edges}

    def _pop(self) -> LayerNode:
        """Close the innermost open call; its entry exception goes to ``_popped_exc``."""
        self._popped_exc = self._stack_exc.pop()
        return self._stack.pop()

    def _fail(self, exc: BaseException) -> None:
        """Mark the innermost call that ``exc`` escaped from, and the calls around it."""
        self.error = f"{type(exc).__name__}: {exc}"
        for call in self._stack:  # calls still open (a KeyboardInterrupt skips the hooks)
            call.error = call.error or self.error
        try:
            exc.recording = self  # type: ignore[attr-defined]
        except AttributeError:
            pass
        if self._failure is not None and self._failure[0] is exc:
            failed = self._failure[1]
        elif self._stack:
            failed = self._stack[-1]
        else:
            return  # raised outside the model's forward
        self.failed_key = failed.key
        shapes = ", ".join(shape_str(s) for s in failed.input_shapes) or "no tensors"
        where = failed.path or failed.name
        note = (f"torchrecorder: raised in module '{where}' ({failed.type_name}) called with "
                f"input shapes [{shapes}]; the partial recording is in the exception's "
                "'recording' attribute")
        if hasattr(exc, "add_note"):
            exc.add_note(note)

    def _finish(self) -> None:
        """Drop unused ops (unless the pass failed) and forget the live objects seen."""
        if self.error is None:
            self._prune()
        self._live.clear()
        self._stack.clear()
        self._stack_exc.clear()
        self._failure = None
        self._modules.clear()
        self._params.clear()

    def lint(self) -> None:
        """Check the graph's invariants; raise ``AssertionError`` naming the first broken one.

        Every edge joins recorded nodes; every node's parent is a recorded layer
        that lists it in ``subnets`` and is one level shallower; every parent
        chain reaches the context; ``subnets`` name only recorded nodes.
        """
        nodes = self.nodes
        assert isinstance(nodes.get(None), ContextNode), "the context node (key None) is missing"
        for key, node in nodes.items():
            assert node.key == key, f"node {key!r} carries the key {node.key!r}"
            if key is None:
                continue
            parent = nodes.get(node.parent)
            assert isinstance(parent, LayerNode), f"parent {node.parent!r} of {key!r} is not a layer"
            assert key in parent.subnets, f"{key!r} is missing from the subnets of {node.parent!r}"
            assert node.depth == parent.depth + 1, (
                f"{key!r} has depth {node.depth}, its parent {node.parent!r} {parent.depth}")
            if isinstance(node, LayerNode):
                for sub in node.subnets:
                    assert sub in nodes, f"{key!r} lists the unrecorded node {sub!r} in subnets"
                    assert nodes[sub].parent == key, f"{sub!r} is in the subnets of {key!r}, not its child"
        for a, b in self.edges:
            assert a in nodes and b in nodes, f"edge {(a, b)!r} joins unrecorded nodes"
            assert a != b, f"self-loop on {a!r}"
        for key in self.context.subnets:
            assert key in nodes, f"the context lists the unrecorded node {key!r}"

    # --------------------------------------------------------------- display
    def summary(self) -> str:
        """A table of the recorded module calls: name, type, shapes, parameters."""
        from .summary import summary_table

        return summary_table(self)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        n_layers = sum(1 for _ in self.layers())
        return (f"<Recorder {self.name!r}: {n_layers} module calls, {len(self.nodes) - 1} nodes, "
                f"{len(self.edges)} edges>")

    def to_json(self, path: Optional[str] = None) -> str:
        """The graph as JSON (schema in :mod:`torchrecorder.export`); also written to ``path`` if given.

        :func:`torchrecorder.load_json` rebuilds a graph that draws the same.
        """
        from .export import dumps

        text = dumps(self)
        if path is not None:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        return text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None,
                          **kwargs: Any) -> dict[str, str]:
        """Jupyter display: the graph at ``render_depth=1``, at a readable size."""
        from .renderer.graphviz import GraphvizRenderer
        from .renderer.notebook import mimebundle

        source = GraphvizRenderer(self, 1).render().source
        return mimebundle(source, repr(self), include=include, exclude=exclude)

    def _repr_svg_(self) -> Optional[str]:
        """The graph at ``render_depth=1`` as SVG text, or ``None`` without Graphviz."""
        from .renderer.graphviz import GraphvizRenderer
        from .renderer.notebook import svg_of

        return svg_of(GraphvizRenderer(self, 1).render().source)


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


def _bind_arguments(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
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


def _adopt(rec: Recorder, module: nn.Module, node: Optional[LayerNode]) -> None:
    """Let ``rec`` know ``module`` under the path and name of the layer ``node``, if new to it."""
    if node is not None and id(module) not in rec._modules:
        rec._module_info(module, node.path, node.name)


def prehook(module: nn.Module, inputs: Any, rec: Recorder, node: Optional[LayerNode] = None,
            kwargs: Optional[dict[str, Any]] = None) -> None:
    """Hook run BEFORE ``module``: open a call scope.

    Records a new :class:`~.nodes.LayerNode` for this call (in the scope of the
    calling module), the module's parameters on its first call, and a
    :class:`~.nodes.TensorNode` for each input tensor not already standing for
    a layer boundary.  The inputs are passed on untouched.
    :meth:`Recorder.register_hooks` registers the same work on every module.

    Args:
        module: the module about to run.
        inputs: its positional arguments.
        rec: the active :class:`Recorder`.
        node: a layer whose ``path`` and ``name`` the module's calls take, for a
            module that :meth:`Recorder.register_hooks` did not see; else ignored.
        kwargs: its keyword arguments.
    """
    _adopt(rec, module, node)
    rec._pre_hook(module, inputs, kwargs or {})


def posthook(module: nn.Module, inputs: Any, outputs: Any, rec: Recorder,
             node: Optional[LayerNode] = None, kwargs: Optional[dict[str, Any]] = None) -> None:
    """Hook run AFTER ``module`` returned: close its call scope.

    Each output tensor gets a :class:`~.nodes.TensorNode` in the caller's scope
    with an edge from the node inside the call that produced it; an output that
    is just a child's output is moved up instead of copied, and an output the
    module returned unchanged gets an ``identity`` op.  The outputs are passed
    on untouched.  The hook :meth:`Recorder.register_hooks` registers is
    called even when ``forward`` raises (``always_call=True``): the call is then
    closed without outputs and marked with the error.
    """
    del node
    rec._post_hook(module, inputs, kwargs, outputs)


@contextmanager
def recording(net: nn.Module, name: str = "net", *, keep_tensors: bool = False) -> Iterator[Recorder]:
    """Record every forward call of ``net`` made inside the ``with`` block.

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    >>> with recording(net, "mlp") as rec:
    ...     out = net(torch.randn(2, 4))
    >>> [layer.key for layer in rec.layers()]
    ['mlp', '0', '1']

    On leaving the block every hook is removed, whatever happened.  If the
    block raises, the exception goes on unchanged but for a note naming the
    module that raised, and ``exc.recording`` holds the partial graph.

    Args:
        net: the module to record.
        name: the name shown for the root module.
        keep_tensors: keep the tensors (activations) on the tensor nodes.
    """
    if not isinstance(net, nn.Module):
        raise TypeError(f"expected a torch.nn.Module to record, got {type(net).__name__}")
    rec = Recorder(name, keep_tensors=keep_tensors)
    rec.register_hooks(net, name=name)
    try:
        with _OpMode(rec):
            yield rec
    except BaseException as exc:
        rec._fail(exc)
        raise
    finally:
        rec.remove_hooks()
        rec._finish()


# -------------------------------------------------- the original hook functions
def _grad_fn_op_name(classname: str) -> str:
    """``AddmmBackward0`` -> ``addmm``; ``NativeLayerNormBackward0`` -> ``native_layer_norm``."""
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


def op_acc(gf: Any, rec: Recorder, node: Any) -> None:
    """Operator accumulator: record the autograd graph that ends at ``gf``.

    Walks ``gf`` and everything reachable through ``next_functions`` with an
    explicit stack (no recursion limit), adding an :class:`~.nodes.OpNode` in
    the scope of ``node`` for each autograd node not yet recorded, and an edge
    for each connection.  An ``AccumulateGrad`` node is not drawn: it points to
    the node of its ``variable`` (recorded as a parameter node if needed).

    Args:
        gf: a ``grad_fn`` (autograd node) or ``None``.
        rec: the :class:`Recorder` to update.
        node: the layer node (or its key) whose scope the operations belong to.
    """
    if gf is None:
        return
    scope = rec.nodes[rec._key_of(node)]
    depth = scope.depth + 1

    def ensure(fn: Any) -> Key:
        key = rec._lookup(fn)
        if key is not None:
            return key
        variable = getattr(fn, "variable", None)
        if variable is not None:
            vkey = rec._lookup(variable)
            if vkey is None:
                vkey = rec.add_node(variable, depth, scope.key, getattr(variable, "name", None)).key
            rec.add_dummy(fn, vkey)
            return vkey
        return rec.add_node(fn, depth, scope.key).key

    stack = [gf]
    ensure(gf)
    expanded: set[int] = set()
    while stack:
        fn = stack.pop()
        if id(fn) in expanded or getattr(fn, "variable", None) is not None:
            continue
        expanded.add(id(fn))
        to_key = ensure(fn)
        for nxt, _ in fn.next_functions:
            if nxt is None:
                continue
            rec.add_edge(ensure(nxt), to_key)
            stack.append(nxt)


def tensor_acc(tensor: Tensor, rec: Recorder, node: Any) -> Key:
    """Tensor accumulator: record ``tensor`` as an input/output of ``node``'s module.

    The new :class:`~.nodes.TensorNode` goes in the scope of ``node``'s parent
    (the tensor crosses ``node``'s boundary).  Nothing happens if the tensor
    already stands for a node.

    Returns:
        the key of the tensor's node.
    """
    key = rec._lookup(tensor)
    if key is not None:
        return key
    layer = rec.nodes[rec._key_of(node)]
    scope = rec.nodes[layer.parent]
    assert isinstance(scope, LayerNode)
    return rec._tensor_node(tensor, scope, f"{layer.key}:tensor").key


def param_acc(param: nn.Parameter, rec: Recorder, node: Any) -> Key:
    """Parameter accumulator: record ``param`` in the scope of ``node`` (its module's call).

    Returns:
        the key of the parameter's node (an existing one if already recorded).
    """
    key = rec._lookup(param)
    if key is not None:
        return key
    layer = rec.nodes[rec._key_of(node)]
    assert isinstance(layer, LayerNode)
    path = rec._params.get(id(param), (None, ""))[1] or f"{layer.key}.param"
    return rec._param_node(param, layer, path).key


def leaf_dummy(tensor: Tensor, rec: Recorder) -> Tensor:
    """Return ``tensor + 0``, pointed at ``tensor``'s node.

    The original recorder fed modules such dummies so that operations on them
    could be told apart; the current recorder does not need them, but the
    function keeps working for code that does.
    """
    rec._paused += 1
    try:
        dummy = tensor + 0
    finally:
        rec._paused -= 1
    rec.add_dummy(dummy, tensor)
    if dummy.grad_fn is not None:
        rec.add_dummy(dummy.grad_fn, tensor)
    return dummy

