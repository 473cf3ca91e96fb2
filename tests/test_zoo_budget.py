"""The drawing budget: every default drawing stays within it, says what it collapsed, and an
explicit request is drawn as asked."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.errors import LargeDrawingWarning
from torchrecorder.projection import LoopNode
from torchrecorder.projection.budget import (
    MAX_EDGES,
    MAX_NODES,
    MAX_SPANS,
    default_depth,
    drawn_size,
    edge_spans,
    layout_spans,
)
from torchrecorder.renderer import GraphvizRenderer, MermaidRenderer
from torchrecorder.renderer.graphviz import TITLE_SUFFIX
from torchrecorder.renderer.html import HtmlRenderer

from .backends import budget_said, lays_out, needs_backend
from .dot_parse import parse_dot
from .graph_checks import check_folding
from .zoo import all_cases, stress_cases
from .zoo.session import Zoo

NOTE = "torchrecorder note"


def _size(source: str) -> tuple[int, int]:
    """Drawn nodes (boxes and clusters, the note left out) and edges, counted in the DOT."""
    parsed = parse_dot(source)
    # a cluster's title node is part of drawing the cluster: counted once, as the cluster
    drawn = [n for n in parsed.nodes if n != NOTE and not n.endswith(TITLE_SUFFIX)]
    return len(drawn) + len(parsed.clusters), len(parsed.edges)


def _quiet_dot(rec: torchrecorder.Recorder, *args: object, **kwargs: object) -> tuple[str, list[str]]:
    with budget_said() as said:
        source = torchrecorder.make_dot(rec, *args, **kwargs).source  # type: ignore[arg-type]
    return source, said


@pytest.mark.parametrize("case", [c.name for c in all_cases() + stress_cases()])
def test_every_zoo_models_default_drawings_are_within_the_budget(zoo: Zoo, case: str) -> None:
    rec = zoo.recorded(case).rec
    source, said = _quiet_dot(rec)
    nodes, edges = _size(source)
    assert nodes <= MAX_NODES and edges <= MAX_EDGES, (nodes, edges)
    assert (NOTE in parse_dot(source).nodes) == bool(said)  # reduced: the drawing says so too
    with budget_said():
        r = GraphvizRenderer(rec)
        projection = r.projection
    shared = r.budget.shared if r.budget is not None else ()  # as drawn: fan-out edges shared
    assert edge_spans(projection, shared) <= MAX_SPANS and layout_spans(projection, shared) <= MAX_SPANS
    # the notebook's and the page's first view (depth 1 by default)
    with budget_said():
        first = GraphvizRenderer(rec, default_depth(1)).render().source
    nodes, edges = _size(first)
    assert nodes <= MAX_NODES and edges <= MAX_EDGES, (nodes, edges)


def _endpoints_kept(rec: torchrecorder.Recorder, depth: int) -> None:
    """Every drawn edge of the folded drawing stands for a path of the unfolded one, every path
    of the unfolded one has its image, and only the edges carried from one iteration to another
    go back up (see check_folding)."""
    with budget_said():
        folded = GraphvizRenderer(rec, depth, fold_repeats=True, tensor_nodes=True, all_ops=True,
                                  max_nodes=None)
        assert folded.projection.fold.hidden, "nothing folded"
        check_folding(rec, depth, tensor_nodes=True, all_ops=True)


@pytest.mark.parametrize("case,depth", [
    ("FarthestPointSampling", 1), ("SeriesDecoder", 1), ("DartsSupernet", 3), ("YoloStyle", 3),
    ("Transformer48", 3)])
def test_stress_models_fold_and_keep_every_edges_endpoints(zoo: Zoo, case: str, depth: int) -> None:
    _endpoints_kept(zoo.recorded(case).rec, depth)


@pytest.mark.parametrize("case,iterations", [("FarthestPointSampling", 999), ("SeriesDecoder", 1000)])
def test_loop_models_are_drawn_with_their_loop_folded(zoo: Zoo, case: str, iterations: int) -> None:
    rec = zoo.recorded(case).rec
    r = GraphvizRenderer(rec)
    source = r.render().source
    assert r.budget is not None and not r.budget.reduced  # folding alone brings it within budget
    loops = [n for n in r.children(rec.nodes[next(iter(rec.context.subnet_keys))]) if isinstance(n, LoopNode)]
    assert [len(r.repeats(n)) for n in loops] == [iterations]
    assert f"loop ×{iterations}" in source


class Chain(nn.Module):
    """``n`` different operations in a row at the top level: nothing folds, depth 1 is too big."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.fc(x)
        for i in range(self.n):
            x = (torch.sin, torch.cos, torch.tanh, torch.exp, torch.sigmoid)[i % 5](x)
            x = x[:, : 4 - (i % 3)] if i % 7 == 0 else x
            x = torch.nn.functional.pad(x, (0, 4 - x.shape[1]))
        return x


class Deep(nn.Module):
    """Modules nested ``levels`` deep, each running a few ops."""

    def __init__(self, levels: int) -> None:
        super().__init__()
        self.inner = Deep(levels - 1) if levels > 1 else None
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc(x)) * 2.0 + 1.0
        return self.inner(x) if self.inner is not None else x


@pytest.fixture(scope="module")
def deep() -> torchrecorder.Recorder:
    return torchrecorder.record(Deep(40), "deep", (1, 4))


def test_default_drawing_over_the_budget_draws_the_deepest_depth_that_fits(
        deep: torchrecorder.Recorder) -> None:
    source, said = _quiet_dot(deep, max_nodes=60)
    assert len(said) == 1 and "render_depth=" in said[0] and "max_nodes=None" in said[0]
    parsed = parse_dot(source)
    assert NOTE in parsed.nodes
    assert "max_nodes=None" in parsed.node_attrs[NOTE]["label"]
    assert _size(source)[0] <= 60
    r = GraphvizRenderer(deep, max_nodes=60)
    with pytest.warns(LargeDrawingWarning):
        r.render()
    assert r.budget is not None and r.budget.reduced
    # one level deeper does not fit
    deeper = GraphvizRenderer(deep, r.budget.depth + 1, max_nodes=None)
    assert drawn_size(deeper.projection)[0] > 60


def test_the_depth_that_opens_everything_is_the_graphs_whether_the_drawing_fits_or_not(
        deep: torchrecorder.Recorder) -> None:
    # Deep(40): the network at depth 0, its 40 nested calls at depths 1..40
    fits = GraphvizRenderer(deep, 3)
    fits.render()
    assert fits.budget is not None and not fits.budget.reduced and fits.budget.deepest == 41
    reduced = GraphvizRenderer(deep, max_nodes=60)
    with pytest.warns(LargeDrawingWarning, match="render_depth=41 or max_nodes=None"):
        reduced.render()
    assert reduced.budget is not None and reduced.budget.reduced and reduced.budget.deepest == 41


def test_explicit_depth_or_no_budget_draws_everything_with_a_warning(deep: torchrecorder.Recorder) -> None:
    full, _ = _quiet_dot(deep, None, max_nodes=None)
    assert NOTE not in parse_dot(full).nodes
    explicit, said_explicit = _quiet_dot(deep, 41, max_nodes=60)
    assert explicit == full
    assert len(said_explicit) == 1 and "over the budget" in said_explicit[0]
    quiet, said_quiet = _quiet_dot(deep, 41)  # within the default budget: nothing said
    assert quiet == full and said_quiet == []


def test_budget_folds_runs_of_two_before_lowering_the_depth() -> None:
    net = nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4)) for _ in range(4)])
    rec = torchrecorder.record(net, "seq", (1, 4))
    with budget_said():
        r = GraphvizRenderer(rec, max_nodes=10)
        r.render()
    assert r.budget is not None and r.budget.min_run == 2 and r.budget.depth == 256
    assert "every repeated run of 2 or more folded" in r.budget.note()


def test_the_other_renderers_and_entry_points_keep_the_budget(deep: torchrecorder.Recorder, tmp_path) -> None:
    with budget_said() as said:
        mmd = MermaidRenderer(deep, max_nodes=60).render()
        html = HtmlRenderer(deep, max_nodes=4)
        page = html.page_data()
    assert "n_torchrecorder_note" in mmd
    # the page opens collapsed at the budget: nothing open at depth 0
    assert html.budget is not None and html.budget.depth == 0 and html.budget.size[0] <= 4
    assert not any(row[5] for row in page["nodes"])
    assert len(said) == 2, said
    with pytest.raises(ValueError, match="max_nodes"):
        GraphvizRenderer(deep, max_nodes=0)


def test_command_line_default_depth_is_a_default(tmp_path) -> None:
    from torchrecorder.__main__ import build_parser

    args = build_parser().parse_args(["m:f", "-s", "1,4"])
    assert args.depth == 1 and type(args.depth).__name__ == "DefaultDepth"
    args = build_parser().parse_args(["m:f", "-s", "1,4", "-d", "1"])
    assert type(args.depth) is int


def test_long_work_shows_its_progress_and_short_work_does_not(deep: torchrecorder.Recorder,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from torchrecorder import _progress
    from torchrecorder.backend import render_source

    source = torchrecorder.make_dot(deep, 2).source
    render_source(source, "svg")
    assert "torchrecorder:" not in capsys.readouterr().err
    monkeypatch.setattr(_progress, "ENABLED", True)  # as if the drawing were long
    source = torchrecorder.make_dot(deep, 2).source
    render_source(source, "svg")
    err = capsys.readouterr().err
    assert "torchrecorder: drawing 'deep'" in err and "done in" in err
    assert "torchrecorder: laying out with dot -Tsvg" in err


def test_html_page_counts_loops_folded_and_opens_within_the_budget(zoo: Zoo) -> None:
    rec = zoo.recorded("SeriesDecoder").rec
    html = HtmlRenderer(rec)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LargeDrawingWarning)
        page = html.page_data()
    # the loop folded, depth 1 fits: the network opens on its loop, drawn once
    assert html.budget is not None and not html.budget.reduced and html.budget.depth == 1
    assert html.budget.size[0] <= MAX_NODES and page["nodes"][0][5] == 1 and len(page["loops"]) == 1
    # unfolded (fold_repeats=False) every operation counts, and the page opens collapsed
    plain = HtmlRenderer(rec, fold_repeats=False)
    with pytest.warns(LargeDrawingWarning, match="render_depth=1 or max_nodes=None"):
        page = plain.page_data()
    assert plain.budget is not None and plain.budget.reduced and plain.budget.depth == 0
    assert plain.budget.size[0] <= MAX_NODES and not any(row[5] for row in page["nodes"])


class _Reader(nn.Module):
    """Every step reads the input again: each edge from ``x`` reaches further back."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        for _ in range(self.steps):
            y = torch.sin(y) * x
        return y


def test_edge_spans_count_the_ranks_that_long_edges_pass() -> None:
    chain = torchrecorder.record(nn.Sequential(*[nn.ReLU() for _ in range(40)]), "chain", (1, 4))
    reader = torchrecorder.record(_Reader(40), "reader", (1, 4))
    everything = {"fold_repeats": False, "max_nodes": None}
    assert edge_spans(GraphvizRenderer(chain, **everything).projection) == 0  # type: ignore[arg-type]
    # x at rank 0 (just above its first consumer, sin_1), sin_k at rank 2k-1, mul_k at 2k:
    # the edge x -> mul_k passes the 2k-1 ranks between, 1 + 3 + ... + 79 = 40² in all
    spans = edge_spans(GraphvizRenderer(reader, **everything).projection)  # type: ignore[arg-type]
    assert spans == 40 ** 2, spans


class _GroupReader(nn.Module):
    """Every step reads one of ``steps // 8`` values made at the top, each read by 8 steps (too
    few to share their edges): the edges reach further and further back."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        made = [x + k for k in range(self.steps // 8)]
        y = x
        for i in range(self.steps):
            y = torch.sin(y) * made[i // 8]
        return y


def test_default_drawing_keeps_to_the_span_budget_and_says_why() -> None:
    """Few boxes, long edges (a DARTS cell: every step reads every earlier state): ``dot`` takes
    seconds to minutes.  Where one value feeds every step, its edges are shared (one edge to a
    mark); where sharing is not enough, the default drawing goes shallower; both name the
    ranks passed."""
    reader = torchrecorder.record(_Reader(120), "reader", (1, 4))
    with budget_said() as said:
        renderer = GraphvizRenderer(reader, default_depth(256), fold_repeats=False)
        source = renderer.render().source
    assert said and "ranks" in said[0] and "the edges of x" in said[0], said
    assert renderer.budget is not None and renderer.budget.reduced and renderer.budget.shared == ("input:x",)
    assert renderer.budget.depth == 256 and edge_spans(renderer.projection, ("input:x",)) <= MAX_SPANS
    assert NOTE in parse_dot(source).nodes
    grouped = torchrecorder.record(_GroupReader(120), "grouped", (1, 4))
    with budget_said() as said:
        renderer = GraphvizRenderer(grouped, default_depth(256), fold_repeats=False)
        source = renderer.render().source
    assert said and "ranks" in said[0] and "render_depth=0 collapsed" in said[0], said
    assert renderer.budget is not None and renderer.budget.depth == 0
    assert NOTE in parse_dot(source).nodes
    with budget_said() as said:  # asked for: drawn, with a warning first
        GraphvizRenderer(reader, None, fold_repeats=False).render()
    assert any("ranks" in message for message in said)


@needs_backend
def test_cluster_title_edges_count_toward_the_layout_budget(zoo: Zoo) -> None:
    """PointNet++: every stage reads the point coordinates again.  Folded at full depth it
    draws 200-odd boxes and its drawn edges pass fewer ranks than the budget allows, but each
    edge entering a module's cluster also ranks that cluster's title below its tail, and
    those invisible edges pass thousands of ranks: ``dot`` took 24 s on it
    (``benchmarks/layout_measures.py``).  The default drawing counts them and shares the
    edges of the coordinates (and of the values each stage reads many times): drawn in full,
    its edges then pass a few hundred ranks (``dot``: under a second)."""
    rec = zoo.recorded("PointNet2").rec
    with budget_said():
        full = GraphvizRenderer(rec, None, fold_repeats=True, max_nodes=None).projection
    nodes, edges = drawn_size(full)
    assert nodes <= MAX_NODES and edges <= MAX_EDGES and edge_spans(full) <= MAX_SPANS  # the old budget
    assert layout_spans(full) > 2 * MAX_SPANS  # the title edges do not fit
    with budget_said() as said:
        renderer = GraphvizRenderer(rec)
        source = renderer.render().source
    budget = renderer.budget
    assert budget is not None and budget.reduced and "input:xyz" in budget.shared
    assert budget.full_spans is not None and budget.full_spans > MAX_SPANS
    assert layout_spans(renderer.projection) > MAX_SPANS >= layout_spans(renderer.projection, budget.shared)
    assert said and "ranks" in said[0] and "the edges of xyz" in said[0], said
    lays_out(source)
    assert NOTE in parse_dot(source).nodes and "ranks" in parse_dot(source).node_attrs[NOTE]["label"]


def test_layout_spans_count_the_title_edges_into_nested_clusters() -> None:
    """An input read at the top and again modules down: its drawn edge, and a title edge for
    each cluster it enters, as long; the deeper the nesting, the more.  A chain of modules
    passes only the rank of each title it enters."""
    blocks = nn.Sequential(*[nn.Sequential(nn.ReLU()) for _ in range(12)])
    chain = torchrecorder.record(blocks, "chain", (1, 4))
    everything = {"fold_repeats": False, "max_nodes": None}
    p = GraphvizRenderer(chain, **everything).projection  # type: ignore[arg-type]
    assert edge_spans(p) == 0 and layout_spans(p) <= 2 * len(p.edges)
    spans = []
    for levels in (1, 3, 6):
        rec = torchrecorder.record(_Reread(levels), "reread", (1, 4))
        p = GraphvizRenderer(rec, **everything).projection  # type: ignore[arg-type]
        spans.append((edge_spans(p), layout_spans(p)))
    assert all(drawn > 0 for drawn, _ in spans)
    title_spans = [layout - drawn for drawn, layout in spans]
    assert title_spans[0] < title_spans[1] < title_spans[2], spans


class _Nest(nn.Module):
    def __init__(self, levels: int) -> None:
        super().__init__()
        self.inner = _Nest(levels - 1) if levels > 1 else None

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.sin(torch.cos(torch.tanh(x)))
        return self.inner(x, y) if self.inner is not None else x * y


class _Reread(nn.Module):
    """The input goes through a chain of ops, then into a module nested ``levels`` deep that
    reads it again."""

    def __init__(self, levels: int) -> None:
        super().__init__()
        self.nest = _Nest(levels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for _ in range(6):
            h = torch.sigmoid(torch.exp(h))
        return self.nest(h, x)
