"""Label text shared by the renderers: parameter lines and counts, read from node metadata only."""

from __future__ import annotations

from typing import Optional

from ..graph import Graph
from ..nodes import LayerNode, ParamNode, shape_str
from ..projection import LoopNode

__all__ = ["count_str", "dtype_suffix", "listed_params", "param_lines", "params_text", "run_title"]


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
    show them too; a module called again shows them on its first call only.
    """
    total = node.num_params_total
    if not total:
        return []
    return params_text(listed_params(rec, node), total)


def params_text(params: list[ParamNode], total: int) -> list[str]:
    """:func:`param_lines` of a module of ``total`` parameters that lists ``params``."""
    lines = [f"{p.name}: {shape_str(p.shape)}" for p in params]
    lines.append(f"{count_str(total)} params" if total != 1 else "1 param")
    return lines


def listed_params(rec: Optional[Graph], node: LayerNode) -> list[ParamNode]:
    """The parameters whose shapes :func:`param_lines` lists: all of a module's, if it owns
    all its parameters directly and at most three; else none.

    :func:`param_lines` reads nothing else of them than their names and shapes.
    """
    if rec is None or node.num_params != node.num_params_total:
        return []
    get = rec.nodes.get
    params = [n for k in node.subnets if isinstance(n := get(k), ParamNode)]
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
