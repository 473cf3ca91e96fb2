"""Edges of a :class:`~torchrecorder.renderer.graphviz.GraphvizRenderer` drawn as a chain of
edges through nodes that keep the drawing tidy: a node holding the edge's label, in the
innermost cluster holding both ends, and an invisible point on the title rank of each titled
cluster the edge enters (inside it)."""

from __future__ import annotations

import itertools
from typing import Any

from .._text import dot_quote, quote_dot_id
from ..nodes import BaseNode, TensorNode
from ._statements import plain_id

__all__ = ["LABEL_SUFFIX", "VIA_SUFFIX", "around", "cluster_parents", "common_clusters", "input_groups",
           "label_node_attrs", "path_edge", "titles_entered", "via_point_attrs"]

#: appended to ``"a -> b"``: the id of the node that draws the label of the edge from a to b
LABEL_SUFFIX = "::label"
#: appended to ``"a -> b"`` and a number: the ids of the points the edge from a to b passes
#: on the title ranks of the clusters it enters
VIA_SUFFIX = "::via"
#: the attributes of those points: a box no wider than the edge's line and two points high
#: (``dot`` ends the parts of the edge a point above and below a node's centre), drawn in
#: the edge's colour, which joins the parts
_VIA_ATTRS = {"label": "", "shape": "box", "height": "0.03", "fixedsize": "true", "style": "filled",
              "penwidth": "0"}
#: the edge attributes a label node takes
_LABEL_ATTRS = ("fontname", "fontsize", "fontcolor", "tooltip")

#: the renderer (a GraphvizRenderer, not imported here: it imports this module)
Renderer = Any


def around(key: Any, parent: dict[Any, Any]) -> list[Any]:
    """The keys of the clusters around ``key``, innermost first (``parent``:
    :func:`cluster_parents`)."""
    out = []
    while key in parent:
        key = parent[key]
        out.append(key)
    return out


def cluster_parents(renderer: Renderer, cached: bool = True) -> dict[Any, Any]:
    """Each drawn key inside a cluster -> the key of that cluster; with ``cached``, made once
    per drawing (edges are drawn after every node), else as drawn so far."""
    if cached and renderer._cluster_parent_of is not None:
        return renderer._cluster_parent_of
    got = {child.key: key for key, children in renderer._clusters.items() for child in children}
    if cached:
        renderer._cluster_parent_of = got
    return got


def common_clusters(renderer: Renderer, fnode: BaseNode, tnode: BaseNode) -> list[BaseNode]:
    """The clusters that hold both ``fnode`` and ``tnode``, outermost first."""
    parent = cluster_parents(renderer)
    around_t = set(around(tnode.key, parent))
    return [renderer._cluster_nodes[key] for key in reversed(around(fnode.key, parent)) if key in around_t]


def titles_entered(renderer: Renderer, fnode: BaseNode, tnode: BaseNode) -> list[BaseNode]:
    """The titled clusters that hold ``tnode`` but not ``fnode``, outermost first: the edge
    passes the rank of each one's title."""
    if not renderer._titled:
        return []
    parent = cluster_parents(renderer)
    around_f = set(around(fnode.key, parent))
    return [renderer._cluster_nodes[key] for key in reversed(around(tnode.key, parent))
            if key not in around_f and key in renderer._titled]


def label_node_attrs(attrs: Any) -> dict[str, Any]:
    """The attributes of the node drawing the label of an edge styled ``attrs`` (which has a
    ``label``): the label, ``shape=plain``, the edge's font and tooltip; hidden with the edge.
    Both ``make_dot`` and the HTML page draw a label node with these."""
    node = {"label": attrs["label"], "shape": "plain"}
    node.update({k: attrs[k] for k in _LABEL_ATTRS if k in attrs})
    if "invis" in str(attrs.get("style", "")).split(","):
        node["style"] = "invis"
    return node


def via_point_attrs(attrs: Any) -> dict[str, Any]:
    """The attributes of the points an edge styled ``attrs`` passes on the title ranks of the
    clusters it enters: as wide as its line, in its colour; hidden with the edge."""
    try:  # as wide as the edge's line: filled, with no border
        line = float(attrs.get("penwidth", 1.0))
    except ValueError:
        line = 1.0
    point = {**_VIA_ATTRS, "width": f"{line / 72:.4f}", "fillcolor": str(attrs.get("color", "black"))}
    if "invis" in str(attrs.get("style", "")).split(","):
        point["style"] = "invis"
    return point


def _in_clusters(renderer: Renderer, chain: list[BaseNode], statement: str) -> str:
    """``statement`` inside the (reopened) clusters of ``chain``, outermost first."""
    opening = "".join(f"subgraph {dot_quote('cluster_' + renderer.node_id(n))} {{ " for n in chain)
    return f"{opening}{statement}{' }' * len(chain)}"


def path_edge(renderer: Renderer, g: Any, fnode: BaseNode, tnode: BaseNode, ends: tuple[str, str],
              attrs: dict[Any, Any], method: str, labelled: bool, entered: list[BaseNode]) -> None:
    """Write into ``g`` the edge between the drawn ``ends`` (of ``fnode`` and ``tnode``) styled
    ``attrs`` (what the styler's ``method`` returned) as a chain of edges; only the last part
    has an arrowhead.

    With ``labelled``, its label is a node of its own (``shape=plain``, its id
    ``"a -> b::label"``) in the innermost cluster holding both ends: Graphviz keeps a node
    inside its cluster and routes other edges around it.  Then, for each titled cluster in
    ``entered`` (outermost first), an invisible point (``"a -> b::via1"``, ...) inside that
    cluster, on its title's rank: without it the edge would pass each title's rank outside the
    cluster (Graphviz keeps a cluster's ranks to its members), bulging out of it and around its
    title.  A hidden edge (a diff's other side) keeps its label node, hidden: the views of a
    diff share one layout.
    """
    a, b = ends
    name = f"{plain_id(a)} -> {plain_id(b)}"
    path: list[str] = []
    group = renderer._groups.get((fnode.key, tnode.key))  # an input's edge to its first consumer
    if labelled:
        node = label_node_attrs(attrs)
        del attrs["label"]
        if group:
            node["group"] = group
        lid = quote_dot_id(name + LABEL_SUFFIX)
        renderer._label_ids[(fnode.key, tnode.key)] = lid  # the titles it feeds rank below it
        statement = f"{lid} [{renderer._attr_text(node, method)}]"
        g.body.append(f"\t{_in_clusters(renderer, common_clusters(renderer, fnode, tnode), statement)}\n")
        path.append(lid)
    if entered:
        point = via_point_attrs(attrs)
        if group:
            point["group"] = group
        point_text = renderer._attr_text(point, method)
        vids = [quote_dot_id(f"{name}{VIA_SUFFIX}{i}") for i in range(1, len(entered) + 1)]
        path.extend(vids)
        # one statement, each point in its cluster nested in the one before: as long as the
        # nesting is deep, not its square
        inner = ""
        for vid, cluster in zip(reversed(vids), reversed(entered), strict=True):
            # on the title's rank: left free, ``dot`` ranks a point anywhere between the ends,
            # and the part before it then runs outside the cluster down to it
            ranked = f"{{rank=same; {renderer._title_id(cluster)}; {vid}}}"
            inner = _in_clusters(renderer, [cluster], f"{vid} [{point_text}] {ranked} {inner}".rstrip())
        g.body.append(f"\t{_in_clusters(renderer, common_clusters(renderer, fnode, tnode), inner)}\n")
    # the parts meet at a point's centre (clipped at its tiny border they would leave a gap)
    via = {vid for vid in path if VIA_SUFFIX in vid}
    for tail, head in itertools.pairwise([a, *path, b]):
        part = dict(attrs) if head == b else {**attrs, "arrowhead": "none"}
        if head in via:
            part["headclip"] = "false"
        if tail in via:
            part["tailclip"] = "false"
        g.body.append(f"\t{tail} -> {head} [{renderer._attr_text(part, method)}]\n")


def input_groups(renderer: Renderer) -> dict[Any, str]:
    """The ``group`` of each of the network's inputs, of the first node it feeds (in drawing
    order) and of that edge (its key ``(tail key, head key)``), so that the nodes the edge
    passes (a label, the points on titles' ranks) join it: ``dot`` keeps the edges of a group
    straight, the input above its consumer, where a cluster's title beside the edge would
    push the input aside and join them by an S-shaped edge.  A consumer already in an input's
    group is left to it."""
    inputs = [n for n in renderer.children(renderer.rec.context)
              if isinstance(n, TensorNode) and n.role == "input"]
    groups: dict[Any, str] = {}
    edges = renderer._ranked_edges()
    for number, node in enumerate(inputs):
        head = next((t for f, t in edges if f.key == node.key), None)
        if head is None or node.key in groups or head.key in groups:
            continue
        groups[node.key] = groups[head.key] = groups[(node.key, head.key)] = f"input{number}"
    return groups
