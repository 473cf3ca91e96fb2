"""The values a folded run of the HTML page carries from one of its blocks to another.

``make_dot`` draws a folded run of identical blocks once, marked ``×N``; the value each
block passes to the next is what ``×N`` says, but any other edge between two blocks of
the run (in a backward graph every gradient goes from a later block to an earlier one; a
value made in block 0 and read in block 2) is *carried*: drawn between the nodes that
stand for its ends in the first block, dashed and not ranking them
(:attr:`~torchrecorder.projection.Projection.carried_edges`).  The page hides every edge
between two blocks while the run is folded, so it is given these edges apart and draws
them while the run is folded, as make_dot does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Optional

from ..nodes import BaseNode, Key
from ..projection import Projection

__all__ = ["run_carried_rows"]


def run_carried_rows(folded: Optional[Projection], index: Mapping[Key, int], parents: list[int],
                     first_blocks: Mapping[int, int], edges: list[list[Any]],
                     edge_rows: Callable[[Projection, list[tuple[BaseNode, BaseNode]]], list[list[Any]]]
                     ) -> dict[int, list[int]]:
    """Run -> the rows of its carried edges, which are appended to ``edges``.

    Args:
        folded: the finest drawing with runs and loops folded (``None``: nothing folds).
        index: node key -> its row in the page's data.
        parents: each row's parent row (-1: none).
        first_blocks: the row of the first block of each run the page folds -> the run.
        edges: the page's edge rows (the carried ones are added at the end).
        edge_rows: the rows of ``folded``'s carried edges given (``HtmlRenderer._edge_rows``).
    """
    if folded is None or not first_blocks:
        return {}
    owned: list[tuple[BaseNode, BaseNode]] = []
    owners: list[int] = []
    for a, b in folded.carried_edges:
        i, j = index.get(a.key), index.get(b.key)
        if i is None or j is None:
            continue
        run = _first_block_run(i, first_blocks, parents)
        if run is not None and run == _first_block_run(j, first_blocks, parents):
            owned.append((a, b))
            owners.append(run)
    got: dict[int, list[int]] = {}
    for run, row in zip(owners, edge_rows(folded, owned), strict=True):
        got.setdefault(run, []).append(len(edges))
        edges.append(row)
    return got


def _first_block_run(i: int, first_blocks: Mapping[int, int], parents: list[int]) -> Optional[int]:
    """The innermost run whose first block holds the row ``i``, if any."""
    while i >= 0:
        run = first_blocks.get(i)
        if run is not None:
            return run
        i = parents[i]
    return None
