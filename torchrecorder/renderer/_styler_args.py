"""The checks of :class:`~torchrecorder.renderer.styler.GraphvizStyler`'s keyword arguments:
a Graphviz attribute given where Graphviz would ignore it, or a keyword of another tool, is
refused with a message that says where it belongs (Graphviz itself ignores an unknown
attribute without a word)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ..backend import GRAPHVIZ_ATTRIBUTES

__all__ = ["KIND_ARGS", "NAMED_ELSEWHERE", "check_kind_attribute", "check_node_attribute"]

#: the kinds of ``KIND_attrs`` keyword arguments (``layer_attrs``, ``edge_attrs``, ...)
KIND_ARGS = ("graph", "layer", "tensor", "io", "param", "op", "cluster", "edge", "param_edge",
              "failed", "folded", "folded_cluster", "graph_break", "unread")


_USERS = {"G": "graphs", "C": "clusters", "S": "subgraphs", "N": "nodes", "E": "edges"}
#: the Graphviz components (letters of :data:`~torchrecorder.backend.GRAPHVIZ_ATTRIBUTES`) that
#: each kind of ``KIND_attrs`` styles; the kinds not named style nodes (``failed`` and
#: ``graph_break`` mark a box or a cluster)
_KIND_USERS = {"graph": "G", "cluster": "C", "folded_cluster": "C", "edge": "E", "param_edge": "E",
               "failed": "NC", "graph_break": "NC"}
# keywords of other tools (graphviz's ``render(format=...)``, torchview's ``draw_graph``,
# torchviz's and torchinfo's) and the option of that meaning here
NAMED_ELSEWHERE = {
    "format": "the file format is render_network's fmt=, or the format= of make_dot(...).render()",
    "depth": "did you mean 'render_depth'?",
    "expand_nested": "torchview's expand_nested: modules above render_depth= are always drawn "
                     "as clusters holding their children",
    "show_shapes": "did you mean 'edge_shapes'?",
    "input_size": "torchinfo's and torchview's input_size is input_shapes= here",
    "dtypes": "torchinfo's and torchview's dtypes is dtype= here (one dtype for every input "
              "made from input_shapes, or a list with one per shape)",
    "graph_name": "the network's name is render_network's name argument",
    "graph_dir": "torchview's graph_dir is direction= here ('TB', 'LR', ...)",
    "roll": "torchview's roll is fold_repeats= here: True folds any run of 2 identical blocks "
            "or loop iterations",
    "hide_inner_tensors": "torchview's hide_inner_tensors=False is tensor_nodes=True here",
    "hide_module_functions": "torchview's hide_module_functions=False is expand_leaves=True here",
    "save_graph": "render_network writes the file; make_dot returns a graphviz.Digraph "
                  "(its .render() writes one)",
    "params": "torchviz's params is not needed: the recording names every parameter",
    "show_attrs": "torchviz's show_attrs has no equivalent; make_dot(rec, backward=True, "
                  "show_saved=True) draws the backward graph with its saved tensors",
    "col_names": "torchinfo's col_names is the columns= of rec.summary(...)",
    "batch_dim": "input_shapes= takes whole shapes, batch dimension included",
}
# the keywords that the drawing functions take beside the styler's (for "did you mean")
_DRAWING_OPTIONS = ("render_depth", "fold_repeats", "tensor_nodes", "styler_cls", "expand_leaves",
                    "label_nodes", "all_ops", "direction", "margin", "param_shapes", "param_counts",
                    "edge_shapes", "align", "max_nodes")


def check_node_attribute(arg: str, node_attributes: Iterable[str]) -> None:
    """Raise ``TypeError`` unless ``arg`` is one of ``node_attributes`` (a styler's
    :attr:`~torchrecorder.renderer.styler.GraphvizStyler.node_attributes`), with a hint."""
    node_attributes = list(node_attributes)
    if arg in node_attributes:
        return
    users = GRAPHVIZ_ATTRIBUTES.get(arg)
    if users:
        where = {"G": "graph_attrs", "C": "cluster_attrs", "E": "edge_attrs"}
        kinds = [f"{where[u]}={{{arg!r}: ...}}" for u in users if u in where]
        raise TypeError(f"{arg!r} is a Graphviz attribute of "
                        + ", ".join(_USERS[u] for u in users) + ", not of nodes"
                        + (f": pass {' or '.join(kinds)}" if kinds else ""))
    known = [*node_attributes, *(f"{k}_attrs" for k in KIND_ARGS), "preset", *_DRAWING_OPTIONS]
    close = [repr(c) for c in difflib.get_close_matches(arg, known, n=1)]
    hint = NAMED_ELSEWHERE.get(arg, f"did you mean {close[0]}?" if close else "")
    raise TypeError(f"unknown keyword argument {arg!r}: it is neither an option nor a "
                    "Graphviz node attribute" + (f" ({hint})" if hint else ""))


def check_kind_attribute(arg: str, name: str, node_attributes: Iterable[str]) -> None:
    """Raise ``ValueError`` unless ``name`` is a Graphviz attribute of the elements that
    ``arg`` (``layer_attrs``, ``edge_attrs``, ...) styles; Graphviz itself ignores an
    unknown one without a word, so ``layer_attrs={"fillcolour": ...}`` would change nothing."""
    users = _KIND_USERS.get(arg[: -len("_attrs")], "N")
    known = GRAPHVIZ_ATTRIBUTES.get(name, "")
    if any(u in known for u in users) or ("N" in users and name in node_attributes):
        return
    what = " or ".join(_USERS[u] for u in users)
    if known:
        hint = f"it is an attribute of {', '.join(_USERS[u] for u in known)}"
    else:
        close = difflib.get_close_matches(name, [a for a, u in GRAPHVIZ_ATTRIBUTES.items()
                                                 if any(x in u for x in users)], n=1)
        hint = f"did you mean {close[0]!r}?" if close else "see https://graphviz.org/doc/info/attrs.html"
    raise ValueError(f"{arg}: {name!r} is not a Graphviz attribute of {what} ({hint})")
