"""Node objects made before a recording's pass, so that the collector does not scan them during it.

A recording keeps every node it makes until the pass ends, and every object the collector
tracks counts towards its youngest generation's threshold: on a graph-bound model the
nodes are about a sixth of the pass's tracked allocations, and each collection scans those
made since the last one (see :mod:`~torchrecorder.recording.collector`, whose promise this
keeps: the thresholds are not touched and the forward's own allocations count as in a plain
call, so its garbage is collected at least as soon).

A model recorded again usually makes as many nodes of each kind as the last time.  Its memo
(:mod:`~torchrecorder.recording.memo`) keeps those counts (:attr:`ModelMemo.sizes
<torchrecorder.recording.memo.ModelMemo>`; a hint, never trusted), and :meth:`NodePool.fill`
makes that many bare node objects (``cls.__new__(cls)``, no fields set) right before
:func:`~torchrecorder.recording.collector.old_objects_aside` sets the old objects aside, with
the collector paused: they are set aside with them, their allocations never count, and the
collector never scans them during the pass.  The engine takes its operation, layer, tensor
and parameter nodes from the pool (:func:`take`) while it lasts and makes new ones after.  A
tensor or parameter node is initialised by its class's own ``__init__``; a layer or operation
node is made whole by ``LayerNode()``/``OpNode()`` ahead (its lists and child set included) and
given one call's fields by :func:`begin_layer`/:func:`begin_op`, which must set every field its
constructor sets (``tests/test_node_pool.py`` compares such nodes with new ones slot by slot),
so that a node from the pool is the node a recording without one makes.  What the pass did
not use is dropped when it ends (:meth:`NodePool.clear`); a node from the pool belongs to its
recording only.

Nothing is filled when no old objects are set aside (the process froze objects of its own,
or another recording is active): the nodes would only be made earlier.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import repeat
from typing import Any, Optional, TypeVar

from ..nodes import BaseNode, LayerNode, OpNode, ParamNode, TensorNode

__all__ = ["KINDS", "NodePool", "begin_layer", "begin_op", "sizes_of", "take"]

N = TypeVar("N", bound=BaseNode)

#: the node classes the engine makes once per operation, module call, tensor and parameter
KINDS: tuple[type[BaseNode], ...] = (OpNode, LayerNode, TensorNode, ParamNode)

#: at most this many nodes of one kind are made ahead (a hint of a huge model stays bounded)
LIMIT = 1 << 20
#: nodes of each kind made beyond the hint: a pass that leaves some unused tells exactly how
#: many it took (:meth:`NodePool.used`), with no count of the graph's nodes
MARGIN = 1


def take(pool: list[N], cls: type[N]) -> N:
    """A bare ``cls`` object: the last of ``pool``, or a new one when it is empty.  (The engine
    inlines this where it makes nodes per operation and per call.)"""
    return pool.pop() if pool else cls.__new__(cls)


def begin_layer(node: LayerNode, name: str, fn: Any, depth: int, parent: Any, key: Any, type_name: str,
                path: str, call_index: int, num_params: int, num_params_total: int, num_buffers: int,
                source: Any) -> None:
    """Give ``node``, made by ``LayerNode()`` for the pool and not used yet, the fields of one
    call: the arguments of ``LayerNode.__init__`` a recording sets (``opaque`` and ``unfused``
    stay ``""``), its ``subnet_keys`` and shape lists the ones ``LayerNode()`` made."""
    node.name = name
    node._fn = fn
    node.depth = depth
    node.parent_key = parent
    node.key = key
    node._source = source
    node.type_name = type_name
    node.path = path
    node.call_index = call_index
    node.num_params = num_params
    node.num_params_total = num_params_total
    node.num_buffers = num_buffers


def begin_op(node: OpNode, name: str, fn: Any, depth: int, parent: Any, key: Any, op: str, grad_fn: str,
             source: Any) -> None:
    """Give ``node``, made by ``OpNode()`` for the pool and not used yet, the fields of one
    operation: the arguments of ``OpNode.__init__`` a recording sets but ``output_shapes``,
    which it fills in the list ``OpNode()`` made."""
    node.name = name
    node._fn = fn
    node.depth = depth
    node.parent_key = parent
    node.key = key
    node._source = source
    node.op = op
    node.grad_fn = grad_fn


def sizes_of(nodes: Iterable[BaseNode]) -> tuple[int, ...]:
    """How many of ``nodes`` are of each of :data:`KINDS` exactly (a pool's sizes)."""
    count = Counter(map(type, nodes))
    return tuple(count[cls] for cls in KINDS)


class NodePool:
    """Bare node objects of each of :data:`KINDS` for one recording (see the module's
    docstring).

    Attributes:
        ops: bare :class:`~torchrecorder.nodes.OpNode` objects.
        layers: bare :class:`~torchrecorder.nodes.LayerNode` objects.
        tensors: bare :class:`~torchrecorder.nodes.TensorNode` objects.
        params: bare :class:`~torchrecorder.nodes.ParamNode` objects.
    """

    __slots__ = ("filled", "layers", "ops", "params", "tensors")

    def __init__(self) -> None:
        self.filled: Optional[tuple[int, ...]] = None  # the sizes made by fill()
        self.ops: list[OpNode] = []
        self.layers: list[LayerNode] = []
        self.tensors: list[TensorNode] = []
        self.params: list[ParamNode] = []

    def fill(self, sizes: Optional[tuple[int, ...]]) -> None:
        """Make ``sizes[i]`` bare objects of ``KINDS[i]`` (nothing for ``None`` or sizes of
        another length)."""
        if sizes is None or len(sizes) != len(KINDS):
            return
        for pool, cls, n in zip(self._pools(), KINDS, sizes, strict=True):
            n = min(max(n + MARGIN, 0), LIMIT)
            if cls is LayerNode or cls is OpNode:  # made whole, lists included (see begin_layer)
                pool.extend([cls() for _ in range(n)])
            else:
                pool.extend(map(cls.__new__, repeat(cls, n)))
        self.filled = tuple(map(len, self._pools()))

    def _pools(self) -> tuple[list[Any], ...]:
        return self.ops, self.layers, self.tensors, self.params

    def used(self) -> Optional[tuple[int, ...]]:
        """How many nodes of each kind the pass took from the pool, when it did not run out of
        any kind (then it made no node of that kind otherwise), else ``None``."""
        left = tuple(map(len, self._pools()))
        if self.filled is None or 0 in left:
            return None
        return tuple(f - n for f, n in zip(self.filled, left, strict=True))

    def clear(self) -> None:
        """Drop what the pass did not use."""
        self.filled = None
        self.ops.clear()
        self.layers.clear()
        self.tensors.clear()
        self.params.clear()

    def __len__(self) -> int:
        return len(self.ops) + len(self.layers) + len(self.tensors) + len(self.params)

    def __repr__(self) -> str:
        return (f"NodePool(ops={len(self.ops)}, layers={len(self.layers)}, tensors={len(self.tensors)}, "
                f"params={len(self.params)})")
