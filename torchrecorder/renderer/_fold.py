"""Find runs of structurally identical consecutive blocks, so that a renderer can draw one of them.

Two module calls are *structurally identical* when they have the same type,
the same input and output shapes, the same parameter names and shapes, and
their insides match: the same kinds of nodes (layer types, op names, tensor
shapes) in the same order, joined by the same edges.  Names and module
identity do not matter: the 32 decoder layers of a transformer match, and so do
12 calls of one shared module.  Everything here reads node metadata only.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Optional

from ..nodes import BaseNode, ContextNode, Key, LayerNode, OpNode, ParamNode, TensorNode

if TYPE_CHECKING:
    from ..recorder import Recorder

__all__ = ["FoldPlan", "structure_ids"]


def _kids(rec: Recorder, layer: LayerNode) -> list[BaseNode]:
    """Children of ``layer`` that take part in its structure (parameters do not)."""
    nodes = rec.nodes
    return [nodes[k] for k in layer.subnets if k in nodes and not isinstance(nodes[k], ParamNode)]


def _params(rec: Recorder, layer: LayerNode) -> tuple[Hashable, ...]:
    nodes = rec.nodes
    return tuple((n.name, n.shape, n.dtype) for k in layer.subnets
                 if isinstance(n := nodes.get(k), ParamNode))


def preorder(rec: Recorder, layer: LayerNode) -> Iterator[BaseNode]:
    """``layer`` and everything inside it but parameters, parents before children."""
    stack: list[BaseNode] = [layer]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, LayerNode):
            stack.extend(reversed(_kids(rec, node)))


def structure_ids(rec: Recorder) -> dict[Key, int]:
    """A number per layer; two layers get the same number exactly when their structures match."""
    nodes = rec.nodes
    pos: dict[Key, int] = {}
    order: list[LayerNode] = []
    stack: list[LayerNode] = [rec.context]
    while stack:
        layer = stack.pop()
        order.append(layer)
        for i, kid in enumerate(_kids(rec, layer)):
            pos[kid.key] = i
            if isinstance(kid, LayerNode):
                stack.append(kid)

    # each edge belongs to the innermost layer holding both ends, as two relative paths
    owned: dict[Key, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}

    def depth(k: Key) -> int:
        return -1 if k is None else nodes[k].depth

    for a, b in rec.edges:
        if a not in pos or b not in pos:
            continue  # parameters, or the context itself
        x, y, px, py = a, b, [], []
        while depth(x) > depth(y):
            px.append(pos.get(x, -1))
            x = nodes[x].parent
        while depth(y) > depth(x):
            py.append(pos.get(y, -1))
            y = nodes[y].parent
        while x != y:
            px.append(pos.get(x, -1))
            py.append(pos.get(y, -1))
            x, y = nodes[x].parent, nodes[y].parent
        owned.setdefault(x, []).append((tuple(reversed(px)), tuple(reversed(py))))

    # parameters live in a module's first call; later calls of it share them
    first_params: dict[tuple[str, str], tuple[Hashable, ...]] = {}
    for layer in order:
        if layer.call_index == 1 and not isinstance(layer, ContextNode):
            first_params[(layer.path, layer.name)] = _params(rec, layer)

    interned: dict[Hashable, int] = {}
    ids: dict[Key, int] = {}
    for layer in reversed(order):  # children before parents
        kids: list[Hashable] = []
        for kid in _kids(rec, layer):
            if isinstance(kid, LayerNode):
                kids.append(ids[kid.key])
            elif isinstance(kid, TensorNode):
                kids.append(("tensor", kid.shape, kid.dtype, kid.role))
            elif isinstance(kid, OpNode):
                kids.append(("op", kid.op, tuple(map(tuple, kid.output_shapes))))
            else:
                kids.append((type(kid).__name__, kid.name))
        signature = (
            layer.type_name,
            tuple(map(tuple, layer.input_shapes)),
            tuple(map(tuple, layer.output_shapes)),
            first_params.get((layer.path, layer.name), ()),
            layer.error is not None,
            tuple(kids),
            tuple(sorted(owned.get(layer.key, ()))),
        )
        ids[layer.key] = interned.setdefault(signature, len(interned))
    return ids


class FoldPlan:
    """Which drawn blocks stand for a run of identical blocks, and what the others map to.

    Attributes:
        runs: key of each run's first block -> every block of the run, in order.
        hidden: keys of children that are not drawn (later blocks of a run and
            the tensors passed between its blocks).
        alias: key of a node inside a later block -> key of its counterpart in
            the first block; ``None`` for nodes that stand for nothing drawn.
    """

    def __init__(self) -> None:
        self.runs: dict[Key, list[LayerNode]] = {}
        self.hidden: set[Key] = set()
        self.alias: dict[Key, Optional[Key]] = {}

    @classmethod
    def build(cls, rec: Recorder, min_run: int, expanded: Callable[[BaseNode], bool]) -> FoldPlan:
        """Fold every chain of at least ``min_run`` identical blocks among drawn children.

        A chain is a run of consecutive identical blocks each of which takes
        its input from the one before (directly or through the tensor between
        them); identical blocks side by side (parallel branches) are not folded.
        """
        plan = cls()
        if min_run < 2 or not _may_repeat(rec, min_run):
            return plan
        ids = structure_ids(rec)
        preds: dict[Key, list[Key]] = {}
        for a, b in rec.edges:
            preds.setdefault(b, []).append(a)
        nodes = rec.nodes
        stack: list[LayerNode] = [rec.context]
        while stack:
            layer = stack.pop()
            kids = [nodes[k] for k in layer.subnets if k in nodes]
            for run, gaps in _runs(kids, ids, min_run):
                for chain, chain_gaps, insides in _chains(rec, run, gaps, preds):
                    if len(chain) >= min_run:
                        plan._fold(rec, chain, chain_gaps, insides)
            for kid in kids:
                if kid.key not in plan.hidden and isinstance(kid, LayerNode) and expanded(kid):
                    stack.append(kid)
        return plan

    def _fold(self, rec: Recorder, run: list[LayerNode], gaps: list[list[tuple[TensorNode, bool]]],
              insides: list[list[Key]]) -> None:
        first = run[0]
        self.runs[first.key] = run
        lead = insides[0]
        for member, keys in zip(run[1:], insides[1:], strict=True):
            self.hidden.add(member.key)
            self.alias.update(zip(keys, lead, strict=True))
            for key in keys:
                node = rec.nodes[key]
                if isinstance(node, LayerNode):
                    for k in node.subnets:
                        if isinstance(rec.nodes.get(k), ParamNode):
                            self.alias[k] = None
        for gap in gaps:
            for tensor, produced in gap:
                if produced:  # an output of the block before it, passed to the next
                    self.hidden.add(tensor.key)
                    self.alias[tensor.key] = None


def _chains(rec: Recorder, run: list[LayerNode], gaps: list[list[TensorNode]],
            preds: dict[Key, list[Key]]) -> Iterator[tuple[list[LayerNode],
                                                          list[list[tuple[TensorNode, bool]]],
                                                          list[list[Key]]]]:
    """Split ``run`` where a block does not feed the next; mark the gap tensors each block produced."""
    insides = [[n.key for n in preorder(rec, member)] for member in run]
    sets = [set(keys) for keys in insides]
    marked = [[(t, any(p in sets[i] for p in preds.get(t.key, ()))) for t in gap]
              for i, gap in enumerate(gaps)]
    start = 0
    for i in range(len(run)):
        last = i == len(run) - 1
        if not last:
            outs = sets[i] | {t.key for t, produced in marked[i] if produced}
            feeds = any(p in outs for k in insides[i + 1] for p in preds.get(k, ()))
        if last or not feeds:
            yield run[start:i + 1], marked[start:i], insides[start:i + 1]
            start = i + 1


def _may_repeat(rec: Recorder, min_run: int) -> bool:
    """Whether some layer holds ``min_run`` consecutive calls alike in type and shapes.

    A cheap necessary condition for a fold, checked before the structural comparison.
    """
    nodes = rec.nodes
    for layer in nodes.values():
        if not isinstance(layer, LayerNode) or len(layer.subnets) < min_run:
            continue
        last: Optional[tuple[object, ...]] = None
        count = 0
        for key in layer.subnets:
            kid = nodes.get(key)
            if isinstance(kid, LayerNode):
                sig = (kid.type_name, kid.input_shapes, kid.output_shapes)
                count = count + 1 if sig == last else 1
                last = sig
                if count >= min_run:
                    return True
            elif not (isinstance(kid, TensorNode) and not isinstance(kid, ParamNode) and not kid.role):
                last, count = None, 0
    return False


def _runs(kids: list[BaseNode], ids: dict[Key, int],
          min_run: int) -> Iterator[tuple[list[LayerNode], list[list[TensorNode]]]]:
    """Runs of identical layers among ``kids``, with the plain tensors in each gap between blocks."""
    i = 0
    while i < len(kids):
        first = kids[i]
        if not isinstance(first, LayerNode):
            i += 1
            continue
        run: list[LayerNode] = [first]
        gaps: list[list[TensorNode]] = []
        pending: list[TensorNode] = []
        j = last = i + 1
        while j < len(kids):
            kid = kids[j]
            if isinstance(kid, LayerNode) and ids.get(kid.key) == ids.get(first.key):
                run.append(kid)
                gaps.append(pending)
                pending = []
                last = j + 1
            elif isinstance(kid, TensorNode) and not isinstance(kid, ParamNode) and not kid.role:
                pending.append(kid)
            else:
                break
            j += 1
        if len(run) >= min_run:
            yield run, gaps
            i = last
        else:
            i += 1
