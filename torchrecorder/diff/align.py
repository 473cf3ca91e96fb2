"""Align the child calls of two paired modules: equal ends first, then anchors, then small alignments.

Inside a pair of modules, the children still unpaired are aligned in call order.  Equal
children at both ends pair at once; what is left between them is cut at *anchors* (a child
whose signature, or failing that whose name, occurs once on each side of the gap, kept in
order); each piece small enough is aligned by a Needleman-Wunsch alignment over
:func:`score`; a piece still large with no anchor is cut along its diagonal.  So a module
with thousands of children costs time linear in their number.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Hashable, Sequence
from typing import Optional

from ..nodes import LayerNode
from .sides import WRAPPED_NAMES, Matching, Side

__all__ = ["align", "flag_ambiguous", "score"]

_NUMBER = re.compile(r"\d+")
#: alignment scores (see :func:`score`)
_SIG, _NAME, _TYPE_NAME, _NAME_ONLY, _TYPE = 10.0, 1.0, 2.0, 1.5, 1.0


def _inner(side: Side, layer: LayerNode, sig: int, type_name: str) -> Optional[LayerNode]:
    """The child of ``layer`` that is the other side's module (signature ``sig``, type
    ``type_name``), if ``layer`` wraps it.

    Recognised by structure, not by class name: a child with the very signature (type,
    parameters' names, shapes and dtypes, children) of the other side's module, whatever
    ``layer``'s own type (peft's ``lora.Linear`` is a ``Linear`` too); failing that, a child of
    that type kept under a wrapper's name (``base_layer``, ``module``, ...) or as the only child
    of a module of another type.
    """
    if side.sig[layer.key] == sig:
        return None
    kids = side.children.get(layer.key, [])
    for kid in kids:
        if side.sig[kid.key] == sig:
            return kid
    if layer.type_name == type_name:
        return None
    for kid in kids:
        name = side.local(kid, layer)
        if kid.type_name == type_name and (name in WRAPPED_NAMES or len(kids) == 1):
            return kid
    return None


Score = tuple[float, Optional[tuple[str, LayerNode]]]
Pair = tuple[LayerNode, LayerNode, str]
#: a gap of at most this many cells (children x children) is aligned in full
_FULL_CELLS = 4096
#: a gap with no anchor is cut along its diagonal into pieces of about this many children
_PIECE = 48


def score(m: Matching, la: LayerNode, name_a: str, lb: LayerNode, name_b: str) -> Score:
    """How well ``la`` (named ``name_a`` in its parent) fits ``lb`` (0: not at all), and the
    wrapped module if a wrapper fits."""
    a, b = m.a, m.b
    same_name = name_a == name_b
    if a.sig[la.key] == b.sig[lb.key]:
        return _SIG + (_NAME if same_name else 0.0), None
    if same_name:
        wrapped = _inner(b, lb, a.sig[la.key], la.type_name)
        if wrapped is not None:
            return _SIG if a.sig[la.key] == b.sig[wrapped.key] else _TYPE_NAME, ("b", wrapped)
        wrapped = _inner(a, la, b.sig[lb.key], lb.type_name)
        if wrapped is not None:
            return _SIG if a.sig[wrapped.key] == b.sig[lb.key] else _TYPE_NAME, ("a", wrapped)
        return (_TYPE_NAME if la.type_name == lb.type_name else _NAME_ONLY), None
    if la.type_name == lb.type_name:
        return _TYPE, None
    return 0.0, None


def _emit(m: Matching, x: LayerNode, y: LayerNode, wrap: Optional[tuple[str, LayerNode]],
          out: list[Pair]) -> None:
    if wrap is not None and wrap[1].key in (m.back if wrap[0] == "b" else m.pairs):
        wrap = None  # the wrapped module is paired already (by hand): pair the two plainly
    if wrap is None:
        out.append((x, y, "aligned"))
    elif wrap[0] == "b":
        m.wrapped[x.key] = ("b", y.key)
        out.append((x, wrap[1], "wrapped"))
    else:
        m.wrapped[wrap[1].key] = ("a", x.key)
        out.append((wrap[1], y, "wrapped"))


def _full(m: Matching, xs: list[LayerNode], us: list[str], ys: list[LayerNode], vs: list[str],
          out: list[Pair]) -> None:
    """Needleman-Wunsch over :func:`score`: the pairs of highest total score, in order."""
    nx, ny = len(xs), len(ys)
    yv = list(zip(ys, vs, strict=True))
    scores = [[score(m, x, u, y, v) for y, v in yv] for x, u in zip(xs, us, strict=True)]
    best = [[0.0] * (ny + 1) for _ in range(nx + 1)]
    for i in range(nx - 1, -1, -1):
        row, below = best[i], best[i + 1]
        srow = scores[i]
        for j in range(ny - 1, -1, -1):
            s = srow[j][0]
            v = below[j + 1] + s if s > 0 else -1.0
            row[j] = max(v, below[j], row[j + 1])
    i = j = 0
    while i < nx and j < ny:
        s, wrap = scores[i][j]
        if s > 0 and best[i][j] == best[i + 1][j + 1] + s:
            _emit(m, xs[i], ys[j], wrap, out)
            i += 1
            j += 1
        elif best[i][j] == best[i + 1][j]:
            i += 1
        else:
            j += 1


def _increasing(cands: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest chain of ``(i, j)`` (sorted by ``i``) whose ``j`` increase too (patience sorting)."""
    tops: list[int] = []  # the smallest last j of a chain of each length
    ends: list[int] = []  # the index into cands of that chain's last element
    back: list[int] = []
    for n, (_, j) in enumerate(cands):
        k = bisect_left(tops, j)
        back.append(ends[k - 1] if k else -1)
        if k == len(tops):
            tops.append(j)
            ends.append(n)
        else:
            tops[k] = j
            ends[k] = n
    chain: list[tuple[int, int]] = []
    n = ends[-1] if ends else -1
    while n >= 0:
        chain.append(cands[n])
        n = back[n]
    chain.reverse()
    return chain


def _anchors(keys_x: Sequence[Hashable], keys_y: Sequence[Hashable]) -> list[tuple[int, int]]:
    """Positions ``(i, j)`` of the keys found exactly once on each side, as a chain in order."""
    count: dict[Hashable, list[int]] = {}
    for i, k in enumerate(keys_x):
        count.setdefault(k, [0, -1, 0, -1])
        c = count[k]
        c[0] += 1
        c[1] = i
    for j, k in enumerate(keys_y):
        got = count.get(k)
        if got is not None:
            got[2] += 1
            got[3] = j
    cands = sorted((c[1], c[3]) for c in count.values() if c[0] == 1 and c[2] == 1)
    return _increasing(cands)


def _gap(m: Matching, xs: list[LayerNode], us: list[str], ys: list[LayerNode], vs: list[str],
         out: list[Pair]) -> None:
    """Align ``xs`` with ``ys`` (their names ``us``, ``vs``): in full when small, else cut at
    anchors (equal signature, then equal name and type, then equal name), else along the diagonal."""
    todo = [(0, len(xs), 0, len(ys))]
    sig_a, sig_b = m.a.sig, m.b.sig
    while todo:
        i0, i1, j0, j1 = todo.pop()
        if i0 >= i1 or j0 >= j1:
            continue
        if (i1 - i0) * (j1 - j0) <= _FULL_CELLS:
            _full(m, xs[i0:i1], us[i0:i1], ys[j0:j1], vs[j0:j1], out)
            continue
        found: list[tuple[int, int]] = []
        keyings: tuple[tuple[Sequence[Hashable], Sequence[Hashable]], ...] = (
                ([sig_a[x.key] for x in xs[i0:i1]], [sig_b[y.key] for y in ys[j0:j1]]),
                ([(u, x.type_name) for x, u in zip(xs[i0:i1], us[i0:i1], strict=True)],
                 [(v, y.type_name) for y, v in zip(ys[j0:j1], vs[j0:j1], strict=True)]),
                (us[i0:i1], vs[j0:j1]))
        for key_x, key_y in keyings:
            found = [(i, j) for i, j in _anchors(key_x, key_y)
                     if score(m, xs[i0 + i], us[i0 + i], ys[j0 + j], vs[j0 + j])[0] > 0]
            if found:
                break
        if not found:  # no anchor: pieces along the diagonal
            pieces = -(-max(i1 - i0, j1 - j0) // _PIECE)
            for p in range(pieces - 1, -1, -1):
                todo.append((i0 + (i1 - i0) * p // pieces, i0 + (i1 - i0) * (p + 1) // pieces,
                             j0 + (j1 - j0) * p // pieces, j0 + (j1 - j0) * (p + 1) // pieces))
            continue
        prev_i, prev_j = i0, j0
        cuts = []
        for i, j in found:
            cuts.append((prev_i, i0 + i, prev_j, j0 + j))
            prev_i, prev_j = i0 + i + 1, j0 + j + 1
            _, wrap = score(m, xs[i0 + i], us[i0 + i], ys[j0 + j], vs[j0 + j])
            _emit(m, xs[i0 + i], ys[j0 + j], wrap, out)
        cuts.append((prev_i, i1, prev_j, j1))
        todo.extend(reversed(cuts))


def align(m: Matching, pa: LayerNode, pb: LayerNode) -> list[Pair]:
    """Align the unpaired child calls of ``pa`` and ``pb`` in call order; the new pairs (in
    ``a``'s order), wrappers found recorded in ``m.wrapped``."""
    xs = [c for c in m.a.children.get(pa.key, []) if c.key not in m.pairs]
    ys = [c for c in m.b.children.get(pb.key, []) if c.key not in m.back]
    if not xs or not ys:
        return []
    pa_ = pa if pa.key is not None else None
    pb_ = pb if pb.key is not None else None
    us = [m.a.local(x, pa_) for x in xs]
    vs = [m.b.local(y, pb_) for y in ys]
    sig_a, sig_b = m.a.sig, m.b.sig
    # equal children at both ends pair at once (an edit is usually local)
    out: list[Pair] = []

    def same(i: int, j: int, renumbered: bool = False) -> bool:
        if sig_a[xs[i].key] != sig_b[ys[j].key]:
            return False
        return us[i] == vs[j] or (renumbered and _NUMBER.sub("#", us[i]) == _NUMBER.sub("#", vs[j]))
    head = 0
    while head < min(len(xs), len(ys)) and same(head, head):
        out.append((xs[head], ys[head], "aligned"))
        head += 1
    tail = 0
    while len(xs) - tail > head and len(ys) - tail > head \
            and same(len(xs) - 1 - tail, len(ys) - 1 - tail, True):
        out.append((xs[len(xs) - 1 - tail], ys[len(ys) - 1 - tail], "aligned"))
        tail += 1
    _gap(m, xs[head:len(xs) - tail], us[head:len(us) - tail], ys[head:len(ys) - tail],
         vs[head:len(vs) - tail], out)
    out.sort(key=lambda pair: m.a.order[pair[0].key])
    return out


def flag_ambiguous(m: Matching, pa: LayerNode, pb: LayerNode) -> None:
    """Unpaired children with the signature of a paired sibling: which one moved cannot be told."""
    for tag, side, kids, paired in (("a", m.a, m.a.children.get(pa.key, []), m.pairs),
                                    ("b", m.b, m.b.children.get(pb.key, []), m.back)):
        sigs = {side.sig[c.key] for c in kids if c.key in paired}
        for c in kids:
            if c.key not in paired and side.sig[c.key] in sigs:
                m.ambiguous.append((tag, c.key))

