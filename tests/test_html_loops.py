"""The HTML page's data folds Python loops as ``make_dot`` does, and its first view (and the
drawing budget) counts the loops folded."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.errors import LargeDrawingWarning
from torchrecorder.nodes import OpNode
from torchrecorder.projection import LoopNode
from torchrecorder.projection.budget import MAX_EDGES, MAX_NODES
from torchrecorder.renderer import GraphvizRenderer
from torchrecorder.renderer.html import HtmlRenderer

from .test_loops import Series, Wrapped
from .zoo.session import Zoo


class RunLoop(nn.Module):
    """A loop whose body is a run of identical blocks (folded as a run) and an op."""

    def __init__(self, n: int = 3, blocks: int = 4) -> None:
        super().__init__()
        self.n = n
        self.per = blocks
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(n * blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(self.n):
            x = x * 0.5
            for block in self.blocks[i * self.per:(i + 1) * self.per]:
                x = block(x)
        return x


def page_of(rec: torchrecorder.Recorder, *args: Any, **options: Any) -> tuple[HtmlRenderer, dict[str, Any]]:
    """The renderer and page data of ``rec`` (no warning expected)."""
    r = HtmlRenderer(rec, *args, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LargeDrawingWarning)
        return r, r.page_data()


def ids_of(data: dict[str, Any], rows: list[int]) -> list[str]:
    return [data["strings"][data["nodes"][i][2]].strip('"') for i in rows]


@pytest.mark.parametrize(("case", "count", "ops", "summary"), [
    ("SeriesDecoder", 1000, ["mul", "pow", "add"], "1000 identical iterations of: mul · pow · add"),
    # the boolean mask selects a different number of points each time: the shapes of the
    # selections (left out of the drawing) differ from one iteration to the next
    # (the first iteration's first setitem writes into a buffer of zeros: it reads nothing drawn,
    # but the later iterations' feed it, so the folded loop draws it as make_dot does)
    ("FarthestPointSampling", 999, ["setitem", "sub", "pow", "sum", "lt", "setitem", "max"],
     "999 iterations of: setitem · sub · pow · sum · lt · max, alike but for the shapes of getitem"),
])
def test_stress_loop_models_open_at_the_default_depth_with_the_loop_folded(
        zoo: Zoo, case: str, count: int, ops: list[str], summary: str) -> None:
    rec = zoo.recorded(case).rec
    r, data = page_of(rec)
    # the folded loop fits: the first view keeps render_depth 1, within the budget
    assert r.budget is not None and not r.budget.reduced and r.budget.depth == 1
    nodes, edges = r.budget.size
    assert nodes <= MAX_NODES and edges <= MAX_EDGES and nodes < 30
    assert data["folded"] is True
    (loop,) = data["loops"]
    holder, first, later, aliases, cross, cluster, qid, n, text, added, carried, shown = loop
    assert holder == 0 and n == count  # the network's own loop (row 0: the network)
    names = [rec.nodes[k].op for k in _keys(rec, ids_of(data, first))]  # type: ignore[attr-defined]
    assert sorted(names) == sorted(ops)
    # every later iteration is on the page, each node mapped onto the first iteration's (or, an
    # operation left out there as it reads nothing drawn, onto nothing)
    assert len(later) >= (count - 1) * len(first)
    assert sorted(aliases[0::2]) == sorted(later)
    assert all(j in first or j == -1 for j in aliases[1::2]) and sum(j in first for j in aliases[1::2]) \
        == (count - 1) * len(first)
    assert len(cross) >= count - 1  # at least the value carried from each iteration to the next
    # drawn folded as make_dot draws it: a dashed back edge within the first iteration
    g = GraphvizRenderer(rec, 1)
    g.render()
    want = {(g.node_id(a), g.node_id(b)) for a, b in g.projection.carried_edges}
    assert {tuple(ids_of(data, data["edges"][e][:2])) for e in carried} == want
    assert all(set(data["edges"][e][:2]) <= set(first) for e in carried)
    assert all(i in first for i in shown) and not set(added) & set(carried)
    assert f"loop ×{count}" in data["strings"][cluster] and data["strings"][qid].endswith('#loop"')
    assert data["strings"][text] == summary
    # the first view opens the network and draws the group, not the 1,000 iterations
    assert data["nodes"][0][5] == 1


def _keys(rec: torchrecorder.Recorder, ids: list[str]) -> list[Any]:
    by_id = {GraphvizRenderer(rec).node_id(n): k for k, n in rec.nodes.items()}
    return [by_id[i] for i in ids]


def test_page_counts_what_make_dot_counts(zoo: Zoo) -> None:
    """The first view is the drawing make_dot makes at the same depth: the budget sees the same size."""
    rec = zoo.recorded("SeriesDecoder").rec
    r, _ = page_of(rec)
    g = GraphvizRenderer(rec, 1)
    g.render()
    assert r.budget is not None and g.budget is not None and r.budget.size == g.budget.size


def test_fold_repeats_false_pages_have_no_loops_and_fit_the_budget_by_depth(zoo: Zoo) -> None:
    rec = zoo.recorded("SeriesDecoder").rec
    r = HtmlRenderer(rec, fold_repeats=False)
    with pytest.warns(LargeDrawingWarning, match="render_depth=1 or max_nodes=None"):
        data = r.page_data()
    assert "loops" not in data and data["runs"] == [] and data["folded"] is False
    # every operation counted: the first view is collapsed to fit
    assert r.budget is not None and r.budget.reduced and r.budget.depth == 0
    assert not any(row[5] for row in data["nodes"])


def test_fold_repeats_false_page_data_is_the_page_without_folding() -> None:
    """With ``fold_repeats=False`` the page holds what it held before loops folded (no ``loops``
    entry), and the same nodes and edges as the folded page, which adds only its loop rows."""
    rec = torchrecorder.record(Series(12), "series", (1, 4))
    _, folded = page_of(rec, fold_repeats=True)
    _, plain = page_of(rec, fold_repeats=False)
    # (colour: the colour menu's costs; colour_start: its choice when the page opens)
    assert set(plain) == {"version", "name", "header", "fanout", "titles_entered", "budget", "ranked",
                          "folded", "strings", "attrs", "nodes", "edges", "runs", "colour",
                          "colour_start"}
    assert set(folded) == set(plain) | {"loops"}

    def rows(data: dict[str, Any]) -> list[Any]:
        return [[r[0], r[1], data["strings"][r[2]]] for r in data["nodes"]]

    assert rows(plain) == rows(folded) and len(rows(plain)) > 12 * 3
    assert [e[:2] for e in plain["edges"]] == [e[:2] for e in folded["edges"]]


def test_loop_inside_a_module_is_held_by_it_and_starts_folded() -> None:
    rec = torchrecorder.record(Wrapped(10), "net", (1, 4))
    _, data = page_of(rec, 1, fold_repeats=True)
    (loop,) = data["loops"]
    holder = loop[0]
    info = json.loads(data["strings"][data["nodes"][holder][6]])
    assert info["path"] == "body" and data["nodes"][holder][5] == 0  # closed in the first view
    assert data["nodes"][holder][4] >= 0  # but it can open, and then shows the folded loop
    assert all(data["nodes"][i][0] == holder for i in loop[1] + loop[2])
    assert loop[7] == 10


def test_loop_of_blocks_keeps_the_run_folded_inside_each_iteration() -> None:
    rec = torchrecorder.record(RunLoop(3, 4), "net", (1, 4))
    _, data = page_of(rec, fold_repeats=True)
    (loop,) = data["loops"]
    assert loop[7] == 2  # (mul, four blocks) twice; the third iteration's input differs (make_dot's loop)
    # each iteration's four blocks are one run; the first iteration's run is drawn in the loop
    assert len(data["runs"]) == 3
    leads = [run[0] for run in data["runs"]]
    assert leads[0] in loop[1] and leads[1] in loop[2] and leads[2] not in loop[1] + loop[2]
    # the run's hidden blocks belong to the iteration of their lead
    assert set(data["runs"][0][1]) <= set(loop[1]) and set(data["runs"][1][1]) <= set(loop[2])


def test_page_data_is_deterministic() -> None:
    # recorded from one line: the page shows the line each call was made from
    a, b = (page_of(torchrecorder.record(Series(20), "s", (1, 4)), fold_repeats=True)[1] for _ in range(2))
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_a_loop_of_operations_all_left_out_draws_no_empty_group() -> None:
    """A loop of data-movement operations only (``y.t()`` again and again) is not drawn as an
    empty group when those operations are left out."""

    class Turning(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(x)
            for _ in range(3):
                y = y.t()
            return torch.sigmoid(y)

    rec = torchrecorder.record(Turning(), "net", (8, 8))
    r = GraphvizRenderer(rec, fold_repeats=True)
    source = r.render().source
    assert "loop ×" not in source
    every = GraphvizRenderer(rec, fold_repeats=True, all_ops=True)
    assert "loop ×3" in every.render().source  # drawn, the operations fold
    kids = every.children(rec.nodes["net"])
    (group,) = [k for k in kids if isinstance(k, LoopNode)]
    assert [n.op for n in every.children(group) if isinstance(n, OpNode)] == ["t"]
    _, data = page_of(rec, fold_repeats=True)
    assert "loops" not in data
