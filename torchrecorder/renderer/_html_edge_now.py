"""The page's edges: what its renderer tells its styler of the edge being styled, and where
each edge's contents sit among the boxes.

The edges of the page are those of its finest drawing (another
:class:`~torchrecorder.projection.Projection` than the renderer's own), so the data-movement
operations and the tensors the styler asks the renderer for are those of that edge, set
while its attributes are made (:meth:`EdgeNow.styling`); where boxes closed join several of
those edges into one, it stands for the tensors of them all (:func:`tensors_between`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Optional, Protocol

from ..nodes import BaseNode, Key, LayerNode, OpNode, TensorNode
from ._html_through import holders
from .base import BaseRenderer

__all__ = ["EdgeNow", "EdgeTensors", "first_holder", "tensors_between"]


class EdgeTensors(Protocol):
    """What :func:`tensors_between` reads of a drawing's edges (a
    :class:`~torchrecorder.projection.Projection`, the page's made edges)."""

    def edge_tensors(self, fnode: BaseNode, tnode: BaseNode) -> tuple[TensorNode, ...]: ...


class EdgeNow(BaseRenderer):
    """A renderer whose :meth:`edge_ops` and :meth:`edge_tensors` answer for the edge being
    styled while :meth:`styling` says which (``None``: ask the projection)."""

    _ops_now: Optional[tuple[OpNode, ...]] = None
    _tensors_now: Optional[tuple[TensorNode, ...]] = None

    @contextmanager
    def styling(self, ops: tuple[OpNode, ...], tensors: tuple[TensorNode, ...]) -> Iterator[None]:
        """While the edge that stands for ``ops`` and ``tensors`` is styled."""
        self._ops_now, self._tensors_now = ops, tensors
        try:
            yield
        finally:
            self._ops_now = self._tensors_now = None

    def edge_ops(self, fnode: BaseNode, tnode: BaseNode) -> tuple[OpNode, ...]:
        """The data-movement operations on the drawn edge (those of the edge being styled)."""
        if self._ops_now is not None:
            return self._ops_now
        return super().edge_ops(fnode, tnode)

    def edge_tensors(self, fnode: BaseNode, tnode: BaseNode) -> tuple[TensorNode, ...]:
        """The tensors the drawn edge stands for (those of the edge being styled)."""
        if self._tensors_now is not None:
            return self._tensors_now
        return super().edge_tensors(fnode, tnode)


def first_holder(item: BaseNode, chain: list[int], order: list[BaseNode], nodes: Mapping[Key, BaseNode],
                 memo: dict[Key, frozenset[Key]]) -> int:
    """The position in ``chain`` (a node and the layers holding it, innermost first) of the
    first layer that holds ``item`` (an operation or a tensor); ``len(chain)`` if none does.
    Every layer after it holds ``item`` too."""
    above = memo.get(item.key)
    if above is None:
        keys = []
        parent: Key = item.parent_key
        while parent is not None and parent in nodes:
            keys.append(parent)
            parent = nodes[parent].parent_key
        above = memo[item.key] = frozenset(keys)
    for i, at in enumerate(chain):
        node = order[at]
        if isinstance(node, LayerNode) and node.key in above:
            return i
    return len(chain)


def tensors_between(finest: EdgeTensors, pairs: Iterable[tuple[BaseNode, BaseNode]], index: Mapping[Key, int],
                    parents: list[int], order: list[BaseNode], nodes: Mapping[Key, BaseNode],
                    memo: dict[Key, frozenset[Key]]) -> dict[tuple[int, int], tuple[TensorNode, ...]]:
    """``(source box, target box)`` (rows of the page) -> the tensors that the edges of
    ``pairs`` drawn between the two carry, where more than one: the page draws the edges
    that two boxes join as one (the first's attributes), which must say that it stands for
    all of them, as ``make_dot``'s one edge between the two boxes does."""
    out: dict[tuple[int, int], list[TensorNode]] = {}
    for fnode, tnode in pairs:
        a, b = index.get(fnode.key), index.get(tnode.key)
        tensors = finest.edge_tensors(fnode, tnode) if a is not None and b is not None else ()
        if not tensors or a is None or b is None:
            continue
        sources, targets = holders(a, parents), holders(b, parents)
        # the boxes the first tensor is drawn between (outside both): where the edge shows it
        t_a = first_holder(tensors[0], sources, order, nodes, memo)
        t_b = first_holder(tensors[0], targets, order, nodes, memo)
        for source in sources[:t_a]:
            for target in targets[:t_b]:
                got = out.setdefault((source, target), [])
                got.extend(t for t in tensors if all(t is not u for u in got))
    return {pair: tuple(got) for pair, got in out.items() if len(got) > 1}
