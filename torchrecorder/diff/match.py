"""Pair the nodes of two recorded graphs: deterministic, linear apart from small local alignments.

The passes, in order (each pairs only what is still unpaired):

1. *normalise* the module paths: a common prefix on one side (peft's ``base_model.model.``) is
   found and stripped, the user's ``rename={regex: repl}`` is applied to ``a``'s paths, and the
   user's ``mapping={a_path: b_path}`` pairs modules by hand;
2. *top-down*: the two root calls are paired; inside every paired module its child calls are
   aligned in call order: equal children at both ends pair first, the rest by a
   Needleman-Wunsch alignment over a score that puts an equal subtree signature - types,
   parameter shapes, child signatures, operation names - above an equal name,
   so an inserted block renumbers the blocks after it instead of changing them all; a child
   that wraps the other side's module (its ``base_layer``) pairs that module as *wrapped*;
3. *exact paths*: modules left over whose normalised path and call match;
4. *unique signatures*: a left-over subtree whose signature occurs once on each side (moved);
5. *bottom-up*: a left-over container whose children mostly map into one left-over container
   of the other side (Dice >= 0.5);
6. inside every paired module (and the top scope): operations aligned by (name, output shapes)
   in recording order, ignoring the ``_N`` ordinals of their keys, then by name alone;
   parameters by name; tensors through the node that produced them.

Children of a module that no alignment can tell apart (an identical block inserted among
identical blocks) are flagged *ambiguous* rather than guessed.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any, Optional

from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode, OpNode, ParamNode, TensorNode

__all__ = ["Matching", "Side", "match"]

#: names under which a wrapper keeps the module it wraps (peft, torch.ao, DDP-like wrappers)
WRAPPED_NAMES = ("base_layer", "module", "original_module", "base_model", "model", "layer")
_NUMBER = re.compile(r"\d+")
#: alignment scores (see :func:`_score`)
_SIG, _NAME, _TYPE_NAME, _NAME_ONLY, _TYPE = 10.0, 1.0, 2.0, 1.5, 1.0


class Side:
    """One graph, indexed for matching: children, signatures and normalised paths of its calls."""

    def __init__(self, graph: Graph, interned: dict[Any, int]) -> None:
        self.graph = graph
        nodes = graph.nodes
        self.layers: list[LayerNode] = list(graph.layers())
        self.order: dict[Key, int] = {k: i for i, k in enumerate(nodes)}
        self.children: dict[Key, list[LayerNode]] = {}
        self.ops: dict[Key, list[OpNode]] = {}
        self.params: dict[Key, list[ParamNode]] = {}
        self.tensors: dict[Key, list[TensorNode]] = {}
        for layer in [graph.context, *self.layers]:
            kids: list[LayerNode] = []
            ops: list[OpNode] = []
            params: list[ParamNode] = []
            tensors: list[TensorNode] = []
            for k in layer.subnets:
                n = nodes[k]
                if isinstance(n, LayerNode):
                    kids.append(n)
                elif isinstance(n, OpNode):
                    ops.append(n)
                elif isinstance(n, ParamNode):
                    params.append(n)
                elif isinstance(n, TensorNode):
                    tensors.append(n)
            self.children[layer.key] = kids
            self.ops[layer.key] = ops
            self.params[layer.key] = params
            self.tensors[layer.key] = tensors
        self.calls: dict[str, int] = {}
        for layer in self.layers:
            self.calls[layer.path] = self.calls.get(layer.path, 0) + 1
        # subtree signatures, interned into small ints shared by both sides (children first)
        self.sig: dict[Key, int] = {}
        for layer in reversed(self.layers):
            k = layer.key
            item = (layer.type_name,
                    tuple((p.name, tuple(p.shape or ()), p.dtype) for p in self.params[k]),
                    tuple(self.sig.get(c.key, -1) for c in self.children[k]),
                    tuple(o.op for o in self.ops[k]))
            got = interned.get(item)
            if got is None:
                got = interned[item] = len(interned)
            self.sig[k] = got
        self.norm: dict[Key, str] = {layer.key: layer.path for layer in self.layers}
        self.types: dict[Key, str] = {layer.key: layer.type_name for layer in self.layers}
        self.prefix = ""

    def strip(self, prefix: str) -> None:
        """Normalise every path by removing ``prefix`` (``"x.y."``)."""
        self.prefix = prefix
        whole = prefix[:-1]
        for layer in self.layers:
            p = layer.path
            if p.startswith(prefix):
                self.norm[layer.key] = p[len(prefix):]
            elif p == whole:
                self.norm[layer.key] = ""
            elif not p or prefix.startswith(p + "."):  # a module around the prefix: a wrapper
                self.norm[layer.key] = "^" + p

    def local(self, layer: LayerNode, parent: Optional[LayerNode]) -> str:
        """``layer``'s name inside ``parent`` (normalised), with ``#k`` for a later call."""
        p = self.norm.get(parent.key, "") if parent is not None and parent.key is not None else ""
        path = self.norm[layer.key]
        name = path[len(p) + 1:] if p and path.startswith(p + ".") else path
        return name if layer.call_index == 1 else f"{name}#{layer.call_index}"

    def parent_layer(self, node: BaseNode) -> Optional[LayerNode]:
        got = self.graph.nodes.get(node.parent)
        return got if isinstance(got, LayerNode) and got.key is not None else None


class Matching:
    """The result of :func:`match`.

    Attributes:
        a, b: the two indexed sides.
        pairs: ``a`` key -> ``b`` key; ``back`` the reverse.
        via: ``a`` key -> how it was paired (``"key"``, ``"aligned"``, ``"signature"``,
            ``"bottom-up"``, ``"user"``, ``"wrapped"``, ``"scope"``, ``"producer"``).
        wrapped: ``a`` key -> (the side holding the wrapper, the wrapper's key).
        ambiguous: keys (``("a", key)`` / ``("b", key)``) of unpaired calls that an identical
            sibling could stand for.
        notes: what the matcher did that a reader should know, in words.
    """

    def __init__(self, a: Side, b: Side) -> None:
        self.a, self.b = a, b
        self.pairs: dict[Key, Key] = {}
        self.back: dict[Key, Key] = {}
        self.via: dict[Key, str] = {}
        self.wrapped: dict[Key, tuple[str, Key]] = {}
        self.ambiguous: list[tuple[str, Key]] = []
        self.notes: list[str] = []

    def pair(self, ka: Key, kb: Key, via: str) -> None:
        self.pairs[ka] = kb
        self.back[kb] = ka
        self.via[ka] = via


def _prefix_candidates(side: Side) -> list[str]:
    """Dotted prefixes that at least half of ``side``'s module paths start with."""
    n = len(side.layers)
    count: dict[str, int] = {}
    for layer in side.layers:  # every dotted prefix of up to four names, counted in one pass
        parts = layer.path.split(".")
        for i in range(1, min(len(parts), 5)):
            pre = ".".join(parts[:i]) + "."
            count[pre] = count.get(pre, 0) + 1
    paths = {layer.path for layer in side.layers if layer.call_index == 1}
    return [pre for pre, c in count.items() if 2 * c >= n and pre[:-1] in paths]


def _choose_prefix(a: Side, b: Side) -> None:
    """Strip the prefix (of either side) that makes the most module paths equal, if any does."""
    def score(pa: str, pb: str) -> int:
        def norm(side: Side, pre: str) -> set[tuple[str, int]]:
            whole = pre[:-1]
            return {(p[len(pre):] if pre and p.startswith(pre) else ("" if pre and p == whole else p),
                     layer.call_index) for layer in side.layers for p in (layer.path,)}
        return len(norm(a, pa) & norm(b, pb))

    best = (score("", ""), "", "")
    for side_name, side in (("a", a), ("b", b)):
        for pre in _prefix_candidates(side):
            pa, pb = (pre, "") if side_name == "a" else ("", pre)
            s = score(pa, pb)
            if s > best[0]:
                best = (s, pa, pb)
    if best[1]:
        a.strip(best[1])
    if best[2]:
        b.strip(best[2])


def _inner(side: Side, layer: LayerNode, type_name: str) -> Optional[LayerNode]:
    """The module that ``layer`` wraps, if it wraps one of type ``type_name``."""
    if layer.type_name == type_name:
        return None
    kids = side.children.get(layer.key, [])
    for kid in kids:
        name = side.local(kid, layer)
        if kid.type_name == type_name and (name in WRAPPED_NAMES or len(kids) == 1):
            return kid
    return None


def _score(m: Matching, la: LayerNode, pa: Optional[LayerNode], lb: LayerNode,
           pb: Optional[LayerNode]) -> tuple[float, Optional[tuple[str, LayerNode]]]:
    """How well ``la`` fits ``lb`` (0: not at all), and the wrapped module if a wrapper fits."""
    a, b = m.a, m.b
    name_a, name_b = a.local(la, pa), b.local(lb, pb)
    same_name = name_a == name_b
    if a.sig[la.key] == b.sig[lb.key]:
        return _SIG + (_NAME if same_name else 0.0), None
    if same_name:
        wrapped = _inner(b, lb, la.type_name)
        if wrapped is not None:
            return _SIG if a.sig[la.key] == b.sig[wrapped.key] else _TYPE_NAME, ("b", wrapped)
        wrapped = _inner(a, la, lb.type_name)
        if wrapped is not None:
            return _SIG if a.sig[wrapped.key] == b.sig[lb.key] else _TYPE_NAME, ("a", wrapped)
        return (_TYPE_NAME if la.type_name == lb.type_name else _NAME_ONLY), None
    if la.type_name == lb.type_name:
        return _TYPE, None
    return 0.0, None


def _align(m: Matching, pa: LayerNode, pb: LayerNode) -> list[tuple[LayerNode, LayerNode, str]]:
    """Align the unpaired child calls of ``pa`` and ``pb`` in call order; the new pairs."""
    xs = [c for c in m.a.children.get(pa.key, []) if c.key not in m.pairs]
    ys = [c for c in m.b.children.get(pb.key, []) if c.key not in m.back]
    if not xs or not ys:
        return []
    pa_ = pa if pa.key is not None else None
    pb_ = pb if pb.key is not None else None
    # equal children at both ends pair at once (an edit is usually local): the alignment
    # below is quadratic in what is left between them
    out: list[tuple[LayerNode, LayerNode, str]] = []
    def same(x: LayerNode, y: LayerNode, renumbered: bool = False) -> bool:
        if m.a.sig[x.key] != m.b.sig[y.key]:
            return False
        u, v = m.a.local(x, pa_), m.b.local(y, pb_)
        return u == v or (renumbered and _NUMBER.sub("#", u) == _NUMBER.sub("#", v))
    head = 0
    while head < min(len(xs), len(ys)) and same(xs[head], ys[head]):
        out.append((xs[head], ys[head], "aligned"))
        head += 1
    tail: list[tuple[LayerNode, LayerNode, str]] = []
    while len(xs) - len(tail) > head and len(ys) - len(tail) > head \
            and same(xs[len(xs) - 1 - len(tail)], ys[len(ys) - 1 - len(tail)], True):
        tail.append((xs[len(xs) - 1 - len(tail)], ys[len(ys) - 1 - len(tail)], "aligned"))
    xs, ys = xs[head:len(xs) - len(tail)], ys[head:len(ys) - len(tail)]
    tail.reverse()
    if not xs or not ys:
        return out + tail
    nx, ny = len(xs), len(ys)
    scores = [[_score(m, x, pa_, y, pb_) for y in ys] for x in xs]
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
            x, y = xs[i], ys[j]
            if wrap is None:
                out.append((x, y, "aligned"))
            elif wrap[0] == "b":
                m.wrapped[x.key] = ("b", y.key)
                out.append((x, wrap[1], "wrapped"))
            else:
                m.wrapped[wrap[1].key] = ("a", x.key)
                out.append((wrap[1], y, "wrapped"))
            i += 1
            j += 1
        elif best[i][j] == best[i + 1][j]:
            i += 1
        else:
            j += 1
    return out + tail


def _flag_ambiguous(m: Matching, pa: LayerNode, pb: LayerNode) -> None:
    """Unpaired children with the signature of a paired sibling: which one moved cannot be told."""
    for tag, side, kids, paired in (("a", m.a, m.a.children.get(pa.key, []), m.pairs),
                                    ("b", m.b, m.b.children.get(pb.key, []), m.back)):
        sigs = {side.sig[c.key] for c in kids if c.key in paired}
        for c in kids:
            if c.key not in paired and side.sig[c.key] in sigs:
                m.ambiguous.append((tag, c.key))


def _descend(m: Matching, todo: list[tuple[LayerNode, LayerNode]]) -> None:
    """Align the children of every pair in ``todo``, and of the pairs that gives, depth first."""
    while todo:
        pa, pb = todo.pop()
        new = _align(m, pa, pb)
        for x, y, via in new:
            m.pair(x.key, y.key, via)
        _flag_ambiguous(m, pa, pb)
        todo.extend((x, y) for x, y, _ in reversed(new))


def _user_pairs(m: Matching, mapping: Mapping[str, str]) -> None:
    by_a = {(layer.path if layer.call_index == 1 else f"{layer.path}#{layer.call_index}"): layer
            for layer in m.a.layers}
    by_b = {(layer.path if layer.call_index == 1 else f"{layer.path}#{layer.call_index}"): layer
            for layer in m.b.layers}
    for old, new in mapping.items():
        if old not in by_a:
            raise ValueError(f"mapping: {old!r} is not a module path of the first model")
        if new not in by_b:
            raise ValueError(f"mapping: {new!r} is not a module path of the second model")
        m.pair(by_a[old].key, by_b[new].key, "user")


def _root(side: Side) -> Optional[LayerNode]:
    for layer in side.layers:
        if side.norm[layer.key] == "" and layer.call_index == 1:
            return layer
    return side.layers[0] if side.layers else None


def _leftover_passes(m: Matching) -> None:
    a, b = m.a, m.b
    # exact normalised paths
    by_path = {(b.norm[layer.key], layer.call_index): layer for layer in b.layers if layer.key not in m.back}
    found = []
    for layer in a.layers:
        if layer.key in m.pairs:
            continue
        other = by_path.get((a.norm[layer.key], layer.call_index))
        if other is not None and other.key not in m.back and other.type_name == layer.type_name:
            m.pair(layer.key, other.key, "key")
            found.append((layer, other))
    _descend(m, list(reversed(found)))
    # subtrees whose signature occurs once unpaired on each side
    def unique(side: Side, paired: Mapping[Key, Key]) -> dict[int, LayerNode]:
        count: dict[int, int] = {}
        first: dict[int, LayerNode] = {}
        for layer in side.layers:
            if layer.key not in paired and side.children[layer.key]:
                s = side.sig[layer.key]
                count[s] = count.get(s, 0) + 1
                first.setdefault(s, layer)
        return {s: first[s] for s, c in count.items() if c == 1}
    ua, ub = unique(a, m.pairs), unique(b, m.back)
    found = []
    for s, layer in sorted(ua.items(), key=lambda item: a.order[item[1].key]):
        other = ub.get(s)
        if other is not None and layer.key not in m.pairs and other.key not in m.back:
            m.pair(layer.key, other.key, "signature")
            found.append((layer, other))
    _descend(m, list(reversed(found)))
    # bottom-up: containers whose children mostly map into one container
    for layer in reversed(a.layers):
        kids = a.children[layer.key]
        if layer.key in m.pairs or not kids:
            continue
        votes: dict[Key, int] = {}
        for kid in kids:
            kb = m.pairs.get(kid.key)
            if kb is not None:
                parent = b.graph.nodes[kb].parent
                if parent is not None and parent not in m.back:
                    votes[parent] = votes.get(parent, 0) + 1
        if not votes:
            continue
        target = max(votes, key=lambda k: (votes[k], -b.order[k]))
        cand = b.graph.nodes[target]
        if isinstance(cand, LayerNode) and 2 * votes[target] >= 0.5 * (len(kids) + len(b.children[target])):
            m.pair(layer.key, target, "bottom-up")
            _descend(m, [(layer, cand)])


def _pair_scope(m: Matching, ka: Key, kb: Key) -> None:
    """Pair the operations and parameters recorded directly in the paired scopes ``ka``, ``kb``."""
    a, b = m.a, m.b
    ops_a = [o for o in a.ops.get(ka, []) if o.key not in m.pairs]
    ops_b = [o for o in b.ops.get(kb, []) if o.key not in m.back]
    if ops_a and ops_b:
        def op_key(o: OpNode) -> tuple[Any, ...]:
            return (o.op, *[tuple(s) for s in o.output_shapes])
        sm = difflib.SequenceMatcher(None, [op_key(o) for o in ops_a], [op_key(o) for o in ops_b],
                                     autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                for x, y in zip(ops_a[i1:i2], ops_b[j1:j2], strict=True):
                    m.pair(x.key, y.key, "scope")
            elif tag == "replace":
                xs, ys = ops_a[i1:i2], ops_b[j1:j2]
                inner = difflib.SequenceMatcher(None, [o.op for o in xs], [o.op for o in ys], autojunk=False)
                for blk in inner.get_matching_blocks():
                    for x, y in zip(xs[blk.a:blk.a + blk.size], ys[blk.b:blk.b + blk.size], strict=True):
                        m.pair(x.key, y.key, "scope")
    params_b = {p.name: p for p in b.params.get(kb, []) if p.key not in m.back}
    for p in a.params.get(ka, []):
        q = params_b.get(p.name)
        if q is not None and p.key not in m.pairs:
            m.pair(p.key, q.key, "scope")


def _pair_tensors(m: Matching) -> None:
    """Pair tensors through the paired nodes that produced them (inputs by name)."""
    def outputs(side: Side) -> tuple[dict[Key, list[Key]], dict[Key, Key]]:
        outs: dict[Key, list[Key]] = {}
        producer: dict[Key, Key] = {}
        nodes = side.graph.nodes
        for u, v in side.graph.edges:
            if type(nodes[v]) is TensorNode and v not in producer and not isinstance(nodes[u], ParamNode):
                producer[v] = u
                outs.setdefault(u, []).append(v)
        return outs, producer
    outs_a, prod_a = outputs(m.a)
    outs_b, _ = outputs(m.b)
    inputs_b = {n.name: k for k, n in m.b.graph.nodes.items()
                if type(n) is TensorNode and n.role == "input"}
    for k, n in m.a.graph.nodes.items():
        if type(n) is not TensorNode or k in m.pairs:
            continue
        kb: Key = None
        if n.role == "input" and k not in prod_a:
            kb = inputs_b.get(n.name)
        elif k in prod_a and prod_a[k] in m.pairs:
            i = outs_a[prod_a[k]].index(k)
            got = outs_b.get(m.pairs[prod_a[k]], [])
            kb = got[i] if i < len(got) else None
        if kb is not None and kb not in m.back:
            m.pair(k, kb, "producer")


def match(a: Graph, b: Graph, *, mapping: Optional[Mapping[str, str]] = None,
          rename: Optional[Mapping[str, str]] = None, strip_prefix: Any = "auto") -> Matching:
    """Pair the nodes of ``a`` and ``b`` (see the module's docstring for the passes).

    Args:
        a, b: the graphs.
        mapping: ``{a_module_path: b_module_path}`` pairs made by hand (``path#2`` for a
            second call).
        rename: ``{regex: replacement}`` applied, in order, to ``a``'s module paths before
            they are compared with ``b``'s.
        strip_prefix: ``"auto"`` finds a common prefix to strip; ``None`` strips none; a
            string is stripped from the side whose paths start with it.

    Raises:
        ValueError: a ``mapping`` path names no module, a ``rename`` pattern does not compile.
    """
    interned: dict[Any, int] = {}
    m = Matching(Side(a, interned), Side(b, interned))
    if strip_prefix == "auto":
        _choose_prefix(m.a, m.b)
    elif strip_prefix:
        pre = str(strip_prefix).rstrip(".") + "."
        for side in (m.a, m.b):
            if any(layer.path.startswith(pre) for layer in side.layers):
                side.strip(pre)
    for side, tag in ((m.a, "first"), (m.b, "second")):
        if side.prefix:
            m.notes.append(f"the prefix {side.prefix!r} of the {tag} model's module paths was stripped")
    for pattern, repl in (rename or {}).items():
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"rename: {pattern!r} is not a regular expression: {exc}") from None
        for k, path in m.a.norm.items():
            m.a.norm[k] = rx.sub(repl, path)
    if mapping:
        _user_pairs(m, mapping)
    ra, rb = _root(m.a), _root(m.b)
    todo: list[tuple[LayerNode, LayerNode]] = []
    if ra is not None and rb is not None and ra.key not in m.pairs and rb.key not in m.back:
        m.pair(ra.key, rb.key, "key")
    for ka, kb in list(m.pairs.items()):
        todo.append((m.a.graph.nodes[ka], m.b.graph.nodes[kb]))  # type: ignore[arg-type]
    _descend(m, list(reversed(todo)))
    _leftover_passes(m)
    if ra is not None and rb is not None and ra.type_name != rb.type_name and not any(
            (m.a.sig[x] == m.b.sig[y] and (m.a.params[x] or m.a.children[x]))
            or (m.a.norm[x] == m.b.norm[y] and m.a.types[x] == m.b.types[y])
            for x, y in m.pairs.items() if x != ra.key and x in m.a.sig):
        # unrelated models: what paired did so by type alone
        m.pairs.clear()
        m.back.clear()
        m.via.clear()
        m.wrapped.clear()
        m.notes.append("the two models share no module: everything is added or removed")
        return m
    _pair_scope(m, None, None)
    for ka, kb in list(m.pairs.items()):
        if isinstance(m.a.graph.nodes[ka], LayerNode):
            _pair_scope(m, ka, kb)
    _pair_tensors(m)
    return m
