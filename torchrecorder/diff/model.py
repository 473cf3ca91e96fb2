"""The result of a diff: one :class:`Entry` per pair or unpaired node, edges, roll-ups, JSON."""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from .._text import utf8_safe
from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode, OpNode, ParamNode, TensorNode, shape_str
from .match import Matching
from .status import MARKS, STATUSES
from .text import type_text

__all__ = ["DIFF_FORMAT", "DIFF_VERSION", "MARKS", "STATUSES", "Diff", "Entry"]

#: the ``format`` and ``version`` fields of :meth:`Diff.to_json`
DIFF_FORMAT = "torchrecorder.diff"
DIFF_VERSION = 1
#: the kinds of entry counted in a module's roll-up (tensors and parameters follow their nodes)
ROLLUP_KINDS = ("layer", "op")
_MIRROR = {"added": "removed", "removed": "added"}


class Entry:
    """One pair of nodes, or one node found on one side only.

    Attributes:
        a, b: the node's key in the first / second graph, or ``None``.
        kind: ``"layer"``, ``"op"``, ``"param"`` or ``"tensor"``.
        status: one of :data:`STATUSES`.
        via: how the pair was found (see :class:`~torchrecorder.diff.match.Matching`); ``""``
            for an unpaired node.
        changes: attribute -> ``(old, new)`` text, for what differs (``type``, ``output_shapes``,
            ``shape``, ``dtype``, ``params``, ``calls``, ...).
        note: a word on the entry: the wrapper's type of a wrapped module, ``"wrapper of X"`` on
            the wrapper itself, ``"renumbered"``, ``"ambiguous: ..."``.
        ambiguous: an identical sibling could stand for this unpaired call.
        rollup: status -> how many modules and operations below this one (a module) have that
            status (only statuses other than ``same``).
        one_sided: ``"a"`` / ``"b"`` -> the part of :attr:`rollup` found on that side only
            (what a view of the other side leaves out).
        part_of: for status ``wrapper``, the keys ``(a, b)`` of the wrapped pair the node
            belongs to (the pair of roots for a wrapper of the whole model), else ``None``.
        parent: the index in :attr:`Diff.entries` of the entry this one is drawn inside, or
            ``None`` at the top.
        index: this entry's own index in :attr:`Diff.entries`.
    """

    __slots__ = ("a", "ambiguous", "b", "changes", "index", "kind", "note", "one_sided", "parent", "part_of",
                 "rollup", "status", "via")

    def __init__(self, a: Key, b: Key, kind: str, status: str, via: str = "") -> None:
        self.a, self.b, self.kind, self.status, self.via = a, b, kind, status, via
        self.changes: dict[str, tuple[str, str]] = {}
        self.note = ""
        self.ambiguous = False
        self.rollup: dict[str, int] = {}
        self.one_sided: dict[str, dict[str, int]] = {}
        self.part_of: Optional[tuple[Key, Key]] = None
        self.parent: Optional[int] = None
        self.index = 0

    def __repr__(self) -> str:
        return f"Entry(a={self.a!r}, b={self.b!r}, kind={self.kind!r}, status={self.status!r})"

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON data."""
        d: dict[str, Any] = {"a": self.a, "b": self.b, "kind": self.kind, "status": self.status}
        if self.via:
            d["via"] = self.via
        if self.changes:
            d["changes"] = {k: list(v) for k, v in self.changes.items()}
        if self.note:
            d["note"] = self.note
        if self.part_of is not None:
            d["part_of"] = {"a": self.part_of[0], "b": self.part_of[1]}
        if self.ambiguous:
            d["ambiguous"] = True
        if self.rollup:
            d["rollup"] = dict(self.rollup)
        return d


def _shapes(shapes: Any) -> str:
    return ", ".join(shape_str(tuple(s)) for s in shapes) if shapes else "-"


def _layer_changes(m: Matching, x: LayerNode, y: LayerNode) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    if x.type_name != y.type_name:
        out["type"] = (x.type_name, y.type_name)
    elif x.fn is not None and y.fn is not None and type(x.fn) is not type(y.fn):
        # two classes of one name (torch.nn.Linear, its dynamically quantised Linear): their modules
        ka, kb = type(x.fn), type(y.fn)
        out["type"] = (f"{ka.__module__}.{ka.__qualname__}", f"{kb.__module__}.{kb.__qualname__}")
    for field in ("input_shapes", "output_shapes"):
        su, sv = getattr(x, field), getattr(y, field)
        if su != sv and [tuple(s) for s in su] != [tuple(s) for s in sv]:
            out[field] = (_shapes(su), _shapes(sv))
    pa = m.a.params.get(x.key, [])
    pb = m.b.params.get(y.key, [])
    if x.num_params != y.num_params or len(pa) != len(pb):
        if len(pa) == len(pb):  # elements; the number of tensors too when it changed
            out["params"] = (f"{x.num_params:,}", f"{y.num_params:,}")
        else:
            out["params"] = (f"{x.num_params:,} in {len(pa)}", f"{y.num_params:,} in {len(pb)}")
    da = "/".join(dict.fromkeys(p.dtype for p in pa))
    db = "/".join(dict.fromkeys(p.dtype for p in pb))
    if da != db and da and db:
        out["dtype"] = (da, db)
    if x.call_index == 1 and y.call_index == 1:
        ca, cb = m.a.calls.get(x.path, 1), m.b.calls.get(y.path, 1)
        if ca != cb:
            out["calls"] = (str(ca), str(cb))
    if x.opaque != y.opaque:
        out["opaque"] = (x.opaque or "-", y.opaque or "-")
    return out


def _node_changes(x: BaseNode, y: BaseNode) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    if isinstance(x, OpNode) and isinstance(y, OpNode):
        if x.op != y.op:
            out["op"] = (x.op, y.op)
        su, sv = x.output_shapes, y.output_shapes
        if su != sv and [tuple(s) for s in su] != [tuple(s) for s in sv]:
            out["output_shapes"] = (_shapes(su), _shapes(sv))
    elif isinstance(x, TensorNode) and isinstance(y, TensorNode):
        if x.shape != y.shape and tuple(x.shape or ()) != tuple(y.shape or ()):
            out["shape"] = (shape_str(x.shape), shape_str(y.shape))
        if x.dtype != y.dtype:
            out["dtype"] = (x.dtype, y.dtype)
        if isinstance(x, ParamNode) and isinstance(y, ParamNode) and x.requires_grad != y.requires_grad:
            out["requires_grad"] = (str(x.requires_grad), str(y.requires_grad))
    return out


class Diff:
    """What changed between two recorded graphs (made by :func:`torchrecorder.diff`).

    ``str(d)`` is :meth:`summary`; ``d.to_json()`` the documented JSON; ``bool(d)`` is true
    when the graphs differ; :func:`torchrecorder.make_dot` draws it.

    Attributes:
        a, b: the two graphs.
        entries: one :class:`Entry` per pair or unpaired node, in drawing order (the second
            graph's recording order, each node found only in the first after the node it
            followed there).
        edges: ``(a_edge, b_edge, status)``: the edge on each side (``None`` where absent),
            status ``same``, ``added``, ``removed`` or ``wrapped`` (one side's edge whose ends
            the other side joins through a wrapper's parts: a LoRA layer now between them).
        wrapper_edges: the indices in :attr:`edges` of the added or removed edges that belong
            to a wrapper's parts (to and from ``lora_A``, ``lora_B``, the add): not free
            additions, the wrapper's own.
        notes: what the matcher did that a reader should know (a stripped prefix, ambiguity).
        root_note: ``"wrapped by PeftModel"`` when the first model's root is held by a wrapper
            of the whole second model (``"unwrapped from ..."`` the other way), else ``""``;
            the roots are paired, and the root is not counted as a wrapped layer.
        root_pair: the keys ``(a, b)`` of the model held by a wrapper of the whole other model
            and its counterpart (what the whole-model wrapper's parts are ``part_of``), else
            ``None``.
        matching: the :class:`~torchrecorder.diff.match.Matching` it was built from.
    """

    def __init__(self, matching: Matching) -> None:
        self.matching = m = matching
        self.a: Graph = m.a.graph
        self.b: Graph = m.b.graph
        self.notes: list[str] = list(m.notes)
        self.root_note = ""
        self.root_pair: Optional[tuple[Key, Key]] = None
        self.entries: list[Entry] = []
        self.index_a: dict[Key, int] = {}
        self.index_b: dict[Key, int] = {}
        self._parts: dict[str, dict[Key, Key]] = {"a": {}, "b": {}}  # side -> part -> wrapped a key
        self._build_entries()
        self._classify()
        self._parents_and_rollup()
        self.edges: list[tuple[Optional[tuple[Key, Key]], Optional[tuple[Key, Key]], str]] = []
        self.wrapper_edges: set[int] = set()
        self._build_edges()

    # ------------------------------------------------------------ building
    def _build_entries(self) -> None:
        m = self.matching
        a_nodes, b_nodes = self.a.nodes, self.b.nodes
        slots: dict[Key, list[Key]] = {}  # b key -> a-only keys drawn right after it
        head: list[Key] = []
        last_b: Key = None
        for ka in a_nodes:
            if ka is None:
                continue
            kb = m.pairs.get(ka)
            if kb is not None:
                last_b = kb
            elif last_b is None:
                head.append(ka)
            else:
                slots.setdefault(last_b, []).append(ka)

        def add_a_only(ka: Key) -> None:
            node = a_nodes[ka]
            self.index_a[ka] = len(self.entries)
            self.entries.append(Entry(ka, None, node.kind if node.kind != "context" else "layer", "removed"))

        for ka in head:
            add_a_only(ka)
        for kb, node in b_nodes.items():
            if kb is None:
                continue
            ka = m.back.get(kb)
            e = Entry(ka, kb, node.kind, "same" if ka is not None else "added",
                      m.via.get(ka, "") if ka else "")
            if ka is not None:
                self.index_a[ka] = len(self.entries)
            self.index_b[kb] = len(self.entries)
            self.entries.append(e)
            for k in slots.get(kb, ()):
                add_a_only(k)
        if len(self.index_a) != len(a_nodes) - (None in a_nodes) or \
                len(self.index_b) != len(b_nodes) - (None in b_nodes):
            raise RuntimeError("diff: a node of a model has no entry (a bug in the matcher)")

    def _classify(self) -> None:
        for i, e in enumerate(self.entries):
            e.index = i
        m = self.matching
        ambiguous = set(m.ambiguous)
        wrappers: dict[tuple[str, Key], Key] = {}
        for inner, (side, wrapper) in m.wrapped.items():
            wrappers[(side, wrapper)] = inner
        root_inner = next((k for k, (_, w) in m.wrapped.items()
                           if (self.b if m.wrapped[k][0] == "b" else self.a).nodes[w].depth == 0), None)
        chain = {item: root_inner for item in m.chain}
        for e in self.entries:
            if e.a is not None and e.b is not None:
                x, y = self.a.nodes[e.a], self.b.nodes[e.b]
                if isinstance(x, LayerNode) and isinstance(y, LayerNode):
                    e.changes = _layer_changes(m, x, y)
                    na, nb = m.a.norm.get(e.a, ""), m.b.norm.get(e.b, "")
                    wrap = m.wrapped.get(e.a)
                    if wrap is not None:
                        w = (self.b if wrap[0] == "b" else self.a).nodes[wrap[1]]
                        e.note = ("wrapped by " if wrap[0] == "b" else "unwrapped from ") + type_text(w, m)
                        if w.depth == 0:
                            # the model held by a wrapper of the whole model (PeftModel): the
                            # roots' pairing is said in the header, the root is no wrapped layer
                            self.root_note = e.note
                            self.root_pair = (e.a, e.b)
                            self.notes.append(f"the roots are paired: {x.type_name} {e.note}")
                            wrap = None
                        else:
                            e.status = "wrapped"
                    if wrap is not None:
                        pass
                    elif e.changes:
                        e.status = "changed"
                    elif na != nb and self._moved(x, y):
                        e.status = "renamed"
                        e.changes["path"] = (x.call_title(True), y.call_title(True))
                        e.note = _renumbered(m.a.local(x, m.a.parent_layer(x)),
                                             m.b.local(y, m.b.parent_layer(y)))
                    if e.status == "changed" and na != nb and self._moved(x, y):
                        e.changes["path"] = (x.call_title(True), y.call_title(True))
                else:
                    e.changes = _node_changes(x, y)
                    if e.changes:
                        e.status = "changed"
            else:
                side, key = ("a", e.a) if e.a is not None else ("b", e.b)
                if (side, key) in ambiguous:
                    e.ambiguous = True
                    e.note = "ambiguous: an identical sibling could stand for it"
                inner = wrappers.get((side, key))
                if inner is None and (side, key) in chain:
                    inner = chain[(side, key)]
                if inner is not None:
                    e.note = f"wrapper of {m.pairs.get(inner) if side == 'b' else inner}"
        # each node of a wrapper (the wrapper module on its side, its new children, their
        # parameters, operations and tensors) is the wrapper's part, not a free addition
        self._parts = {"a": self._wrapper_parts("a"), "b": self._wrapper_parts("b")}
        for side, parts in self._parts.items():
            for key, inner in parts.items():
                part = self.entry_of(side, key)
                if part is not None:
                    part.status = "wrapper"
                    part.part_of = (inner, m.pairs.get(inner))

    def _moved(self, x: LayerNode, y: LayerNode) -> bool:
        """Whether the call ``x`` became ``y`` under another name, or in another module (not
        only because a module around it was renamed)."""
        m = self.matching
        px, py = m.a.parent_layer(x), m.b.parent_layer(y)
        if (m.pairs.get(px.key) if px is not None else None) != (py.key if py is not None else None):
            return True
        return m.a.local(x, px) != m.b.local(y, py)

    def _parents_and_rollup(self) -> None:
        for i, e in enumerate(self.entries):
            if e.b is not None:
                parent = self.b.nodes[e.b].parent_key
                e.parent = self.index_b.get(parent) if parent is not None else None
            else:
                parent = self.a.nodes[e.a].parent_key
                e.parent = self.index_a.get(parent) if parent is not None else None
            if e.parent == i:  # never: a node is not its own parent
                e.parent = None
        for e in self.entries:
            if e.status == "same" or e.kind not in ROLLUP_KINDS:
                continue
            p = e.parent
            seen = 0
            only = "b" if e.a is None else ("a" if e.b is None else "")
            while p is not None and seen <= len(self.entries):
                r = self.entries[p].rollup
                r[e.status] = r.get(e.status, 0) + 1
                if only:
                    r = self.entries[p].one_sided.setdefault(only, {})
                    r[e.status] = r.get(e.status, 0) + 1
                p = self.entries[p].parent
                seen += 1

    def _wrapper_parts(self, side: str) -> dict[Key, Key]:
        """The unpaired nodes of ``side`` that belong to a wrapper, each with the ``a`` key of
        the module it wraps: the wrapper itself and what lies below it with no paired node in
        between (peft's ``lora_A``, its dropout and weight, the add).  A wrapper of the whole
        model (``PeftModel``) holds the root and the modules between it and the model it holds
        (peft's ``LoraModel``); its parts belong to the pair of roots."""
        m = self.matching
        graph, paired = (self.a, m.pairs) if side == "a" else (self.b, m.back)
        wrappers: dict[Key, Key] = {w: inner for inner, (tag, w) in m.wrapped.items() if tag == side}
        roots = [inner for inner, (tag, w) in m.wrapped.items() if tag == side and graph.nodes[w].depth == 0]
        if roots:
            wrappers.update({k: roots[0] for tag, k in m.chain if tag == side})
        parts: dict[Key, Key] = {}
        if not wrappers:
            return parts
        verdict: dict[Key, Optional[Key]] = {}  # node -> the wrapped module's a key, or None
        for k in graph.nodes:
            if k is None or k in paired:
                continue
            trail: list[Key] = []
            node_key: Key = k
            found: Optional[Key] = None
            while node_key is not None and node_key not in paired:
                if node_key in verdict:
                    found = verdict[node_key]
                    break
                trail.append(node_key)
                if node_key in wrappers:
                    found = wrappers[node_key]
                    break
                node_key = graph.nodes[node_key].parent_key
            for t in trail:
                verdict[t] = found
            if found is not None:
                parts[k] = found
        return parts

    def _through_wrapper(self, start: Key, end: Key, adj: dict[Key, list[Key]],
                         parts: dict[Key, Key]) -> bool:
        """Whether a path leads from ``start`` to ``end`` through wrapper parts only."""
        todo = [x for x in adj.get(start, ()) if x in parts or x == end]
        seen = set(todo)
        while todo:
            x = todo.pop()
            if x == end:
                return True
            for y in adj.get(x, ()):
                if y not in seen and (y in parts or y == end):
                    seen.add(y)
                    todo.append(y)
        return False

    def _build_edges(self) -> None:
        """Pair the edges: equal ends on both sides (``same``), else ``added`` / ``removed``;
        an edge whose ends are paired and joined on the other side through a wrapper's parts
        (the LoRA layer between ``q_proj``'s op and its output) is ``wrapped``: the wrapper
        took the wrapped module's place in the data flow.  The edges of a wrapper's parts are
        listed in :attr:`wrapper_edges`."""
        m = self.matching
        parts = self._parts
        adj: dict[str, dict[Key, list[Key]]] = {"a": {}, "b": {}}
        for tag, graph in (("a", self.a), ("b", self.b)):
            if parts[tag]:
                for u, v in graph.links:
                    adj[tag].setdefault(u, []).append(v)
        b_edges = self.b.links
        hit: set[tuple[Key, Key]] = set()
        for u, v in self.a.links:
            mu, mv = m.pairs.get(u), m.pairs.get(v)
            if mu is not None and mv is not None and (mu, mv) in b_edges:
                self.edges.append(((u, v), (mu, mv), "same"))
                hit.add((mu, mv))
            elif mu is not None and mv is not None and parts["b"] \
                    and self._through_wrapper(mu, mv, adj["b"], parts["b"]):
                self.edges.append(((u, v), None, "wrapped"))
            else:
                self.edges.append(((u, v), None, "removed"))
        for u, v in b_edges:
            if (u, v) in hit:
                continue
            mu, mv = m.back.get(u), m.back.get(v)
            if mu is not None and mv is not None and parts["a"] \
                    and self._through_wrapper(mu, mv, adj["a"], parts["a"]):
                self.edges.append((None, (u, v), "wrapped"))
            else:
                self.edges.append((None, (u, v), "added"))
        for i, (ea, eb, status) in enumerate(self.edges):
            tag, edge = ("a", ea) if status == "removed" else ("b", eb)
            if status in ("added", "removed") and edge is not None \
                    and (edge[0] in parts[tag] or edge[1] in parts[tag]):
                self.wrapper_edges.add(i)

    # ------------------------------------------------------------ reading
    def entry_of(self, side: str, key: Key) -> Optional[Entry]:
        """The entry holding ``key`` of side ``"a"`` or ``"b"``, if any."""
        i = (self.index_a if side == "a" else self.index_b).get(key)
        return self.entries[i] if i is not None else None

    def counts(self, kind: Optional[str] = None) -> dict[str, int]:
        """Entries per status (of one ``kind`` if given), every status listed."""
        out = dict.fromkeys(STATUSES, 0)
        for e in self.entries:
            if kind is None or e.kind == kind:
                out[e.status] += 1
        return out

    def changed_entries(self) -> list[Entry]:
        """Every entry whose status is not ``same``."""
        return [e for e in self.entries if e.status != "same"]

    def __bool__(self) -> bool:
        return any(e.status != "same" for e in self.entries) or any(s != "same" for *_, s in self.edges)

    def __len__(self) -> int:
        return len(self.changed_entries())

    def mirrored(self) -> list[tuple[Key, Key, str, str]]:
        """``(a, b, kind, status)`` of every entry as the reverse diff would state it (a test
        helper: ``diff(b, a)``'s entries, as a set, equal ``diff(a, b).mirrored()``'s)."""
        return [(e.b, e.a, e.kind, _MIRROR.get(e.status, e.status)) for e in self.entries]

    def summary(self) -> str:
        """An indented tree of what changed, repeated changes folded into one line."""
        from .text import summary_text
        return summary_text(self)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        c = self.counts()
        return (f"<Diff {self.a.name!r} -> {self.b.name!r}: "
                + ", ".join(f"{n} {s}" for s, n in c.items() if n and s != "same") + ">")

    def to_dict(self) -> dict[str, Any]:
        """The diff as JSON data (see :meth:`to_json`)."""
        from .text import patterns
        by_kind = {k: self.counts(k) for k in ("layer", "op", "param", "tensor")}
        edge_counts = dict.fromkeys(("same", "added", "removed", "wrapped"), 0)
        for *_, s in self.edges:
            edge_counts[s] += 1
        edge_counts["inside_wrappers"] = len(self.wrapper_edges)
        return {
            "format": DIFF_FORMAT, "version": DIFF_VERSION, "a": self.a.name, "b": self.b.name,
            "summary": {**self.counts(), "differ": bool(self), "by_kind": by_kind, "edges": edge_counts},
            "notes": list(self.notes),
            "patterns": patterns(self),
            "nodes": [e.to_dict() for e in self.entries],
            "edges": [{"a": list(ea) if ea else None, "b": list(eb) if eb else None, "status": s,
                       **({"wrapper": True} if i in self.wrapper_edges else {})}
                      for i, (ea, eb, s) in enumerate(self.edges)],
        }

    def to_json(self, path: Optional[str] = None, indent: Optional[int] = 1) -> str:
        """The diff as JSON text (written to ``path`` too, if given).

        The document: ``{"format": "torchrecorder.diff", "version": 1, "a": name, "b": name,
        "summary": {status: count, ..., "differ": bool, "by_kind": {kind: {status: count}},
        "edges": {"same", "added", "removed", "wrapped", "inside_wrappers"}}, "notes": [...],
        "patterns": [{"pattern", "status", "count", "text"}], "nodes": [{"a": key|null,
        "b": key|null, "kind", "status", "via"?, "changes"?: {attr: [old, new]}, "note"?,
        "ambiguous"?, "part_of"?: {"a": key, "b": key}, "rollup"?}], "edges": [{"a": [u, v]|null,
        "b": [u, v]|null, "status", "wrapper"?: true}]}``.
        """
        # a lone surrogate (from a name) becomes a \uXXXX escape: it reads back as the same text
        text = utf8_safe(json.dumps(self.to_dict(), indent=indent, ensure_ascii=False))
        if path is not None:
            from .._files import write_atomically
            write_atomically(str(path), text.encode("utf-8"))
        return text


def _renumbered(x: str, y: str) -> str:
    """``"renumbered +1"`` when the names differ only in one number, else ``""``."""
    nx, ny = re.findall(r"\d+", x), re.findall(r"\d+", y)
    if re.sub(r"\d+", "#", x) != re.sub(r"\d+", "#", y) or len(nx) != len(ny):
        return ""
    shifts = [int(v) - int(u) for u, v in zip(nx, ny, strict=True) if u != v]
    return f"renumbered {shifts[0]:+d}" if len(shifts) == 1 else ""
