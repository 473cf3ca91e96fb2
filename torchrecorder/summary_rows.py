"""The rows of the layer table and their statistics: ``depth-idx`` labels as torchinfo numbers
them, containers that are never called, parameter counts, tied parameters, mult-adds.

Everything here reads node metadata (no live module), so a graph loaded from
JSON gives the same rows.  :mod:`torchrecorder.summary` formats them.

How torchinfo (1.8) numbers its rows, and so how these rows are numbered:

* one row per module *call*, in the order the calls start; a module called
  twice has two rows, each with its own label;
* a row's depth is the module's depth in the module tree (the number of
  components of its dotted path), not the depth of the call;
* before a call, each ancestor of the module (depth 1 and deeper) that is not
  the latest row at its depth is inserted as a row of its own: a
  ``ModuleList`` or ``ModuleDict`` that is never called gets a row (and a
  label) before its first child's call, and again when a call of another
  module came in between; such a container keeps the label of its last row;
* ``idx`` counts the rows at each depth from 1; the network is ``0-1``.

A network that calls itself (``return self(x, depth - 1)``) has no place in its own module
tree: such a call is a row at the depth of the call, and the module tree of what runs in it
starts below it (torchinfo lists the calls inside it at depth 1, as if they ran outside).

A module registered at two places in the tree is placed by its first dotted
path here; torchinfo places it by its last.
"""

from __future__ import annotations

import math
from typing import Optional

from .graph import Graph
from .nodes import Key, LayerNode, ParamNode, TensorNode, itemsize
from .projection.params import ParamHolders

__all__ = ["Row", "Stats", "label_paths", "layer_rows"]


class Row:
    """One row of the layer table: a module call, or an ancestor that was not the latest row
    at its depth (a container never called, such as a ``ModuleList``).

    Attributes:
        key: the call's node key; for an inserted ancestor, its dotted path (with ``#0``
            added when a node already has that key).
        path: the module's dotted path (``""`` for the network).
        depth: the module's depth in the module tree (torchinfo's depth).
        layer: the call's node; ``None`` for an inserted ancestor.
        label: ``"depth-idx"``; an ancestor inserted several times keeps its last label.
    """

    __slots__ = ("depth", "key", "label", "layer", "path")

    def __init__(self, key: Key, path: str, depth: int, layer: Optional[LayerNode]) -> None:
        self.key = key
        self.path = path
        self.depth = depth
        self.layer = layer
        self.label = ""

    def __repr__(self) -> str:
        return f"Row({self.key!r}, {self.label})"


def _offsets(rec: Graph) -> dict[Key, int]:
    """Call key -> the depth at which its module tree starts: 0, or, inside a call of the
    network made by the network itself (a ``forward`` that recurses through ``self(...)``),
    the depth of that call, so that what runs in it is drawn below it."""
    nodes = rec.nodes
    offsets: dict[Key, int] = {}
    for layer in rec.layers():  # parents before children
        if not layer.path and layer.depth > 0:
            offsets[layer.key] = layer.depth
        else:
            parent = nodes.get(layer.parent_key)
            offsets[layer.key] = offsets.get(parent.key, 0) if isinstance(parent, LayerNode) else 0
    return offsets


def layer_rows(rec: Graph) -> list[Row]:
    """The rows of the layer table in torchinfo's order, labelled as torchinfo labels them
    (module docstring).  An inserted ancestor may appear several times, as one :class:`Row`."""
    rows: list[Row] = []
    inserted: dict[tuple[str, int], Row] = {}  # (dotted path, depth) -> its row
    latest: dict[int, str] = {}  # depth -> path of the latest row at that depth
    nodes = rec.nodes
    offsets = _offsets(rec)

    def clear_below(depth: int) -> None:
        for d in [d for d in latest if d > depth]:
            del latest[d]

    for layer in rec.layers():
        offset = offsets[layer.key]
        depth = offset + layer.path.count(".") + 1 if layer.path else layer.depth
        if layer.path:
            parts = layer.path.split(".")
            for d in range(offset + 1, depth):
                ancestor = ".".join(parts[:d - offset])
                if latest.get(d) == ancestor:
                    continue
                row = inserted.get((ancestor, d))
                if row is None:
                    key = ancestor if ancestor not in nodes else f"{ancestor}#0"
                    if offset:  # the same container, listed again inside a call of the network
                        key = f"{key}@{offset}"
                    row = inserted[ancestor, d] = Row(key, ancestor, d, None)
                if not rows or rows[-1] is not row:
                    rows.append(row)
                latest[d] = ancestor
                clear_below(d)
        rows.append(Row(layer.key, layer.path, depth, layer))
        latest[depth] = layer.path
        clear_below(depth)
    counters: dict[int, int] = {}
    for row in rows:
        n = counters[row.depth] = counters.get(row.depth, 0) + 1
        row.label = f"{row.depth}-{n}"
    return rows


def label_paths(rec: Graph) -> dict[str, str]:
    """``depth-idx`` label -> dotted path of the module it names (``""``: the network)."""
    return {row.label: row.path for row in layer_rows(rec)}


class Stats:
    """Parameter counts, tied parameters and mult-adds of a recording's rows.

    A parameter is recorded once, in the first call of the module that owns it,
    so the totals count shared weights once.  A module whose own parameter was
    recorded on an earlier module (an output projection tied to the embedding)
    lists that parameter in :attr:`tied`.

    Attributes:
        own: first call's key -> parameter elements recorded on that call.
        tied: first call's key -> dotted paths of its parameters recorded on an earlier module.
        holders: the :class:`~torchrecorder.projection.params.ParamHolders` these are read from.
        total, trainable: parameter elements in all, and those with ``requires_grad``.
        param_bytes: bytes of all parameters.
        act_bytes: bytes of every tensor a module returned (the network's inputs not counted).
    """

    def __init__(self, rec: Graph) -> None:
        self.rec = rec
        self.total = self.trainable = self.param_bytes = self.act_bytes = 0
        holders = self.holders = ParamHolders(rec)
        self.own: dict[Key, int] = holders.own
        self._params: dict[Key, list[ParamNode]] = {}  # first call -> its parameters, tied ones too
        self._local: dict[Key, str] = holders.local  # parameter -> its name in its owner
        nodes = rec.nodes
        for node in nodes.values():
            if isinstance(node, ParamNode):
                self._params.setdefault(holders.owner(node), []).append(node)
                self.total += node.numel
                self.trainable += node.numel if node.requires_grad else 0
                self.param_bytes += node.numel * itemsize(node.dtype)
            elif isinstance(node, TensorNode) and node.role != "input" and node.shape is not None:
                self.act_bytes += math.prod(node.shape) * itemsize(node.dtype)
        self.first: dict[str, LayerNode] = holders.first  # "path\0name" -> the module's first call
        self.tied: dict[Key, list[str]] = {}
        for key, params in holders.tied.items():
            self.tied[key] = [p.path for p in params]
            self._params.setdefault(key, []).extend(params)
        # a leaf ran no other module and holds no module with parameters (torchinfo: no children)
        self._inside: Optional[dict[str, int]] = None
        self._grads: dict[str, tuple[int, int]] = {}
        self._leaf: dict[Key, bool] = {}
        for layer in rec.layers():
            first = self.first_call(layer)
            self._leaf[layer.key] = first.num_params_total <= first.num_params and not any(
                isinstance(nodes.get(k), LayerNode) for k in layer.subnet_keys)

    @staticmethod
    def _ident(layer: LayerNode) -> str:
        return ParamHolders.ident(layer)

    def first_call(self, layer: LayerNode) -> LayerNode:
        """The first call of ``layer``'s module."""
        return self.first.get(self._ident(layer), layer)

    def _totals(self) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
        """Per dotted path: parameter elements recorded inside, and (elements, trainable ones)
        of the parameters of the modules inside, tied ones included (computed once)."""
        if self._inside is None:
            inside: dict[str, int] = {}
            grads: dict[str, tuple[int, int]] = {}
            for first in self.first.values():
                own = self.own.get(first.key, 0)
                params = self._params.get(first.key, ())
                n = sum(p.numel for p in params)
                t = sum(p.numel for p in params if p.requires_grad)
                path = first.path
                while True:
                    inside[path] = inside.get(path, 0) + own
                    n0, t0 = grads.get(path, (0, 0))
                    grads[path] = (n0 + n, t0 + t)
                    if not path:
                        break
                    path = path.rpartition(".")[0]
            self._inside, self._grads = inside, grads
        return self._inside, self._grads

    def subtree(self, row: Row) -> int:
        """Parameter elements recorded on ``row``'s module and the modules inside it."""
        return self._totals()[0].get(row.path, 0)

    def trainable_text(self, row: Row) -> str:
        """torchinfo's ``trainable`` column: ``True``, ``False``, ``Partial`` or ``--`` (no parameters)."""
        n, t = self._totals()[1].get(row.path, (0, 0))
        if n == 0:
            return "--"
        return "True" if t == n else ("False" if t == 0 else "Partial")

    def is_leaf(self, row: Row) -> bool:
        """A call that ran no other module, of a module that holds no module with parameters
        (an inserted ancestor never is one)."""
        return row.layer is not None and self._leaf.get(row.layer.key, False)

    def mult_adds(self, row: Row) -> int:
        """torchinfo's multiply-add count of a leaf call (0 for other rows).

        Each ``weight`` and ``bias`` of the module counts its elements times the
        output's first dimension, times the output's spatial positions for a
        convolution; other weights (``weight_ih_l0`` of an RNN) count their elements
        times the output's first two dimensions.  Operations outside modules
        (a functional ``matmul``) count nothing, as in torchinfo.
        """
        layer = row.layer
        if layer is None or not self.is_leaf(row) or not layer.output_shapes:
            return 0
        shape = list(layer.output_shapes[0])
        first = self.first_call(layer)
        macs = 0
        for param in self._params.get(first.key, ()):
            name = self._local.get(param.key, param.name)
            if name in ("weight", "bias"):
                if "Conv" in layer.type_name:
                    macs += param.numel * math.prod(shape[:1] + shape[2:])
                elif shape:
                    macs += shape[0] * param.numel
            elif "weight" in name or "bias" in name:
                macs += math.prod(shape[:2]) * param.numel
        return macs
