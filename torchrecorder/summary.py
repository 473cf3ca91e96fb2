"""The layer table of a recording (what ``print(rec)`` shows), in the manner of torchinfo and scio.

Each module call is one row, in execution order: the call's dotted name (tree
drawn in the margin) and type, its ``depth-idx`` label (``1-3``: the third
module first called at depth 1, as torchinfo and scio number them; the whole
network is ``0-1``), input and output shapes, its parameters and their share
of the total.  Runs of structurally identical consecutive blocks (the layers
of a transformer) fold into one group of rows marked ``×N``.  Everything here
reads node metadata, so a graph loaded from JSON prints the same table.

>>> import torch, torchrecorder
>>> net = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))
>>> rec = torchrecorder.record(net, "net", (1, 5))
>>> print(summary_table(rec, columns=("label", "params", "share")))
=========================================
Layer (type)      Label  Param #  Param %
=========================================
net (Sequential)  0-1         --       --
├─0 (Linear)      1-1         24   61.54%
├─1 (ReLU)        1-2         --       --
└─2 (Linear)      1-3         15   38.46%
=========================================
Total params: 39
Trainable params: 39
Non-trainable params: 0
Params size (MB): 0.00
Activations size (MB): 0.00
=========================================
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Optional

from .graph import Graph
from .nodes import ContextNode, Key, LayerNode, ParamNode, TensorNode, shape_str
from .projection import FoldPlan, FoldRepeats, fold_min

__all__ = ["COLUMNS", "layer_labels", "summary_table"]

#: the optional columns of :func:`summary_table`, in the order they are printed, with headers
COLUMNS: dict[str, str] = {
    "label": "Label",
    "input": "Input shape",
    "output": "Output shape",
    "params": "Param #",
    "share": "Param %",
}

_RIGHT = {"params", "share"}


def layer_labels(rec: Graph) -> dict[Key, str]:
    """The ``depth-idx`` label of every module call: layer key -> ``"1-3"``.

    ``idx`` counts the modules first called at that depth, in call order (the
    whole network is ``0-1``); a later call of a module has its first call's
    label.  :func:`torchrecorder.capture` and the recorders of
    :mod:`torchrecorder.hooks.recorders` select layers by these labels.
    """
    counters: dict[int, int] = {}
    first: dict[str, str] = {}
    labels: dict[Key, str] = {}
    for layer in rec.layers():
        ident = f"{layer.path}\0{layer.name}"
        if layer.call_index > 1 and ident in first:
            labels[layer.key] = first[ident]
            continue
        n = counters[layer.depth] = counters.get(layer.depth, 0) + 1
        labels[layer.key] = first[ident] = f"{layer.depth}-{n}"
    return labels


_BITS = re.compile(r"(\d+)")


def _itemsize(dtype: str) -> int:
    """Bytes per element of a dtype given by name (``"bfloat16"`` -> 2); 4 when unknown."""
    if dtype in ("bool", "uint8", "int8") or dtype.startswith("float8"):
        return 1
    m = _BITS.search(dtype)
    if m is None:
        return 4
    return max(1, int(m.group(1)) // 8)


def _shapes(shapes: Sequence[Sequence[int]]) -> str:
    if not shapes:
        return "--"
    text = ", ".join(shape_str(tuple(s)) for s in shapes[:3])
    return text + (f", +{len(shapes) - 3}" if len(shapes) > 3 else "")


def _check_columns(columns: Optional[Iterable[str]]) -> list[str]:
    if columns is None:
        return list(COLUMNS)
    if isinstance(columns, str):
        columns = [columns]
    chosen = list(columns)
    unknown = [c for c in chosen if c not in COLUMNS]
    if unknown:
        raise ValueError(f"unknown summary column(s) {unknown}; choose from {list(COLUMNS)}")
    return [c for c in COLUMNS if c in chosen]


class _Counts:
    """Parameter elements per layer: its own (parameter nodes it holds) and of its whole subtree.

    A parameter is recorded once, in the first call of the module that owns it,
    so shared weights are counted once.
    """

    def __init__(self, rec: Graph) -> None:
        self.own: dict[Key, int] = {}
        self.total = self.trainable = self.param_bytes = self.act_bytes = 0
        for node in rec.nodes.values():
            if isinstance(node, ParamNode):
                self.own[node.parent] = self.own.get(node.parent, 0) + node.numel
                self.total += node.numel
                self.trainable += node.numel if node.requires_grad else 0
                self.param_bytes += node.numel * _itemsize(node.dtype)
            elif isinstance(node, TensorNode) and node.role != "input" and node.shape is not None:
                self.act_bytes += math.prod(node.shape) * _itemsize(node.dtype)
        self.subtree: dict[Key, int] = {}
        for layer in reversed(list(rec.layers())):  # children are recorded after their parents
            n = self.own.get(layer.key, 0)
            for k in layer.subnets:
                n += self.subtree.get(k, 0)
            self.subtree[layer.key] = n


def summary_table(rec: Graph, *, columns: Optional[Iterable[str]] = None, depth: Optional[int] = None,
                  fold: FoldRepeats = "auto") -> str:
    """One row per module call: name and type, ``depth-idx`` label, shapes, parameters, share.

    Args:
        rec: a recording (or any :class:`~torchrecorder.graph.Graph`).
        columns: which of :data:`COLUMNS` to print (``"label"``, ``"input"``,
            ``"output"``, ``"params"``, ``"share"``); default all.  The name
            column is always printed.
        depth: print module calls down to this depth only (the network is
            depth 0); a row whose children are not printed counts their
            parameters as its own.  Default: all.
        fold: runs of structurally identical chained blocks print once, their
            first block standing for all, marked ``×N`` with per-block counts:
            ``"auto"`` folds runs of 8 or more, ``True`` runs of 2 or more, an
            int runs of that many, ``False`` nothing.

    Totals count every parameter once (shared weights once), trainable or
    not, their memory, and the memory of the activations passed between
    modules (every tensor a module returned).

    Raises:
        ValueError: an unknown column, a negative depth, or a bad ``fold``.
    """
    cols = _check_columns(columns)
    if depth is not None and (not isinstance(depth, int) or depth < 0):
        raise ValueError(f"depth must be an int >= 0 or None, got {depth!r}")
    min_run = fold_min(fold)
    plan = FoldPlan.build(rec, min_run, lambda node: True) if min_run else FoldPlan()
    counts = _Counts(rec)
    labels = layer_labels(rec)
    nodes = rec.nodes

    def shown_kids(layer: LayerNode) -> list[LayerNode]:
        if depth is not None and layer.depth >= depth:
            return []
        return [n for k in layer.subnets if isinstance(n := nodes.get(k), LayerNode)
                and k not in plan.hidden]

    header = ["Layer (type)", *[COLUMNS[c] for c in cols]]
    rows: list[list[str]] = [header]
    # depth-first, keeping for each open level whether more siblings follow (for the tree margin)
    stack: list[tuple[LayerNode, str, bool]] = [(k, "", True) for k in reversed(shown_kids(rec.context))]
    top = not isinstance(rec.context, ContextNode) or len(stack) == 1
    while stack:
        layer, margin, last = stack.pop()
        kids = shown_kids(layer)
        run = plan.runs.get(layer.key, [layer])
        is_top = top and layer.parent is None
        branch = "" if is_top else ("└─" if last else "├─")
        if len(run) > 1:
            title = f"{_title(run[0])} … {_title(run[-1])}"
            label = f"{labels.get(run[0].key, '')}…{labels.get(run[-1].key, '')}"
            type_text = f"({layer.type_name}) ×{len(run)}"
        else:
            title, label, type_text = _title(layer), labels.get(layer.key, ""), f"({layer.type_name})"
            group = plan.in_loop.get(layer.key)
            if group is not None:  # the first iteration of a folded loop stands for all of them
                type_text += f" ×{len(plan.loops[group.key])} (loop)"
        params = counts.own.get(layer.key, 0) if kids else counts.subtree.get(layer.key, 0)
        values = {
            "label": label,
            "input": _shapes(layer.input_shapes),
            "output": _shapes(layer.output_shapes),
            "params": f"{params:,}" if params else "--",
            "share": f"{100 * params / counts.total:.2f}%" if params and counts.total else "--",
        }
        note = layer.run_note()
        if note:
            type_text += f" ({note.split(' (')[0]})"
        if layer.error:
            type_text += " raised"
        rows.append([f"{margin}{branch}{title} {type_text}", *[values[c] for c in cols]])
        inner = margin if is_top else margin + ("  " if last else "│ ")
        for i, kid in reversed(list(enumerate(kids))):
            stack.append((kid, inner, i == len(kids) - 1))

    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    rule = "=" * (sum(widths) + 2 * (len(widths) - 1))
    lines = [rule]
    for i, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])]
        for c, cell, w in zip(cols, row[1:], widths[1:], strict=True):
            cells.append(cell.rjust(w) if c in _RIGHT else cell.ljust(w))
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append(rule)
    mb = 1024 * 1024
    lines += [rule, f"Total params: {counts.total:,}", f"Trainable params: {counts.trainable:,}",
              f"Non-trainable params: {counts.total - counts.trainable:,}",
              f"Params size (MB): {counts.param_bytes / mb:,.2f}",
              f"Activations size (MB): {counts.act_bytes / mb:,.2f}"]
    if rec.error:
        lines.append(f"Recording stopped: {rec.error}")
    lines.extend(f"Note: {note}" for note in getattr(rec, "notes", ()))
    lines.append(rule)
    return "\n".join(lines)


def _title(layer: LayerNode) -> str:
    """The dotted name of a call (the network's own name for the root)."""
    if layer.depth == 0:
        return layer.call_title()
    return layer.call_title(dotted=True)
