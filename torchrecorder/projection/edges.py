"""The edges a :class:`~.drawn.Projection` draws: the graph's edges between drawn nodes, joined
across the nodes left out of the drawing, and told apart from the values carried from one
block or iteration of a folded run or loop to the next.

Every edge drawn stands for a path of the graph, and every edge of the graph between
drawn nodes has its image:

* an edge is taken to the drawn nodes that stand for its ends (a collapsed
  module, the counterpart of a later block or iteration in the first);
* the nodes left out (passed tensors without ``tensor_nodes``, data-movement
  operations without ``all_ops``, the tensors passed between the blocks of a
  folded run) are joined over: the node before such a chain gets an edge to
  each node after it;
* an operation that no input, parameter or layer feeds (a constant, a buffer
  read) is left out with its edges.

Folding draws many nodes in one place, so all of this is done on the *copies*
of the drawn nodes, one per block of a folded run and iteration of a folded loop
(:meth:`~.fold.FoldPlan.copy_of`), and only then taken to the drawn nodes: a
chain through a left-out node of one iteration never joins what enters it in
the first iteration to what leaves it in the last (an edge the graph does not
have), and an operation left out in the first iteration (a write into a buffer
made of zeros) is drawn when a later iteration's copy is fed.  An edge between
two copies of one run or loop is *carried* from one block or iteration to another:
it is drawn apart (:attr:`DrawnEdges.carried`, a renderer marks it as a back edge
that does not rank its ends), unless its ends are drawn as one node or it is the
chain of a run (a block's output passed to the next block: what ``×N`` says).
The edges that are not carried draw an acyclic graph when the graph is.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any, Optional

from ..nodes import BaseNode, Key, OpNode, ParamNode, TensorNode
from .fold import FoldPlan
from .loops import DATA_MOVEMENT_OPS

__all__ = ["DrawnEdges", "drawn_edges", "is_passed_tensor"]

#: one end of an edge before it is drawn: a drawn key, or for a node of a folded run or loop
#: an int that stands for its drawn key and copies (:meth:`~.fold.FoldPlan.copy_of`)
End = Any


def is_passed_tensor(node: BaseNode) -> bool:
    """A tensor between layers: not a parameter, not one of the network's inputs or outputs."""
    return isinstance(node, TensorNode) and not isinstance(node, ParamNode) and not node.role


class DrawnEdges:
    """The edges of one drawing.

    Attributes:
        plain: the edges drawn, in recording order (acyclic when the graph is).
        carried: edges from one block or iteration of a folded run or loop to another,
            drawn apart (none of them is in ``plain``).
        via: the tensor left out that an edge carries, if any.
        more: the other tensors left out that the same edge stands for, where it stands for
            several (T5's hidden states and position bias, from one block to the next).
        ops: the data-movement operations left out on an edge, in the order they ran.
        left_out: keys of the nodes not drawn although their group is.
    """

    __slots__ = ("carried", "left_out", "more", "ops", "plain", "via")

    def __init__(self) -> None:
        self.plain: dict[tuple[Key, Key], None] = {}
        self.carried: dict[tuple[Key, Key], None] = {}
        self.via: dict[tuple[Key, Key], TensorNode] = {}
        self.more: dict[tuple[Key, Key], tuple[TensorNode, ...]] = {}
        self.ops: dict[tuple[Key, Key], tuple[OpNode, ...]] = {}
        self.left_out: frozenset[Key] = frozenset()


def drawn_edges(nodes: Mapping[Key, BaseNode], edges: Iterable[tuple[Key, Key]],
                drawn: Mapping[Key, Optional[Key]], fold: FoldPlan, *, tensor_nodes: bool,
                all_ops: bool, boxes: Container[Key] = ()) -> DrawnEdges:
    """The edges drawn of the graph's ``links``, with ``drawn`` mapping each key to the key
    of the drawn node that stands for it (``None``: nothing) and ``fold`` what is folded.

    Args:
        nodes: the graph's nodes.
        edges: the graph's edges, in recording order.
        drawn: each key's drawn key.
        fold: the fold plan the drawing follows.
        tensor_nodes: passed tensors are drawn (else joined over).
        all_ops: every operation is drawn (else data-movement ones are joined over and
            operations fed by nothing drawn left out).
        boxes: first blocks of folded runs drawn as one box each, in no other folded run or
            loop: their copies need not be told apart (an edge between two of them is
            within the box; nothing in them is left out).
    """
    out = DrawnEdges()
    gaps: set[End] = set()
    ends: Mapping[Key, Optional[End]] = drawn
    end_nodes: Mapping[End, BaseNode] = nodes
    # the copies of the nodes of folded runs and loops, told apart: each (drawn key, copies)
    # an int (ints hash fast; the graph's keys are strings)
    copy_key: list[Key] = []  # end -> its drawn key
    copy_set: list[int] = []  # end -> its copies (an index into ``sets``)
    sets: list[tuple[tuple[int, int], ...]] = []
    if fold.copies:
        ends = dict(drawn)
        copy_of = _copies_memo(fold)
        own: dict[End, BaseNode] = {}
        interned: dict[tuple[Key, tuple[tuple[int, int], ...]], int] = {}
        set_ids: dict[tuple[tuple[int, int], ...], int] = {}
        in_copies = fold.copies
        # the keys in a unit, then those drawn as another's node only (each once)
        for key in itertools.chain(in_copies, [k for k in fold.alias if k not in in_copies]):
            d = drawn.get(key)
            if d in boxes:
                continue
            gap = d is None
            if gap:
                if key not in fold.gaps:
                    continue
                d = key  # a tensor passed between two blocks of a run: joined over
            copies = copy_of(key)
            if not copies:
                continue
            e = interned.get((d, copies))
            if e is None:
                e = interned[(d, copies)] = len(copy_key)
                copy_key.append(d)
                got = set_ids.get(copies)
                if got is None:
                    got = set_ids[copies] = len(sets)
                    sets.append(copies)
                copy_set.append(got)
                own[e] = nodes[d]
                if gap:
                    gaps.add(e)
            ends[key] = e
        end_nodes = {**nodes, **own}
    get = ends.get
    pairs: dict[tuple[End, End], None] = {}
    for ka, kb in edges:
        ea = get(ka)
        if ea is None:
            continue
        eb = get(kb)
        if eb is None or ea == eb:
            continue
        pairs[(ea, eb)] = None
    through: set[End] = set()
    dropped: set[End] = set()
    more: dict[tuple[End, End], tuple[TensorNode, ...]] = {}
    if not tensor_nodes or not all_ops or gaps:
        joined = _join(end_nodes, list(pairs), gaps, tensor_nodes, all_ops, through, dropped, more)
    else:
        joined = dict.fromkeys(pairs, _DIRECT)
    if not copy_key:  # nothing folded: the ends are the drawn keys
        out.plain = dict.fromkeys(joined)
        for pair, (tensor, ops, _) in joined.items():
            if tensor is not None:
                out.via[pair] = tensor
                if pair in more:
                    out.more[pair] = more[pair]
            if ops:
                out.ops[pair] = ops
        if through or dropped:
            kept = {e for edge in pairs for e in edge if e not in dropped}
            out.left_out = frozenset(through | (dropped - kept))
        return out
    units = fold.units
    plain, carried, via, edge_ops = out.plain, out.carried, out.via, out.ops
    kinds_of: dict[tuple[int, int], tuple[str, ...]] = {}
    a: Key
    b: Key
    for (ea, eb), (tensor, ops, chain) in joined.items():
        target = plain
        if type(ea) is int:
            a = copy_key[ea]
            if type(eb) is int:
                b = copy_key[eb]
                if a == b:
                    continue
                pair = (copy_set[ea], copy_set[eb])
                kinds = kinds_of.get(pair)
                if kinds is None:
                    kinds = kinds_of[pair] = _carried(sets[pair[0]], sets[pair[1]], units)
                if kinds:
                    if chain and "run" in kinds:
                        continue  # a block's output passed on to the next block: the run's ×N
                    target = carried
            else:
                b = eb
        else:
            a = ea
            b = copy_key[eb] if type(eb) is int else eb
        if a == b:
            continue  # within one drawn node (a value carried to its own next copy: the ×N)
        if (a, b) not in target:
            target[(a, b)] = None
            if tensor is not None:
                via.setdefault((a, b), tensor)
                if (ea, eb) in more:  # (of one iteration: another's tensors are copies of these)
                    out.more[(a, b)] = more[(ea, eb)]
            if ops:
                edge_ops.setdefault((a, b), ops)
    for edge in [edge for edge in carried if edge in plain]:
        del carried[edge]  # drawn already
    if through or dropped:
        def keys_of(ends: Iterable[End]) -> set[Key]:
            return {copy_key[e] if type(e) is int else e for e in ends}

        kept = (keys_of(e for e in itertools.chain.from_iterable(pairs) if e not in dropped)
                if dropped else set())
        out.left_out = frozenset(keys_of(e for e in through if e not in gaps) | (keys_of(dropped) - kept))
    return out


def _copies_memo(fold: FoldPlan) -> Callable[[Key], tuple[tuple[int, int], ...]]:
    """:meth:`~.fold.FoldPlan.copy_of` of a finished plan, each key's answer found once (the
    nodes of a loop's first iteration are the alias of every later iteration's)."""
    return _CopiesMemo(fold)


class _CopiesMemo:
    """:func:`_copies_memo`'s function (an object, not a closure that calls itself: that would
    be a reference cycle, left to the garbage collector with everything it holds)."""

    __slots__ = ("alias", "copies", "memo")

    def __init__(self, fold: FoldPlan) -> None:
        self.copies, self.alias = fold.copies, fold.alias
        self.memo: dict[Key, tuple[tuple[int, int], ...]] = {}

    def __call__(self, key: Key) -> tuple[tuple[int, int], ...]:
        memo = self.memo
        got = memo.get(key)
        if got is not None:
            return got
        own = self.copies.get(key, ())
        target = self.alias.get(key)
        if target is None:
            got = own
        else:
            more = memo.get(target)
            if more is None:
                more = self(target)
            if not more or (len(more) == 1 and len(own) == 1 and more[0][0] == own[0][0]):
                got = own
            else:
                units = dict(more)
                units.update(own)
                got = tuple(sorted(units.items()))
        memo[key] = got
        return got


#: what an edge between two drawn ends carries: no tensor, no operation, no run's gap
_DIRECT: tuple[None, tuple[OpNode, ...], bool] = (None, (), False)


def _carried(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...],
             units: list[str]) -> tuple[str, ...]:
    """The kinds of the units that hold the ends of an edge (copies ``a`` and ``b``) in
    different copies: the edge is carried from one block or iteration to another."""
    if not a or not b:
        return ()
    other = dict(b)
    return tuple(units[unit] for unit, copy in a if other.get(unit, copy) != copy)


def _join(nodes: Mapping[End, BaseNode], pairs: list[tuple[End, End]], gaps: set[End], tensor_nodes: bool,
          all_ops: bool, through: set[End], dropped: set[End],
          more: Optional[dict[tuple[End, End], tuple[TensorNode, ...]]] = None,
          ) -> dict[tuple[End, End], tuple[Optional[TensorNode], tuple[OpNode, ...], bool]]:
    """``pairs`` without the ends left out: an edge into a passed tensor, a data-movement
    op or a tensor between two blocks of a folded run is joined to what the chain feeds;
    an operation with no drawn input is dropped with its edges.  Fills ``through`` and
    ``dropped``; each edge comes with the last tensor and the operations left out on its
    way, and whether it passed a tensor between two blocks; ``more`` gets, for an edge that
    stands for several chains, the last tensors of the chains after the first, in order."""
    succ: dict[End, list[End]] = {}
    targets: dict[End, None] = {}  # ends with an edge in
    for a, b in pairs:
        got = succ.get(a)
        if got is None:
            succ[a] = [b]
        else:
            got.append(b)
        targets[b] = None
    # each end's kind, read once: a passed tensor, a data-movement op, another op, or else
    kinds = {k: _kind(nodes[k]) for k in succ}
    kinds.update((k, _kind(nodes[k])) for k in targets if k not in kinds)
    through.update(gaps)
    if not tensor_nodes:
        through.update(k for k, kind in kinds.items() if kind == _PASSED)
    if not all_ops:
        through.update(k for k in succ if kinds[k] == _MOVING)
        dropped.update(_sourceless(kinds, pairs, succ, targets))
        through -= dropped

    Reached = list[tuple[End, Optional[TensorNode], tuple[OpNode, ...], bool]]

    def reached(start: End) -> Reached:
        """Ends fed through the chain of left-out ends that starts at ``start``, each with the
        last tensor and the operations on the way, and whether a run's gap was passed."""
        first = nodes[start]
        here = (first if isinstance(first, TensorNode) else None,
                (first,) if isinstance(first, OpNode) else (), start in gaps)
        out: Reached = []
        nxt = succ.get(start, ())
        if not any(b in through for b in nxt):  # (most chains: one node left out)
            return [(b, *here) for b in nxt if b not in dropped]
        seen = {start: here}
        todo = deque([start])
        while todo:
            k = todo.popleft()
            tensor, ops, gap = seen[k]
            for b in succ.get(k, ()):
                if b in dropped:
                    continue
                if b in through:
                    if b not in seen:
                        node = nodes[b]
                        seen[b] = ((node, ops, gap or b in gaps) if isinstance(node, TensorNode)
                                   else (tensor, (*ops, node) if isinstance(node, OpNode) else ops, gap))
                        todo.append(b)
                else:
                    out.append((b, tensor, ops, gap))
        return out

    result: dict[tuple[End, End], tuple[Optional[TensorNode], tuple[OpNode, ...], bool]] = {}
    memo: dict[End, Reached] = {}
    for a, b in pairs:
        if a in through or a in dropped or b in dropped:
            continue
        if b not in through:
            if (a, b) not in result:
                result[(a, b)] = _DIRECT
            continue
        got = memo.get(b)
        if got is None:  # several producers feeding one left-out end walk its chain once
            got = memo[b] = reached(b)
        for c, tensor, ops, gap in got:
            if c == a:
                continue
            known = result.get((a, c))
            if known is None:
                result[(a, c)] = (tensor, ops, gap)
            elif (more is not None and tensor is not None and known[0] is not None
                  and tensor is not known[0] and tensor not in more.get((a, c), ())):
                more[(a, c)] = (*more.get((a, c), ()), tensor)
    return result


#: the kinds of ends :func:`_join` tells apart
_OTHER, _PASSED, _MOVING, _OP = range(4)


def _kind(node: BaseNode) -> int:
    if isinstance(node, OpNode):
        return _MOVING if node.op in DATA_MOVEMENT_OPS else _OP
    return _PASSED if is_passed_tensor(node) else _OTHER


def _sourceless(kinds: Mapping[End, int], pairs: list[tuple[End, End]], succ: Mapping[End, list[End]],
                has_input: Container[End]) -> set[End]:
    """Ends of drawn operations (and the passed tensors they make) that no input, parameter or
    layer feeds, however far back: constants and buffer reads."""
    candidates = {k for k, kind in kinds.items() if kind != _OTHER}
    fed = list(dict.fromkeys(a for a, _ in pairs if a not in candidates))  # each once
    sourced: set[End] = set()
    while fed:
        for b in succ.get(fed.pop(), ()):
            if b in candidates and b not in sourced:
                sourced.add(b)
                fed.append(b)
    # a tensor nothing made (no edge in) is not a constant's product: keep it
    return {k for k in candidates - sourced if kinds[k] != _PASSED or k in has_input}
