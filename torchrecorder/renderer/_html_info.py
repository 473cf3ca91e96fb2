"""What the HTML page's detail panel shows of each node, and the tensors that cross each
module call's boundary (with their dtypes), for :class:`~torchrecorder.renderer.html.HtmlRenderer`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from ..cost import Cost, format_flops
from ..errors import GraphError
from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode, OpNode, ParamNode, TensorNode, shape_str
from ..projection import Projection
from ..projection.drawn import held_by_reader
from ._html_cost import cost_text
from .labels import count_str, param_total

__all__ = ["boundary_tensors", "lift_data", "lift_rows", "panel_info"]


def boundary_tensors(rec: Graph) -> dict[Key, tuple[list[TensorNode], list[TensorNode]]]:
    """Layer key -> the tensors that entered it and those that left it (with their dtypes)."""
    nodes = rec.nodes
    out: dict[Key, tuple[list[TensorNode], list[TensorNode]]] = {}
    ancestors: dict[Key, frozenset[Key]] = {}

    def chain(key: Key) -> frozenset[Key]:
        got = ancestors.get(key)
        if got is None:
            keys = []
            parent = nodes[key].parent_key if key in nodes.keys() else None
            while parent is not None and parent in nodes.keys():
                keys.append(parent)
                parent = nodes[parent].parent_key
            got = ancestors[key] = frozenset(keys)
        return got

    def add(tensor: TensorNode, inner: Key, outer: frozenset[Key], side: int) -> None:
        parent = nodes[inner].parent_key if inner in nodes.keys() else None
        while parent is not None and parent not in outer and parent in nodes.keys():
            listed = out.setdefault(parent, ([], []))[side]
            if not listed or listed[-1] is not tensor:
                if tensor not in listed:
                    listed.append(tensor)
            parent = nodes[parent].parent_key

    for a, b in rec.links:
        na, nb = dict.get(nodes, a), dict.get(nodes, b)
        if isinstance(na, TensorNode) and not isinstance(na, ParamNode):
            add(na, b, chain(a), 0)
        if isinstance(nb, TensorNode) and not isinstance(nb, ParamNode):
            add(nb, a, chain(b), 1)
    return out


def _tensor_text(t: TensorNode) -> str:
    return f"{shape_str(t.shape)} {t.dtype}".strip()


def panel_info(rec: Graph, node: BaseNode, tensors: dict[Key, tuple[list[TensorNode], list[TensorNode]]],
          source: Optional[dict[str, Any]] = None, costs: Optional[Cost] = None) -> dict[str, Any]:
    """What the page's detail panel shows of ``node`` (plain text; the page writes it as text),
    with ``source`` (:func:`~torchrecorder.renderer.sourcelines.source_info`) when given."""
    info = _node_info(rec, node, tensors, costs)
    if source is not None:
        info["source"] = source
    return info


def _node_info(rec: Graph, node: BaseNode, tensors: dict[Key, tuple[list[TensorNode], list[TensorNode]]],
               costs: Optional[Cost] = None) -> dict[str, Any]:
    if isinstance(node, LayerNode):
        ins, outs = tensors.get(node.key, ([], []))
        params = [[p.name, shape_str(p.shape), p.dtype, p.numel] for k in node.subnet_keys
                  if isinstance(p := dict.get(rec.nodes, k), ParamNode)]
        total = param_total(rec, node)  # the layer table's count: a tied parameter counted once
        info: dict[str, Any] = {
            "kind": "module", "name": node.call_title(), "path": node.call_title(dotted=True),
            "type": node.type_name,
            "in": [_tensor_text(t) for t in ins] or [shape_str(s) for s in node.input_shapes],
            "out": [_tensor_text(t) for t in outs] or [shape_str(s) for s in node.output_shapes],
            "params": params, "total": count_str(total), "total_n": total,
        }
        if costs is not None and str(node.key) in costs:
            info["cost"] = cost_text(costs[str(node.key)])
        if node.error:
            info["error"] = node.error
        return info
    if isinstance(node, ParamNode):
        return {"kind": "parameter", "name": node.name, "path": node.path, "shape": shape_str(node.shape),
                "dtype": node.dtype, "count": node.numel}
    if isinstance(node, TensorNode):
        return {"kind": "input" if node.role == "input" else "output" if node.role == "output" else "tensor",
                "name": node.name, "shape": shape_str(node.shape), "dtype": node.dtype,
                "device": node.device}
    if isinstance(node, OpNode):
        parent = dict.get(rec.nodes, node.parent_key)
        where = parent.call_title(dotted=True) if isinstance(parent, LayerNode) else ""
        op: dict[str, Any] = {"kind": "operation", "name": node.op, "path": where,
                              "out": [shape_str(s) for s in node.output_shapes]}
        if costs is not None and str(node.key) in costs.ops:
            op["cost"] = format_flops(costs.ops[str(node.key)])
        if node.error:  # the operation a failed recording stopped in
            op["error"] = node.error
        return op
    return {"kind": type(node).__name__, "name": node.name}


def lift_rows(rec: Graph, finest: Projection, order: list[BaseNode], parents: list[int],
              index: dict[Key, int], add_string: Callable[[str], int]) -> dict[str, Any]:
    """The page's parameters that a node outside the module holding them reads, for its
    script to draw each beside that module's box while the module is closed (as
    :meth:`~torchrecorder.projection.Projection.children` does): ``{"lift": rows, "paths":
    paths}`` or, where there are none, ``{}``.  A row is ``[parameter, reader, ...]``
    (positions in ``order``; a reader is the finest drawn node standing for a node that reads
    the parameter and does not hold it as its own, see ``drawn.held_by_reader``), only for
    parameters with a reader outside the layer ``parents`` puts them in; ``paths`` each
    node's module path (``add_string``'s index; -1: not a layer)."""
    nodes = rec.nodes
    readers: dict[int, list[int]] = {}
    for a, b in rec.links:
        i = index.get(a)
        param = dict.get(nodes, a)
        if i is None or not isinstance(param, ParamNode) or held_by_reader(nodes, b, param):
            continue
        try:
            drawn = finest.drawn_key(b)
        except GraphError:  # not reachable from the context
            continue
        t = index.get(drawn) if drawn is not None else None
        if t is None or t == i:
            continue
        got = readers.setdefault(i, [])
        if t not in got:
            got.append(t)
    rows = []
    for i, got in readers.items():
        holder = parents[i]
        if holder >= 0 and any(not _under(t, holder, parents) for t in got):
            rows.append([i, *got])
    if not rows:
        return {}
    return {"lift": rows, "paths": [add_string(n.path) if isinstance(n, LayerNode) else -1 for n in order]}


def lift_data(rec: Graph, finest: Projection, first: Projection, order: list[BaseNode], parents: list[int],
              index: dict[Key, int], rows: list[list[Any]], add_string: Callable[[str], int],
              box_attrs: Callable[[BaseNode], int]) -> dict[str, Any]:
    """:func:`lift_rows`, and ``"lift_box"``: for each of its rows, ``[layer, attrs, ...]``, the
    parameter's attributes (``box_attrs`` of the node, the page's index of the styler's
    ``style_node``) drawn beside the box of each call it was recorded in, named from that box down
    (``fc.weight``) as :meth:`~torchrecorder.projection.Projection.param_name` names it in
    ``first``, the page's first view.  Every parameter's own row (``rows``) gets the
    attributes it has where ``finest`` draws it (beside a module that never opens, or in its
    own module), whichever box the first view drew it beside."""
    lifted = lift_rows(rec, finest, order, parents, index, add_string)
    for i, node in enumerate(order):  # each parameter named where the finest drawing has it
        if isinstance(node, ParamNode):
            box = finest.beside(node)
            if box is not first.beside(node):
                with first.naming_beside(node, box):
                    rows[i][3] = box_attrs(node)
    boxes: list[list[int]] = []
    for row in lifted.get("lift", ()):
        i = row[0]
        node = order[i]
        if not isinstance(node, ParamNode):
            raise GraphError(f"a lifted node is not a parameter: {node.key!r}")
        got: list[int] = []
        key = node.parent_key  # the calls it was recorded in, innermost first
        while key is not None:
            layer = dict.get(rec.nodes, key)
            if not isinstance(layer, LayerNode):
                break
            c = index.get(key)
            if c is not None:
                with first.naming_beside(node, layer):
                    got += [c, box_attrs(node)]
            key = layer.parent_key
        boxes.append(got)
    return {**lifted, "lift_box": boxes} if boxes else lifted


def _under(i: int, top: int, parents: list[int]) -> bool:
    """Whether position ``i`` of the page's preorder lies inside the layer at ``top``."""
    while i >= 0:
        if i == top:
            return True
        i = parents[i]
    return False
