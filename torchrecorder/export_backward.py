"""The backward graph of a recording in its JSON document (the optional ``"backward"`` field).

A recording made with ``record(..., backward=True)`` keeps the autograd graph of its pass
(:class:`~torchrecorder.graph.AutogradGraph`).  :mod:`torchrecorder.export` writes it as::

    "backward": {
      "grad_enabled": true,
      "nodes": [{"name": "AddmmBackward0", "scope": "0", "forward": "linear",
                 "param": "", "shape": null, "saved": [["mat1", [1, 3]]], "unread": [],
                 "stored": [["float32", 0]]}, ...],  # (dtype, storage) of each saved tensor
      "edges": [[0, 2], ...],             # node i is in nodes[j]'s next_functions
      "outputs": [[2, "output:0"], ...],  # (node index, key of the output tensor node)
      "storages": [[12, ""], ...]         # (bytes, kind) of each storage saved tensors live in
    }

``stored`` and ``storages`` (what ``cost(rec).saved_bytes`` reads; see
:class:`~torchrecorder.graph.AutogradGraph`) are optional too: a document without them
loads with ``storages = None`` (bytes saved for backward unknown).

The field is absent when no backward graph was kept, so documents without it read as
before and older readers (which ignore unknown fields) still read documents with it.  A
loaded recording draws ``make_dot(rec, backward=True)`` exactly as the original does.

>>> import torch, torchrecorder
>>> from torchrecorder.export import dumps, loads
>>> rec = torchrecorder.record(torch.nn.Linear(3, 2), "fc", (1, 3), backward=True)
>>> again = loads(dumps(rec))
>>> [n.name for n in again.backward.nodes] == [n.name for n in rec.backward.nodes]
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .graph import AutogradGraph, AutogradNode
from .nodes import TensorNode

__all__ = ["backward_from_dict", "backward_to_dict"]


def backward_to_dict(bw: AutogradGraph) -> dict[str, Any]:
    """``bw`` as a JSON-ready dict (see the module docstring)."""
    return {
        "grad_enabled": bw.grad_enabled,
        "nodes": [{"name": n.name, "scope": n.scope, "forward": n.forward, "param": n.param,
                   "shape": None if n.shape is None else [int(d) for d in n.shape],
                   "saved": [[name, [int(d) for d in shape]] for name, shape in n.saved],
                   "unread": list(n.unread),
                   "stored": [[dtype, int(s)] for dtype, s in n.stored]} for n in bw.nodes],
        "edges": [[int(a), int(b)] for a, b in bw.edges],
        "outputs": [[int(i), key] for i, key in bw.outputs],
        **({} if bw.storages is None else {"storages": [[int(n), kind] for n, kind in bw.storages]}),
    }


#: the kinds of a storage saved tensors live in (see AutogradGraph.storages)
_KINDS = ("", "model", "number")


def _bad(where: str, expected: str) -> ValueError:
    return ValueError(f"backward: {where} has the wrong type or value: expected {expected}")


def _is_int(v: Any, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v < hi


def _shape(v: Any, where: str) -> tuple[int, ...]:
    if not isinstance(v, list) or not all(_is_int(d, -1, 2**63) for d in v):
        raise _bad(where, "a shape (a list of ints >= -1)")
    return tuple(v)


def _key(v: Any, where: str) -> Any:
    """A key an autograd node names: its module call (one the pass pruned, or none, puts it at
    the top level) or the operation it is the ``grad_fn`` of (kept for reference only)."""
    if v is not None and not isinstance(v, str):
        raise _bad(where, "a node key (a string) or null")
    return v


def _node(d: Any, i: int, storages: int) -> AutogradNode:
    where = f"nodes[{i}]"
    if not isinstance(d, dict):
        raise _bad(where, "a JSON object")
    name = d.get("name")
    if not isinstance(name, str):
        raise _bad(f"{where}.name", "a string")
    param = d.get("param", "")
    if not isinstance(param, str):
        raise _bad(f"{where}.param", "a string")
    shape = d.get("shape")
    saved = d.get("saved", [])
    if not isinstance(saved, list) or not all(isinstance(s, list) and len(s) == 2 and isinstance(s[0], str)
                                              for s in saved):
        raise _bad(f"{where}.saved", "a list of [name, shape] pairs")
    unread = d.get("unread", [])
    if not isinstance(unread, list) or not all(isinstance(u, str) for u in unread):
        raise _bad(f"{where}.unread", "a list of strings")
    stored = d.get("stored", [])
    if not isinstance(stored, list) or not all(
            isinstance(s, list) and len(s) == 2 and isinstance(s[0], str) and _is_int(s[1], 0, storages)
            for s in stored) or (stored and len(stored) != len(saved)):
        raise _bad(f"{where}.stored", f"a [dtype, storage index < {storages}] pair for each saved tensor")
    return AutogradNode(name, _key(d.get("scope"), f"{where}.scope"),
                        _key(d.get("forward"), f"{where}.forward"), param,
                        None if shape is None else _shape(shape, f"{where}.shape"),
                        [(s[0], _shape(s[1], f"{where}.saved")) for s in saved], list(unread),
                        [(s[0], s[1]) for s in stored])


def backward_from_dict(data: Any, nodes: Mapping[Any, Any]) -> AutogradGraph:
    """The :class:`~torchrecorder.graph.AutogradGraph` of a document's ``"backward"`` field,
    every field checked: its outputs must name tensor nodes of ``nodes`` (the loaded
    graph's), its indices nodes of the backward graph, and its edges run forward (as
    recorded), so that the backward graph it loads draws.

    Raises:
        ValueError: a field has the wrong type or value (the message names it).
    """
    if not isinstance(data, dict):
        raise _bad("the field", "a JSON object")
    grad_enabled = data.get("grad_enabled", True)
    if not isinstance(grad_enabled, bool):
        raise _bad("grad_enabled", "true or false")
    raw = {f: data.get(f, []) for f in ("nodes", "edges", "outputs")}
    for field, value in raw.items():
        if not isinstance(value, list):
            raise _bad(field, "a JSON array")
    bw = AutogradGraph(grad_enabled)
    storages = data.get("storages")
    if storages is not None:
        if not isinstance(storages, list) or not all(
                isinstance(s, list) and len(s) == 2 and _is_int(s[0], 0, 2**63) and s[1] in _KINDS
                for s in storages):
            raise _bad("storages", 'a list of [bytes, kind] pairs, kind "", "model" or "number"')
        bw.storages = [(s[0], s[1]) for s in storages]
    bw.nodes = [_node(d, i, len(bw.storages or ())) for i, d in enumerate(raw["nodes"])]
    n = len(bw.nodes)
    for i, e in enumerate(raw["edges"]):
        if not (isinstance(e, list) and len(e) == 2 and all(_is_int(x, 0, n) for x in e) and e[0] < e[1]):
            raise _bad(f"edges[{i}]", f"a pair [i, j] of node indices, 0 <= i < j < {n}")
        bw.edges.append((e[0], e[1]))
    for i, o in enumerate(raw["outputs"]):
        if not (isinstance(o, list) and len(o) == 2 and _is_int(o[0], 0, n) and isinstance(o[1], str)):
            raise _bad(f"outputs[{i}]", "a pair [node index, output tensor key]")
        if not isinstance(nodes.get(o[1]), TensorNode):
            raise ValueError(f"backward: outputs[{i}] names {o[1][:40]!r}, which is not a tensor node "
                             "of the graph")
        bw.outputs.append((o[0], o[1]))
    return bw
