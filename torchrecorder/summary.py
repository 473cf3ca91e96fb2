"""The layer table of a recording (what ``print(rec)`` shows), in the manner of torchinfo and scio.

Each module call is one row, in execution order: the call's dotted name (tree
drawn in the margin) and type, its ``depth-idx`` label (``1-3``: the third row
at depth 1 of the module tree, as torchinfo and scio number them; the whole
network is ``0-1``; a container never called, such as a ``ModuleList``, has
rows of its own: :mod:`torchrecorder.summary_rows`), input and output shapes,
its parameters and their share of the total, and on request torchinfo's
mult-adds and whether the parameters are trainable.  Runs of structurally
identical consecutive blocks (the layers of a transformer) fold into one group
of rows marked ``×N``.  Everything here reads node metadata, so a graph loaded
from JSON prints the same table (a never-called container's class, which only the
live model knows, then reads ``container``).

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

from collections.abc import Iterable, Sequence
from typing import Optional

from ._text import shorten, utf8_safe, visible
from .cost import COST_STATS, cost, format_flops, format_stat
from .graph import Graph
from .nodes import ContextNode, Key, LayerNode, shape_str
from .projection import FoldPlan, FoldRepeats, fold_min
from .summary_rows import Row, Stats, label_paths, layer_rows

__all__ = ["COLUMNS", "DEFAULT_COLUMNS", "label_paths", "layer_labels", "summary_table"]

#: the optional columns of :func:`summary_table`, in the order they are printed, with headers
COLUMNS: dict[str, str] = {
    "label": "Label",
    "input": "Input shape",
    "output": "Output shape",
    "params": "Param #",
    "share": "Param %",
    "mult_adds": "Mult-Adds",
    "flops": "FLOPs",
    "activation_bytes": "Output size",
    "param_bytes": "Param size",
    "saved_bytes": "Saved size",
    "trainable": "Trainable",
    "source": "Source",
}

#: the columns printed when none are chosen (``print(rec)``)
DEFAULT_COLUMNS: tuple[str, ...] = ("label", "input", "output", "params", "share")

_RIGHT = {"params", "share", "mult_adds", "flops", "activation_bytes", "param_bytes", "saved_bytes"}

#: bytes in the MB of the totals (10^6, as torchinfo)
MB = 1_000_000

#: the tree margin is drawn for this many levels; a deeper row writes its depth as a number
#: (``┆42 └─0 (Linear)``), so that the table grows linearly with the nesting depth
MAX_TREE_LEVELS = 24
#: a name or a type longer than this is shortened in the middle (``…``) in the table, so that
#: one long name (or a dotted path thousands of levels deep) does not widen every row
MAX_NAME_CHARS = 80


def layer_labels(rec: Graph) -> dict[Key, str]:
    """The ``depth-idx`` label of every row of the table, as torchinfo numbers them: key -> ``"1-3"``.

    ``depth`` is the module's depth in the module tree and ``idx`` counts the
    rows at that depth in call order (the whole network is ``0-1``); each call
    of a module called several times has its own label.  A container that is
    never called (``ModuleList``, ``ModuleDict``) takes a label before its
    first child's call; its key is its dotted path, which names no node
    (:mod:`torchrecorder.summary_rows` gives the rules; :func:`label_paths` maps
    every label to its module's path).  :func:`torchrecorder.capture` and the
    recorders of :mod:`torchrecorder.hooks.recorders` select layers by these labels.
    """
    return {row.key: row.label for row in layer_rows(rec)}


def _shapes(shapes: Sequence[Sequence[int]]) -> str:
    if not shapes:
        return "--"
    text = ", ".join(shape_str(tuple(s)) for s in shapes[:3])
    return text + (f", +{len(shapes) - 3}" if len(shapes) > 3 else "")


#: torchinfo's ``col_names`` that name one of these columns: ``columns=`` takes them too
TORCHINFO_COLUMNS: dict[str, str] = {"input_size": "input", "output_size": "output", "num_params": "params",
                                     "params_percent": "share"}


def _check_columns(columns: Optional[Iterable[str]]) -> list[str]:
    if columns is None:
        return list(DEFAULT_COLUMNS)
    if isinstance(columns, str):
        columns = [columns]
    chosen = [TORCHINFO_COLUMNS.get(c, c) if isinstance(c, str) else c for c in columns]
    unknown = [c for c in chosen if c not in COLUMNS]
    if unknown:
        raise ValueError(f"unknown summary column(s) {unknown}; choose from {list(COLUMNS)}")
    return [c for c in COLUMNS if c in chosen]


def _shown(rows: list[Row], hidden: set[Key], depth: Optional[int]) -> list[Row]:
    """The rows printed: not inside a folded block, not deeper than ``depth``, and no inserted
    container without a printed call inside it."""
    out: list[Row] = []
    gone: set[Key] = set(hidden)
    for row in rows:
        layer = row.layer
        if layer is not None and (layer.key in gone or layer.parent_key in gone):
            gone.add(layer.key)
            continue
        out.append(row)
    keep: list[Row] = []
    inside = -1  # depth of the nearest call after this point, until a row as shallow as an ancestor
    for row in reversed(out):
        if row.layer is None:
            if not 0 <= row.depth < inside:
                continue
            inside = row.depth
        else:
            inside = row.depth
        keep.append(row)
    keep.reverse()
    return [row for row in keep if depth is None or row.depth <= depth]


def _margins(rows: list[Row], single_root: bool) -> list[str]:
    """The tree drawn left of each name: ``├─``/``└─`` and the ``│`` of open levels."""
    last: list[bool] = [False] * len(rows)
    following: list[int] = []  # the depths of the rows below, each shallower than the one before
    for i in range(len(rows) - 1, -1, -1):
        d = rows[i].depth
        while following and following[-1] > d:
            following.pop()
        last[i] = not (following and following[-1] == d)
        if last[i]:
            following.append(d)
    top = 1 if single_root else 0
    open_last: dict[int, bool] = {}
    out = []
    for row, is_last in zip(rows, last, strict=True):
        d = row.depth
        if d < top:
            out.append("")
        else:
            drawn = range(top, min(d, top + MAX_TREE_LEVELS))  # deeper: the depth as a number
            margin = "".join("  " if open_last.get(a, True) else "│ " for a in drawn)
            if d > top + MAX_TREE_LEVELS:
                margin += f"┆{d} "
            out.append(margin + ("└─" if is_last else "├─"))
        open_last[d] = is_last
    return out


def summary_table(rec: Graph, *, columns: Optional[Iterable[str]] = None, depth: Optional[int] = None,
                  fold: FoldRepeats = "auto") -> str:
    """One row per module call, in torchinfo's order and with its ``depth-idx`` labels.

    Args:
        rec: a recording (or any :class:`~torchrecorder.graph.Graph`).
        columns: which of :data:`COLUMNS` to print: ``"label"``, ``"input"``,
            ``"output"``, ``"params"``, ``"share"`` (the default, all five), and
            ``"mult_adds"`` (multiply-adds as torchinfo counts them, see
            :meth:`~torchrecorder.summary_rows.Stats.mult_adds`), ``"trainable"``
            (``True``, ``False``, ``Partial``: whether the module's parameters
            require gradients), the cost of each call (:func:`torchrecorder.cost`)
            in human units: ``"flops"`` (``7.4 MFLOPs``, as torch's ``FlopCounterMode``
            counts them, the call's children included), ``"activation_bytes"`` (the
            call's outputs, ``1.2 MB``), ``"param_bytes"`` (the parameters recorded in
            the call and its children) and ``"saved_bytes"`` (what autograd saved for the
            backward pass, for a recording made with ``backward=True``), and ``"source"``
            (``file.py:line``, where the call was made:
            :attr:`~torchrecorder.nodes.BaseNode.source`).  The name column
            is always printed.  torchinfo's names (``"input_size"``, ``"output_size"``,
            ``"num_params"``, ``"params_percent"``) choose the same columns.
        depth: print rows down to this depth of the module tree only (the
            network is depth 0, a ``ModuleList``'s items are one deeper than the
            list); a row whose children are not printed counts their parameters
            (and mult-adds) as its own.  Default: all.
        fold: runs of structurally identical chained blocks print once, their
            first block standing for all, marked ``×N`` with per-block counts:
            ``"auto"`` folds runs of 8 or more, ``True`` runs of 2 or more, an
            int runs of that many, ``False`` nothing.

    A module whose parameter was recorded on an earlier module (an output
    projection tied to the embedding) says ``tied: <that parameter's path>``.
    A parameter counts on the module that holds it, also when it was read
    before that module ran (outside it); only one of a module never called
    counts on the call that read it.
    Totals count every parameter once (shared weights once), trainable or
    not, their memory and the memory of the activations passed between
    modules (every tensor a module returned), in MB of 10^6 bytes, as torchinfo.

    The text grows linearly with the model: names and types are shortened to
    :data:`MAX_NAME_CHARS`, the tree margin is drawn :data:`MAX_TREE_LEVELS` deep
    (a deeper row writes its depth as a number), and control characters and lone
    surrogates are written as escapes.

    Raises:
        ValueError: an unknown column, a negative depth, or a bad ``fold``; a cost column
            for a graph loaded from JSON (see :func:`torchrecorder.cost`).
    """
    cols = _check_columns(columns)
    costs = cost(rec) if any(c in COST_STATS for c in cols) else None
    if depth is not None and (not isinstance(depth, int) or depth < 0):
        raise ValueError(f"depth must be an int >= 0 or None, got {depth!r}")
    min_run = fold_min(fold)
    plan = FoldPlan.build(rec, min_run, lambda node: True) if min_run else FoldPlan()
    stats = Stats(rec)
    all_rows = layer_rows(rec)
    rows = _shown(all_rows, plan.hidden, depth)
    n_roots = sum(1 for row in rows if row.depth == 0)
    margins = _margins(rows, n_roots == 1 or not isinstance(rec.context, ContextNode))
    # rows whose descendants are not printed (depth cut): they count those as their own
    cut = {i for i, row in enumerate(rows) if depth is not None and row.depth == depth}
    position = {id(row): i for i, row in enumerate(all_rows)}
    label_of = {row.key: row.label for row in all_rows}
    show_macs = "mult_adds" in cols

    def inner_macs(row: Row) -> int:
        total, start = 0, position[id(row)]
        for other in all_rows[start + 1:]:
            if other.depth <= row.depth:
                break
            if other.layer is not None and other.layer.key not in plan.hidden:
                total += stats.mult_adds(other)
        return total

    header = ["Layer (type)", *[COLUMNS[c] for c in cols]]
    table: list[list[str]] = [header]
    for i, row in enumerate(rows):
        layer = row.layer
        run = plan.runs.get(layer.key, [layer]) if layer is not None else []
        if layer is None:
            title, label, type_text = _cell(row.path), row.label, f"({_cell(_container_type(rec, row))})"
        elif len(run) > 1:
            title = f"{_title(run[0])} … {_title(run[-1])}"
            label = f"{row.label}…{label_of[run[-1].key]}"
            type_text = f"({_cell(layer.type_name)}) ×{len(run)}"
        else:
            title, label, type_text = _title(layer), row.label, f"({_cell(layer.type_name)})"
            group = plan.in_loop.get(layer.key)
            if group is not None:  # the first iteration of a folded loop stands for all of them
                type_text += f" ×{len(plan.loops[group.key])} (loop)"
        leafish = i in cut or (layer is not None and stats.is_leaf(row))
        if layer is not None and layer.call_index > 1:
            params = 0
        else:
            params = stats.subtree(row) if leafish else stats.own.get(row.key, 0)
        macs = 0
        if show_macs:
            macs = stats.mult_adds(row) if stats.is_leaf(row) else (inner_macs(row) if i in cut else 0)
        values = {
            "label": label,
            "input": _shapes(layer.input_shapes) if layer is not None else "--",
            "output": _shapes(layer.output_shapes) if layer is not None else "--",
            "params": f"{params:,}" if params else "--",
            "share": f"{100 * params / stats.total:.2f}%" if params and stats.total else "--",
            "mult_adds": f"{macs:,}" if macs else "--",
            "trainable": stats.trainable_text(row),
            "source": _cell(layer.source.where()) if layer is not None and layer.source else "--",
        }
        if costs is not None:
            entry = costs.get(str(layer.key)) if layer is not None else None
            for stat in COST_STATS:
                value = getattr(entry, stat) if entry is not None else 0
                values[stat] = format_stat(value, stat) if value else "--"
        if layer is not None:
            note = layer.run_note()
            if note:
                type_text += f" ({note.split(' (')[0]})"
            if layer.error:
                type_text += " raised"
            tied = stats.tied.get(layer.key)
            if tied:
                type_text += " tied: " + ", ".join(tied)
        table.append([f"{margins[i]}{title} {type_text}", *[values[c] for c in cols]])

    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    rule = "=" * (sum(widths) + 2 * (len(widths) - 1))
    lines = [rule]
    for i, cells_in in enumerate(table):
        cells = [cells_in[0].ljust(widths[0])]
        for c, cell, w in zip(cols, cells_in[1:], widths[1:], strict=True):
            cells.append(cell.rjust(w) if c in _RIGHT else cell.ljust(w))
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append(rule)
    lines += [rule, f"Total params: {stats.total:,}", f"Trainable params: {stats.trainable:,}",
              f"Non-trainable params: {stats.total - stats.trainable:,}"]
    everything = max((n.num_params_total for n in rec.layers() if n.parent_key is None), default=0)
    if everything > stats.total:  # torchinfo's total counts every parameter of the model
        lines.append(f"Params not recorded: {everything - stats.total:,} (modules the pass never "
                     f"called; all the model's: {everything:,})")
    if show_macs:
        lines.append(f"Total mult-adds: {sum(stats.mult_adds(r) for r in all_rows if r.layer is not None):,}")
    if costs is not None and "flops" in cols:
        lines.append(f"Total FLOPs: {format_flops(costs.total.flops)} ({costs.total.flops:,})")
    lines += [f"Params size (MB): {stats.param_bytes / MB:,.2f}",
              f"Activations size (MB): {stats.act_bytes / MB:,.2f}"]
    if rec.error:
        lines.append(f"Recording stopped: {rec.error}")
    lines.extend(f"Note: {note}" for note in getattr(rec, "notes", ()))
    lines.append(rule)
    return utf8_safe("\n".join(lines))  # (an error or a note may quote a name)


def _container_type(rec: Graph, row: Row) -> str:
    """The class name of an inserted ancestor: read from the live network while the recording
    holds it, else (a graph loaded from JSON) ``"container"``."""
    root = next(iter(rec.layers()), None)
    get = getattr(root.fn, "get_submodule", None) if root is not None and not root.path else None
    if get is None:
        return "container"
    try:
        return type(get(row.path)).__name__
    except AttributeError:
        return "container"


def _cell(text: str) -> str:
    """``text`` for one cell: control characters and lone surrogates made visible, at most
    :data:`MAX_NAME_CHARS` characters."""
    return utf8_safe(visible(shorten(text, MAX_NAME_CHARS)))


def _title(layer: LayerNode) -> str:
    """The dotted name of a call (the network's own name for the root), ready for a cell."""
    if layer.depth == 0:
        return _cell(layer.call_title())
    return _cell(layer.call_title(dotted=True))
