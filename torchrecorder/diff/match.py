"""Pair the nodes of two recorded graphs: deterministic, linear apart from small local alignments.

The passes run on the two graphs in an order fixed by their contents
(:func:`~torchrecorder.diff.sides.content_key`), so ``match(b, a)`` is the mirror of
``match(a, b)`` by construction.  In order (each pairs only what is still unpaired):

1. *normalise* the module paths: a common prefix on one side (peft's ``base_model.model.``) is
   found and stripped, the user's ``rename={regex: repl}`` is applied to ``a``'s paths, and the
   user's ``mapping={a_path: b_path}`` (checked: one module onto one) pairs modules by hand;
2. *top-down*: the two roots are paired (a root that holds the other model, as peft's
   ``PeftModel`` or ``OptimizedModule`` do, wraps it); inside every paired module its child
   calls are aligned in call order (:mod:`~torchrecorder.diff.align`): equal children at both
   ends pair first, the rest is cut at anchors and aligned by a Needleman-Wunsch alignment over
   a score that puts an equal subtree signature - types, parameter shapes, child signatures,
   operation names - above an equal name, so an inserted block renumbers the blocks after it
   instead of changing them all; a child that wraps the other side's module (a child with its
   signature, whatever the wrapper's class) pairs that module as *wrapped*;
3. *exact paths*: modules left over whose normalised path and call match;
4. *unique signatures*: a left-over subtree whose signature occurs once on each side (moved);
5. *bottom-up*: a left-over container whose children mostly map into one left-over container
   of the other side (Dice >= 0.5);
6. inside every paired module (and the top scope): operations aligned by (name, output shapes)
   in recording order, ignoring the ``_N`` ordinals of their keys, then by name alone;
   parameters by name; tensors through the node that produced them (or, made inside a wrapped
   module, the wrapper's output read in their place); inputs by name, else by position.

Children of a module that no alignment can tell apart (an identical block inserted among
identical blocks) are flagged *ambiguous* rather than guessed.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any, Optional

from ..graph import Graph
from ..nodes import Key, LayerNode, OpNode, ParamNode, TensorNode
from .align import align, flag_ambiguous
from .sides import Matching, Side, content_key

__all__ = ["Matching", "Side", "match"]


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

def _descend(m: Matching, todo: list[tuple[LayerNode, LayerNode]]) -> None:
    """Align the children of every pair in ``todo``, and of the pairs that gives, depth first."""
    while todo:
        pa, pb = todo.pop()
        new = align(m, pa, pb)
        for x, y, via in new:
            m.pair(x.key, y.key, via)
        flag_ambiguous(m, pa, pb)
        todo.extend((x, y) for x, y, _ in reversed(new))


def _user_pairs(a: Side, b: Side, mapping: Mapping[str, str]) -> list[tuple[LayerNode, LayerNode]]:
    """The module calls that ``mapping`` pairs, checked: every path exists, no module twice."""
    def by_path(side: Side) -> dict[str, LayerNode]:
        return {(layer.path if layer.call_index == 1 else f"{layer.path}#{layer.call_index}"): layer
                for layer in side.layers}
    by_a, by_b = by_path(a), by_path(b)
    out = []
    seen: dict[str, str] = {}
    for old, new in mapping.items():
        if old not in by_a:
            raise ValueError(f"mapping: {old!r} is not a module path of the first model")
        if new not in by_b:
            raise ValueError(f"mapping: {new!r} is not a module path of the second model")
        if new in seen:
            raise ValueError(f"mapping: {seen[new]!r} and {old!r} are both mapped onto {new!r}; "
                             "a module pairs with one module at most")
        seen[new] = old
        out.append((by_a[old], by_b[new]))
    return out


def _top(side: Side) -> Optional[LayerNode]:
    """The recorded root call (the model itself)."""
    return next((layer for layer in side.layers if layer.depth == 0), None)


def _wrapped_root(m: Matching, ra: LayerNode, rb: LayerNode) -> None:
    """When one root module is held inside the other model's recorded root (peft's ``PeftModel``
    holds the model as ``base_model.model``), the two are paired as *wrapped* by that root, and
    the modules between them are the wrapper's parts (:attr:`Matching.chain`)."""
    for tag, side, inner, other in (("b", m.b, rb, ra), ("a", m.a, ra, rb)):
        top = _top(side)
        if top is None or top.key == inner.key or _top(m.a if tag == "b" else m.b) is not other:
            continue
        m.wrapped[ra.key] = (tag, top.key)
        node = side.graph.nodes.get(inner.parent_key)
        while isinstance(node, LayerNode) and node.key is not None and node.key != top.key:
            m.chain.append((tag, node.key))
            node = side.graph.nodes.get(node.parent_key)
        return


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
                parent = b.graph.nodes[kb].parent_key
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
                blocks = [blk for blk in inner.get_matching_blocks() if blk.size]
                if not blocks and len(xs) == len(ys):  # one op for another (linear -> linear_dynamic)
                    blocks = [difflib.Match(0, 0, len(xs))]
                for blk in blocks:
                    for x, y in zip(xs[blk.a:blk.a + blk.size], ys[blk.b:blk.b + blk.size], strict=True):
                        m.pair(x.key, y.key, "scope")
    params_b = {p.name: p for p in b.params.get(kb, []) if p.key not in m.back}
    for p in a.params.get(ka, []):
        q = params_b.get(p.name)
        if q is not None and p.key not in m.pairs:
            m.pair(p.key, q.key, "scope")
    if ka is not None and kb is not None:
        _pair_parametrized(m, ka, kb)


def _pair_parametrized(m: Matching, ka: Key, kb: Key) -> None:
    """A parameter that ``torch.nn.utils.parametrize`` moved on one side (``weight`` kept as
    ``parametrizations.weight.original`` of the same module), or that ``torch.nn.utils.prune``
    keeps as ``weight_orig`` (the module's ``weight`` being it times a mask), pairs with the
    other side's."""
    la, lb = m.a.graph.nodes[ka], m.b.graph.nodes[kb]
    if not isinstance(la, LayerNode) or not isinstance(lb, LayerNode):
        return
    for here, there, layer, other, forward in ((m.a, m.b, la, lb, True), (m.b, m.a, lb, la, False)):
        paired, other_paired = (m.pairs, m.back) if forward else (m.back, m.pairs)
        if not there.parametrized or not other.path:
            continue
        for p in here.params.get(layer.key, []):
            q = (there.parametrized.get(f"{other.path}.parametrizations.{p.name}.original")
                 or there.parametrized.get(f"{other.path}.{p.name}_orig"))
            if q is not None and p.key not in paired and q.key not in other_paired:
                if forward:
                    m.pair(p.key, q.key, "scope")
                else:
                    m.pair(q.key, p.key, "scope")


def _pair_wrapped_outputs(m: Matching, prod_a: dict[Key, Key], prod_b: dict[Key, Key]) -> None:
    """A tensor made inside a wrapped module is, on the other side, the wrapper's output: pair it
    with the tensor that the paired consumer reads in its place (same position among its inputs)."""
    inner: dict[tuple[str, Key], None] = {}
    for ka, (tag, wrapper) in m.wrapped.items():
        if (m.b if tag == "b" else m.a).graph.nodes[wrapper].depth == 0:
            continue  # a wrapper of the whole model (PeftModel): its tensors pair through their makers
        inner[("a", ka) if tag == "b" else ("b", m.pairs[ka])] = None
    if not inner:
        return

    def inputs_of(side: Side) -> dict[Key, list[Key]]:
        got: dict[Key, list[Key]] = {}
        nodes = side.graph.nodes
        for u, v in side.graph.links:
            if type(nodes[u]) is TensorNode:
                got.setdefault(v, []).append(u)
        return got

    def made_inside(side: Side, tag: str, producer: Key) -> bool:
        node = side.graph.nodes.get(producer)
        while node is not None and node.parent_key is not None:
            if (tag, node.parent_key) in inner:
                return True
            node = side.graph.nodes.get(node.parent_key)
        return False

    ins = {"a": inputs_of(m.a), "b": inputs_of(m.b)}
    for tag, side, prod, here, there, other in (("a", m.a, prod_a, m.pairs, m.back, "b"),
                                                ("b", m.b, prod_b, m.back, m.pairs, "a")):
        readers: dict[Key, list[Key]] = {}
        for v, us in ins[tag].items():
            for u in us:
                readers.setdefault(u, []).append(v)
        for t, producer in prod.items():
            if t in here or not made_inside(side, tag, producer):
                continue
            for c in readers.get(t, ()):
                c2 = here.get(c)
                if c2 is None:
                    continue
                i = ins[tag][c].index(t)
                got = ins[other].get(c2, [])
                far_side, far_prod = (m.b, prod_b) if other == "b" else (m.a, prod_a)
                if i < len(got) and got[i] not in there \
                        and not made_inside(far_side, other, far_prod.get(got[i])):
                    if tag == "a":
                        m.pair(t, got[i], "wrapper")
                    else:
                        m.pair(got[i], t, "wrapper")
                    break


def _pair_tensors(m: Matching) -> None:
    """Pair tensors through the paired nodes that produced them (inputs by name)."""
    def outputs(side: Side) -> tuple[dict[Key, list[Key]], dict[Key, Key]]:
        outs: dict[Key, list[Key]] = {}
        producer: dict[Key, Key] = {}
        nodes = side.graph.nodes
        for u, v in side.graph.links:
            if type(nodes[v]) is TensorNode and v not in producer and not isinstance(nodes[u], ParamNode):
                producer[v] = u
                outs.setdefault(u, []).append(v)
        return outs, producer
    outs_a, prod_a = outputs(m.a)
    outs_b, prod_b = outputs(m.b)
    _pair_wrapped_outputs(m, prod_a, prod_b)
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
            m.pair(k, kb, "producer" if n.role != "input" else "key")
    # inputs whose names differ (peft's forward(*args, **kwargs) names input_ids args[0]) pair
    # by position among the inputs left
    free_a = [k for k, n in m.a.graph.nodes.items()
              if type(n) is TensorNode and n.role == "input" and k not in prod_a and k not in m.pairs]
    free_b = [k for k, n in m.b.graph.nodes.items()
              if type(n) is TensorNode and n.role == "input" and k not in m.back]
    for ka, kb in zip(free_a, free_b, strict=False):
        m.pair(ka, kb, "position")


def match(a: Graph, b: Graph, *, mapping: Optional[Mapping[str, str]] = None,
          rename: Optional[Mapping[str, str]] = None, strip_prefix: Any = "auto") -> Matching:
    """Pair the nodes of ``a`` and ``b`` (see the module's docstring for the passes).

    The passes run on the two graphs in an order fixed by their contents (:func:`content_key`),
    not by which is ``a``: so ``match(b, a)`` is the mirror of ``match(a, b)`` by construction.

    Args:
        a, b: the graphs.
        mapping: ``{a_module_path: b_module_path}`` pairs made by hand (``path#2`` for a
            second call).
        rename: ``{regex: replacement}`` applied, in order, to ``a``'s module paths before
            they are compared with ``b``'s.
        strip_prefix: ``"auto"`` finds a common prefix to strip; ``None`` strips none; a
            string is stripped from the side whose paths start with it.

    Raises:
        ValueError: a ``mapping`` path names no module, a ``mapping`` pairs two modules with
            one, a ``rename`` pattern does not compile.
    """
    rules = []
    for pattern, repl in (rename or {}).items():
        try:
            rules.append((re.compile(pattern), repl))
        except re.error as exc:
            raise ValueError(f"rename: {pattern!r} is not a regular expression: {exc}") from None
    interned: dict[Any, int] = {}
    side_a, side_b = Side(a, interned), Side(b, interned)
    for rx, repl in rules:
        for k, path in side_a.norm.items():
            side_a.norm[k] = rx.sub(repl, path)
    user = _user_pairs(side_a, side_b, mapping or {})
    if content_key(a) <= content_key(b):
        m = _match(Matching(side_a, side_b), user, strip_prefix)
    else:
        m = _match(Matching(side_b, side_a), [(y, x) for x, y in user], strip_prefix).swapped()
    for side, tag in ((m.a, "first"), (m.b, "second")):
        if side.prefix:
            m.notes.insert(0, f"the prefix {side.prefix!r} of the {tag} model's module paths was stripped")
    return m


def _match(m: Matching, user: list[tuple[LayerNode, LayerNode]], strip_prefix: Any) -> Matching:
    if strip_prefix == "auto":
        _choose_prefix(m.a, m.b)
    elif strip_prefix:
        pre = str(strip_prefix).rstrip(".") + "."
        for side in (m.a, m.b):
            if any(layer.path.startswith(pre) for layer in side.layers):
                side.strip(pre)
    for x, y in user:
        m.pair(x.key, y.key, "user")
    ra, rb = _root(m.a), _root(m.b)
    todo: list[tuple[LayerNode, LayerNode]] = []
    if ra is not None and rb is not None and ra.key not in m.pairs and rb.key not in m.back:
        m.pair(ra.key, rb.key, "key")
        _wrapped_root(m, ra, rb)
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
        ta, tb = _top(m.a), _top(m.b)
        if ta is not None and tb is not None:  # the two recorded roots are always paired
            m.pair(ta.key, tb.key, "key")
        return m
    _pair_scope(m, None, None)
    for ka, kb in list(m.pairs.items()):
        if isinstance(m.a.graph.nodes[ka], LayerNode):
            _pair_scope(m, ka, kb)
    _pair_tensors(m)
    return m
