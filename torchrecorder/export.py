"""Save a recording as JSON and load it back, so that it can be drawn without running the model.

The JSON document (schema version :data:`SCHEMA_VERSION`)::

    {
      "format": "torchrecorder.graph",   # always this string
      "version": 1,                       # schema version; loaders refuse newer ones
      "name": "net",                      # the recording's name
      "error": null,                      # "ExcType: message" if the forward pass raised
      "failed_key": null,                 # key of the module call that raised
      "notes": ["..."],                   # only when the recording lost something (Graph.notes)
      "context": ["net", "input:x", ...], # keys directly in the context, in order
      "nodes": [ {node}, ... ],           # every node but the context, in recording order
      "edges": [["from_key", "to_key"], ...]
    }

Every node has ``key`` (unique string), ``kind`` (``"layer"``, ``"tensor"``,
``"param"`` or ``"op"``), ``name``, ``depth`` (the root module is 0) and
``parent`` (the key of the enclosing layer, ``null`` for the context).  Kinds
add:

* ``layer``: ``type`` (class name), ``path`` (dotted path in the root module),
  ``call_index`` (1 for a module's first call), ``num_params`` (elements owned
  directly), ``num_params_total`` (with children), ``num_buffers``,
  ``input_shapes``, ``output_shapes`` (lists of lists of ints), ``error``,
  ``subnets`` (keys of its children, in order);
* ``tensor``: ``shape`` (list of ints, ``null`` if unknown), ``dtype``
  (``"float32"``), ``device``, ``role`` (``"input"``, ``"output"`` or ``""``);
* ``param``: ``shape``, ``dtype``, ``device``, ``path``, ``numel``,
  ``requires_grad``;
* ``op``: ``op`` (the function's name), ``output_shapes``.

Tensors and modules themselves are never saved: a loaded graph's nodes have
``fn = None``.  Every renderer reads only this metadata, so a loaded graph
draws exactly like the recording.

>>> import torch, torchrecorder
>>> rec = torchrecorder.record(torch.nn.Linear(3, 2), "fc", (1, 3))
>>> again = loads(dumps(rec))
>>> torchrecorder.make_dot(again).source == torchrecorder.make_dot(rec).source
True
"""

from __future__ import annotations

import json
import os
from typing import Any, TypeVar, Union

from .errors import GraphError
from .graph import Graph
from .nodes import BaseNode, LayerNode, OpNode, OrderedSet, ParamNode, TensorNode

__all__ = ["FORMAT_NAME", "SCHEMA_VERSION", "dumps", "from_dict", "load", "loads", "save", "to_dict"]

#: value of the document's ``"format"`` field
FORMAT_NAME = "torchrecorder.graph"
#: the schema version written; documents with a larger version are refused
SCHEMA_VERSION = 1

G = TypeVar("G", bound=Graph)

_KINDS: dict[str, type[BaseNode]] = {
    "layer": LayerNode, "tensor": TensorNode, "param": ParamNode, "op": OpNode,
}


def _shape(shape: Any) -> Any:
    return None if shape is None else [int(d) for d in shape]


def _node_dict(node: BaseNode) -> dict[str, Any]:
    out: dict[str, Any] = {"key": node.key, "kind": node.kind, "name": node.name,
                           "depth": node.depth, "parent": node.parent}
    if isinstance(node, LayerNode):
        out.update(type=node.type_name, path=node.path, call_index=node.call_index,
                   num_params=node.num_params, num_params_total=node.num_params_total,
                   num_buffers=node.num_buffers, input_shapes=[_shape(s) for s in node.input_shapes],
                   output_shapes=[_shape(s) for s in node.output_shapes], error=node.error,
                   subnets=list(node.subnets))
    elif isinstance(node, TensorNode):
        out.update(shape=_shape(node.shape), dtype=node.dtype, device=node.device)
        if isinstance(node, ParamNode):
            out.update(path=node.path, numel=node.numel, requires_grad=node.requires_grad)
        else:
            out.update(role=node.role)
    elif isinstance(node, OpNode):
        out.update(op=node.op, output_shapes=[_shape(s) for s in node.output_shapes])
    return out


def to_dict(rec: Graph) -> dict[str, Any]:
    """The recording as a JSON-ready dict (see the module docstring for the schema)."""
    if not isinstance(rec, Graph):
        raise TypeError(f"expected a Recorder (or Graph) to export, got {type(rec).__name__}")
    for key, node in rec.nodes.items():
        if key is not None and node.kind not in _KINDS:
            raise TypeError(f"cannot export node {key!r} of kind {node.kind!r} "
                            f"({type(node).__name__}); known kinds: {sorted(_KINDS)}")
    doc: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": SCHEMA_VERSION,
        "name": rec.name,
        "error": rec.error,
        "failed_key": rec.failed_key,
    }
    notes = getattr(rec, "notes", None)
    if notes:
        doc["notes"] = list(notes)
    return {
        **doc,
        "context": list(rec.context.subnets),
        "nodes": [_node_dict(n) for k, n in rec.nodes.items() if k is not None],
        "edges": [[a, b] for a, b in rec.edges],
    }


def dumps(rec: Graph) -> str:
    """The recording as JSON text: one node or edge per line, non-ASCII text kept as it is."""
    doc = to_dict(rec)
    head = {k: v for k, v in doc.items() if k not in ("context", "nodes", "edges")}
    lines = ["{"]
    lines.extend(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in head.items())
    for field in ("context", "nodes", "edges"):
        items = [json.dumps(item, ensure_ascii=False) for item in doc[field]]
        body = ",\n".join(f"  {item}" for item in items)
        end = "," if field != "edges" else ""
        name = json.dumps(field)
        lines.append(f" {name}: [\n{body}\n ]{end}" if items else f" {name}: []{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def save(rec: Graph, path: Union[str, os.PathLike[str]]) -> None:
    """Write the recording as JSON to ``path``."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(dumps(rec))


def _tuple_shape(value: Any, where: str) -> Any:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(d, int) and not isinstance(d, bool)
                                              for d in value):
        raise ValueError(f"{where}: a shape must be a list of ints, got {value!r}")
    return tuple(value)


def _require(data: dict[str, Any], field: str, types: Any, where: str) -> Any:
    if field not in data:
        raise ValueError(f"{where}: missing field {field!r}")
    value = data[field]
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        raise ValueError(f"{where}: field {field!r} has the wrong type ({type(value).__name__})")
    return value


def _make_node(d: Any) -> BaseNode:
    if not isinstance(d, dict):
        raise ValueError(f"a node must be a JSON object, got {type(d).__name__}")
    key = _require(d, "key", str, "node")
    where = f"node {key!r}"
    kind = _require(d, "kind", str, where)
    cls = _KINDS.get(kind)
    if cls is None:
        raise ValueError(f"{where}: unknown kind {kind!r}; known kinds: {sorted(_KINDS)}")
    common = dict(name=_require(d, "name", str, where), depth=_require(d, "depth", int, where),
                  parent=_require(d, "parent", (str, type(None)), where), key=key)
    node: BaseNode
    if cls is LayerNode:
        layer = LayerNode(**common, type_name=_require(d, "type", str, where),
                          path=d.get("path", ""), call_index=d.get("call_index", 1))
        layer.num_params = d.get("num_params", 0)
        layer.num_params_total = d.get("num_params_total", 0)
        layer.num_buffers = d.get("num_buffers", 0)
        layer.input_shapes = [_tuple_shape(s, where) for s in d.get("input_shapes", [])]
        layer.output_shapes = [_tuple_shape(s, where) for s in d.get("output_shapes", [])]
        layer.error = d.get("error")
        layer.subnets = OrderedSet(d.get("subnets", []))
        node = layer
    elif cls is ParamNode:
        node = ParamNode(**common, shape=_tuple_shape(d.get("shape"), where), dtype=d.get("dtype", ""),
                         device=d.get("device", ""), path=d.get("path", ""), numel=d.get("numel", 0),
                         requires_grad=d.get("requires_grad", True))
    elif cls is TensorNode:
        node = TensorNode(**common, shape=_tuple_shape(d.get("shape"), where), dtype=d.get("dtype", ""),
                          device=d.get("device", ""), role=d.get("role", ""))
    else:
        node = OpNode(**common, op=d.get("op", ""),
                      output_shapes=[_tuple_shape(s, where) for s in d.get("output_shapes", [])])
    return node


def from_dict(data: Any, graph_cls: type[G] = Graph) -> G:  # type: ignore[assignment]
    """Rebuild a graph from :func:`to_dict`'s output, as an instance of ``graph_cls``.

    The nodes have ``fn = None``; renderers draw the result like the original.
    :func:`torchrecorder.load_json` asks for a
    :class:`~torchrecorder.recorder.Recorder`, which prints its layer table and
    shows itself in notebooks; no recording engine is built either way.

    Raises:
        ValueError: ``data`` is not a torchrecorder graph, comes from a newer
            schema version, or has a field of the wrong type (the message
            names the field).
        GraphError: the graph it describes breaks an invariant (a
            ``ValueError`` too).
    """
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise ValueError(f"not a torchrecorder graph: expected a JSON object with "
                         f"\"format\": {FORMAT_NAME!r}")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"invalid schema version {version!r}")
    if version > SCHEMA_VERSION:
        raise ValueError(f"this graph uses schema version {version}; this torchrecorder reads "
                         f"versions up to {SCHEMA_VERSION}: upgrade torchrecorder")
    rec = graph_cls(str(data.get("name", "net")))
    rec.error = data.get("error")
    rec.failed_key = data.get("failed_key")
    notes = data.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise ValueError("graph: field 'notes' must be a list of strings")
    rec.notes = list(notes)
    for d in _require(data, "nodes", list, "graph"):
        node = _make_node(d)
        if node.key in rec.nodes:
            raise ValueError(f"duplicate node key {node.key!r}")
        rec.nodes[node.key] = node
        rec.keys.reserve(str(node.key))
    rec.context.subnets = OrderedSet(_require(data, "context", list, "graph"))
    for edge in _require(data, "edges", list, "graph"):
        if not (isinstance(edge, list) and len(edge) == 2):
            raise ValueError(f"an edge must be a [from_key, to_key] pair, got {edge!r}")
        a, b = edge
        if a not in rec.nodes or b not in rec.nodes:
            raise ValueError(f"edge {edge!r} joins nodes that are not in the graph")
        rec.edges.add((a, b))
    try:
        rec.lint()
    except GraphError as exc:
        raise GraphError(f"inconsistent graph: {exc}") from None
    return rec


def loads(text: Union[str, bytes], graph_cls: type[G] = Graph) -> G:  # type: ignore[assignment]
    """Rebuild a graph from JSON text (see :func:`from_dict`)."""
    return from_dict(json.loads(text), graph_cls)


def load(path: Union[str, os.PathLike[str]], graph_cls: type[G] = Graph) -> G:  # type: ignore[assignment]
    """Rebuild a graph from a JSON file written by :func:`save` or ``fmt="json"``."""
    with open(path, encoding="utf-8") as fh:
        return loads(fh.read(), graph_cls)

