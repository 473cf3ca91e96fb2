"""A layer table of a recording (what ``print(rec)`` shows), in the manner of torchinfo."""

from __future__ import annotations

from .graph import Graph
from .nodes import shape_str

__all__ = ["summary_table"]


def _shapes(shapes: list[tuple[int, ...]]) -> str:
    if not shapes:
        return "--"
    text = ", ".join(shape_str(s) for s in shapes[:3])
    return text + (f", +{len(shapes) - 3}" if len(shapes) > 3 else "")


def summary_table(rec: Graph) -> str:
    """One row per module call: tree-indented name, type, input and output shapes, parameters.

    Parameters are counted on a module's first call only, so the total is the
    number of parameters the pass used once each.
    """
    rows = [("Layer", "Type", "Input shape", "Output shape", "Params")]
    total = trainable = 0
    for layer in rec.layers():
        name = layer.call_title()
        params = layer.num_params if layer.call_index == 1 else 0
        rows.append(("  " * layer.depth + name, layer.type_name, _shapes(layer.input_shapes),
                     _shapes(layer.output_shapes), f"{params:,}" if params else "--"))
    for node in rec.nodes.values():
        numel = getattr(node, "numel", None)
        if numel is not None:
            total += numel
            trainable += numel if getattr(node, "requires_grad", False) else 0
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    rule = "=" * (sum(widths) + 2 * 4)
    lines = [rule]
    for i, row in enumerate(rows):
        pairs = enumerate(zip(row, widths, strict=True))
        cells = [c.ljust(w) if j < 4 else c.rjust(w) for j, (c, w) in pairs]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append(rule)
    lines += [rule, f"Total params: {total:,}", f"Trainable params: {trainable:,}",
              f"Non-trainable params: {total - trainable:,}"]
    if rec.error:
        lines.append(f"Recording stopped: {rec.error}")
    lines.extend(f"Note: {note}" for note in getattr(rec, "notes", ()))
    lines.append(rule)
    return "\n".join(lines)
