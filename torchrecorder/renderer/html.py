"""One self-contained, interactive HTML page of a recording: open and close modules in the browser.

:class:`HtmlRenderer` is a :class:`~torchrecorder.renderer.graphviz.GraphvizRenderer`
that, instead of one DOT text, writes the module hierarchy, the finest drawn
nodes and edges and each element's Graphviz attribute text (made by the same
styler hooks, so the page looks like the static figure) into a page.  The
page's script applies the reader's open/closed state (edges re-attached to the
nearest visible ancestor, folded runs of blocks and Python loops drawn once,
each unfolded and folded again by the reader), builds the DOT of that state and
lays it out with Graphviz compiled to WebAssembly (``viz-global.js`` of
``@viz-js/viz``, vendored in ``_vendor/``), in a Web Worker made from the
inlined script (the page answers meanwhile; a layout can be cancelled, and
one that fails leaves the view drawn before).  Every view is held to the
drawing budget of ``max_nodes`` (:func:`~torchrecorder.projection.budget.budget_limits`,
carried in the page): what would exceed it is drawn with less, and the page
says what.  Everything is inlined: the page makes no network request.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Container, Iterable
from typing import Any, Optional, Union

from .._files import write_atomically
from .._text import utf8_safe
from ..errors import GraphError
from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode, OpNode, Source, TensorNode
from ..projection import FoldPlan, FoldRepeats, LoopNode, Projection, iterations_text
from ..projection.backward import backward_view
from ..projection.budget import VIEW_DEPTH, MaxNodes, budget_limits
from ._cluster_titles import cluster_attr_list, title_attrs
from ._edge_paths import label_node_attrs, via_point_attrs
from ._html_cost import colourings, page_colouring, recorded_cost
from ._html_edge_now import EdgeNow, first_holder, tensors_between
from ._html_fanout import fanout_marks
from ._html_info import boundary_tensors, lift_data, panel_info
from ._html_loops import loop_rows
from ._html_made import MadeEdges, made_edges
from ._html_runs import run_carried_rows
from ._html_through import holders, through_rows
from ._once import render_once
from .backward import BackwardRenderer
from .base import ALL_DEPTHS
from .graphviz import GraphvizRenderer, GraphvizStyler
from .html_page import client_html, page_html, provider_html, script_json
from .labels import run_title
from .notebook_viewer import SESSION, current_cell
from .sourcelines import DEFAULT_EDITOR_URL, check_editor_url, source_info
from .webfonts import web_fontname

__all__ = ["BackwardHtmlRenderer", "HtmlPage", "HtmlRenderer", "make_html", "page_html", "script_json"]

#: node kinds as numbers in the page's data
_KINDS = {"layer": 0, "op": 1, "tensor": 2, "io": 3, "param": 4}
#: what a page's text escapes inside a single-quoted attribute (one pass: nothing escaped twice)
_SRCDOC_ESCAPES = str.maketrans({"&": "&amp;", "'": "&#39;", "<": "&lt;", ">": "&gt;"})

#: the depth the page opens at by default (within the drawing budget)
HTML_DEFAULT_DEPTH = VIEW_DEPTH


class HtmlPage:
    """An HTML page (its text in :attr:`text`) that shows itself in Jupyter.

    In a notebook (JupyterLab, classic Notebook, VS Code) the page is shown
    inline in an ``<iframe srcdoc=...>``, sandboxed to run its own scripts and
    downloads only.  The first view of a kernel session carries the viewer
    (about 1.4 MB); a later one, shown from another cell, carries only its data
    and borrows that viewer in the browser (see
    :mod:`~torchrecorder.renderer.html_page`), or says in its frame that the
    first view is not on the page.  :meth:`save` writes the whole page to a
    file that opens from disk.

    Attributes:
        text: the whole page, one self-contained HTML document.
        name: the recording's name (the default file name of downloads).
        height: the height of the inline view in notebooks, in CSS pixels.
        share_viewer: whether notebook views share one viewer (a class
            attribute: set ``HtmlPage.share_viewer = False`` for every view to
            carry its own, as where outputs are cleared or shown apart).
    """

    share_viewer: bool = True

    def __init__(self, text: str, name: str, height: int = 640, *,
                 data: Optional[dict[str, Any]] = None) -> None:
        self.text = text
        self.name = name
        self.height = height
        self._data = data

    def save(self, path: Union[str, os.PathLike[str]]) -> str:
        """Write the page to ``path`` (UTF-8, atomically, as every file torchrecorder writes)
        and return the path as a string."""
        path = os.fspath(path)
        write_atomically(path, self.text.encode("utf-8"))
        return path

    def notebook_page(self, carries_viewer: bool) -> str:
        """The document a notebook view shows: the whole page sharing its viewer, or (when
        ``carries_viewer`` is false) the data and a loader of a shared viewer.  A page made
        from text alone is always shown whole."""
        if self._data is None:
            return self.text
        if carries_viewer:
            return provider_html(self._data, self.name)
        return client_html(self._data, self.name)

    def _repr_html_(self) -> str:
        """The page inline in a notebook output: an iframe holding it as ``srcdoc``."""
        carries = True
        if self.share_viewer and self._data is not None:
            carries = SESSION.carries_viewer(current_cell())
        # single-quoted: the page's many double quotes stay one byte each
        doc = self.notebook_page(carries).translate(_SRCDOC_ESCAPES)
        return (f"<iframe srcdoc='{doc}' "
                f'title="{html.escape(utf8_safe(self.name), quote=True)}" '
                f'style="width:100%;height:{int(self.height)}px;border:1px solid #ccc" '
                'sandbox="allow-scripts allow-downloads"></iframe>')

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"<HtmlPage {self.name!r}: {len(self.text.encode('utf-8')):,} bytes>"


class HtmlRenderer(EdgeNow, GraphvizRenderer):
    """Render a graph into one interactive HTML page (see the module docstring).

    Arguments as :class:`~torchrecorder.renderer.graphviz.GraphvizRenderer`;
    ``render_depth`` (default 1) is the depth the page opens at, and
    ``fold_repeats`` says which runs of identical blocks and which Python loops
    (runs of identical iterations of operations, drawn as a group ``loop ×N``
    as in :func:`~torchrecorder.make_dot`) start folded; each can be unfolded
    in the page, and folded again.  ``height`` is the height of the notebook
    view.  The detail panel shows the line of code of a module call or an
    operation (:attr:`~torchrecorder.nodes.BaseNode.source`, read when the page
    is built) with a link that opens it in an editor: ``editor_url`` is its
    template, ``{path}`` (absolute, starting with ``/``) and ``{line}`` filled
    in; VS Code's ``"vscode://file{path}:{line}"`` by default, for instance
    ``"pycharm://open?file={path}&line={line}"`` for PyCharm, ``None`` for no link.

    The styler's ``style_node``, ``style_cluster``, ``style_repeated``,
    ``style_edge`` and ``style_tensor_edge`` make every attribute the page
    uses; :meth:`is_expanded` says which layers open first, and the same rule
    at an unlimited depth says which layers can open at all.  The first view,
    which the drawing budget counts, has its runs and loops folded: a model
    whose loops make thousands of operations opens at the depth asked for
    when its folded drawing fits the budget.
    """

    colour_start: Optional[str] = None  # the cost the Colour menu colours by when the page opens
    colour_menu: bool = True  # False: a colouring drawn into every view, the menu's left out

    def __init__(self, rec: Graph, render_depth: Optional[int] = HTML_DEFAULT_DEPTH,
                 styler_cls: Optional[type[GraphvizStyler]] = None, *,
                 fold_repeats: FoldRepeats = "auto", tensor_nodes: bool = False,
                 expand_leaves: bool = False, all_ops: bool = False,
                 direction: Optional[str] = None, height: int = 640, max_nodes: MaxNodes = "auto",
                 editor_url: Optional[str] = DEFAULT_EDITOR_URL, **styler_args: Any) -> None:
        super().__init__(rec, render_depth, styler_cls, fold_repeats=fold_repeats, tensor_nodes=tensor_nodes,
                         expand_leaves=expand_leaves, all_ops=all_ops, direction=direction,
                         max_nodes=max_nodes, **styler_args)
        if isinstance(height, bool) or not isinstance(height, int) or height < 100:
            raise ValueError(f"height must be an int >= 100 (CSS pixels), got {height!r}")
        self.height = height
        self.editor_url = check_editor_url(editor_url)
        # the page draws with the web fonts whose widths viz.js lays text out with
        for attrs in self.styler.styles.values():
            if "fontname" in attrs:
                attrs["fontname"] = web_fontname(attrs["fontname"])

    def render(self) -> HtmlPage:
        """The page: the data of :meth:`page_data` in the page template."""
        data = self.page_data()
        return HtmlPage(page_html(data, self.rec.name), self.rec.name, self.height, data=data)

    # ----------------------------------------------------------------- data
    def expandable(self) -> dict[Key, bool]:
        """Layer key -> whether :meth:`is_expanded` opens it at an unlimited depth."""
        saved = self._render_depth, self._projection
        self._render_depth, self._projection = ALL_DEPTHS, None
        try:
            return {k: bool(self.is_expanded(n)) for k, n in self.rec.nodes.items()
                    if isinstance(n, LayerNode)}
        finally:
            self._render_depth, self._projection = saved

    def page_data(self) -> dict[str, Any]:
        """Everything the page draws from, as JSON-ready data.

        ``nodes`` lists the module hierarchy and the nodes of the finest
        drawing (every module that can open, open; nothing folded) in
        preorder, each as ``[parent, kind, id, box, cluster, open, info]``
        (indices into ``strings`` and ``attrs``); ``edges`` the finest drawn
        edges as ``[from, to, attrs...]``, one attribute set per level the
        source may be shown at (itself, its parent's box, ...); ``runs`` the
        folded runs with the aliases of their later blocks; ``loops`` (when
        there are any) the folded Python loops (``_html_loops.loop_rows``:
        the layer that ran it, the nodes of its first and later iterations,
        what those stand for, the edges drawn only while it is unfolded), each
        followed by its cluster's attributes, its DOT id, its count of
        iterations and its summary (``mul · pow · add``), then the edges and
        nodes drawn only while it is folded (its carried edges among them:
        ``make_dot``'s, appended to ``edges``); ``budget`` the drawing budget every
        view is held to (:func:`~torchrecorder.projection.budget.budget_limits` of
        ``max_nodes``: ``None``, none); ``made`` the rows of ``edges`` out of a box holding a
        constant, drawn while it is not open (``_html_made``).  ``attrs``: label, other
        attributes, tooltip, and for an edge drawn as a chain, its label node's and points'.
        """
        rec = self.rec
        can_open = self.expandable()

        def opens(node: BaseNode) -> bool:
            return can_open.get(node.key, False)

        finest = Projection(rec, ALL_DEPTHS, opens, min_run=0, tensor_nodes=self.tensor_nodes,
                            all_ops=self.all_ops)
        first = self.projection  # the first view: render_depth, this renderer's rule
        strings = _Interner()
        attrs = _Interner()
        # the finest drawing with every run and loop folded, as make_dot works it out: its
        # edges and the nodes it draws are those of the page's folded loops
        folded = None if not self.fold_min else Projection(
            rec, ALL_DEPTHS, opens, min_run=self.fold_min, tensor_nodes=self.tensor_nodes,
            all_ops=self.all_ops)
        also = _folded_only(finest, folded)
        order, parents = _preorder(rec, finest, also)
        index = {node.key: i for i, node in enumerate(order)}
        dtypes = boundary_tensors(rec)
        lines: dict[Source, Optional[dict[str, Any]]] = {}  # one read and one link per line of code

        def where(src: Optional[Source]) -> Optional[dict[str, Any]]:
            if src is not None and src not in lines:
                lines[src] = source_info(src, self.editor_url)
            return None if src is None else lines[src]

        costs = recorded_cost(rec)
        rows: list[list[Any]] = []
        for node, parent in zip(order, parents, strict=True):
            kind = _KINDS.get(self.styler.kind_of(node), 1)
            box = attrs.add(self._parts(self.styler.style_node(node), "style_node", strings))
            cluster = -1
            is_open = 0
            if isinstance(node, LayerNode) and can_open.get(node.key, False):
                cluster = strings.add(self._cluster_text(self.styler.style_cluster(node), "style_cluster"))
                is_open = int(first.is_expanded(node))
            panel = panel_info(rec, node, dtypes, where(node.source), costs)
            found = self.styler.breaks.at(rec, node, inside=False) if isinstance(node, LayerNode) else []
            if found:  # torch.compile's graph breaks in the call (make_dot(rec, breaks=...))
                panel["breaks"] = [{"where": f"{os.path.basename(str(b.filename))}:{b.lineno}",
                                    "reason": self.styler.breaks.describe(b)} for b in found]
            info = strings.add(json.dumps(panel, ensure_ascii=False, separators=(",", ":")))
            rows.append([parent, kind, strings.add(self._quoted_id(node)), box, cluster, is_open, info])
        edges = self._edge_rows(finest, order, parents, index, attrs, strings)
        runs = self._run_rows(rec, opens, index, parents, edges, attrs, strings, folded, order)
        loops = self._loop_rows(rec, folded, also, order, parents, index, edges, attrs, strings)
        made = len(edges)  # then the edges out of boxes that hold a constant (_html_made)
        edges += self._edge_rows(made_edges(rec, finest, index), order, parents, index, attrs, strings)
        header = self.new_graph().source.rstrip()
        if not header.endswith("}"):
            raise GraphError(f"unexpected DOT header from new_graph(): {header[-40:]!r}")
        data = {
            "version": 1, "name": rec.name, "header": header[:-1], "fanout": self.max_constraining_fanout,
            "titles_entered": self.max_titles_entered, "folded": bool(self.fold_min),
            "strings": strings.items, "attrs": attrs.items, "nodes": rows, "edges": edges, "runs": runs,
            "budget": budget_limits(self._max_nodes),  # "ranked": as GraphvizRenderer._unranked_fanout
            "ranked": budget_limits(self._max_nodes) or budget_limits("auto"),
            **({"loops": loops} if loops else {}),
            **({"colour": colourings(costs, order), "colour_start": self.colour_start or ""}
               if costs is not None and self.colour_menu else {}),  # (and the choice it opens with)
            **fanout_marks(self, rec, opens, index, strings.add),  # (a styler's own style_fanout)
            **lift_data(rec, finest, first, order, parents, index, rows, strings.add, lambda node: attrs.add(
                self._parts(self.styler.style_node(node), "style_node", strings))),  # (params read outside)
            **through_rows(finest, index, parents),  # (edges past modules that only pass a value on)
            **({"made": list(range(made, len(edges)))} if made < len(edges) else {}),  # (constants)
            **({"all_ops": True} if self.all_ops else {}),  # (the page then leaves no operation out)
        }
        return data

    def _parts(self, attrs: Any, method: str, strings: _Interner) -> tuple[int, int, int]:
        """A node's attributes as three strings (label, the rest, tooltip), each interned."""
        text = self._attr_text(attrs, method)  # also checks what the styler returned
        label, tooltip = attrs.get("label"), attrs.get("tooltip")
        rest = {k: v for k, v in attrs.items() if k not in ("label", "tooltip")}
        parts = (self._attr_text({"label": label}, method) if label is not None else "",
                 self._attr_text(rest, method) if rest else "",
                 self._attr_text({"tooltip": tooltip}, method) if tooltip is not None else "")
        if " ".join(p for p in parts if p) != text:
            raise GraphError(f"{type(self.styler).__name__}.{method}() attributes do not split "
                             "into label, others and tooltip")
        return strings.add(parts[0]), strings.add(parts[1]), strings.add(parts[2])

    def _cluster_text(self, attrs: Any, method: str) -> str:
        """A cluster's attributes for the page: those of its title node (see
        :func:`~torchrecorder.renderer.graphviz.title_attrs`), a NUL, the cluster's own."""
        checked = self._checked(attrs, method)
        title = title_attrs(checked)
        cluster = cluster_attr_list(checked)
        return cluster if title is None else self._attr_text(title, method) + "\u0000" + cluster

    def _edge_rows(self, finest: Union[Projection, MadeEdges], order: list[BaseNode], parents: list[int],
                   index: dict[Key, int], attrs: _Interner, strings: _Interner,
                   pairs: Optional[list[tuple[BaseNode, BaseNode]]] = None,
                   carried: bool = False) -> list[list[Any]]:
        """``[from, to, attrs at level 0, 1, ..., edge]``: the attributes of the edge drawn from
        its source, from the source's parent's box, ... (trailing repeats left out), for each of
        ``finest``'s edges (or ``pairs``, edges it draws; ``carried``: its carried edges)."""
        rows: list[list[Any]] = []
        rec_nodes = self.rec.nodes
        ancestors: dict[Key, frozenset[Key]] = {}
        # the stock style_edge reads of its source only whether it is a parameter: past the
        # boxes that hold the edge's ops and tensor, every outer box gives the same attributes
        stock = type(self.styler).style_edge is GraphvizStyler.style_edge
        pairs = finest.edges if pairs is None else pairs
        # the tensors of all the edges joined into one between two boxes (the page draws the first)
        together = tensors_between(finest, pairs, index, parents, order, rec_nodes, ancestors)
        for fnode, tnode in pairs:
            a, b = index.get(fnode.key), index.get(tnode.key)
            if a is None or b is None:
                continue
            tensors = finest.edge_tensors(fnode, tnode)
            tensor = tensors[0] if tensors else None
            ops = finest.edge_ops(fnode, tnode)
            sources, targets = holders(a, parents), holders(b, parents)
            # where, going out from each end, a box first holds each op (and the tensor): the
            # attributes change only there, so each variant is made once
            at_a = [first_holder(op, sources, order, rec_nodes, ancestors) for op in ops]
            at_b = [first_holder(op, targets, order, rec_nodes, ancestors) for op in ops]
            t_a = first_holder(tensor, sources, order, rec_nodes, ancestors) if tensor is not None else 0
            t_b = first_holder(tensor, targets, order, rec_nodes, ancestors) if tensor is not None else 0
            variants: list[Any] = []
            for i, source in enumerate(sources):
                node = order[source]
                kept = [n for n in range(len(ops)) if at_a[n] > i]
                carried_here = tensor is not None and t_a > i
                last = max([at_b[n] for n in kept] + ([t_b] if carried_here else []), default=0)
                by_target: list[int] = []
                made: dict[tuple[tuple[OpNode, ...], bool, tuple[TensorNode, ...]], int] = {}
                for j in range(min(len(targets), last + 1)):
                    shown = tuple(ops[n] for n in kept if at_b[n] > j)
                    carried_tensor = tensor if carried_here and t_b > j else None
                    many = together.get((source, targets[j]), tensors) if carried_tensor is not None else ()
                    many = (carried_tensor, *(t for t in many if t is not tensor)) if carried_tensor else ()
                    got = made.get((shown, carried_tensor is None, many))
                    if got is None:
                        got = attrs.add(self._edge_parts(node, tnode, carried_tensor, shown, strings,
                                                         carried=carried, tensors=many))
                        made[(shown, carried_tensor is None, many)] = got
                    by_target.append(got)
                while len(by_target) > 1 and by_target[-1] == by_target[-2]:
                    by_target.pop()
                variants.append(by_target[0] if len(by_target) == 1 else by_target)
                if stock and i >= 1 and not kept and not carried_here:
                    break  # the same for every box further out
            while len(variants) > 1 and variants[-1] == variants[-2]:
                variants.pop()
            rows.append([a, b, *variants])
        return rows

    def _edge_parts(self, fnode: BaseNode, tnode: BaseNode, tensor: Optional[TensorNode],
                    ops: tuple[OpNode, ...], strings: _Interner,
                    carried: bool = False, tensors: tuple[TensorNode, ...] = ()) -> tuple[int, ...]:
        """The styler's attributes of the edge from ``fnode`` to ``tnode`` standing for ``ops``
        (``carried``: a value carried from one iteration of a folded loop to another) as
        :meth:`_parts` splits them; an edge that ``make_dot`` draws with its label as a node of
        its own (:attr:`label_nodes`) and through points on the title ranks of the clusters
        it enters (any edge without ``constraint=false``) also carries the attributes of that
        node ("" where it has none) and of those points: the page draws it the same way.
        ``tensors``: all the tensors the edge carrying ``tensor`` stands for."""
        with self.styling(ops, tensors if tensor is not None else ()):
            if carried:
                attrs, method = self.styler.style_carried_edge(fnode, tnode, tensor), "style_carried_edge"
            elif tensor is not None:
                attrs, method = self.styler.style_tensor_edge(fnode, tnode, tensor), "style_tensor_edge"
            else:
                attrs, method = self.styler.style_edge(fnode, tnode), "style_edge"
        parts = self._parts(attrs, method, strings)
        if carried or str(attrs.get("constraint", "true")).lower() == "false":
            return parts
        label = (self._attr_text(label_node_attrs(attrs), method)
                 if self.label_nodes and attrs.get("label") else "")
        return (*parts, strings.add(label), strings.add(self._attr_text(via_point_attrs(attrs), method)))

    def _run_rows(self, rec: Graph, opens: Any, index: dict[Key, int], parents: list[int],
                  edges: list[list[Any]], attrs: _Interner, strings: _Interner,
                  folded: Optional[Projection], order: list[BaseNode]) -> list[list[Any]]:
        """``[lead, members, aliases (from, to or -1, ...), crossing edges, box, cluster, title,
        carried edges]`` per run of identical blocks (``fold_repeats``); the page folds each
        until unfolded (the carried edges: ``_html_runs``)."""
        if not self.fold_min:
            return []
        plan = FoldPlan.build(rec, self.fold_min, opens, loops=False)
        member_of: dict[int, tuple[int, int]] = {}
        runs: list[list[Any]] = []
        for number, (lead_key, run) in enumerate(plan.runs.items()):
            lead = index.get(lead_key)
            members = [index.get(m.key) for m in run]
            if lead is None or any(m is None for m in members):
                continue
            aliases: list[int] = []
            member_set = {m for m in members if m is not None}
            first_at, last_at = min(member_set), max(member_set)
            for key, target in plan.alias.items():
                i = index.get(key)
                if i is None:
                    continue
                # inside a later block, or a tensor drawn between two blocks of this run
                gap = (target is None and parents[i] == parents[first_at] and first_at < i < last_at)
                if not gap and not _under(i, member_set, parents):
                    continue
                j = index.get(target) if target is not None else None
                aliases.extend((i, -1 if j is None else j))
            for position, m in enumerate(members):
                if m is not None:
                    member_of[m] = (number, position)
            lead_node = rec.nodes[lead_key]
            if not isinstance(lead_node, LayerNode):
                continue
            box = attrs.add(self._parts(self.styler.style_repeated(lead_node, run, False), "style_repeated",
                                        strings))
            cluster = -1
            if opens(lead_node):
                cluster = strings.add(self._cluster_text(self.styler.style_repeated(lead_node, run, True),
                                                         "style_repeated"))
            runs.append([lead, members, aliases, [], box, cluster, run_title(run, dotted=True), number])
        # the edges between two blocks of a run: not drawn while it is folded
        by_number = {row[-1]: row for row in runs}
        for e, row in enumerate(edges):
            for where_a in _runs_around(row[0], member_of, parents):
                for where_b in _runs_around(row[1], member_of, parents):
                    if where_a[0] == where_b[0] and where_a[1] != where_b[1] and where_a[0] in by_number:
                        by_number[where_a[0]][3].append(e)
        firsts = {row[1][0]: k for k, row in enumerate(runs)}
        carried = run_carried_rows(folded, index, parents, firsts, edges, lambda p, pairs: self._edge_rows(
            p, order, parents, index, attrs, strings, pairs, True))
        return [[*row[:-1], carried.get(k, [])] for k, row in enumerate(runs)]

    def _loop_rows(self, rec: Graph, folded: Optional[Projection], also: set[Key], order: list[BaseNode],
                   parents: list[int], index: dict[Key, int], edges: list[list[Any]], attrs: _Interner,
                   strings: _Interner) -> list[list[Any]]:
        """One row per folded Python loop (``fold_repeats``), as ``make_dot`` folds them: the
        page draws each once, marked ``×N``, until it is unfolded.  The edges drawn while a
        loop is folded are those of ``folded``, the finest drawing with everything folded:
        the rows of its edges the unfolded drawing lacks and of its carried edges are added
        to ``edges``."""
        if folded is None:
            return []

        def describe(group: LoopNode, iterations: list[Any]) -> list[Any]:
            style = self.styler.style_repeated(group, iterations, True)
            cluster = self._cluster_text(style, "style_repeated")
            return [strings.add(cluster), strings.add(self._quoted_id(group)), len(iterations),
                    strings.add(iterations_text(group, len(iterations), group.type_name))]

        def edge_rows(pairs: list[tuple[BaseNode, BaseNode]], carried: bool) -> list[list[Any]]:
            return self._edge_rows(folded, order, parents, index, attrs, strings, pairs, carried)

        return loop_rows(folded, also, rec.context.key, order, parents, index, edges, describe, edge_rows)


class _Interner:
    """A list of distinct values and each one's index."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._index: dict[Any, int] = {}

    def add(self, value: Any) -> int:
        got = self._index.get(value)
        if got is None:
            got = self._index[value] = len(self.items)
            self.items.append(list(value) if isinstance(value, tuple) else value)
        return got


def _folded_only(finest: Projection, folded: Optional[Projection]) -> set[Key]:
    """Keys of the nodes of folded loops that ``folded`` draws and ``finest`` leaves out (an
    operation of a loop's first iteration that only a later iteration's copy feeds)."""
    if folded is None or not finest.left_out:
        return set()
    drawn, gone, iteration = folded.drawn_key, folded.left_out, folded.fold.iteration
    return {k for k in finest.left_out if k in iteration and k not in gone and drawn(k) == k}


def _preorder(rec: Graph, finest: Projection, also: Container[Key] = ()) -> tuple[list[BaseNode], list[int]]:
    """The nodes of the finest drawing in preorder (a layer before what it holds, children in
    order), and each one's parent's position (-1 at the top); with the nodes of ``also``
    (:func:`_folded_only`) among them."""

    def children(node: BaseNode) -> list[BaseNode]:
        kids = finest.children(node)
        if not also or not isinstance(node, LayerNode) or not any(k in also for k in node.subnet_keys):
            return kids
        keep = {kid.key for kid in kids}
        if not keep.issubset(node.subnet_keys):
            return kids
        return [rec.nodes[k] for k in node.subnet_keys if k in keep or k in also]

    order: list[BaseNode] = []
    parents: list[int] = []
    stack: list[tuple[BaseNode, int]] = [(n, -1) for n in reversed(children(rec.context))]
    while stack:
        node, parent = stack.pop()
        at = len(order)
        order.append(node)
        parents.append(parent)
        if isinstance(node, LayerNode) and finest.is_expanded(node):
            stack.extend((child, at) for child in reversed(children(node)))
    return order, parents


def _under(i: int, tops: set[int], parents: list[int]) -> bool:
    """Whether the node at ``i`` is one of ``tops`` or inside one."""
    while i >= 0:
        if i in tops:
            return True
        i = parents[i]
    return False


def _runs_around(i: int, member_of: dict[int, tuple[int, int]],
                 parents: list[int]) -> Iterable[tuple[int, int]]:
    """(run, block) of every run block that holds the node at ``i``."""
    while i >= 0:
        got = member_of.get(i)
        if got is not None:
            yield got
        i = parents[i]


class BackwardHtmlRenderer(BackwardRenderer, HtmlRenderer):
    """The page of a backward graph (:func:`~torchrecorder.projection.backward.backward_view`):
    an :class:`HtmlRenderer` whose module calls open as
    :class:`~torchrecorder.renderer.backward.BackwardRenderer`'s do, so that every
    ``grad_fn`` can be shown."""


def make_html(rec: Graph, render_depth: Optional[int] = HTML_DEFAULT_DEPTH,
              styler_cls: Optional[type[GraphvizStyler]] = None, *, backward: bool = False,
              show_saved: bool = False, **options: Any) -> HtmlPage:
    """The interactive HTML page of a recording (``options`` as in :class:`HtmlRenderer`).

    ``backward=True`` shows the autograd graph of a recording made with
    ``record(..., backward=True)`` (or loaded from its JSON) instead, as
    ``make_dot(rec, backward=True)`` draws it; ``show_saved=True`` adds the tensors each
    autograd node saved.

    >>> import torch, torchrecorder
    >>> rec = torchrecorder.record(torch.nn.Sequential(torch.nn.Linear(2, 2)), "mlp", (1, 2))
    >>> page = torchrecorder.make_html(rec)
    >>> page.text.startswith("<!DOCTYPE html>"), "viz-global" in page.text or "Viz" in page.text
    (True, True)

    ``stat="flops"`` (or ``"activation_bytes"``, ``"param_bytes"``, ``"saved_bytes"``) colours the page by
    each call's cost, as :func:`torchrecorder.make_dot` does; the detail panel shows every
    call's cost whatever the colouring.

    Raises:
        ValueError: ``backward=True`` and the recording holds no backward graph (the message
            says why), or ``show_saved=True`` without ``backward=True``.
    """
    if backward:
        view = backward_view(rec, saved=show_saved)
        return render_once(BackwardHtmlRenderer(view, render_depth, styler_cls, **options))
    if show_saved:
        raise ValueError("show_saved=True shows the tensors saved for backward: pass backward=True too")
    styler_cls, start = page_colouring(rec, options, styler_cls)  # stat=: the Colour menu's, or baked in
    renderer = HtmlRenderer(rec, render_depth, styler_cls, **options)
    renderer.colour_start, renderer.colour_menu = start, "activations" not in options  # (one colouring)
    return render_once(renderer)
