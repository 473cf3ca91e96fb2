"""Find repeated operation patterns (the iterations of a Python loop) among a layer's children.

A loop in ``forward`` leaves, in the recording, the same sequence of
children again and again: ``mul, add, pow, mul, add, pow, ...``.  Such a
stretch is *folded* when at least ``min_run`` consecutive iterations

* hold the same sequence of children: operations of one name and output
  shapes (only the name, for data-movement operations that are not drawn),
  tensors of one shape and dtype, layers of one structure
  (:meth:`~.structures.BlockStructures.number`);
* are wired alike: the edges between the children of an iteration (and into
  the layers among them) join the same positions in every iteration, and the
  edges from earlier iterations of the run come from the same positions, as
  many iterations back, in every iteration after the first (a recurrence may
  read two or more iterations back; no edge comes from a later iteration);
* call their modules alike: each layer of an iteration is a call of the same
  module in every iteration, or of a different module in each;
* form a chain: every iteration after the first uses a value of the one
  before (as folded blocks do; iterations side by side, such as the ``q``,
  ``k`` and ``v`` projections of an attention, are not a loop to fold).

Detection is exact and deterministic: every child gets a number per
signature; for each period ``p`` up to :data:`MAX_PERIOD` the stretches where
the numbers repeat with period ``p`` are found with one comparison of the
sequence against itself shifted by ``p`` (linear in the number of children);
the stretches that cover most are taken first, trimmed to the children no
other took, their iterations cut where the repetition starts or, where that
separates a call from the tensors it reads (recorded after it), where the
fewest edges cross from one iteration to the next (the offset leaving the
most whole iterations is taken); then the wiring of each is checked,
iteration by iteration, and a stretch whose iterations stop matching (a
shape that changes) is cut there.
Everything here reads node metadata only.
"""

from __future__ import annotations

import array
import bisect
import operator
import re
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Optional

from ..nodes import BaseNode, Key, LayerNode, OpNode, ParamNode, ScopeNode, TensorNode

__all__ = ["DATA_MOVEMENT_OPS", "MAX_PERIOD", "LoopNode", "Stretch", "find_stretches", "iterations_text",
           "loop_title"]

#: Operations that only move, select or re-type data (no arithmetic).  Unless every op is
#: drawn (``all_ops``), they are left out and named on the edge they sat on.
DATA_MOVEMENT_OPS: frozenset[str] = frozenset((
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "transpose", "t",
    "permute", "movedim", "moveaxis", "swapaxes", "swapdims", "squeeze", "unsqueeze",
    "contiguous", "expand", "expand_as", "getitem", "narrow", "select", "identity", "clone",
    "detach", "to", "type", "type_as", "float", "double", "half", "bfloat16", "int", "long",
    "short", "bool", "byte", "char", "cpu", "cuda",
))

#: the longest loop body (in children of one layer) that is looked for
MAX_PERIOD = 48


class LoopNode(LayerNode):
    """The drawn group of a folded loop: the first iteration's children, marked ``×N``.

    It is not a recorded node (no key of the graph names it): a
    :class:`~torchrecorder.projection.Projection` makes one per folded loop and
    lists it among the children of the layer that ran the loop, in place of
    the first iteration's children, which it holds (``subnets``).  A renderer
    draws it as a group, like an expanded layer; ``repeats()`` of it lists one
    ``LoopNode`` per iteration (``call_index`` 1, 2, ...).

    Attributes:
        ops: the names of the operations of one iteration, in order.
        varying: the data-movement operations left out of the drawing whose output shapes
            differ from one iteration to another (``x[:, :t + 1]``, a boolean mask's
            selection): the iterations are alike as drawn, not identical.
    """

    kind = "loop"
    __slots__ = ("ops", "varying")

    def __init__(self, parent: ScopeNode, key: str, members: Sequence[BaseNode], call_index: int = 1) -> None:
        if not members:  # a later iteration's node (a folded loop makes one per iteration)
            super().__init__("loop", None, parent.depth + 1, parent.key, key, "repeated layers", "",
                             call_index)
            self.ops: list[str] = []
            self.varying: tuple[str, ...] = ()
            return
        ops = [n.op for n in members if isinstance(n, OpNode)]
        moving = DATA_MOVEMENT_OPS
        names = list(dict.fromkeys(op for op in ops if op not in moving)) or list(dict.fromkeys(ops))
        summary = " · ".join(names[:6]) + (" …" if len(names) > 6 else "")
        super().__init__("loop", None, parent.depth + 1, parent.key, key,
                         type_name=summary or "repeated layers", path="", call_index=call_index)
        self.ops = ops
        self.varying = ()
        for n in members:
            self.subnet_keys.add(n.key)
        shapes = [n for n in members if isinstance(n, LayerNode)]
        self.input_shapes = list(shapes[0].input_shapes) if shapes else []
        self.output_shapes = list(shapes[-1].output_shapes) if shapes else []


def iterations_text(group: LoopNode, count: int, of: str = "") -> str:
    """``"12 identical iterations"`` (``of`` what, if given), or what differs between them
    (see ``LoopNode.varying``).

    >>> loop = LoopNode(LayerNode("net", key="net"), "net/mul#loop", ())
    >>> iterations_text(loop, 12, "mul · add")
    '12 identical iterations of: mul · add'
    >>> loop.varying = ("getitem",)
    >>> iterations_text(loop, 12)
    '12 iterations, alike but for the shapes of getitem'
    """
    of = f" of: {of}" if of else ""
    if not group.varying:
        return f"{count} identical iterations{of}"
    return f"{count} iterations{of}, alike but for the shapes of {', '.join(group.varying)}"


def loop_title(run: Sequence[LayerNode]) -> str:
    """``"loop"``: the title of a folded loop (its count is written beside it)."""
    return run[0].name


class Stretch:
    """One folded loop: ``count`` iterations of ``period`` children from ``start`` in a list.

    ``span``: for a candidate, the length of the whole periodic stretch from ``start`` (up
    to ``period - 1`` children past the last whole iteration); ``count * period`` if not given.
    """

    __slots__ = ("count", "period", "span", "start")

    def __init__(self, start: int, period: int, count: int, span: Optional[int] = None) -> None:
        self.start = start
        self.period = period
        self.count = count
        self.span = count * period if span is None else span

    def __repr__(self) -> str:
        return f"Stretch(start={self.start}, period={self.period}, count={self.count})"


def signature(node: BaseNode, all_ops: bool) -> Hashable:
    """What two children must share to be the same position of two iterations (before their
    structure and wiring are compared)."""
    if type(node) is OpNode or isinstance(node, OpNode):
        if not all_ops and node.op in DATA_MOVEMENT_OPS:
            return ("op", node.op)
        return ("op", node.op, _shapes(node.output_shapes))
    if isinstance(node, ParamNode):
        return ("param", node.key)  # never repeats
    if isinstance(node, TensorNode):
        return ("tensor", None if node.shape is None else tuple(node.shape), node.dtype, node.role)
    if isinstance(node, LayerNode):
        return ("layer", node.type_name, _shapes(node.input_shapes), _shapes(node.output_shapes))
    return (type(node).__name__, node.key)


def _shapes(shapes: Sequence[Sequence[int]]) -> Hashable:
    return tuple(map(tuple, shapes))


def periodic_stretches(numbers: Sequence[int], min_count: int,
                       max_period: int = MAX_PERIOD) -> list[Stretch]:
    """Candidate loops: maximal stretches of ``numbers`` periodic with a period ``p`` (each
    at least ``min_count`` periods long), for every ``p`` up to ``max_period``.

    >>> periodic_stretches([7, 1, 2, 1, 2, 1, 2, 9], 3)
    [Stretch(start=1, period=2, count=3)]
    """
    n = len(numbers)
    out: list[Stretch] = []
    packed = _packed(numbers)
    for p in range(1, min(max_period, n // max(min_count, 1)) + 1):
        need = p * (min_count - 1)
        if need <= 0:
            continue
        if packed is None:
            eq = bytes(map(operator.eq, numbers[:-p], numbers[p:]))  # 1 where the period holds
            for m in re.finditer(b"\x01{%d,}" % need, eq):
                start, length = m.start(), m.end() - m.start()
                out.append(Stretch(start, p, (length + p) // p, length + p))
            continue
        # the numbers against themselves shifted by p, all at once: an XOR of the two as
        # integers is 0 in exactly the bytes of the numbers where the period holds
        data, width = packed
        size = (n - p) * width
        diff = (int.from_bytes(data[:size], "little")
                ^ int.from_bytes(data[p * width:], "little")).to_bytes(size, "little")
        zeros = bytes(need * width)
        at = diff.find(zeros)  # a run of zero bytes long enough (find: faster than a regex)
        while at >= 0:
            run = _ZEROS.match(diff, at)  # where the run ends (find said it starts here)
            end = size if run is None else run.end()
            first, last = -(-at // width), end // width  # the whole numbers in the run
            if last - first >= need:
                out.append(Stretch(first, p, (last - first + p) // p, last - first + p))
            at = diff.find(zeros, end)
    return out


#: a run of zero bytes (matched greedily in one C loop)
_ZEROS = re.compile(b"\x00+")


def _packed(numbers: Sequence[int]) -> Optional[tuple[bytes, int]]:
    """``numbers`` as bytes, each in as few bytes as the largest needs (1, 2 or 8), with that
    width; ``None`` if they do not fit (a negative one, or one of more than 64 bits)."""
    try:
        return bytes(numbers), 1
    except (ValueError, TypeError):  # one over 255 (or below 0)
        pass
    for code in ("H", "Q"):
        try:
            packed = array.array(code, numbers)
        except (OverflowError, TypeError):
            continue
        return packed.tobytes(), packed.itemsize
    return None


def choose(stretches: list[Stretch], min_count: int,
           phases: Optional[Callable[[Stretch], Sequence[int]]] = None) -> list[Stretch]:
    """Non-overlapping stretches, those covering most taken first (then the shorter period,
    then the earlier start), each trimmed to whole periods no other took; in order.

    ``phases(s)``: where in its period a stretch's iterations may begin (offsets from
    ``s.start``, the preferred first; ``[0]`` when not given): a periodic stretch may start
    anywhere in an iteration.  Each candidate is cut at the offset that leaves the most
    whole iterations free within all of its ``span`` (the preferred on a tie).  Only that
    cut is checked afterwards: trying other offsets until one is wired alike would make a
    chain of what is no loop (the output of one call read in the iteration of the next,
    for calls side by side).
    """
    ranked = sorted(stretches, key=lambda s: (-s.count * s.period, s.period, s.start))
    starts: list[int] = []
    ends: list[int] = []
    taken: list[Stretch] = []
    for s in ranked:
        if _longest_free(starts, ends, s.start, s.start + s.span, 1, min_count * s.period) is None:
            continue  # no room for min_count iterations at any offset
        cuts: list[Stretch] = []  # per offset, the whole iterations left free: most first
        for offset in ([0] if phases is None else phases(s)):
            got = _longest_free(starts, ends, s.start + offset, s.start + s.span, s.period, min_count)
            if got is not None:
                cuts.append(Stretch(got[0], s.period, got[1]))
        if not cuts:
            continue
        # the most whole iterations; on a tie the preferred offset (min keeps the first)
        cut = min(cuts, key=lambda c: -c.count)
        at = bisect.bisect_left(starts, cut.start)
        starts.insert(at, cut.start)
        ends.insert(at, cut.start + cut.count * cut.period)
        taken.insert(at, cut)
    return taken


def _longest_free(starts: list[int], ends: list[int], lo: int, hi: int, period: int,
                  min_count: int) -> Optional[tuple[int, int]]:
    """(start, count) of the most whole iterations of ``period`` from ``lo`` (on, aligned to
    ``lo``) inside ``[lo, hi)`` that no taken stretch (``starts``/``ends``, sorted) covers;
    ``None`` if fewer than ``min_count`` fit."""
    i = bisect.bisect_right(starts, lo) - 1
    free_lo = lo if i < 0 or ends[i] <= lo else ends[i]
    best: Optional[tuple[int, int]] = None
    j = i + 1
    while True:
        nxt = starts[j] if j < len(starts) else hi
        seg_hi = min(nxt, hi)
        if seg_hi > free_lo:
            a = lo + -(-(free_lo - lo) // period) * period  # aligned to an iteration
            count = (seg_hi - a) // period
            if count >= min_count and (best is None or count > best[1]):
                best = (a, count)
        if nxt >= hi:
            return best
        free_lo = max(free_lo, ends[j])
        j += 1


def find_stretches(kids: Sequence[BaseNode], min_count: int, all_ops: bool,
                   same_layer: Callable[[LayerNode, LayerNode], bool],
                   insides: Callable[[BaseNode], Sequence[Key]],
                   preds: Callable[[Key], Sequence[Key]]) -> Iterator[Stretch]:
    """The loops to fold among ``kids`` (a layer's drawn children, in order).

    Args:
        kids: the children.
        min_count: the fewest iterations folded.
        all_ops: whether every operation is drawn (data-movement ones compare their shapes too).
        same_layer: whether two layer children have the same structure.
        insides: the keys a child stands for (itself and, for a layer, everything inside it
            but parameters), in a fixed order.
        preds: the predecessors of a key.
    """
    if len(kids) < 2 * min_count or min_count < 2:
        return
    interned: dict[Hashable, int] = {}
    numbers = [interned.setdefault(signature(kid, all_ops), len(interned)) for kid in kids]
    if len(interned) == len(numbers):
        return

    def phases(s: Stretch) -> list[int]:
        return _phases(kids, s, insides, preds)

    for s in choose(periodic_stretches(numbers, min_count), min_count, phases):
        yield from _wired_alike(kids, s, min_count, same_layer, insides, preds)


def _phases(kids: Sequence[BaseNode], s: Stretch, insides: Callable[[BaseNode], Sequence[Key]],
            preds: Callable[[Key], Sequence[Key]]) -> list[int]:
    """Where the iterations of the periodic stretch ``s`` may begin, as offsets from its start,
    the preferred first.

    A stretch of repeated signatures starts wherever the repetition does, often inside
    an iteration (the loop's first iteration reads the network's input, and the tensor
    node a later call's input gets is missing from it).  Cut there, a call can land in one
    iteration and the tensors it reads in the next: the iterations are then not wired
    alike.  The offsets are those where no edge goes back from a later child across an
    iteration's start.  First those where the recording tells where the loop's body begins:
    where the lines of code the children ran from do not step back inside an iteration
    (:func:`_descents`: the body's statements run top to bottom, so an iteration cut inside
    the body, its second statement first, reads a line above the one before); among them
    0 first (where the repetition starts: where the loop does, unless its first iteration
    differs: the first call reads a tensor made before the loop that later calls get from
    the iteration before), then those where the fewest edges cross an iteration's start
    (the fewest values carried from one iteration to the next, as where a ``for`` loop's
    body begins), the earlier on a tie; ``[0]`` if every offset has an edge back.  Each
    offset is tried at one start, in the second of the stretch's first three periods, where
    the edges on both sides are read.
    """
    p = s.period
    if p == 1:
        return [0]
    lo, hi = s.start, min(s.start + s.span, s.start + 3 * p)
    at: dict[Key, int] = {}
    for i in range(lo, hi):
        for key in insides(kids[i]):
            at[key] = i
    # the starts tried: one per offset where three periods are read, else every one
    tried_lo, tried_hi = (lo + p, lo + 2 * p) if hi - lo == 3 * p else (lo + 1, hi)
    crossing = [0] * p
    back = [False] * p
    for i in range(lo, hi):
        for key in insides(kids[i]):
            for src in preds(key):
                a = at.get(src)
                if a is None or a == i:
                    continue
                # the starts tried between the two ends
                for q in range(max(min(a, i) + 1, tried_lo), min(max(a, i), tried_hi - 1) + 1):
                    if a > i:
                        back[(q - lo) % p] = True
                    else:
                        crossing[(q - lo) % p] += 1
    descents = [_descents(kids[s.start + off:s.start + off + p]) for off in range(p)]
    allowed = sorted((off for off in range(p) if not back[off]),
                     key=lambda off: (descents[off], off > 0, crossing[off], off))
    return allowed or [0]


def _descents(kids: Sequence[BaseNode]) -> int:
    """How often the line of code steps back between one child and the next that ran in the
    same function: 0 for an iteration cut where the loop's body begins as written (its
    statements run top to bottom), at least 1 for one cut inside the body.  Children without
    a known line (tensors, a recording made with ``source=False``) are passed over."""
    last: dict[tuple[str, str], int] = {}
    count = 0
    for kid in kids:
        src = kid.source if isinstance(kid, (OpNode, LayerNode)) else None
        if src is None:
            continue
        where = (src.filename, src.function)
        if src.lineno < last.get(where, src.lineno):
            count += 1
        last[where] = src.lineno
    return count


def _wired_alike(kids: Sequence[BaseNode], s: Stretch, min_count: int,
                 same_layer: Callable[[LayerNode, LayerNode], bool],
                 insides: Callable[[BaseNode], Sequence[Key]],
                 preds: Callable[[Key], Sequence[Key]]) -> Iterator[Stretch]:
    """``s`` cut where an iteration is not wired (or built) like the ones before it."""
    p = s.period
    if all(isinstance(kid, TensorNode) for kid in kids[s.start:s.start + p]):
        return  # tensors alone are no loop
    # each iteration's keys in one list, children in order: a position in it stands for the
    # child and the place inside it (iterations compared below are built alike, as the
    # layers' structures are checked too, so equal positions mean equal places)
    flat: list[list[Key]] = []
    for k in range(s.count):
        keys: list[Key] = []
        for kid in kids[s.start + k * p:s.start + (k + 1) * p]:
            keys.extend(insides(kid))
        flat.append(keys)
    owner: dict[Key, tuple[int, int]] = {}  # key -> (iteration, position)
    for k, keys in enumerate(flat):
        owner.update(zip(keys, zip([k] * len(keys), range(len(keys)), strict=True), strict=True))
    intra: list[tuple[int, ...]] = []
    cross: list[tuple[tuple[int, int, int], ...]] = []
    backward: list[bool] = []  # an edge from a later iteration
    chained: list[bool] = []
    reach: list[int] = []  # the most iterations back an edge comes from
    owner_get = owner.get
    for k, keys in enumerate(flat):
        n = len(keys)
        inside: list[int] = []  # an edge within the iteration: ``position * n + source position``
        before: list[tuple[int, int, int]] = []  # (position, iterations back, source position)
        for i, key in enumerate(keys):
            for src in preds(key):
                got = owner_get(src)
                if got is None:
                    continue
                dk = k - got[0]
                if dk == 0:
                    inside.append(i * n + got[1])
                else:
                    before.append((i, dk, got[1]))
        inside.sort()
        before.sort()
        intra.append(tuple(inside))
        cross.append(tuple(before))
        back = {entry[1] for entry in before}  # how many iterations back each edge comes from
        backward.append(bool(back) and min(back) < 0)
        chained.append(1 in back)
        reach.append(max(back, default=0))
    # the module each layer of an iteration calls (its path): the iterations of one loop call
    # one module again and again (``x = f(x)``) or a new one each time (``for layer in
    # self.layers``), not first the one and then the other (two loops one after the other)
    layers = [j for j in range(p) if isinstance(kids[s.start + j], LayerNode)]
    paths = [tuple([getattr(kids[s.start + k * p + j], "path", None) for j in layers])
             for k in range(s.count)]
    first = 0
    calls: tuple[bool, ...] = ()
    for k in range(1, s.count + 1):
        if k < s.count:
            # the values an iteration reads from the iterations before it in the run come from
            # the same positions, as many iterations back, as in the iteration before it (up
            # to the run's first iteration; what comes from before the run comes from outside)
            d = k - first
            same_calls = tuple(map(operator.eq, paths[k], paths[first]))
            if d == 1:
                calls = same_calls
            alike = (chained[k] and not backward[k] and intra[k] == intra[first]
                     and (d == 1 or _within(cross[k], reach[k], d - 1)
                          == _within(cross[k - 1], reach[k - 1], d - 1))
                     and same_calls == calls
                     and _same_layers(kids, s.start + first * p, s.start + k * p, p, same_layer))
            if alike:
                continue
        if k - first >= min_count:
            yield Stretch(s.start + first * p, p, k - first)
        first = k


def _within(entries: tuple[tuple[int, int, int], ...], reach: int,
            back: int) -> tuple[tuple[int, int, int], ...]:
    """The edges of ``entries`` (from at most ``reach`` iterations before) from at most ``back``."""
    return entries if reach <= back else tuple(e for e in entries if e[1] <= back)


def _same_layers(kids: Sequence[BaseNode], a: int, b: int, p: int,
                 same_layer: Callable[[LayerNode, LayerNode], bool]) -> bool:
    for j in range(p):
        x, y = kids[a + j], kids[b + j]
        if isinstance(x, LayerNode) and isinstance(y, LayerNode) and not same_layer(x, y):
            return False
    return True
