"""Draw a diff: one union graph through the project's Graphviz renderer and styler.

:func:`union_graph` builds a plain :class:`~torchrecorder.graph.Graph` holding every pair once
and every unpaired node of either side; :class:`DiffRenderer` (a
:class:`~torchrecorder.renderer.GraphvizRenderer`) draws it with :class:`DiffStyler`, which
colours each node by its status (Okabe-Ito hues, colour-blind safe) and marks it
(``+ − ~ ↦``) so that the picture reads in black and white.  The views ``"a"`` and ``"b"`` lay out
every node of the union (``style=invis`` for what the view does not hold), so the three
pictures line up, but draw each pair from the view's own graph: its labels, counts and shapes
are that side's.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Optional

import graphviz

from .._text import html_text
from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode, OrderedSet, ScopeNode, TensorNode
from ..projection.drawn import default_expanded
from ..renderer.base import DEFAULT_RENDER_DEPTH
from ..renderer.graphviz import GraphvizRenderer, GraphvizStyler
from ..renderer.labels import count_str, stacked_label
from .model import MARKS, Diff, Entry
from .text import describe, flag_lines, rollup_text

__all__ = ["DIFF_STYLES", "VIEWS", "DiffRenderer", "DiffStyler", "UnionGraph", "make_diff_dot",
           "union_graph"]

#: the drawings of one diff: both graphs in one, or the part of each graph
VIEWS = ("union", "a", "b")
#: colours of each status (Okabe-Ito): border, fill, and the line style marking it
DIFF_STYLES: dict[str, dict[str, str]] = {
    "same": {"color": "#9a9a9a", "fillcolor": "#f4f4f4", "fontcolor": "#5a5a5a"},
    "added": {"color": "#009E73", "fillcolor": "#d4efe5", "fontcolor": "black", "penwidth": "2.2"},
    "removed": {"color": "#D55E00", "fillcolor": "#fbe2d3", "fontcolor": "black", "penwidth": "2.2",
                "dash": "dashed"},
    "changed": {"color": "#E69F00", "fillcolor": "#fdf0d2", "fontcolor": "black", "penwidth": "2.2"},
    "renamed": {"color": "#0072B2", "fillcolor": "#dcecf8", "fontcolor": "black", "penwidth": "2.2"},
    "wrapped": {"color": "#CC79A7", "fillcolor": "#f6e3ee", "fontcolor": "black", "penwidth": "2.2"},
    # a wrapper and its parts: the wrapped module's hue, a paler fill and a thinner line
    "wrapper": {"color": "#CC79A7", "fillcolor": "#fbf2f7", "fontcolor": "black", "penwidth": "1.4"},
}
#: edge statuses from the most telling down: the status of a run of edges drawn as one
_TELLING = ("removed", "added", "wrapper-a", "wrapper-b", "wrapped-a", "wrapped-b")
_WORDS = {"added": "added", "removed": "removed", "changed": "changed", "renamed": "renamed / moved",
          "wrapped": "wrapped", "wrapper": "part of a wrapper", "same": "unchanged"}


class UnionGraph(Graph):
    """The graph of a diff's drawing: a :class:`~torchrecorder.graph.Graph` whose edges each
    have a status (``edge_status``: edge -> ``same``, ``added``, ``removed``, ``wrapped-a``
    / ``wrapped-b``: the side's edge whose place a wrapper's parts took on the other side, or
    ``wrapper-a`` / ``wrapper-b``: an edge of a wrapper's parts, found on that side only)."""

    def __init__(self, name: str = "net") -> None:
        super().__init__(name)
        self.edge_status: dict[tuple[Key, Key], str] = {}


def union_graph(d: Diff, view: str = "union") -> tuple[UnionGraph, dict[Key, Entry]]:
    """One graph holding every entry of ``d`` once and the edges of both; with the entry of
    each of its keys.

    A pair is drawn from the second graph's node in the union (and in view ``"b"``), from the
    first graph's in view ``"a"``: so each view's labels, parameter counts and shapes are its
    own side's.  Keys are the second graph's; a node found only in the first keeps its key
    behind a prefix (``a/``, or ``aa/``, ... : the first that begins none of the second graph's
    keys), so no key of one side can take the place of a key of the other.

    Raises:
        ValueError: ``view`` is not one of :data:`VIEWS`.
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(map(repr, VIEWS))}, got {view!r}")
    name = d.b.name if d.b.name == d.a.name else f"{d.a.name} → {d.b.name}"
    g = UnionGraph({"union": name, "a": d.a.name, "b": d.b.name}[view])
    b_keys = [str(k) for k in d.b.nodes if k is not None]
    prefix = "a/"
    while any(k.startswith(prefix) for k in b_keys):
        prefix = "a" + prefix
    ukeys: list[Key] = [e.b if e.b is not None else f"{prefix}{e.a}" for e in d.entries]
    info: dict[Key, Entry] = {}
    copies: list[BaseNode] = []
    for i, e in enumerate(d.entries):
        from_a = e.b is None or (view == "a" and e.a is not None)
        src = d.a.nodes[e.a] if from_a else d.b.nodes[e.b]
        node = copy.copy(src)
        node.key = ukeys[i]
        node.fn = None
        node.parent_key = ukeys[e.parent] if e.parent is not None else None
        if isinstance(node, LayerNode):
            node.subnet_keys = OrderedSet()
            # the prefix the matcher stripped (peft's base_model.model.) is left out of titles
            side = d.matching.a if from_a else d.matching.b
            prefix = side.prefix
            if prefix and node.path.startswith(prefix):
                node.path = node.path[len(prefix):]
            elif prefix and node.path + "." == prefix:  # the module the prefix names: the model
                node.path, node.name = "", side.graph.name
        copies.append(node)
        info[node.key] = e
        g.nodes[node.key] = node
        g.keys.reserve(str(node.key))
    g.nodes.adopt(copies)
    for node in copies:
        parent = g.nodes[node.parent_key]
        if isinstance(parent, ScopeNode):
            parent.subnet_keys.add(node.key)
    # depths from the top down (a node found only in the first graph may come before its parent)
    todo: list[tuple[Key, int]] = [(k, 0) for k in g.context.subnet_keys]
    while todo:
        k, depth = todo.pop()
        node = g.nodes[k]
        node.depth = depth
        if isinstance(node, LayerNode):
            todo.extend((c, depth + 1) for c in node.subnet_keys)
    a_to_u = {e.a: ukeys[i] for i, e in enumerate(d.entries) if e.a is not None}
    edge_status = g.edge_status
    for i, (ea, eb, status) in enumerate(d.edges):
        u, v = (eb[0], eb[1]) if eb is not None else (a_to_u[ea[0]], a_to_u[ea[1]])  # type: ignore[index]
        if status == "wrapped":  # drawn in the view of the side that has it, and laid out in all
            status = "wrapped-a" if eb is None else "wrapped-b"
        elif i in d.wrapper_edges:  # a wrapper's own edge: styled as the wrapper, not as added
            status = "wrapper-a" if eb is None else "wrapper-b"
        if u != v and (u, v) not in edge_status:
            edge_status[(u, v)] = status
            g.links.add((u, v))
    return g, info


class DiffStyler(GraphvizStyler):
    """A :class:`~torchrecorder.renderer.GraphvizStyler` colouring nodes by their diff status.

    Args:
        info: union key -> :class:`~torchrecorder.diff.Entry` (from :func:`union_graph`).
        view: ``"union"``, ``"a"`` or ``"b"``: in ``"a"`` what only the second graph holds is
            invisible (and the other way round), and no ``old → new`` line or roll-up of
            what the view does not hold is written.
        **styler_args: as for :class:`~torchrecorder.renderer.GraphvizStyler`.
    """

    def __init__(self, info: Optional[dict[Key, Entry]] = None, view: str = "union",
                 diff: Optional[Diff] = None, **styler_args: Any) -> None:
        super().__init__(**styler_args)
        if view not in VIEWS:
            raise ValueError(f"view must be one of {', '.join(map(repr, VIEWS))}, got {view!r}")
        self.info = info or {}
        self.view = view
        self.diff = diff
        self._drawn_memo: Optional[dict[tuple[Key, Key], str]] = None

    def _hidden(self, e: Optional[Entry]) -> bool:
        if e is None or self.view == "union":
            return False
        return (e.a is None) if self.view == "a" else (e.b is None)

    @staticmethod
    def _side(e: Optional[Entry]) -> str:
        if e is None or (e.a is not None and e.b is not None):
            return "side-both"
        return "side-a" if e.a is not None else "side-b"

    def _paint(self, attrs: dict[str, str], e: Optional[Entry], cluster: bool = False) -> dict[str, str]:
        status = e.status if e is not None else "same"
        if e is not None:  # for the HTML view: the entry and its status (no effect on the layout)
            attrs["id"] = f"d{e.index}"
            attrs["class"] = f"diff-{status} {self._side(e)}"
        if e is not None and e.status == "same" and cluster and self._own_rollup(e):
            status = "changed"
        look = DIFF_STYLES[status]
        attrs.update({k: v for k, v in look.items() if k != "dash"})
        style = [s for s in attrs.get("style", "").split(",") if s and s not in ("dashed", "bold", "invis")]
        if "dash" in look:
            style.append("dashed")
        if cluster and "filled" not in style:
            attrs.pop("fillcolor", None)
        if self._hidden(e):
            style = ["invis"]
            attrs["fontcolor"] = "transparent"  # a cluster's label too
        attrs["style"] = ",".join(style)
        return attrs

    def _marked(self, label: str, e: Optional[Entry], kind: str) -> str:
        """``label`` (HTML-like) with the status mark in front and what changed below."""
        if e is None or not (label.startswith("<") and label.endswith(">")):
            return label
        inner = str(label)[1:-1]  # the markup (an HtmlLabel's slices read its text)
        mark = MARKS[e.status] if e.status != "same" else ""
        if e.note.startswith("wrapper of"):
            mark = MARKS["wrapped"]
        below: list[str] = []
        if self.view != "union":
            pass  # a view shows its own side: what changed (old → new) is the union's to say
        elif e.status != "same" and self.diff is not None and e.kind == "layer":
            text = describe(self.diff, e)
            if e.status in ("changed", "renamed", "wrapped") and text:
                for part in text.split(", ")[:3]:
                    below.append(f'<FONT POINT-SIZE="8">{self._text(part)}</FONT>')
        elif e.status == "changed":
            for old, new in list(e.changes.values())[:2]:
                below.append(f'<FONT POINT-SIZE="7">{self._text(f"{old} → {new}")}</FONT>')
        if inner.startswith("<TABLE") and inner.endswith("</TABLE>"):
            # stacked lines (table rows): the mark goes into the first cell, the changes below
            if mark:
                cell = inner.index(">", inner.index("<TD")) + 1
                inner = f"{inner[:cell]}<B>{html_text(mark)}</B> {inner[cell:]}"
            rows = "".join(f"<TR><TD>{line}</TD></TR>" for line in below)
            return f"<{inner[: -len('</TABLE>')]}{rows}</TABLE>>"
        first = inner if not mark else f"<B>{html_text(mark)}</B> {inner}"
        return stacked_label(self._row_gap(kind), [first, *below])

    def _own_counts(self, label: str, node: BaseNode, e: Optional[Entry]) -> str:
        """``label`` with a paired module's parameter count as each side has it in the union:
        ``8.1k params → 11.4k params`` (a view draws its own side's node: its own count)."""
        if e is None or e.a is None or e.b is None or self.diff is None or not isinstance(node, LayerNode) \
                or self.view != "union":
            return label
        x = self.diff.a.nodes.get(e.a)
        if not isinstance(x, LayerNode) or x.num_params_total == node.num_params_total:
            return label
        ours = f"{count_str(node.num_params_total)} params" if node.num_params_total != 1 else "1 param"
        if ours not in label:
            return label
        old = f"{count_str(x.num_params_total)} params" if x.num_params_total != 1 else "1 param"
        new = ours
        label = str(label)  # the markup (an HtmlLabel's slices read its text)
        at = label.index(ours)
        colours = re.findall(r'<FONT[^>]*COLOR="([^"]+)"', label[:at])
        shown = colours[-1] if colours else "black"
        runs = "".join(f'<FONT COLOR="{shown}">{html_text(t)}</FONT>' for t in (old, " → ", new))
        return label[:at] + runs + label[at + len(ours):]

    def _own_rollup(self, e: Entry) -> dict[str, int]:
        """The roll-up as this view has it: view ``"a"`` counts nothing only the second graph
        holds (added, the parts of its wrappers), ``"b"`` nothing only the first holds."""
        other = {"a": "b", "b": "a"}.get(self.view)
        left_out = e.one_sided.get(other, {}) if other else {}
        own = {s: n - left_out.get(s, 0) for s, n in e.rollup.items()}
        return {s: n for s, n in own.items() if n > 0}

    def style_node(self, node: BaseNode) -> dict[str, str]:
        """The styler's attributes, coloured and marked by the node's status."""
        attrs = super().style_node(node)
        e = self.info.get(node.key)
        attrs["label"] = self._own_counts(self._marked(attrs["label"], e, self.kind_of(node)), node, e)
        return self._paint(attrs, e)

    def style_cluster(self, node: LayerNode) -> dict[str, str]:
        """The cluster's attributes, coloured by its status, its label carrying the roll-up."""
        attrs = super().style_cluster(node)
        e = self.info.get(node.key)
        if "label" in attrs:
            attrs["label"] = self._own_counts(attrs["label"], node, e)
        if e is not None:
            extra = []
            if e.note.startswith("wrapper of"):
                extra.append(f"{MARKS['wrapped']} wrapper")
            elif e.status != "same":
                extra.append(f"{MARKS[e.status]} {_WORDS[e.status]}")
            rollup = self._own_rollup(e)
            if rollup:
                extra.append(rollup_text(rollup))
            label = str(attrs.get("label", ""))
            if extra and label.endswith("</TABLE>>"):
                row = (f'<TR><TD ALIGN="LEFT" COLSPAN="2"><B>{self._text("  ".join(extra))}</B>'
                       "</TD></TR>")
                attrs["label"] = label[: -len("</TABLE>>")] + row + "</TABLE>>"
        return self._paint(attrs, e, cluster=True)

    def _drawn_status(self) -> dict[tuple[Key, Key], str]:
        """Drawn edge -> the status of the recorded edges it stands for (``same`` unless they
        all have one status); made once per drawing.  A drawn edge may run through nodes
        left out of the drawing (a tensor written on the edge, ``view · transpose``): its
        status along such a run is the most telling of the run's edges."""
        got = self._drawn_memo
        if got is not None:
            return got
        raw = getattr(self.rec, "edge_status", {})
        renderer = self.renderer
        seen: dict[tuple[Key, Key], set[str]] = {}
        outs: dict[Key, list[tuple[Key, str]]] = {}
        nodes = self.rec.nodes if self.rec is not None else {}
        joined = renderer is not None and not renderer.tensor_nodes

        # the ends of the drawn edges: a node that is none (an operation written on an edge,
        # view · transpose) is left out, and the edge runs across it
        ends = {n.key for edge in renderer.drawn_edges() for n in edge} if renderer is not None else None

        def drawn(k: Key) -> Key:
            n = nodes.get(k)
            if joined and type(n) is TensorNode and not n.role:
                return None  # a tensor written on the edge: the edge is joined across it
            dk = renderer.drawn_key(k) if renderer is not None else k
            return dk if ends is None or dk in ends else None

        starts: list[tuple[Key, Key, str]] = []  # drawn source, first node left out, status
        for (u, v), status in raw.items():
            du, dv = drawn(u), drawn(v)
            if du is None:
                outs.setdefault(u, []).append((v, status))
            elif dv is None:
                starts.append((du, v, status))
            elif du != dv:
                seen.setdefault((du, dv), set()).add(status)
        for du, first, status in starts:  # runs through nodes left out, to the next drawn node
            todo, visited = [(first, status)], {(first, status)}
            while todo:
                k, st = todo.pop()
                for v, s2 in outs.get(k, ()):
                    both = (st, s2)
                    st2 = next((s for s in _TELLING if s in both), "same")
                    dv = drawn(v)
                    if dv is not None:
                        if du != dv:
                            seen.setdefault((du, dv), set()).add(st2)
                    elif (v, st2) not in visited:
                        visited.add((v, st2))
                        todo.append((v, st2))
        memo = {k: (next(iter(v)) if len(v) == 1 else "same") for k, v in seen.items()}
        self._drawn_memo = memo
        return memo

    def _edge(self, attrs: dict[str, str], fnode: BaseNode, tnode: BaseNode) -> dict[str, str]:
        status = self._drawn_status().get((fnode.key, tnode.key), "same")
        ends = [self.info.get(fnode.key), self.info.get(tnode.key)]
        if status.startswith("wrapped-"):
            # one side's edge whose place a wrapper's parts took on the other: drawn plainly in
            # that side's view, laid out (invisible) in the others, where the wrapper's path shows
            attrs["color"] = "#8a8a8a"
            attrs["style"] = "invis" if self.view != status[-1] else ",".join(
                s for s in attrs.get("style", "").split(",") if s and s not in ("dashed", "invis"))
            attrs["class"] = f"diff-edge-wrapped side-{status[-1]}"
            return attrs
        one_sided = [e for e in ends if e is not None and e.status in ("added", "removed", "wrapper")]
        if status == "same" and one_sided:
            end = one_sided[0]
            status = end.status if end.status != "wrapper" else "wrapper-" + ("a" if end.b is None else "b")
        if status.startswith("wrapper-"):
            # an edge of a wrapper's parts: the wrapper's colour, drawn in its own side's views
            look = DIFF_STYLES["wrapper"]
            attrs["color"] = look["color"]
            hidden = self.view not in ("union", status[-1]) or any(self._hidden(e) for e in ends)
            attrs["style"] = "invis" if hidden else ",".join(
                s for s in attrs.get("style", "").split(",") if s and s not in ("dashed", "invis"))
            attrs["class"] = f"diff-edge-wrapper side-{status[-1]}"
            return attrs
        look = DIFF_STYLES[status]
        attrs["color"] = look["color"] if status != "same" else "#8a8a8a"
        style = [s for s in attrs.get("style", "").split(",") if s and s not in ("dashed", "invis")]
        if status == "removed":
            style.append("dashed")
        hidden = (self.view == "a" and status == "added") or (self.view == "b" and status == "removed")
        attrs["style"] = "invis" if hidden or any(self._hidden(e) for e in ends) else ",".join(style)
        side = "side-b" if status == "added" else ("side-a" if status == "removed" else "side-both")
        attrs["class"] = f"diff-edge-{status} {side}"
        return attrs

    def style_edge(self, fnode: BaseNode, tnode: BaseNode) -> dict[str, str]:
        """The edge coloured by its status (dashed when removed)."""
        return self._edge(super().style_edge(fnode, tnode), fnode, tnode)

    def style_tensor_edge(self, fnode: BaseNode, tnode: BaseNode, tensor: Any) -> dict[str, str]:
        """The edge carrying ``tensor``, coloured by its status."""
        return self._edge(super().style_tensor_edge(fnode, tnode, tensor), fnode, tnode)


class DiffRenderer(GraphvizRenderer):
    """A :class:`~torchrecorder.renderer.GraphvizRenderer` for a union graph: by default only
    modules holding changes open, and a legend is drawn.

    Args:
        rec: the union graph (:func:`union_graph`).
        render_depth: as for :class:`~torchrecorder.renderer.GraphvizRenderer`.
        changes_only: open only the modules that hold changes (within ``render_depth``).
        legend: draw the legend of the statuses.
        **kwargs: as for :class:`~torchrecorder.renderer.GraphvizRenderer`.
    """

    def __init__(self, rec: Graph, render_depth: Optional[int] = DEFAULT_RENDER_DEPTH, *,
                 changes_only: bool = True,
                 legend: bool = True, **kwargs: Any) -> None:
        kwargs.setdefault("styler_cls", DiffStyler)
        super().__init__(rec, render_depth, **kwargs)
        self.changes_only = changes_only
        self.legend = legend

    def is_expanded(self, node: BaseNode) -> bool:
        """The default rule, and (with ``changes_only``) only modules holding changes.

        With ``changes_only``, a leaf module (one box in a model's drawing) that holds changes
        and ran more than one operation opens too, so that what changed in it shows: the
        ``mul`` by its mask that ``torch.nn.utils.prune`` adds to a pruned ``Linear``."""
        if not self.changes_only or node.key is None:
            return super().is_expanded(node)
        info = getattr(self.styler, "info", {})
        e = info.get(node.key)
        if e is None or not e.rollup:
            return False
        return super().is_expanded(node) or default_expanded(
            node, self.render_depth, self.rec.nodes, expand_leaves=True)

    def finish(self, g: graphviz.Digraph) -> graphviz.Digraph:
        """Inputs first, outputs last, and the legend (the same in every view), with the
        parameters that were only frozen or unfrozen named under it (they change no box)."""
        g = super().finish(g)
        if self.legend:
            rows = []
            for status in ("added", "removed", "changed", "renamed", "wrapped", "wrapper", "same"):
                look = DIFF_STYLES[status]
                mark = MARKS[status] if status != "same" else "="
                rows.append(f'<TR><TD BGCOLOR="{look["fillcolor"]}" COLOR="{look["color"]}" BORDER="1">'
                            f'<B>{html_text(mark)}</B></TD><TD ALIGN="LEFT">{_WORDS[status]}</TD></TR>')
            # parameters whose only change is requires_grad change no box: said under the legend
            diff = getattr(self.styler, "diff", None)
            for line in flag_lines(diff) if diff is not None else ():
                rows.append(f'<TR><TD COLSPAN="2" ALIGN="LEFT">{html_text(line.strip())}</TD></TR>')
            table = ('<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2" CELLPADDING="2">'
                     + "".join(rows) + "</TABLE>>")
            g.body.append(f'\t"diff legend" [label={table} shape=plaintext fontsize=9 '
                          f'fontname="Helvetica,Arial,sans-serif"]\n')
        return g


def make_diff_dot(d: Diff, view: str = "union", render_depth: Optional[int] = DEFAULT_RENDER_DEPTH, *,
                  changes_only: bool = True, legend: bool = True, fold_repeats: Any = False,
                  **styler_args: Any) -> graphviz.Digraph:
    """The Graphviz drawing of a diff (what :func:`torchrecorder.make_dot` returns for one).

    Args:
        d: the :class:`~torchrecorder.diff.Diff`.
        view: ``"union"`` (both graphs in one), ``"a"`` or ``"b"``: the union's nodes laid
            out with only that graph's visible, each drawn with that graph's own labels,
            counts and shapes, so the three pictures line up.
        render_depth: modules deeper than this stay closed (``None``: none does).  Left to
            its default, it is lowered to keep the drawing within the drawing budget
            (:mod:`torchrecorder.projection.budget`, ``max_nodes``), as for a model's drawing.
        changes_only: open only modules that hold changes (the default).
        legend: draw the legend (``False`` for a paper).
        fold_repeats: as for :func:`torchrecorder.make_dot` (off by default: blocks differ).
        **styler_args: drawing and styler options, as for :func:`torchrecorder.make_dot`.
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(map(repr, VIEWS))}, got {view!r}")
    g, info = union_graph(d, view)
    renderer = DiffRenderer(g, render_depth, changes_only=changes_only, legend=legend,
                            fold_repeats=fold_repeats, info=info, view=view, diff=d, **styler_args)
    return renderer.render()
