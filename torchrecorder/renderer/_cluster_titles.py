"""The titles of clusters (expanded modules), for :class:`~torchrecorder.renderer.styler.GraphvizStyler`:
the module's dotted path in bold and its type with the parameter count in grey, on one line
where that is no wider than what the cluster holds, else on two, else on three (the count
apart); the count left out where the cluster holds one box that shows it; and the node that
draws a cluster's title in DOT (:func:`title_attrs`) with the cluster's own attributes
(:func:`cluster_attr_list`)."""

from __future__ import annotations

from typing import Any, Optional

from .._text import dot_quote, string_quote
from ..nodes import LayerNode, TensorNode
from .labels import param_count_text, param_total

#: the styler whose title is made (a :class:`~torchrecorder.renderer.styler.GraphvizStyler`,
#: not imported here: it imports this module)
GraphvizStyler = Any

__all__ = ["TITLE_SUFFIX", "cluster_attr_list", "cluster_label", "one_box_holds_all", "title_attrs",
           "title_lines"]

#: average character widths, in ems, of the fonts Graphviz lays out with: a generous one for
#: a title (bold, DejaVu) and a modest one for what it must fit beside
_EM_WIDE = 0.64
_EM_NARROW = 0.5


def one_box_holds_all(styler: GraphvizStyler, node: LayerNode) -> bool:
    """Whether the cluster of ``node`` holds one box, a module with all its parameters
    (a wrapper around one block): the box shows the count, the title need not."""
    renderer = styler.renderer
    if renderer is None or not node.num_params_total:
        return False
    inside = [child for child in renderer.children(node) if not isinstance(child, TensorNode)]
    return (len(inside) == 1 and isinstance(inside[0], LayerNode)
            and not renderer.projection.is_expanded(inside[0])
            and len(renderer.repeats(inside[0])) == 1
            and param_total(styler.rec, inside[0]) == param_total(styler.rec, node))

def _size(styler: GraphvizStyler, kind: str, default: float) -> float:
    try:
        return float(styler.styles[kind].get("fontsize", default))
    except (KeyError, ValueError):
        return default

def _title_rest(styler: GraphvizStyler, node: LayerNode, count: bool) -> str:
    rest = node.type_name
    if node.num_params_total and styler.param_counts and count:
        rest += " · " + param_count_text(styler.rec, node)
    return rest

def _width_inside(styler: GraphvizStyler, node: LayerNode) -> float:
    """About how wide (points) the widest thing drawn inside the cluster of ``node`` is, by
    the length of its text (a low estimate: a title on one line no wider than this does not
    widen the cluster)."""
    renderer = styler.renderer
    if renderer is None:
        return 0.0
    layer, cluster = _size(styler, "layer", 11.0), _size(styler, "cluster", 10.0)
    widest = 0.0
    for child in renderer.children(node):
        if not isinstance(child, LayerNode) or len(renderer.repeats(child)) > 1:
            continue
        if renderer.projection.is_expanded(child):
            rest = _title_rest(styler, child, True)
            width = max(_EM_NARROW * cluster * max(len(child.call_title(dotted=True)), len(rest)),
                        _width_inside(styler, child)) + 12
        else:
            rest = _title_rest(styler, child, True)
            width = _EM_NARROW * max(layer * len(child.call_title()), 0.8 * layer * len(rest)) + 14
        widest = max(widest, width)
    return widest

def title_lines(styler: GraphvizStyler, node: LayerNode, title: str, count: bool) -> int:
    """On how many lines the cluster title of ``node`` goes: 1, the bold path and the type
    (with the count) side by side, where that is at most as wide as what the cluster holds
    already; else 3, the count on a line of its own below the type, where the type's line with
    the count would be wider than that and the type and the count each are not (a title wider
    than the cluster's contents widens the cluster, and a deep nest of clusters with it); else
    2, the type (with the count) below the path.

    The type's line is in the size of a box's second line (:attr:`_type_line`)."""
    size = _size(styler, "cluster", 10.0)
    inside = _width_inside(styler, node)
    rest = _title_rest(styler, node, count)
    if _EM_WIDE * size * (len(title) + len(rest)) + size <= inside:
        return 1
    type_size = styler._type_size
    if rest == node.type_name or _EM_NARROW * type_size * len(rest) <= inside:
        return 2
    count_line = param_count_text(styler.rec, node)
    # split only where the parts fit: a cluster widened anyway keeps the type and count together
    return 3 if _EM_NARROW * type_size * max(len(node.type_name), len(count_line)) <= inside else 2

def cluster_label(styler: GraphvizStyler, node: LayerNode, title: str, repeat: int = 1, count: bool = True,
                  lines: int = 2) -> str:
    """The dotted path in bold (``×N`` for a folded run), and below it the type and the
    parameter count in grey, in the size of a box's second line.

    Each is one text run in a cell of its own: a browser that draws the
    bold title wider than Graphviz measured it cannot run it into the
    type, and no space between runs can be lost (SVG drops a run's
    leading space).  ``lines`` (:func:`title_lines`): 1, the type beside
    the path, an empty cell apart; 2, below it; 3, the count below the type.
    """
    if lines not in (1, 2, 3):
        raise ValueError(f"a cluster title takes 1, 2 or 3 lines, not {lines!r}")
    bold = title + (f" ×{repeat}" if repeat > 1 else "")
    rests = [_title_rest(styler, node, count)]
    if lines == 3 and rests[0] != node.type_name:
        rests = [node.type_name, param_count_text(styler.rec, node)]
    note = node.run_note()
    small_note = styler._small.format(styler._text(note))
    span = 3 if lines == 1 else 2
    note_row = (f'<TR><TD ALIGN="LEFT" COLSPAN="{span}"><I>{small_note}</I></TD></TR>'
                if note else "")
    note_row += "".join(f'<TR><TD ALIGN="LEFT" COLSPAN="{span}">{badge}</TD></TR>'
                        for badge in styler.breaks.badges(styler.rec, node, inside=False))
    # Graphviz measures bold text a few percent narrower than browsers draw it: an empty
    # cell after the title keeps a long one inside the cluster's border
    try:
        size = float(styler.styles["cluster"].get("fontsize", 14))
    except ValueError:
        size = 14.0
    pad = 2 + round(0.03 * size * len(bold))
    # the type in the size and grey of a box's second line (smaller than the bold path)
    greys = [styler._type_line.format(styler._text(rest)) for rest in rests]
    if lines == 1:
        gap = pad + round(size / 2)
        return (f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0">'
                f'<TR><TD ALIGN="LEFT"><B>{styler._text(bold)}</B></TD><TD WIDTH="{gap}"></TD>'
                f'<TD ALIGN="LEFT">{greys[0]}</TD></TR>{note_row}</TABLE>>')
    below = "".join(f'<TR><TD ALIGN="LEFT" COLSPAN="2">{grey}</TD></TR>' for grey in greys)
    return (f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="{styler._row_gap("cluster")}" '
            'CELLPADDING="0">'
            f'<TR><TD ALIGN="LEFT"><B>{styler._text(bold)}</B></TD><TD WIDTH="{pad}"></TD></TR>'
            f'{below}{note_row}</TABLE>>')


#: appended to a cluster's DOT id: the id of the node that draws its title
TITLE_SUFFIX = "::title"
#: the cluster attributes its title node takes
_TITLE_ATTRS = ("fontname", "fontsize", "fontcolor", "tooltip")


def title_attrs(attrs: dict[str, str]) -> Optional[dict[str, str]]:
    """The attributes of the node that draws the title of a cluster styled ``attrs``, whose
    ``label`` it takes out of ``attrs`` (leaving an empty one); ``None`` for a cluster
    without a label.

    The title is a node on a rank of its own, above everything that enters the
    cluster (invisible edges put it there): Graphviz routes edges around nodes,
    where a cluster's own label sits in a band that the edges entering the
    cluster cross.
    """
    label = attrs.pop("label", None)
    if label is None:
        return None
    title = {k: attrs[k] for k in _TITLE_ATTRS if k in attrs}
    title.update(shape="plain", label=label)
    if "invis" in attrs.get("style", "").split(","):  # an invisible cluster: its title too
        title["style"] = "invis"
    # an empty label of its own: a cluster without one would show the graph's (a legend)
    attrs["label"] = ""
    return title


def cluster_attr_list(attrs: dict[str, str]) -> str:
    """A cluster's attributes as ``Digraph.attr(**attrs)`` writes them: sorted, each quoted
    (the tooltip never as an HTML string)."""
    return " ".join(f"{dot_quote(k)}={string_quote(v) if k == 'tooltip' else dot_quote(v)}"
                    for k, v in sorted(attrs.items()))
