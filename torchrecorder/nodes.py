"""The node model of a recording: layers, tensors, parameters and operations.

A :class:`~torchrecorder.recorder.Recorder` keeps its nodes in ``rec.nodes``, a
dict from a *key* to a node.  Keys are unique, deterministic, readable strings
(``"layer1.0.conv1"``, ``"layer1.0/add"``, ``"fc:out"``); the context node that
holds everything has the key ``None``.  A node's ``parent_key`` is the key of the
node whose scope it belongs to, and a scope's ``subnet_keys`` holds the keys of its
children in the order they were recorded.

``parent`` and ``subnets`` are the same links as torchrecorder 1.0.3 code reads them:
the recorded objects (a module, a parameter, ``node.fn`` of a tensor or an operation)
in place of the keys, each of which finds its node in ``rec.nodes`` (see
:attr:`BaseNode.parent`).

Nodes hold metadata (names, shapes, dtypes, parameter counts), never the
activations themselves, unless a recording was asked to keep them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Hashable, Iterable, Iterator, MutableSet
from typing import Any, Generic, NamedTuple, Optional, TypeVar

from ._lines import resolved
from .seed import REMOVED_HOOK, RemovedHook, Subnets, table_of

__all__ = [
    "BaseNode",
    "ContextNode",
    "LayerNode",
    "OpNode",
    "OrderedSet",
    "ParamNode",
    "ScopeNode",
    "Source",
    "TensorNode",
    "itemsize",
    "shape_str",
]

Key = Optional[str]
T = TypeVar("T", bound=Hashable)


class OrderedSet(MutableSet[T], Generic[T]):
    """A set that remembers insertion order, so that iteration is deterministic."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._items: dict[T, None] = dict.fromkeys(items) if items != () else {}

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, value: T) -> None:
        """Add ``value`` at the end unless it is already present."""
        self._items[value] = None

    def discard(self, value: T) -> None:
        """Remove ``value`` if present."""
        self._items.pop(value, None)

    def __repr__(self) -> str:
        return f"OrderedSet({list(self._items)!r})"


_DTYPE_BITS = re.compile(r"(\d+)")


def itemsize(dtype: str) -> int:
    """Bytes per element of a dtype given by name (``"bfloat16"`` -> 2); 4 when unknown."""
    if dtype in ("bool", "uint8", "int8") or dtype.startswith("float8"):
        return 1
    m = _DTYPE_BITS.search(dtype)
    if m is None:
        return 4
    return max(1, int(m.group(1)) // 8)


def shape_str(shape: Optional[tuple[int, ...]]) -> str:
    """Format a shape as ``1×3×224×224`` (``scalar`` for 0-d, ``?`` if unknown, ``*`` for the
    ragged dimension of a nested tensor, stored as ``-1``).

    >>> shape_str((2, -1, 3))
    '2×*×3'
    """
    if shape is None:
        return "?"
    if len(shape) == 0:
        return "scalar"
    return "×".join(str(d) if d >= 0 else "*" for d in shape)


class Source(NamedTuple):
    """Where in the code a node comes from: a line of Python source.

    For a module call, the line that called the module (in the calling module's
    ``forward``, or in the user's script for the root module); for an operation, the
    first line outside torch and torchrecorder that ran it.  A recording shares one
    ``Source`` between all the nodes of a line.

    >>> Source("model.py", 12, "forward").where()
    'model.py:12'
    """

    filename: str
    lineno: int
    function: str

    def where(self) -> str:
        """``file:line``, the file by its base name."""
        return f"{self.filename.replace(chr(92), '/').rpartition('/')[2]}:{self.lineno}"


class BaseNode:
    """A node of the recorded graph.

    Attributes:
        name: short display name (a module's attribute name, an op name, ...).
        depth: scope depth; the context is ``-1``, the root module ``0``.
        parent_key: key of the node whose scope holds this one (``None`` is the
            context).
        key: this node's key in ``Recorder.nodes``.

    ``source`` (a property) is the line of code the node comes from.
    """

    kind = "node"
    # _table: a weak reference to the NodeTable the node belongs to (set by the graph), through
    # which parent and subnets give 1.0.3's objects; unset on a node no graph adopted
    # _source: the Source, or the line named while recording and not resolved yet (an
    # torchrecorder._lines.At), or None (see source)
    __slots__ = ("_fn", "_source", "_table", "depth", "key", "name", "parent_key")
    _table: Any

    def __init__(
        self,
        name: str = "",
        fn: Any = None,
        depth: int = -1,
        parent: Key = None,
        key: Key = None,
    ) -> None:
        self.name = name
        self._fn = fn
        self.depth = depth
        self.parent_key = parent
        self.key = key
        self._source: Any = None

    @property
    def source(self) -> Optional[Source]:
        """The :class:`Source` line of code the node comes from (module calls and operations),
        or ``None`` where it is not known (other nodes, a recording made with ``source=False``
        or loaded from a file written without it).

        A recording names the line by the code object and instruction it found on the call
        stack; the file, line number and function are worked out here, on first read (see
        :mod:`torchrecorder._lines`), and kept."""
        src = self._source
        if type(src) is tuple:  # named while recording, not resolved yet
            src = self._source = resolved(src, Source)
        return src

    @source.setter
    def source(self, value: Optional[Source]) -> None:
        self._source = value

    @property
    def fn(self) -> Any:
        """The recorded object, as torchrecorder 1.0.3 code reads it: the module of a layer,
        the parameter of a :class:`ParamNode`; a tensor-like of a :class:`TensorNode` and an
        operation object of an :class:`OpNode` (see theirs).  ``None`` for a layer of a graph
        loaded from JSON.  :attr:`kept` is what the recording holds."""
        return self._fn

    @fn.setter
    def fn(self, value: Any) -> None:
        self._fn = value

    @property
    def kept(self) -> Any:
        """The object the recording holds for this node (the module, the parameter, the torch
        function, the tensor when tensors are kept), or ``None``: unlike :attr:`fn`, never one
        made for code written for 1.0.3."""
        return self._fn

    @property
    def parent(self) -> Any:
        """The node whose scope holds this one, as torchrecorder 1.0.3 held it: the recorded
        object rather than its key (:attr:`parent_key` is the key).

        That is the module of the layer call that holds the node (for a parameter, the
        module that owns it), ``None`` at the top (the root module's call, its inputs and
        outputs, the context).  Where no object stands for the scope alone, the key stands
        in: a module's second and later calls (``rec.nodes[module]`` is its first call), a
        graph loaded from JSON or built by hand.  Either way ``rec.nodes[node.parent]`` is
        the parent node.

        Setting it takes a key, a node or a recorded object, and sets :attr:`parent_key`
        (it does not move the node: see :meth:`~torchrecorder.graph.Graph.reparent`).
        """
        key = self.parent_key
        if key is None:
            return None
        table = table_of(self)
        if table is None:
            return key
        node = table.get(key)
        return key if node is None else table.seed_ref(node)

    @parent.setter
    def parent(self, value: Any) -> None:
        if value is None or isinstance(value, str):
            self.parent_key = value
        elif isinstance(value, BaseNode):
            self.parent_key = value.key
        else:
            table = table_of(self)
            if table is None:
                raise TypeError(f"cannot set the parent of {self.key!r} to a {type(value).__name__} "
                                "object: the node is in no graph; give the parent's key")
            self.parent_key = table[value].key

    def _seed_ref(self) -> Any:
        """The object 1.0.3 held for this node (see :attr:`parent`), before the graph checks
        that it finds the node; ``None`` where there is none."""
        return self.fn

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        # copied or pickled: every field but the link to the graph and the objects made for
        # 1.0.3 code (made again when read)
        state: dict[str, Any] = {}
        for cls in type(self).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if name == "_seed":
                    state[name] = None
                elif name == "_source":
                    state[name] = self.source  # resolved: a code object does not pickle
                elif name != "_table" and hasattr(self, name):
                    state[name] = getattr(self, name)
        return None, state

    def __deepcopy__(self, memo: dict[int, Any]) -> BaseNode:
        # as pickle copies it: a kept tensor made by an operation (torch deep-copies leaf tensors
        # only) detached, a leaf that requires gradients as it did; this node keeps its own
        from torch import Tensor

        new = memo[id(self)] = type(self).__new__(type(self))
        for name, value in self.__getstate__()[1].items():
            if isinstance(value, Tensor) and value.grad_fn is not None and id(value) not in memo:
                memo[id(value)] = copy.deepcopy(value.detach().requires_grad_(value.requires_grad), memo)
            setattr(new, name, copy.deepcopy(value, memo))
        return new

    def __repr__(self) -> str:
        return f"{type(self).__name__}(key={self.key!r}, name={self.name!r}, depth={self.depth})"


class ScopeNode(BaseNode):
    """A node that holds other nodes: a module call (:class:`LayerNode`) or the context
    (:class:`ContextNode`); ``isinstance(node, ScopeNode)`` asks whether a node can be a
    parent, ``isinstance(node, LayerNode)`` whether it is a module call.

    Attributes:
        subnet_keys: keys of the nodes recorded inside this scope, in order.
    """

    kind = "scope"
    __slots__ = ("subnet_keys",)

    def __init__(self, name: str = "", fn: Any = None, depth: int = -1, parent: Key = None,
                 key: Key = None) -> None:
        super().__init__(name, fn, depth, parent, key)
        self.subnet_keys: OrderedSet[Key] = OrderedSet()

    @property
    def subnets(self) -> Subnets:
        """The children as torchrecorder 1.0.3 code reads them: the recorded objects in place
        of :attr:`subnet_keys` (see :class:`~torchrecorder.seed.Subnets`)."""
        return Subnets(self)


class LayerNode(ScopeNode):
    """One call of a :class:`torch.nn.Module`.

    A module called several times gives one ``LayerNode`` per call; the second
    call's key ends in ``#2``.

    Attributes:
        subnet_keys: keys of the nodes recorded inside this call, in order
            (:attr:`subnets`: the same children as 1.0.3 code reads them).
        type_name: the module's class name, e.g. ``"Conv2d"``.
        path: the module's dotted path in the root module (``""`` for the root).
        call_index: 1 for the first call of this module, 2 for the second, ...
        num_params: number of parameter elements the module owns directly.
        num_params_total: parameter elements of the module and its children.
        num_buffers: number of buffer elements the module owns directly.
        input_shapes: shapes of the tensors the call received.
        output_shapes: shapes of the tensors the call returned.
        error: ``"ExcType: message"`` if the call raised, else ``None``.
        opaque: what ran instead of Python code the recording can see inside, when the call
            is drawn as a closed box around one op: ``"fused: <kernel>"`` (PyTorch's fused
            fast path, e.g. ``_native_multi_head_attention``) or ``"TorchScript"``; else ``""``.
        unfused: the fused kernel a plain call would have run, when the recording ran the
            module's unfused Python path instead (``unfuse_fast_paths=True``); else ``""``.
    """

    kind = "layer"
    __slots__ = (
        "call_index",
        "error",
        "input_shapes",
        "num_buffers",
        "num_params",
        "num_params_total",
        "opaque",
        "output_shapes",
        "path",
        "type_name",
        "unfused",
    )

    def __init__(
        self,
        name: str = "",
        fn: Any = None,
        depth: int = -1,
        parent: Key = None,
        key: Key = None,
        type_name: str = "",
        path: str = "",
        call_index: int = 1,
        opaque: str = "",
        unfused: str = "",
        num_params: int = 0,
        num_params_total: int = 0,
        num_buffers: int = 0,
        source: Any = None,
    ) -> None:
        # fields assigned here rather than through BaseNode.__init__: a recording makes
        # one node per module call and per operation, and the extra call shows
        self.name = name
        self._fn = fn
        self.depth = depth
        self.parent_key = parent
        self.key = key
        self._source = source
        self.subnet_keys = OrderedSet()
        self.type_name = type_name or (type(fn).__name__ if fn is not None else "")
        self.path = path
        self.call_index = call_index
        self.num_params = num_params
        self.num_params_total = num_params_total
        self.num_buffers = num_buffers
        self.input_shapes: list[tuple[int, ...]] = []
        self.output_shapes: list[tuple[int, ...]] = []
        self.error: Optional[str] = None
        self.opaque = opaque
        self.unfused = unfused

    def _seed_ref(self) -> Any:
        # the module stands for its first call, as rec.nodes[module] finds (later calls: key)
        fn = self._fn
        return fn if fn is not None and self.call_index == 1 else None

    @property
    def pre(self) -> RemovedHook:
        """1.0.3's handle of the forward pre-hook on the module: the recorder's hooks are
        taken off when the recording ends (``rec.remove_hooks()``), so its ``remove()`` has
        nothing left to do."""
        return REMOVED_HOOK

    @property
    def post(self) -> RemovedHook:
        """1.0.3's handle of the forward hook on the module (see :attr:`pre`)."""
        return REMOVED_HOOK

    @property
    def back(self) -> None:
        """1.0.3's slot for a backward hook, which 1.0.3 never registered: always ``None``."""
        return None

    def call_title(self, dotted: bool = False) -> str:
        """The name a reader sees for this call: the module's name (its dotted path if
        ``dotted``), with ``#2``, ``#3``, ... for later calls of the same module.

        >>> LayerNode("conv", path="layer1.conv", call_index=2).call_title(dotted=True)
        'layer1.conv #2'
        """
        title = (self.path or self.name) if dotted else self.name
        return title if self.call_index == 1 else f"{title} #{self.call_index}"

    def run_note(self) -> str:
        """What a picture says about how the call ran, when it is not plain Python code the
        recording saw: ``"fused: <kernel>"``, ``"TorchScript"``, ``"unfused path (plain call:
        <kernel>)"``; else ``""``.

        >>> LayerNode("attn", unfused="_native_multi_head_attention").run_note()
        'unfused path (plain call: _native_multi_head_attention)'
        """
        if self.opaque:
            return self.opaque
        return f"unfused path (plain call: {self.unfused})" if self.unfused else ""


class ContextNode(ScopeNode):
    """The node that holds a whole recording: its key is ``None``, its depth ``-1``.

    Its ``subnet_keys`` are the root module's call(s) and the root's input and output
    tensors.  It is a scope, not a module call: ``isinstance(node, LayerNode)`` is false
    of it, as of 1.0.3's ``ContextDummy``, so a loop over ``rec.nodes`` that picks the
    layers gets the module calls only.
    """

    kind = "context"
    __slots__ = ()

    def __init__(self, name: str = "ContextDummy") -> None:
        super().__init__(name=name, fn=None, depth=-1, parent=None, key=None)

    def _seed_ref(self) -> Any:
        return None


class TensorNode(BaseNode):
    """A tensor that crosses a module boundary (a layer's input or output).

    Attributes:
        shape: the tensor's shape as a tuple of ints.
        dtype: the dtype's name, e.g. ``"float32"``.
        device: the device's string, e.g. ``"cpu"`` or ``"meta"``.
        role: ``"input"`` for the root module's inputs, ``"output"`` for its
            outputs, ``""`` for tensors between layers.
    """

    kind = "tensor"
    # _seed: ((shape, dtype), the meta tensor fn gave for them), made on first read
    __slots__ = ("_seed", "device", "dtype", "role", "shape")

    def __init__(
        self,
        name: str = "",
        fn: Any = None,
        depth: int = -1,
        parent: Key = None,
        key: Key = None,
        shape: Optional[tuple[int, ...]] = None,
        dtype: str = "",
        device: str = "",
        role: str = "",
    ) -> None:
        self.name = name
        self._fn = fn
        self.depth = depth
        self.parent_key = parent
        self.key = key
        self._source = None
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.role = role

    @property
    def fn(self) -> Any:
        """The tensor, when the recording kept it (``keep_tensors=True``) or, for a parameter,
        the live parameter; else, as 1.0.3 code reads it, a tensor on the ``meta`` device with
        the recorded shape and dtype (no memory): ``node.fn.shape``, ``node.fn.dtype``; for a
        parameter, a ``Parameter`` with its ``requires_grad`` too.  The same object at each read
        while these stay, so ``rec.nodes[node.fn]`` finds the node."""
        fn = self._fn
        if fn is None and self.shape is not None:
            got = getattr(self, "_seed", None)
            made = (self.shape, self.dtype, getattr(self, "requires_grad", None))
            if got is None or got[0] != made:
                from .seed import meta_tensor

                got = self._seed = (made, meta_tensor(*made))
            return got[1]
        return fn

    @fn.setter
    def fn(self, value: Any) -> None:
        self._fn = value


class ParamNode(TensorNode):
    """A parameter of a module, recorded once, in the scope of its module's first call.

    Attributes:
        path: the parameter's dotted path in the root module.
        numel: number of elements.
        requires_grad: whether the parameter is trainable.
        held_as: the other dotted paths under which modules that ran hold this very
            parameter (``("head.weight",)`` for an embedding table tied to an output
            projection); ``()`` where none does; ``None`` where the graph does not know (a
            JSON document that does not say, a node added by hand).
    """

    kind = "param"
    __slots__ = ("held_as", "numel", "path", "requires_grad")

    def __init__(
        self,
        name: str = "",
        fn: Any = None,
        depth: int = -1,
        parent: Key = None,
        key: Key = None,
        shape: Optional[tuple[int, ...]] = None,
        dtype: str = "",
        device: str = "",
        path: str = "",
        numel: int = 0,
        requires_grad: bool = True,
        held_as: Optional[tuple[str, ...]] = None,
    ) -> None:
        # fields assigned here rather than through TensorNode.__init__ (one node per parameter)
        self.name = name
        self._fn = fn
        self.depth = depth
        self.parent_key = parent
        self.key = key
        self._source = None
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.role = ""
        self.path = path
        self.numel = numel
        self.requires_grad = requires_grad
        self.held_as = held_as


class OpNode(BaseNode):
    """An operation that ran during the forward pass (``linear``, ``cat``, ``add``).

    Attributes:
        op: the operation's name as called in the forward code.
        output_shapes: shapes of the tensors the operation produced.
        grad_fn: the class name of the autograd node the operation made, where it made one
            (``"AddmmBackward0"``), else ``""``.
        error: ``"ExcType: message"`` for the operation a failed recording stopped in (drawn
            with the inputs it was given and no outputs), else ``None``.
    """

    kind = "op"
    # _seed: the Operation fn gave, made on first read
    __slots__ = ("_seed", "error", "grad_fn", "op", "output_shapes")

    def __init__(
        self,
        name: str = "",
        fn: Any = None,
        depth: int = -1,
        parent: Key = None,
        key: Key = None,
        op: str = "",
        output_shapes: Optional[list[tuple[int, ...]]] = None,
        grad_fn: str = "",
        source: Any = None,
    ) -> None:
        self.name = name
        self._fn = fn
        self.depth = depth
        self.parent_key = parent
        self.key = key
        self._source = source
        self.op = op or name
        self.output_shapes = output_shapes if output_shapes is not None else []
        self.grad_fn = grad_fn  # (_seed stays unset until fn is first read)
        self.error: Optional[str] = None

    @property
    def fn(self) -> Any:
        """The operation as 1.0.3 code reads it: an object whose class is named after the
        autograd node 1.0.3 recorded (``type(node.fn).__name__`` is ``"AddmmBackward0"``),
        with the torch function beside it (``node.fn.func``, called by calling ``node.fn``)
        and its name (``node.fn.op``); see :class:`~torchrecorder.seed.Operation`."""
        got = getattr(self, "_seed", None)
        if got is None or got.func is not self._fn:
            from .seed import operation

            got = self._seed = operation(self)
        return got

    @fn.setter
    def fn(self, value: Any) -> None:
        self._fn = value
