"""Find runs of structurally identical consecutive blocks, so that a renderer can draw one of them.

What makes two blocks structurally identical, and how it is read, is in
:mod:`~torchrecorder.projection.structures`; here the blocks alike are grouped into
chains (each block fed by the one before) and loops, and the folded copies are mapped
onto the first.  Everything here reads node metadata only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Optional

from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode, OpNode, ParamNode, ScopeNode, TensorNode
from .loops import DATA_MOVEMENT_OPS, LoopNode, Stretch, find_stretches
from .structures import BlockStructures

__all__ = ["FoldPlan"]


class FoldPlan:
    """Which drawn blocks stand for a run of identical blocks, and what the others map to.

    Attributes:
        runs: key of each run's first block -> every block of the run, in order.
        hidden: keys of children that are not drawn (later blocks of a run and
            the tensors passed between its blocks).
        alias: key of a node inside a later block -> key of its counterpart in
            the first block; ``None`` for nodes that stand for nothing drawn.
        loops: key of each folded loop's group (a :class:`~.loops.LoopNode`) -> one
            ``LoopNode`` per iteration, the first being the drawn group.
        in_loop: key of each child of a folded loop's first iteration -> its group.
        iteration: key of every node of a folded loop (inside layers too) ->
            ``(loop number, iteration)`` (the innermost loop's, for a loop folded inside
            the first iteration of another).
        units: the kind of each folded run (``"run"``) and loop (``"loop"``), numbered in
            the order they were folded.
        copies: key of every node of a folded run or loop (inside layers too, and the
            tensors passed between the blocks of a run) -> ``(unit, copy)`` for each
            unit it is in: ``copy`` is the block of the run, or the iteration of the loop,
            it belongs to (0: the drawn one).  :meth:`copy_of` follows the aliases.
        gaps: keys of the tensors passed from one block of a folded run to the next that are
            read elsewhere too (after the run): drawn joined over.  The copies of a run are
            recorded only when a block's nodes are wired otherwise than the first block's
            (a value read after the run, an edge from one block into another).
        run_units: key of each run's first block -> the run's unit.
    """

    def __init__(self) -> None:
        self.runs: dict[Key, list[LayerNode]] = {}
        self.hidden: set[Key] = set()
        self.alias: dict[Key, Optional[Key]] = {}
        self.loops: dict[Key, list[LayerNode]] = {}
        self.in_loop: dict[Key, LoopNode] = {}
        self.iteration: dict[Key, tuple[int, int]] = {}
        self.units: list[str] = []
        self.copies: dict[Key, tuple[tuple[int, int], ...]] = {}
        self.gaps: set[Key] = set()
        self.run_units: dict[Key, int] = {}

    def copy_of(self, key: Key) -> tuple[tuple[int, int], ...]:
        """``(unit, copy)`` for each folded run or loop whose drawing stands for ``key``,
        sorted by unit: those ``key`` is in, then those of the node it is drawn as (its
        counterpart in the first block or iteration), and so on.  Two nodes drawn in one
        place are copies of it in the same blocks and iterations exactly when their
        ``copy_of`` are equal; an edge between two nodes one unit holds in different
        copies is carried from one block or iteration to another.
        """
        own = self.copies.get(key, ())
        target = self.alias.get(key)
        if target is None:
            return own
        more = self.copy_of(target)
        if not more or (len(more) == 1 and len(own) == 1 and more[0][0] == own[0][0]):
            return own  # (the common case: a later block's node and its counterpart)
        units = dict(more)
        units.update(own)
        return tuple(sorted(units.items()))

    def _copies_of(self, unit: int, copy: int, keys: Sequence[Key]) -> None:
        copies = self.copies
        mark = ((unit, copy),)
        for key in keys:
            got = copies.get(key)
            copies[key] = mark if got is None else got + mark

    @classmethod
    def build(cls, rec: Graph, min_run: int, expanded: Callable[[BaseNode], bool], *,
              loops: bool = True, all_ops: bool = False,
              structures: Optional[BlockStructures] = None) -> FoldPlan:
        """Fold every chain of at least ``min_run`` identical blocks among drawn children, and
        (``loops``) every run of at least ``min_run`` identical iterations of a sequence of
        children (a Python loop: see :mod:`~torchrecorder.projection.loops`).

        A chain is a run of consecutive identical blocks each of which takes
        its input from the one before (directly or through the tensor between
        them); identical blocks side by side (parallel branches) are not folded.

        Structures are compared only for the blocks that may fold: runs of at
        least ``min_run`` blocks alike in type and shapes.  ``all_ops``: every
        operation is drawn, so data-movement operations must match in shape too.
        ``structures``: the :class:`BlockStructures` of ``rec`` to read them from (and
        add to), when other plans of the same graph share it.

        Raises:
            ValueError: ``structures`` are of another graph.
        """
        if structures is not None and structures.rec is not rec:
            raise ValueError("structures of another graph")
        plan = cls()
        if min_run < 2:
            return plan
        nodes = rec.nodes
        hidden = plan.hidden
        blocks = structures
        stack: list[ScopeNode] = [rec.context]
        while stack:
            layer = stack.pop()
            kids = [nodes[k] for k in layer.subnet_keys if k in nodes.keys()]
            candidates = _candidates(kids, min_run) if len(kids) >= min_run else None
            if candidates:
                if blocks is None:
                    blocks = BlockStructures(rec)
                ids = {kid.key: blocks.number(kid) for kid in candidates}
                for run, gaps in _runs(kids, ids, min_run):
                    for chain, chain_gaps, insides in _chains(blocks, run, gaps):
                        if len(chain) >= min_run:
                            plan._fold(blocks, chain, chain_gaps, insides)
            if loops and len(kids) >= 2 * min_run:
                if blocks is None:
                    blocks = BlockStructures(rec)
                plan._fold_loops(blocks, layer, [k for k in kids if k.key not in hidden], min_run, all_ops)
            for kid in kids:
                if isinstance(kid, LayerNode) and kid.key not in hidden and expanded(kid):
                    stack.append(kid)
        return plan

    def _fold(self, blocks: BlockStructures, run: list[LayerNode], gaps: list[list[tuple[TensorNode, bool]]],
              insides: list[list[Key]]) -> None:
        first = run[0]
        self.runs[first.key] = run
        unit = self.run_units[first.key] = len(self.units)
        self.units.append("run")
        lead = insides[0]
        alias = self.alias
        readers = blocks.succs
        member_of: dict[Key, int] = {}
        for i, keys in enumerate(insides):
            member_of.update(dict.fromkeys(keys, i))
        chain: set[Key] = set()  # the tensors passed from one block to the next, read nowhere else
        read_after: list[tuple[Key, int]] = []
        for i, gap in enumerate(gaps):
            for tensor, produced in gap:
                if produced:  # an output of the block before it, passed to the next
                    self.hidden.add(tensor.key)
                    alias[tensor.key] = None
                    if all(k in member_of for k in readers.get(tensor.key, ())):
                        chain.add(tensor.key)
                    else:  # read after the run too (outs[-2]): drawn joined over to what reads it
                        read_after.append((tensor.key, i))
        for member, keys in zip(run[1:], insides[1:], strict=True):
            self.hidden.add(member.key)
            alias.update(zip(keys, lead, strict=True))
            alias.update(dict.fromkeys(blocks.params_inside(member)))
        if not read_after and _closed(blocks.nodes, insides, member_of, chain, readers):
            return  # every block wired like the first: its copies need not be told apart
        for i, keys in enumerate(insides):
            self._copies_of(unit, i, keys)
        for key, i in read_after:
            self.gaps.add(key)
            self._copies_of(unit, i, (key,))
        for i, gap in enumerate(gaps):  # joined over too: what a block reads through them is fed
            for tensor, _produced in gap:
                if tensor.key in chain:
                    self.gaps.add(tensor.key)
                    self._copies_of(unit, i, (tensor.key,))

    def _fold_loops(self, blocks: BlockStructures, layer: ScopeNode, kids: list[BaseNode], min_run: int,
                    all_ops: bool) -> None:
        """Fold the loops among ``kids``, the children of ``layer`` left after blocks folded."""
        runs = self.runs

        def same_layer(a: LayerNode, b: LayerNode) -> bool:
            return (blocks.number(a) == blocks.number(b)
                    and len(runs.get(a.key, ())) == len(runs.get(b.key, ())))

        def insides(node: BaseNode) -> Sequence[Key]:
            return blocks.preorder(node) if isinstance(node, LayerNode) else (node.key,)

        preds = blocks.preds
        for s in find_stretches(kids, min_run, all_ops, same_layer, insides, lambda k: preds.get(k, ())):
            self._fold_loop(blocks, layer, kids, s, insides)

    def _fold_loop(self, blocks: BlockStructures, layer: ScopeNode, kids: list[BaseNode], s: Stretch,
                   insides: Callable[[BaseNode], Sequence[Key]]) -> None:
        number = len(self.loops)
        unit = len(self.units)
        self.units.append("loop")
        p = s.period
        lead = kids[s.start:s.start + p]
        group = LoopNode(layer, f"{lead[0].key}#loop", lead)
        iterations: list[LayerNode] = [group]
        iterations.extend(LoopNode(layer, f"{lead[0].key}#loop{k + 1}", (), call_index=k + 1)
                          for k in range(1, s.count))
        self.loops[group.key] = iterations
        for member in lead:
            self.in_loop[member.key] = group
        lead_insides = [insides(m) for m in lead]
        iteration, alias, hidden = self.iteration, self.alias, self.hidden
        for keys in lead_insides:
            iteration.update(dict.fromkeys(keys, (number, 0)))
            self._copies_of(unit, 0, keys)
        lead_ops = {j: m for j, m in enumerate(lead) if isinstance(m, OpNode)}
        lead_keys = [key for keys in lead_insides for key in keys]
        varying: set[int] = set()  # positions of ops whose shapes differ from the lead's
        for k in range(1, s.count):
            members = kids[s.start + k * p:s.start + (k + 1) * p]
            keys = []  # the iteration's keys, in the order of the lead's
            for j, member in enumerate(members):
                keys.extend(insides(member))
                hidden.add(member.key)
                if isinstance(member, LayerNode):
                    alias.update(dict.fromkeys(blocks.params_inside(member)))
                elif isinstance(member, OpNode) and member.output_shapes != lead_ops[j].output_shapes:
                    varying.add(j)  # a data-movement op left out (the others' shapes were compared)
            iteration.update(dict.fromkeys(keys, (number, k)))
            self._copies_of(unit, k, keys)
            alias.update(zip(keys, lead_keys, strict=True))
        group.varying = tuple(dict.fromkeys(lead_ops[j].op for j in sorted(varying)))


def _closed(nodes: Mapping[Key, BaseNode], insides: list[list[Key]], member_of: dict[Key, int],
            chain: set[Key], readers: dict[Key, list[Key]]) -> bool:
    """Whether the blocks of a run are wired to the rest of the graph as the first is, so that
    drawing each block's nodes as the first block's joins nothing the graph does not: no edge
    goes from one block into another but through the tensors passed from each block to the
    next, and what a later block's nodes feed outside the run (the last block's output) they
    feed from a node never left out of a drawing (a layer, an operation that computes)."""
    for i, keys in enumerate(insides):
        for key in keys:
            for reader in readers.get(key, ()):
                j = member_of.get(reader)
                if j == i or reader in chain or (i == 0 and j is None):
                    continue
                if j is not None:
                    return False
                node = nodes.get(key)
                if not (isinstance(node, LayerNode)
                        or (isinstance(node, OpNode) and node.op not in DATA_MOVEMENT_OPS)):
                    return False
    return True


def _chains(blocks: BlockStructures, run: list[LayerNode],
            gaps: list[list[TensorNode]]) -> Iterator[tuple[list[LayerNode],
                                                            list[list[tuple[TensorNode, bool]]],
                                                            list[list[Key]]]]:
    """Split ``run`` where a block does not feed the next; mark the gap tensors each block produced."""
    preds = blocks.preds
    insides = [blocks.preorder(member) for member in run]
    sets = [set(keys) for keys in insides]
    marked = [[(t, any(p in sets[i] for p in preds.get(t.key, ()))) for t in gap]
              for i, gap in enumerate(gaps)]
    start = 0
    for i in range(len(run)):
        last = i == len(run) - 1
        if not last:
            # only the edges entering the next block can come from this one or its gap: a
            # node lies in one layer only (the graph's invariant, see Graph.lint), so no
            # node of the next block is one of this block's or a tensor between them
            outs, produced = sets[i], {t.key for t, made in marked[i] if made}
            feeds = any(p in outs or p in produced for p in blocks.entries(run[i + 1]))
        if last or not feeds:
            yield run[start:i + 1], marked[start:i], insides[start:i + 1]
            start = i + 1


def _candidates(kids: list[BaseNode], min_run: int) -> list[LayerNode]:
    """The layers of ``kids`` in runs of at least ``min_run`` consecutive layers alike in type
    and shapes (plain tensors between them do not break a run): the only ones that may fold."""
    out: list[LayerNode] = []
    run: list[LayerNode] = []
    last: Optional[tuple[object, ...]] = None
    for kid in kids:
        if isinstance(kid, LayerNode):
            sig = (kid.type_name, kid.input_shapes, kid.output_shapes)
            if sig == last:
                run.append(kid)
                continue
            if len(run) >= min_run:
                out.extend(run)
            run, last = [kid], sig
        elif not (isinstance(kid, TensorNode) and not isinstance(kid, ParamNode) and not kid.role):
            if len(run) >= min_run:
                out.extend(run)
            run, last = [], None
    if len(run) >= min_run:
        out.extend(run)
    return out


def _runs(kids: list[BaseNode], ids: dict[Key, int],
          min_run: int) -> Iterator[tuple[list[LayerNode], list[list[TensorNode]]]]:
    """Runs of identical layers among ``kids``, with the plain tensors in each gap between blocks."""
    i = 0
    while i < len(kids):
        first = kids[i]
        number = ids.get(first.key)
        if not isinstance(first, LayerNode) or number is None:  # no number: it does not repeat
            i += 1
            continue
        run: list[LayerNode] = [first]
        gaps: list[list[TensorNode]] = []
        pending: list[TensorNode] = []
        j = last = i + 1
        while j < len(kids):
            kid = kids[j]
            if isinstance(kid, LayerNode) and ids.get(kid.key) == number:
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
