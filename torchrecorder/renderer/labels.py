"""Label text shared by the renderers: parameter lines and counts, read from node metadata only."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from .._text import DOT_STRING_BYTES, dot_text, shorten, string_quote
from ..graph import Graph, predecessors
from ..nodes import LayerNode, OpNode, ParamNode, TensorNode, shape_str
from ..projection import LoopNode
from ..projection.params import ParamHolders

__all__ = [
    "call_name", "count_str", "dtype_suffix", "edge_label", "listed_params", "OpInputShapes",
    "param_count_text", "param_lines", "param_total", "params_text", "run_title", "shapes_text",
    "stacked_label", "tied_paths", "tooltip_text",
]


def call_name(graph: Graph, node: LayerNode, memo: dict[Any, Any]) -> str:
    """The name a picture gives a module call: :meth:`~torchrecorder.nodes.LayerNode.call_title`,
    or, when a sibling call has the same name but another path, its path below its parent's
    (peft's ``lora_A.default`` and ``lora_B.default``, each held in a ``ModuleDict`` that never
    runs, are both called ``default``).  ``memo`` keeps the siblings' names per parent.

    >>> g = Graph("net")
    >>> g.nodes["q"] = LayerNode("q", key="q", path="q", depth=0)
    >>> for path in ("q.lora_A.default", "q.lora_B.default", "q.base"):
    ...     g.nodes[path] = LayerNode(path.rpartition(".")[2], key=path, path=path, parent="q", depth=1)
    ...     g.nodes["q"].subnet_keys.add(path)
    >>> [call_name(g, g.nodes[k], {}) for k in ("q.lora_A.default", "q.base")]
    ['lora_A.default', 'base']
    """
    parent = dict.get(graph.nodes, node.parent_key)
    if not isinstance(parent, LayerNode):
        return node.call_title()
    names = memo.get(parent.key)
    if names is None:
        names = memo[parent.key] = {}
        for k in parent.subnet_keys:
            kid = dict.get(graph.nodes, k)
            if isinstance(kid, LayerNode):
                names.setdefault(kid.name, set()).add(kid.path)
    if len(names.get(node.name, ())) < 2:
        return node.call_title()
    above = parent.path
    rel = node.path[len(above) + 1:] if above and node.path.startswith(above + ".") else node.path
    return rel if node.call_index == 1 else f"{rel} #{node.call_index}"


def count_str(n: int) -> str:
    """``1234567`` -> ``1.2M``; small counts are written out.

    >>> count_str(999), count_str(1234), count_str(7_000_000_000)
    ('999', '1.2k', '7.0B')
    """
    for unit, size in (("B", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def dtype_suffix(dtype: str) -> str:
    """``""`` for the usual float32, else the dtype after a space."""
    return "" if dtype in ("", "float32") else f" {dtype}"


def param_lines(rec: Optional[Graph], node: LayerNode) -> list[str]:
    """Parameter shapes of a module (when it owns at most three) and its parameter count.

    Read from the recording's parameter nodes, so that graphs loaded from JSON
    show them too; a module called again shows them on its first call only.  The count is
    :func:`param_total`'s, the layer table's: a module whose parameters are all tied to
    ones counted on another module (an output projection tied to the embedding) says
    ``tied`` instead.
    """
    if not node.num_params_total:
        return []
    total = param_total(rec, node)
    if not total:
        return ["tied"]
    return params_text(listed_params(rec, node), total)


def param_count_text(rec: Optional[Graph], node: LayerNode) -> str:
    """The last of :func:`param_lines` (the count, or ``tied``), without listing the parameters:
    what a cluster's title shows (and measures, several times per title)."""
    if not node.num_params_total:
        return ""
    total = param_total(rec, node)
    return _count_text(total) if total else "tied"


def _count_text(total: int) -> str:
    return f"{count_str(total)} params" if total != 1 else "1 param"


#: graph -> its parameter holders, and the sizes of its node table and edges when they were read
_HOLDERS: weakref.WeakKeyDictionary[Graph, tuple[int, int, ParamHolders]] = weakref.WeakKeyDictionary()


#: the graph last asked for (a weak reference), with its entry of ``_HOLDERS``: a drawing asks
#: hundreds of times for the same graph's, and a weak dictionary's lookup costs more than this
_LAST: list[tuple[Any, tuple[int, int, ParamHolders]]] = []


def _holders(rec: Graph) -> ParamHolders:
    sizes = (len(rec.nodes), len(rec.links))
    if _LAST:
        ref, got = _LAST[0]
        if ref() is rec and got[:2] == sizes:
            return got[2]
    kept = _HOLDERS.get(rec)
    if kept is None or kept[:2] != sizes:
        kept = _HOLDERS[rec] = (*sizes, ParamHolders(rec))
    _LAST[:] = [(weakref.ref(rec), kept)]
    return kept[2]


def tied_paths(rec: Optional[Graph], node: LayerNode) -> list[str]:
    """The dotted paths of the parameters ``node``'s module holds tied to a parameter counted on
    another module (the layer table's ``tied:``); empty where ``rec`` is ``None``."""
    if rec is None or not node.num_params:
        return []
    return [p.path for p in _holders(rec).tied.get(node.key, ())]


def param_total(rec: Optional[Graph], node: LayerNode) -> int:
    """The parameter elements of ``node``'s module and those inside it, counted as the layer
    table counts them: a parameter tied to one counted on a module outside (the decoder's
    embedding and the output projection of T5, tied to the encoder's embedding) is not
    counted again (:meth:`~torchrecorder.projection.params.ParamHolders.counted_total`).
    ``node.num_params_total`` where ``rec`` is ``None``."""
    if rec is None or not node.num_params_total:
        return node.num_params_total
    return _holders(rec).counted_total(node)


def params_text(params: list[ParamNode], total: int) -> list[str]:
    """:func:`param_lines` of a module of ``total`` parameters that lists ``params``."""
    lines = [f"{p.name}: {shape_str(p.shape)}" for p in params]
    lines.append(_count_text(total))
    return lines


def listed_params(rec: Optional[Graph], node: LayerNode) -> list[ParamNode]:
    """The parameters whose shapes :func:`param_lines` lists: all of a module's, if it owns
    all its parameters directly and at most three; else none.

    :func:`param_lines` reads nothing else of them than their names and shapes.
    """
    if rec is None or node.num_params != node.num_params_total:
        return []
    nodes = rec.nodes  # (keys only: the C lookup)
    params = [n for k in node.subnet_keys if isinstance(n := dict.get(nodes, k), ParamNode)]
    return params if len(params) <= 3 else []


def run_title(run: list[LayerNode], dotted: bool) -> str:
    """``"layers.0 … layers.11"`` (``dotted``: paths) or ``"0 … 11"`` for a folded run;
    ``"loop"`` for the iterations of a folded loop."""
    first, last = run[0], run[-1]
    if isinstance(first, LoopNode):
        return first.name
    a = (first.path or first.name) if dotted else first.name
    b = (last.path or last.name) if dotted else last.name
    if first.call_index > 1 or last.call_index > 1 or a == b:  # calls of one module: number both
        a, b = f"{a} #{first.call_index}", f"{b} #{last.call_index}"
    return f"{a} … {b}"


def stacked_label(gap: int, lines: Sequence[str]) -> str:
    """An HTML-like label of ``lines`` (label markup each), one above the other.

    Each line is a row of a borderless table: Graphviz makes each row as tall as
    the font of its text measures, ascent to descent, where lines broken with
    ``<BR/>`` sit closer than that and one line's underscores touch the next.  Graphviz
    makes a row as tall as its point size; ``gap`` points between rows make up for fonts
    taller than that (DejaVu: ascent plus descent 1.164 em).
    """
    if len(lines) == 1:
        return f"<{lines[0]}>"
    rows = "".join(f"<TR><TD>{line}</TD></TR>" for line in lines)
    return f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="{gap}" CELLPADDING="0">{rows}</TABLE>>'


def ops_text(ops: Sequence[OpNode]) -> str:
    """``"view · transpose"``: the names of the operations a drawn edge stands for, in the
    order they ran, a name repeated at once written once; ``""`` for none.

    >>> ops_text([OpNode("view"), OpNode("view"), OpNode("transpose")])
    'view · transpose'
    """
    names: list[str] = []
    for op in ops:
        if not names or names[-1] != op.op:
            names.append(op.op)
    return " · ".join(names)


def edge_label(lines: Sequence[str]) -> str:
    """The label of an edge: :func:`stacked_label` lines with a point of room around them, so that
    neither the edge nor a node beside it touches the text."""
    # Graphviz draws the edge along the label's left side: an empty column keeps it off the text
    spacer = f'<TD ROWSPAN="{len(lines)}" WIDTH="3"></TD>'
    rows = "".join(f"<TR>{'' if k else spacer}<TD>{line}</TD></TR>" for k, line in enumerate(lines))
    return f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">{rows}</TABLE>>'


class OpInputShapes:
    """Each operation's input shapes: of the tensors (not parameters) and operations feeding it,
    found on first request (a drawing labels a few of the graph's operations).

    ``shapes.get(key)`` is the set of input shapes of the operation ``key`` (empty for any other
    node); one pass over the edges indexes each node's predecessors on the first request, unless
    ``preds`` gives that index (each node's predecessors, in the order of the edges) then.
    """

    def __init__(self, rec: Optional[Graph],
                 preds: Optional[Callable[[], Mapping[Any, list[Any]]]] = None) -> None:
        self.rec = rec
        self._get_preds = preds
        self._preds: Optional[Mapping[Any, list[Any]]] = None
        self._memo: dict[Any, set[tuple[int, ...]]] = {}

    def get(self, key: Any) -> set[tuple[int, ...]]:
        """The input shapes of operation ``key``."""
        got = self._memo.get(key)
        if got is not None:
            return got
        got = self._memo[key] = set()
        rec = self.rec
        if rec is None or not isinstance(rec.nodes.get(key), OpNode):
            return got
        preds = self._preds
        if preds is None:
            preds = self._preds = self._get_preds() if self._get_preds else predecessors(rec.links)
        nodes = rec.nodes
        for a in preds.get(key, ()):
            src = dict.get(nodes, a)
            if isinstance(src, TensorNode) and not isinstance(src, ParamNode):
                found_shapes: list[Any] = [src.shape]
            elif isinstance(src, OpNode):
                found_shapes = list(src.output_shapes)
            else:
                continue
            for shape in found_shapes:
                try:
                    got.add(tuple(shape))
                except TypeError:  # an unhashable (symbolic) shape
                    continue
        return got


def tooltip_text(text: object) -> str:
    """``text`` escaped for a tooltip, shortened in the middle if Graphviz could not read it."""
    escaped = dot_text(text)
    if len(escaped) <= DOT_STRING_BYTES // 5:  # 4 bytes a character at most, quotes escaped
        return escaped
    raw = str(text)
    while True:
        size = len(string_quote(escaped).encode("utf-8", "surrogatepass"))
        if size <= DOT_STRING_BYTES:
            return escaped
        raw = shorten(raw, max(1, len(raw) * DOT_STRING_BYTES // size - 16))
        escaped = dot_text(raw)


def shapes_text(ins: list[tuple[int, ...]], outs: list[tuple[int, ...]]) -> str:
    """`` in: 1×3, 1×4 out: 1×2`` (either part left out when empty)."""
    text = ""
    if ins:
        text += " in: " + ", ".join(map(shape_str, ins))
    if outs:
        text += " out: " + ", ".join(map(shape_str, outs))
    return text
