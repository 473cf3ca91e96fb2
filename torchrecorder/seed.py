"""What code written for torchrecorder 1.0.3 reads of a node, computed from today's graph.

1.0.3 kept the recorded objects themselves in ``node.fn``: the module, the
parameter, the tensor, and the autograd node (``grad_fn``) of each operation.
A recording keeps the module and the parameter; for the rest this module makes
what 1.0.3 code reads: a tensor on the ``meta`` device with the recorded shape
and dtype (no memory), and an :class:`Operation` whose class is named after the
autograd node 1.0.3 recorded.

>>> from torchrecorder.nodes import OpNode
>>> op = operation(OpNode("add", op="add", grad_fn="AddBackward0"))
>>> type(op).__name__, op.op, op.name()
('AddBackward0', 'add', 'AddBackward0')
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator, Set
from typing import Any, Optional

__all__ = [
    "REMOVED_HOOK", "Operation", "RemovedHook", "SeedName", "Subnets", "grad_fn_name",
    "meta_tensor", "named_as_seed", "operation", "seed_names", "table_of",
]


class Operation:
    """An operation of the graph as 1.0.3 code reads ``OpNode.fn``: its class is named after
    the autograd node the operation made (``AddmmBackward0``), as 1.0.3's ``grad_fn`` was.

    Attributes:
        func: the torch function that ran (``torch.nn.functional.linear``), or ``None`` in a
            graph loaded from JSON; calling the operation calls it.
        op: the operation's name as called in the forward code (``"linear"``).
    """

    __slots__ = ("__weakref__", "func", "op")

    def __init__(self, func: Any, op: str) -> None:
        self.func = func
        self.op = op

    def name(self) -> str:
        """The autograd node's name, as ``grad_fn.name()`` gives it."""
        return type(self).__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.func is None:
            raise TypeError(f"{self.name()} ({self.op}) has no function to call: the graph was "
                            "loaded without the live objects")
        return self.func(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_make, (self.name(), self.func, self.op))

    def __getattr__(self, attr: str) -> Any:
        # only reached for what an Operation lacks: 1.0.3 code reading the autograd node's own
        # API (next_functions, metadata, register_hook) learns what it holds instead
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise AttributeError(
            f"{type(self).__name__} here is torchrecorder's stand-in for the autograd node that "
            f"1.0.3 recorded (torchrecorder.seed.Operation: func, op, name()), not the node "
            f"itself: it has no {attr!r}; the graph's edges are rec.edges, and "
            f"record(..., backward=True) keeps autograd's own graph (rec.backward)")

    def __repr__(self) -> str:
        return f"<{self.name()} ({self.op})>"


@functools.cache
def _operation_class(name: str) -> type[Operation]:
    """The :class:`Operation` subclass named ``name`` (one per name)."""
    return type(name, (Operation,), {"__slots__": (), "__module__": __name__})


def _make(name: str, func: Any, op: str) -> Operation:
    return _operation_class(name)(func, op)


def grad_fn_name(op: str) -> str:
    """The autograd node name for an operation that made none (no input needed gradients):
    its name in CamelCase with ``Backward0``, as autograd names most of them.

    >>> grad_fn_name("relu"), grad_fn_name("layer_norm"), grad_fn_name("__add__")
    ('ReluBackward0', 'LayerNormBackward0', 'AddBackward0')
    """
    words = [w for w in op.replace(".", "_").split("_") if w]
    return "".join(w[:1].upper() + w[1:] for w in words) + "Backward0" if words else "Backward0"


def operation(node: Any) -> Operation:
    """``node.fn`` as 1.0.3 code reads it, for the :class:`~torchrecorder.nodes.OpNode` ``node``."""
    name = node.grad_fn
    if not name:
        live = node._fn  # an autograd node itself (the manual workflow's add_node(grad_fn))
        name = type(live).__name__ if hasattr(live, "next_functions") else grad_fn_name(node.op or node.name)
    return _make(name, node._fn, node.op)


def meta_tensor(shape: tuple[int, ...], dtype: Optional[str], requires_grad: Optional[bool] = None) -> Any:
    """A tensor on the ``meta`` device of ``shape`` and the dtype named ``dtype`` (``float32``
    when unknown): it has a shape, a dtype and no data.  With ``requires_grad`` (``True`` or
    ``False``), a ``torch.nn.Parameter`` that requires gradients or not, as the parameter it
    stands for did."""
    import torch

    kind = getattr(torch, dtype, None) if dtype else None
    if not isinstance(kind, torch.dtype):
        kind = torch.float32
    tensor = torch.empty([max(int(d), 0) for d in shape], dtype=kind, device="meta")
    if requires_grad is None:
        return tensor
    trainable = requires_grad and (kind.is_floating_point or kind.is_complex)
    return torch.nn.Parameter(tensor, requires_grad=trainable)


class SeedName(str):
    """A module's name as 1.0.3 gave it, ``"conv1\\n(Conv2d)"``: a str that the default
    styler draws on two lines (a newline in any other name is shown as ``\\n``)."""

    __slots__ = ()


#: the names a recording gives the network's outputs: ``output``, ``output[0]``,
#: ``output.logits`` (where they sit in what ``forward`` returned), or their shape (``2×3``)
_DEFAULT_OUTPUT_NAME = re.compile(r"output(?:[\[.].*)?|scalar|\?|[\d*]+(?:×[\d*]+)*", re.S)


def seed_names(graph: Any) -> dict[Any, str]:
    """The name 1.0.3 gave each node of ``graph``, by key: ``Input`` (``Input-1``, ``Input-2``,
    ... for several, or for inputs given as a list of shapes or a tuple of tensors:
    ``graph.inputs_listed``), ``Output`` (``Output-1``, ... for several, or for a tuple
    returned: a single output named ``output[0]``), ``name\\n(Class)`` for a module below the
    network, ``Tensor-3`` for a tensor between layers, ``AddmmBackward0-2`` for an operation
    (numbered by class, as 1.0.3 numbered them); a parameter keeps its name."""
    counts: dict[str, int] = {}

    def numbered(classname: str) -> str:
        n = counts[classname] = counts.get(classname, 0) + 1
        return classname if n == 1 else f"{classname}-{n}"

    # node kinds (see torchrecorder.nodes): this module reads nodes, it imports none
    nodes = [n for n in graph.nodes.values() if n.kind != "context"]
    out: dict[Any, str] = {}
    for role, title in (("input", "Input"), ("output", "Output")):
        group = [n for n in nodes if n.kind == "tensor" and n.role == role]
        listed = len(group) > 1 or (getattr(graph, "inputs_listed", False) if role == "input"
                                    else bool(group) and group[0].name.startswith("output["))
        for i, node in enumerate(group, 1):
            if (node.key != f"input:{node.name}" if role == "input"
                    else _DEFAULT_OUTPUT_NAME.fullmatch(node.name) is None):
                out[node.key] = node.name  # named by the user after the recording: kept, as in 1.0.3
            else:
                out[node.key] = f"{title}-{i}" if listed else title
    for node in nodes:
        if node.kind == "layer":
            out[node.key] = node.name if node.depth <= 0 else SeedName(f"{node.name}\n({node.type_name})")
        elif node.kind == "param":
            out[node.key] = node.name
        elif node.kind == "tensor":
            name = numbered("Tensor")  # inputs and outputs took their number in 1.0.3 too
            out.setdefault(node.key, name)
        elif node.kind == "op":
            out[node.key] = numbered(type(node.fn).__name__)
    return out


@contextlib.contextmanager
def named_as_seed(graph: Any) -> Iterator[None]:
    """Within the block, the nodes of ``graph`` carry 1.0.3's names (:func:`seed_names`); their
    own names are put back on leaving it, whatever happens.  Used while 1.0.3 code draws."""
    names = seed_names(graph)
    nodes = graph.nodes
    old = {key: nodes[key].name for key in names}
    try:
        for key, name in names.items():
            nodes[key].name = name
        yield
    finally:
        for key, name in old.items():
            nodes[key].name = name


def table_of(node: Any) -> Any:
    """The node table a node belongs to (``BaseNode._table``, set when a graph adopts it), or
    ``None``."""
    ref = getattr(node, "_table", None)
    return ref() if ref is not None else None


class RemovedHook:
    """A hook handle whose hook is already removed: 1.0.3's ``node.pre`` and ``node.post``
    (see :attr:`~torchrecorder.nodes.LayerNode.pre`)."""

    __slots__ = ()

    def remove(self) -> None:
        """Nothing to remove: the recorder took its hooks off."""

    def __enter__(self) -> RemovedHook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


REMOVED_HOOK = RemovedHook()


class Subnets(Set[Any]):
    """A scope's children as torchrecorder 1.0.3 code reads ``node.subnets``: for each key of
    ``subnet_keys``, in order, the object that stands for the child (see
    :attr:`~torchrecorder.nodes.BaseNode.parent`): the module of a layer call, the parameter,
    ``fn`` of a tensor or an operation; the key where no object stands for the child alone.
    ``rec.nodes[s]`` finds the child for every ``s`` in it::

        tree = [s for s in rec.nodes[net].subnets if isinstance(s, nn.Module)]

    A read-only view: the scope's :attr:`~torchrecorder.nodes.ScopeNode.subnet_keys` is what changes.
    ``x in subnets`` is true of a child's object and of its key.
    """

    __slots__ = ("_scope",)

    def __init__(self, scope: Any) -> None:
        self._scope = scope

    def __iter__(self) -> Iterator[Any]:
        keys = self._scope.subnet_keys
        table = table_of(self._scope)
        if table is None:
            yield from keys
            return
        get = table.get
        for key in list(keys):
            node = get(key)
            yield key if node is None else table.seed_ref(node)

    def __len__(self) -> int:
        return len(self._scope.subnet_keys)

    def __contains__(self, obj: object) -> bool:
        keys = self._scope.subnet_keys
        if obj is None or isinstance(obj, str):
            return obj in keys
        return table_of(self._scope) is not None and any(s is obj for s in self)

    def __repr__(self) -> str:
        return f"Subnets({list(self)!r})"
