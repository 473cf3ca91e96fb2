"""Save a recording as JSON and load it back, so that it can be drawn without running the model.

The JSON document (schema version :data:`SCHEMA_VERSION`)::

    {
      "format": "torchrecorder.graph",   # always this string
      "version": 1,                       # schema version; loaders refuse newer ones
      "name": "net",                      # the recording's name
      "error": null,                      # "ExcType: message" if the forward pass raised
      "failed_key": null,                 # key of the module call that raised
      "notes": ["..."],                   # only when the recording lost something (Graph.notes)
      "sources": [["/path/model.py", 12, "forward"], ...],  # lines of code, when any is known
      "backward": {...},                  # only when recorded with backward=True (export_backward)
      "op_flops": [["h.0/linear", "h.0", 512], ...],  # only for a recording: what cost() reads
      "output_dtypes": {"h.0": ["float32"], ...},     # (Graph.op_flops, Graph.output_dtypes)
      "op_backward_flops": [["h.0/linear", "h.0", 1024], ...],  # with a backward graph
      "call_times": {"h.0": 0.0012, ...}, "timing_subtracted": 0.0003,  # with timing=True
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
  ``input_shapes``, ``output_shapes`` (lists of lists of ints; ``-1`` for the
  ragged dimension of a nested tensor), ``error``, ``subnets`` (keys of its
  children, in order), and, only where set, ``opaque`` and ``unfused`` (see
  :class:`~torchrecorder.nodes.LayerNode`);
* ``tensor``: ``shape`` (list of ints, ``null`` if unknown), ``dtype``
  (``"float32"``), ``device``, ``role`` (``"input"``, ``"output"`` or ``""``);
* ``param``: ``shape``, ``dtype``, ``device``, ``path``, ``numel``,
  ``requires_grad``, and, only where other modules hold the same parameter (tied
  weights), ``held_as``: their dotted paths (optional; a document that has it on some
  parameter loads the others with ``held_as = ()``, one that has it on none with ``None``:
  not known);
* ``op``: ``op`` (the function's name), ``output_shapes``, ``grad_fn`` (the class name of
  the autograd node it made, ``""`` if none; optional), ``error`` (``"ExcType: message"``
  for the operation a failed recording stopped in, which has no outputs; optional).

A layer or op whose line of code is known (:attr:`~torchrecorder.nodes.BaseNode.source`)
has ``source``: its index in the document's ``sources``, a list of ``[file, line,
function]`` (each line once).  Both are optional: a document without them (written before
they existed, or from ``record(..., source=False)``) loads with ``node.source = None``, and
a reader that ignores them reads the rest as before; the schema version stays 1.  So are
the fields :func:`torchrecorder.cost` reads: a loaded document gives the cost the recording
gave (its FLOPs, backward FLOPs, bytes saved for backward and measured times), and one
saved without them the parts it has.

Tensors and modules themselves are never saved: a loaded graph's nodes keep no
object (``kept`` is ``None``; ``fn`` is ``None`` for layers, and what 1.0.3 code
reads for tensors and operations: see :mod:`torchrecorder.seed`).  Every
renderer reads only this metadata, so a loaded graph draws exactly like the
recording.

>>> import torch, torchrecorder
>>> rec = torchrecorder.record(torch.nn.Linear(3, 2), "fc", (1, 3))
>>> again = loads(dumps(rec))
>>> torchrecorder.make_dot(again).source == torchrecorder.make_dot(rec).source
True
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Optional, TypeVar, Union

from ._files import open_regular, write_atomically
from .errors import GraphError, not_a_recording
from .export_backward import backward_from_dict, backward_to_dict
from .graph import Graph
from .nodes import BaseNode, LayerNode, OpNode, OrderedSet, ParamNode, Source, TensorNode

__all__ = ["FORMAT_NAME", "INT_RANGE", "MAX_JSON_BYTES", "SCHEMA_VERSION", "dumps", "from_dict", "load",
           "loads", "read_limited", "save", "to_dict"]

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


def _node_dict(node: BaseNode, sources: dict[Source, int]) -> dict[str, Any]:
    """``node`` as a JSON object; its source line's index in ``sources`` (added if new)."""
    out: dict[str, Any] = {"key": node.key, "kind": node.kind, "name": node.name,
                           "depth": node.depth, "parent": node.parent_key}
    if isinstance(node, LayerNode):
        out.update(type=node.type_name, path=node.path, call_index=node.call_index,
                   num_params=node.num_params, num_params_total=node.num_params_total,
                   num_buffers=node.num_buffers, input_shapes=[_shape(s) for s in node.input_shapes],
                   output_shapes=[_shape(s) for s in node.output_shapes], error=node.error,
                   subnets=list(node.subnet_keys))
        if node.opaque:
            out["opaque"] = node.opaque
        if node.unfused:
            out["unfused"] = node.unfused
    elif isinstance(node, TensorNode):
        out.update(shape=_shape(node.shape), dtype=node.dtype, device=node.device)
        if isinstance(node, ParamNode):
            out.update(path=node.path, numel=node.numel, requires_grad=node.requires_grad)
            if node.held_as:
                out["held_as"] = list(node.held_as)
        else:
            out.update(role=node.role)
    elif isinstance(node, OpNode):
        out.update(op=node.op, output_shapes=[_shape(s) for s in node.output_shapes])
        if node.grad_fn:
            out["grad_fn"] = node.grad_fn
        if node.error:
            out["error"] = node.error
    src = node.source
    if isinstance(src, Source):
        out["source"] = sources.setdefault(src, len(sources))
    return out


def to_dict(rec: Graph) -> dict[str, Any]:
    """The recording as a JSON-ready dict (see the module docstring for the schema)."""
    if not isinstance(rec, Graph):
        raise not_a_recording(rec, "export")
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
    sources: dict[Source, int] = {}
    nodes = [_node_dict(n, sources) for k, n in rec.nodes.items() if k is not None]
    if sources:
        doc["sources"] = [[src.filename, src.lineno, src.function] for src in sources]
    backward = getattr(rec, "backward", None)
    if backward is not None:
        doc["backward"] = backward_to_dict(backward)

    if rec.op_args is not None or rec.op_flops is not None:  # what torchrecorder.cost reads
        from .cost import op_backward_flops, op_flops  # (torch's flop counter, imported when needed)

        doc["op_flops"] = [[k, s, n] for k, s, n in op_flops(rec)]
        backward_flops = op_backward_flops(rec)
        if backward_flops is not None:
            doc["op_backward_flops"] = [[k, s, n] for k, s, n in backward_flops]
    if rec.output_dtypes is not None:
        doc["output_dtypes"] = {str(k): list(v) for k, v in rec.output_dtypes.items()}
    if rec.call_times is not None:
        doc["call_times"] = {str(k): float(v) for k, v in rec.call_times.items()}
        doc["timing_subtracted"] = float(rec.timing_subtracted)
    return {
        **doc,
        "context": list(rec.context.subnet_keys),
        "nodes": nodes,
        "edges": [[a, b] for a, b in rec.links],
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
    text = "\n".join(lines) + "\n"
    if _SURROGATE.search(text):  # a lone surrogate (from a name) cannot be written as UTF-8
        text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


# json.dumps writes them only inside strings, where a \uXXXX escape reads back as the same text
_SURROGATE = re.compile("[\ud800-\udfff]")


def save(rec: Graph, path: Union[str, os.PathLike[str]]) -> None:
    """Write the recording as JSON to ``path``, atomically: on any failure the file at
    ``path`` is left as it was."""
    write_atomically(path, dumps(rec))


_MISSING: Any = object()


def _describe(value: Any) -> str:
    """A short description of a JSON value for an error message (never a deep ``repr``)."""
    if value is None or isinstance(value, (bool, int, float)):
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "..."
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:37]) + "..."
    if isinstance(value, list):
        return "a JSON array"
    return "a JSON object" if isinstance(value, dict) else f"a {type(value).__name__}"


#: the integers a document may hold: those of a signed 64-bit integer, as torch counts sizes
#: (a count that does not fit would load, then fail to draw or print)
INT_RANGE = (-(2**63), 2**63 - 1)


def _is_int(value: Any, least: Optional[int] = None) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)
            and (INT_RANGE[0] if least is None else least) <= value <= INT_RANGE[1])


def _is_shape(value: Any) -> bool:
    # -1: the ragged dimension of a nested tensor
    return value is None or (isinstance(value, list) and all(_is_int(d, -1) for d in value))


def _is_key(value: Any) -> bool:
    return isinstance(value, str)


#: what each kind of field holds: a test, the words for an error message, and for a list the
#: test of its items (to name the first bad one)
_CHECKS: dict[str, tuple[Any, str, Any]] = {
    "str": (lambda v: isinstance(v, str), "a string", None),
    "str?": (lambda v: v is None or isinstance(v, str), "a string or null", None),
    "int": (_is_int, "a 64-bit integer", None),
    "count": (lambda v: _is_int(v, 0), "an integer >= 0 and < 2**63", None),
    "index": (lambda v: _is_int(v, 1), "an integer >= 1 and < 2**63", None),
    "bool": (lambda v: isinstance(v, bool), "true or false", None),
    "shape": (_is_shape, "a shape (a list of ints >= -1 and < 2**63; -1 is ragged) or null",
              lambda d: _is_int(d, -1)),
    "shapes": (lambda v: isinstance(v, list) and all(s is not None and _is_shape(s) for s in v),
               "a list of shapes (lists of ints >= -1 and < 2**63)",
               lambda s: s is not None and _is_shape(s)),
    "keys": (lambda v: isinstance(v, list) and all(_is_key(k) for k in v),
             "a list of node keys (strings)", _is_key),
    "role": (lambda v: v in ("", "input", "output"), "one of \"\", \"input\", \"output\"", None),
    "strs?": (lambda v: v is None or (isinstance(v, list) and all(isinstance(s, str) for s in v)),
              "a list of strings", lambda s: isinstance(s, str)),
}

#: kind -> field -> (check, default); a field without a default is required
_FIELDS: dict[str, dict[str, tuple[str, Any]]] = {
    "layer": {"type": ("str", _MISSING), "path": ("str", ""), "call_index": ("index", 1),
              "num_params": ("count", 0), "num_params_total": ("count", 0),
              "num_buffers": ("count", 0), "input_shapes": ("shapes", []),
              "output_shapes": ("shapes", []), "error": ("str?", None), "subnets": ("keys", []),
              "opaque": ("str", ""), "unfused": ("str", "")},
    "tensor": {"shape": ("shape", None), "dtype": ("str", ""), "device": ("str", ""),
               "role": ("role", "")},
    "param": {"shape": ("shape", None), "dtype": ("str", ""), "device": ("str", ""),
              "path": ("str", ""), "numel": ("count", 0), "requires_grad": ("bool", True),
              "held_as": ("strs?", None)},
    "op": {"op": ("str", ""), "output_shapes": ("shapes", []), "grad_fn": ("str", ""),
           "error": ("str?", None)},
}


def _field(data: dict[str, Any], field: str, check: str, where: str, default: Any = _MISSING) -> Any:
    """``data[field]`` if it passes ``check`` (a key of :data:`_CHECKS`), else ``ValueError``
    naming the field; ``default`` when it is missing (required if no default)."""
    if field not in data:
        if default is _MISSING:
            raise ValueError(f"{where}: missing field {field!r}")
        return default
    value = data[field]
    test, expected, item_test = _CHECKS[check]
    if not test(value):
        got = _describe(value)
        if item_test is not None and isinstance(value, list):
            i = next(i for i, item in enumerate(value) if not item_test(item))
            got += f" whose item {i} is {_describe(value[i])}"
        raise ValueError(f"{where}: field {field!r} has the wrong type or value: expected "
                         f"{expected}, got {got}")
    return value


def _shapes(values: list[Any]) -> list[Any]:
    return [None if s is None else tuple(s) for s in values]  # (None: a tensor's unknown shape)


def _sources(data: dict[str, Any]) -> list[Source]:
    """The document's ``sources`` table (empty when it has none)."""
    table = data.get("sources", [])
    if not isinstance(table, list):
        raise ValueError(f"graph: field 'sources' has the wrong type or value: expected a JSON "
                         f"array, got {_describe(table)}")
    out = []
    for i, item in enumerate(table):
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                and _is_int(item[1], 0) and isinstance(item[2], str)):
            raise ValueError(f"sources[{i}]: a line of code must be a [file, line, function] "
                             f"array (a string, an integer >= 0, a string), got {_describe(item)}")
        out.append(Source(item[0], item[1], item[2]))
    return out


def _make_node(d: Any, index: int, sources: list[Source]) -> BaseNode:
    if not isinstance(d, dict):
        raise ValueError(f"nodes[{index}]: a node must be a JSON object, got {_describe(d)}")
    key = _field(d, "key", "str", f"nodes[{index}]")
    where = f"node {_describe(key)}"
    kind = _field(d, "kind", "str", where)
    cls = _KINDS.get(kind)
    if cls is None:
        raise ValueError(f"{where}: unknown kind {_describe(kind)}; known kinds: {sorted(_KINDS)}")
    common = dict(name=_field(d, "name", "str", where), depth=_field(d, "depth", "int", where),
                  parent=_field(d, "parent", "str?", where), key=key)
    f = {name: _field(d, name, check, where, default) for name, (check, default) in _FIELDS[kind].items()}
    node: BaseNode
    if cls is LayerNode:
        layer = LayerNode(**common, type_name=f["type"], path=f["path"], call_index=f["call_index"])
        layer.num_params = f["num_params"]
        layer.num_params_total = f["num_params_total"]
        layer.num_buffers = f["num_buffers"]
        layer.input_shapes = _shapes(f["input_shapes"])
        layer.output_shapes = _shapes(f["output_shapes"])
        layer.error = f["error"]
        layer.subnet_keys = OrderedSet(f["subnets"])
        layer.opaque = f["opaque"]
        layer.unfused = f["unfused"]
        node = layer
    elif cls is ParamNode:
        node = ParamNode(**common, shape=_shapes([f["shape"]])[0], dtype=f["dtype"], device=f["device"],
                         path=f["path"], numel=f["numel"], requires_grad=f["requires_grad"],
                         held_as=None if f["held_as"] is None else tuple(f["held_as"]))
    elif cls is TensorNode:
        node = TensorNode(**common, shape=_shapes([f["shape"]])[0], dtype=f["dtype"],
                          device=f["device"], role=f["role"])
    else:
        node = OpNode(**common, op=f["op"], output_shapes=_shapes(f["output_shapes"]), grad_fn=f["grad_fn"])
        node.error = f["error"]
    if "source" in d:
        at = d["source"]
        if not (_is_int(at, 0) and at < len(sources)):
            raise ValueError(f"{where}: field 'source' must be an index into 'sources' (0 to "
                             f"{len(sources) - 1}), got {_describe(at)}")
        node.source = sources[at]
    return node


def from_dict(data: Any, graph_cls: type[G] = Graph) -> G:  # type: ignore[assignment]
    """Rebuild a graph from :func:`to_dict`'s output, as an instance of ``graph_cls``.

    The nodes have ``fn = None``; renderers draw the result like the original.
    :func:`torchrecorder.load_json` asks for a
    :class:`~torchrecorder.recorder.Recorder`, which prints its layer table and
    shows itself in notebooks; no recording engine is built either way.

    Every field is checked (its type, and for keys that it names a node of the
    right kind) before anything is built, so a document that loads also draws,
    prints and exports.

    Raises:
        ValueError: ``data`` is not a torchrecorder graph, comes from a newer
            schema version, or has a field of the wrong type or a key that
            names no node (the message names the field).
        GraphError: the graph it describes breaks an invariant (a
            ``ValueError`` too).
    """
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise ValueError(f"not a torchrecorder graph: expected a JSON object with "
                         f"\"format\": {FORMAT_NAME!r}")
    version = data.get("version")
    if not isinstance(version, int) or not _is_int(version, 1):
        raise ValueError(f"invalid schema version {_describe(version)}")
    if version > SCHEMA_VERSION:
        raise ValueError(f"this graph uses schema version {version}; this torchrecorder reads "
                         f"versions up to {SCHEMA_VERSION}: upgrade torchrecorder")
    rec = graph_cls(_field(data, "name", "str", "graph", "net"))
    rec.error = _field(data, "error", "str?", "graph", None)
    failed_key = _field(data, "failed_key", "str?", "graph", None)
    nodes = _list(data, "nodes")
    context = _field(data, "context", "keys", "graph")
    edges = _list(data, "edges")
    notes = data.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise ValueError("graph: field 'notes' must be a list of strings")
    rec.notes = list(notes)
    sources = _sources(data)
    flops, dtypes = data.get("op_flops"), data.get("output_dtypes")
    for i, d in enumerate(nodes):
        node = _make_node(d, i, sources)
        if node.key in rec.nodes:
            raise ValueError(f"duplicate node key {_describe(node.key)}")
        rec.nodes[node.key] = node
        rec.keys.reserve(str(node.key))
    for key in context:
        if key not in rec.nodes:
            raise ValueError(f"graph: field 'context' names {_describe(key)}, which is not a node")
    rec.context.subnet_keys = OrderedSet(context)
    params = [n for n in rec.nodes.values() if isinstance(n, ParamNode)]
    if any(p.held_as is not None for p in params):  # written knowing the names: the rest hold none
        for p in params:
            if p.held_as is None:
                p.held_as = ()
    rec.nodes.adopt(rec.nodes.values())
    for i, edge in enumerate(edges):
        if not (isinstance(edge, list) and len(edge) == 2 and all(isinstance(k, str) for k in edge)):
            raise ValueError(f"edges[{i}]: an edge must be a [from_key, to_key] pair of strings, "
                             f"got {_describe(edge)}")
        a, b = edge
        if a not in rec.nodes or b not in rec.nodes:
            raise ValueError(f"edges[{i}]: edge [{_describe(a)}, {_describe(b)}] joins nodes that "
                             "are not in the graph")
        rec.links.add((a, b))
    if failed_key is not None and not isinstance(rec.nodes.get(failed_key), LayerNode):
        raise ValueError(f"graph: field 'failed_key' names {_describe(failed_key)}, which is not a "
                         "module call of the graph")
    rec.failed_key = failed_key
    if flops is not None:
        rec.op_flops = _op_flops(flops, rec)
    if data.get("op_backward_flops") is not None:
        rec.op_backward_flops = _op_flops(data["op_backward_flops"], rec, "op_backward_flops")
    if dtypes is not None:
        rec.output_dtypes = _output_dtypes(dtypes, rec)
    if data.get("call_times") is not None:
        rec.call_times, rec.timing_subtracted = _call_times(data, rec)
    try:
        rec.lint()
    except GraphError as exc:
        raise GraphError(f"inconsistent graph: {exc}") from None
    if "backward" in data:
        rec.backward = backward_from_dict(data["backward"], rec.nodes)
    return rec


def _op_flops(value: Any, rec: Graph,
              field: str = "op_flops") -> list[tuple[Optional[str], Optional[str], int]]:
    """The ``op_flops`` (or ``op_backward_flops``) field: ``[op key, key of the call that ran it
    or null, FLOPs]`` triples."""
    if not isinstance(value, list):
        raise ValueError(f"graph: field {field!r} must be a list, got {_describe(value)}")
    out: list[tuple[Optional[str], Optional[str], int]] = []
    for i, item in enumerate(value):
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                and (item[1] is None or isinstance(rec.nodes.get(item[1]), LayerNode))
                and isinstance(item[2], int) and _is_int(item[2], 0)):
            raise ValueError(f"graph: field {field!r}, item {i}: expected [op key, key of a module call "
                             f"or null, FLOPs >= 0], got {_describe(item)}")
        out.append((item[0], item[1], item[2]))
    return out


def _call_times(data: dict[str, Any], rec: Graph) -> tuple[dict[Optional[str], float], float]:
    """The ``call_times`` field (module call key -> seconds) and ``timing_subtracted``."""
    value, subtracted = data["call_times"], data.get("timing_subtracted", 0.0)
    if not isinstance(value, dict):
        raise ValueError(f"graph: field 'call_times' must be an object, got {_describe(value)}")
    for key, seconds in value.items():
        if not isinstance(rec.nodes.get(key), LayerNode) or not _is_seconds(seconds):
            raise ValueError(f"graph: field 'call_times', item {_describe(key)}: expected a module "
                             f"call's key and a number of seconds >= 0, got {_describe(seconds)}")
    if not _is_seconds(subtracted):
        raise ValueError(f"graph: field 'timing_subtracted' must be a number of seconds >= 0, "
                         f"got {_describe(subtracted)}")
    return {k: float(v) for k, v in value.items()}, float(subtracted)


def _is_seconds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf")


def _output_dtypes(value: Any, rec: Graph) -> dict[Optional[str], list[str]]:
    """The ``output_dtypes`` field: module call key -> the dtype names of its outputs."""
    if not isinstance(value, dict):
        raise ValueError(f"graph: field 'output_dtypes' must be an object, got {_describe(value)}")
    for key, names in value.items():
        if not isinstance(rec.nodes.get(key), LayerNode) or not (
                isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise ValueError(f"graph: field 'output_dtypes', item {_describe(key)}: expected a module "
                             f"call's key and a list of dtype names, got {_describe(names)}")
    return {k: list(v) for k, v in value.items()}


def _list(data: dict[str, Any], field: str) -> list[Any]:
    if field not in data:
        raise ValueError(f"graph: missing field {field!r}")
    value = data[field]
    if not isinstance(value, list):
        raise ValueError(f"graph: field {field!r} has the wrong type or value: expected a JSON "
                         f"array, got {_describe(value)}")
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused if it names a key twice (json would keep the last one silently,
    so a second ``"format"`` could hide the first)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"not a valid torchrecorder graph: duplicate key {_describe(key)} "
                                 "in a JSON object")
            seen.add(key)
    return out


def _constant(name: str) -> Any:
    raise ValueError(f"not a valid torchrecorder graph: {name} is not a JSON value "
                     "(JSON has no NaN or Infinity)")


def loads(text: Union[str, bytes], graph_cls: type[G] = Graph) -> G:  # type: ignore[assignment]
    """Rebuild a graph from JSON text (see :func:`from_dict`); a leading byte-order mark is
    skipped.

    Raises:
        ValueError: the text is not JSON (or nests too deeply to read, names a key twice in
            one object, or holds ``NaN`` or ``Infinity``), or see :func:`from_dict`.
    """
    if isinstance(text, str) and text.startswith("\ufeff"):
        text = text[1:]
    try:
        data = json.loads(text, object_pairs_hook=_object, parse_constant=_constant)
    except RecursionError:
        raise ValueError("not a torchrecorder graph: the JSON nests arrays or objects too "
                         "deeply to read") from None
    except json.JSONDecodeError as exc:  # (json's message gives only where it stopped)
        what = "is not valid JSON (a file cut short, or edited by hand?)" if exc.doc.strip() else "is empty"
        raise json.JSONDecodeError(f"not a torchrecorder graph: the text {what}: {exc.msg}",
                                   exc.doc, exc.pos) from None
    return from_dict(data, graph_cls)


#: the largest file :func:`load` reads unless told otherwise (``max_bytes=``): 256 MiB, some
#: ten times the JSON of a recorded 70-billion-parameter transformer
MAX_JSON_BYTES = 256 * 2**20

def read_limited(path: Union[str, os.PathLike[str]], max_bytes: Optional[int] = MAX_JSON_BYTES) -> bytes:
    """The bytes of the regular file at ``path``, at most ``max_bytes`` of them (``None``: no limit).

    The file is opened without blocking and checked before anything is read, so a named
    pipe, a device (``/dev/zero``) or a socket is refused instead of waiting for a writer
    or reading forever.

    Raises:
        ValueError: ``path`` is not a regular file, or holds more than ``max_bytes`` bytes;
            ``max_bytes`` is not an int >= 0 or ``None``.
        IsADirectoryError: ``path`` is a directory.
        OSError: the file cannot be opened or read.
    """
    if max_bytes is not None and (not isinstance(max_bytes, int) or isinstance(max_bytes, bool)
                                  or max_bytes < 0):
        raise ValueError(f"max_bytes must be an int >= 0 or None (no limit), got {max_bytes!r}")
    name = os.fspath(path)
    fh, st = open_regular(name, "the graph")
    with fh:
        limit = max_bytes
        if limit is not None and st.st_size > limit:
            raise ValueError(f"{name!r} holds {st.st_size:,} bytes, more than the {limit:,} read "
                             "by default: pass max_bytes=None (or a larger limit) to read it")
        data = fh.read() if limit is None else fh.read(limit + 1)
    if limit is not None and len(data) > limit:  # it grew while being read
        raise ValueError(f"{name!r} holds more than {limit:,} bytes: pass max_bytes=None "
                         "(or a larger limit) to read it")
    return data


def load(path: Union[str, os.PathLike[str]], graph_cls: type[G] = Graph,  # type: ignore[assignment]
         *, max_bytes: Optional[int] = MAX_JSON_BYTES) -> G:
    """Rebuild a graph from a JSON file written by :func:`save` or ``fmt="json"`` (UTF-8, with
    or without a byte-order mark), reading at most ``max_bytes`` (see :func:`read_limited`)."""
    data = read_limited(path, max_bytes)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{os.fspath(path)!r} is not UTF-8 text: {exc}") from None
    try:
        return loads(text, graph_cls)
    except json.JSONDecodeError as exc:
        raise json.JSONDecodeError(f"{os.fspath(path)!r}: {exc.msg}", exc.doc, exc.pos) from None
