"""Folding repeated operation patterns (Python loops in ``forward``) into one group marked ×N."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import torchrecorder
from torchrecorder.nodes import LayerNode
from torchrecorder.projection import LoopNode
from torchrecorder.projection.loops import Stretch, choose, periodic_stretches
from torchrecorder.renderer import GraphvizRenderer, MermaidRenderer
from torchrecorder.renderer.graphviz import TITLE_SUFFIX

from .dot_parse import parse_dot
from .graph_checks import check_folding, find_cycle
from .loop_programs import Flows, LoopProgram, LoopSpec, StatesReadAfter, loop_specs
from .zoo.stress import FarthestPointSampling


class Series(nn.Module):
    """``acc = acc + (h * c) ** 2`` for ``n`` terms, at the top level of ``forward``."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        acc = torch.zeros_like(h)
        for k in range(self.n):
            acc = acc + (h * (1.0 / (k + 1))) ** 2
        return acc


class Inner(nn.Module):
    """A module whose own ``forward`` runs the loop (and then a Linear): folded inside it."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.n):
            x = torch.sin(x) * 0.5 + x
        return self.fc(x)


class Wrapped(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.pre = nn.Linear(4, 4)
        self.body = Inner(n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(self.pre(x))


class Growing(nn.Module):
    """A loop whose tensor grows for the first iterations and then keeps its shape."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(5):
            x = torch.cat([x, x[:, :1]], dim=1) * 2.0
        for _ in range(10):
            x = torch.relu(x) + 1.0
        return x


class CellLoop(nn.Module):
    """A module called in a loop with an op after it: the pattern (cell, add) repeats."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.cell = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.n):
            x = torch.tanh(self.cell(x)) + x
        return x


class Step(nn.Module):
    """One step of a sampler: the state and a per-step tensor in, the update out."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(1, 4)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.a(x) + self.b(t)


class Sampler(nn.Module):
    """``x = x - 0.1 * step(x, t)`` for ``n`` steps, starting from the network's input: the
    first call of ``step`` reads the input node itself, every later one gets an input tensor
    node, which the repetition's start (mid-iteration) would separate from its call."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.step = Step()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(self.n):
            t = torch.full((1, 1), float(i))
            x = x - 0.1 * self.step(x, t)
        return x


class Packed(nn.Module):
    """A recurrent cell over sequences sorted by length: batch 2 for 10 steps, then 1 for 10."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (2, 20, 4)
        x = x * 1.0
        h = torch.zeros(2, 4)
        for t in range(20):
            b = 2 if t < 10 else 1
            h = torch.cat([self.cell(x[:b, t], h[:b]), h[b:]], 0)
        return h


class Fibonacci(nn.Module):
    """``a, b = b, tanh(a + b)``: each iteration reads the two before it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x * 1.0, x * 2.0
        for _ in range(30):
            a, b = b, torch.tanh(a + b)
        return b


class TwoLoops(nn.Module):
    """A loop calling one module, then a loop over a list of modules alike in structure."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Linear(4, 4)
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * 1.0
        for _ in range(8):
            x = x + self.shared(x)
        for layer in self.layers:
            x = x + layer(x)
        return x


def _loops(r: GraphvizRenderer) -> list[LoopNode]:
    out: list[LoopNode] = []
    todo = list(r.children(r.rec.context))
    while todo:
        node = todo.pop()
        if isinstance(node, LoopNode):
            out.append(node)
        if r.projection.is_expanded(node):
            todo.extend(r.children(node))
    return out


def test_series_loop_folds_into_one_group_marked_with_its_count() -> None:
    rec = torchrecorder.record(Series(40), "series", (1, 4))
    r = GraphvizRenderer(rec)
    source = r.render().source
    (loop,) = _loops(r)
    assert len(r.repeats(loop)) == 40
    assert [n.op for n in r.children(loop)] == ["mul", "pow", "add"]
    parsed = parse_dot(source)
    assert sum(1 for c in parsed.clusters if c.endswith("#loop")) == 1
    assert "loop ×40" in source
    # nothing of a later iteration is drawn, and the edges in and out of the loop are kept
    ops = [k for k in parsed.nodes if k.startswith("series/") and not k.endswith(TITLE_SUFFIX)]
    assert sorted(ops) == ["series/add", "series/mul", "series/pow", "series/zeros_like"]
    assert ("lin", "series/mul") in parsed.edges
    assert ("series/add", "series@out") in parsed.edges


def test_fold_repeats_false_draws_every_operation() -> None:
    rec = torchrecorder.record(Series(12), "series", (1, 4))
    source = GraphvizRenderer(rec, fold_repeats=False).render().source
    parsed = parse_dot(source)
    assert not any(c.endswith("#loop") for c in parsed.clusters)
    assert sum(1 for k in parsed.nodes if k.startswith("series/add")) == 12
    assert "#loop" not in source and "loop ×" not in source


def test_auto_folds_only_runs_of_eight_or_more() -> None:
    assert _loops(_rendered(Series(7))) == []
    assert len(_loops(_rendered(Series(8)))) == 1
    assert len(_loops(_rendered(Series(3), fold_repeats=True))) == 1


def _rendered(net: nn.Module, **options: object) -> GraphvizRenderer:
    return _rendered_rec(torchrecorder.record(net, "net", (1, 4)), **options)


def _rendered_rec(rec: torchrecorder.Recorder, **options: object) -> GraphvizRenderer:
    r = GraphvizRenderer(rec, **options)  # type: ignore[arg-type]
    r.render()
    return r


@pytest.mark.parametrize("depth", [2, 3])
def test_loop_inside_a_module_folds_at_every_depth_that_opens_it(depth: int) -> None:
    r = _rendered(Wrapped(20), render_depth=depth)
    (loop,) = _loops(r)
    assert loop.parent_key == "body"
    assert len(r.repeats(loop)) == 20
    assert [n.op for n in r.children(loop)] == ["sin", "mul", "add"]
    # at depth 1 the module is one box: nothing to fold
    assert _loops(_rendered(Wrapped(20), render_depth=1)) == []


def test_a_loop_whose_shape_changes_folds_only_the_identical_stretch() -> None:
    r = _rendered(Growing())
    (loop,) = _loops(r)
    assert len(r.repeats(loop)) == 10  # the growing iterations differ in shape: drawn one by one
    assert [n.op for n in r.children(loop)] == ["relu", "add"]
    assert sum(1 for n in r.children(r.rec.nodes["net"]) if isinstance(n, type(r.rec.nodes["net/cat"]))
               and getattr(n, "op", "") == "cat") == 5


def test_loop_calling_a_module_folds_the_module_with_its_ops() -> None:
    r = _rendered(CellLoop(9))
    (loop,) = _loops(r)
    # the first iteration reads the network's input node, so its call has no input tensor node
    # of its own: recorded unlike the others, it is drawn before the loop
    assert len(r.repeats(loop)) == 8
    kids = r.children(loop)
    assert any(getattr(k, "type_name", "") == "Linear" for k in kids)
    assert {getattr(k, "op", None) for k in kids} >= {"tanh", "add"}


def test_loop_iterations_start_where_no_call_is_cut_from_its_inputs() -> None:
    """The repetition starts inside the first iteration (after the call that reads the
    network's input); cut there, each call and the tensors it reads fall in two iterations
    and nothing folded.  The iterations start at the step's first op instead."""
    r = _rendered(Sampler(12))
    (loop,) = _loops(r)
    assert len(r.repeats(loop)) == 11
    assert loop.ops[0] == "full"  # (drawn apart from the iteration's other ops: it reads nothing)
    assert sum(getattr(k, "type_name", "") == "Step" for k in r.children(loop)) == 1


def test_a_loop_after_a_shape_change_keeps_all_its_iterations() -> None:
    """The second stretch's repetition starts in the last iteration of the first: its
    iterations start where its own first iteration does, not one iteration later."""
    r = _rendered_rec(torchrecorder.record(Packed(), "net", input_data=torch.randn(2, 20, 4)))
    loops = sorted(_loops(r), key=lambda n: n.key)
    assert [len(r.repeats(loop)) for loop in loops] == [10, 10]
    for loop in loops:
        assert [getattr(k, "op", getattr(k, "type_name", "")) for k in r.children(loop)][-1] == "cat"


def test_a_loop_over_one_module_and_a_loop_over_a_module_list_stay_two_loops() -> None:
    """Alike in ops and structure, the two loops are told apart by the modules they call:
    one and the same in the first, a new one each time in the second."""
    r = _rendered(TwoLoops())
    loops = sorted(_loops(r), key=lambda n: n.key)
    assert [len(r.repeats(loop)) for loop in loops] == [8, 8]
    called = [[k.path for k in r.children(loop) if isinstance(k, LayerNode)] for loop in loops]
    assert sorted(called) == [["layers.0"], ["shared"]]


def test_iterations_whose_left_out_slices_differ_in_shape_are_not_called_identical() -> None:
    """``x[:, :t + 1].mean(1)``: the drawn ops are alike in every iteration, the slice left
    out of the drawing grows; the loop folds, and says what differs."""

    class PrefixMean(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:  # (1, 12, 4)
            h = torch.zeros(1, 4)
            for t in range(12):
                h = torch.tanh(self.fc(h) + x[:, :t + 1].mean(1))
            return h

    rec = torchrecorder.record(PrefixMean(), "net", input_data=torch.randn(1, 12, 4))
    r = GraphvizRenderer(rec)
    source = r.render().source
    (loop,) = _loops(r)
    assert loop.varying == ("getitem",)
    assert "iterations, alike but for the shapes of getitem" in source
    assert "identical iterations" not in source
    # drawn with every op, the slices' shapes are compared: the iterations differ, nothing folds
    assert _loops(_rendered_rec(rec, all_ops=True)) == []
    series = GraphvizRenderer(torchrecorder.record(Series(12), "s", (1, 4)))
    assert "12 identical iterations" in series.render().source and _loops(series)[0].varying == ()


def test_a_recurrence_reading_two_iterations_back_folds() -> None:
    r = _rendered(Fibonacci())
    (loop,) = _loops(r)
    assert len(r.repeats(loop)) == 30
    assert [n.op for n in r.children(loop)] == ["add", "tanh"]


class StepRNN(nn.Module):
    """A cell called once per time step, its state read by an output layer in the same step."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.RNNCell(4, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.shape[1], 8)
        ys = []
        for t in range(x.shape[0]):
            h = self.cell(x[t], h)
            ys.append(self.out(h))
        return torch.stack(ys)


def test_a_loops_iterations_begin_where_its_body_does_as_written() -> None:
    """The first step's cell reads the zeros made before the loop (a tensor node the later
    calls do not get), so the repetition starts after it, at the step's output: cut there,
    an iteration would be ``out`` of one step and ``cell`` of the next.  The lines of code
    say where the body begins: each iteration is a cell call, then the output layer."""
    rec = torchrecorder.record(StepRNN(), "rnn", input_data=torch.randn(12, 2, 4))
    r = _rendered_rec(rec)
    (loop,) = _loops(r)
    assert len(r.repeats(loop)) == 11
    calls = [k for k in r.children(loop) if isinstance(k, LayerNode)]
    assert [(k.name, k.call_index) for k in calls] == [("cell", 2), ("out", 2)]
    # without the lines of code (source=False) the loop still folds, cut where it repeats
    bare = torchrecorder.record(StepRNN(), "rnn", input_data=torch.randn(12, 2, 4), source=False)
    r = _rendered_rec(bare)
    (loop,) = _loops(r)
    assert len(r.repeats(loop)) == 11


def _fps() -> nn.Module:
    return FarthestPointSampling(npoint=10).eval()


LOOP_MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "Series": (lambda: Series(30), (1, 4)), "Wrapped": (lambda: Wrapped(30), (1, 4)),
    "CellLoop": (lambda: CellLoop(12), (1, 4)), "Growing": (Growing, (1, 4)),
    "Sampler": (lambda: Sampler(12), (1, 4)), "Fibonacci": (Fibonacci, (1, 4)),
    "StatesReadAfter": (StatesReadAfter, (1, 10, 4)), "FarthestPointSampling": (_fps, (1, 64, 3)),
    "Flows": (Flows, (1, 4)), "TwoLoops": (TwoLoops, (1, 4)),
}


@pytest.mark.parametrize("options", [
    {"tensor_nodes": True, "all_ops": True}, {"tensor_nodes": True}, {"all_ops": True}, {},
], ids=lambda o: "+".join(o) or "default")
@pytest.mark.parametrize("name", list(LOOP_MODELS))
def test_folding_keeps_every_edges_endpoints(name: str, options: dict[str, bool]) -> None:
    make, shape = LOOP_MODELS[name]
    torch.manual_seed(0)
    rec = torchrecorder.record(make(), "net", input_data=torch.randn(*shape))
    for depth in (1, 2, None):
        check_folding(rec, depth, **options)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=loop_specs(), options=st.sampled_from([
    {"tensor_nodes": True, "all_ops": True}, {"tensor_nodes": True}, {"all_ops": True}, {}]),
    depth=st.sampled_from([1, 2, 3, None]), fold=st.sampled_from([True, 3, "auto"]))
def test_folding_random_loop_programs_keeps_every_edges_endpoints(
        spec: LoopSpec, options: dict[str, bool], depth: int | None, fold: bool | int | str) -> None:
    """Random loops (cells, carried states, states read after the loop, writes in place, lists
    of modules, loops inside the blocks of a run or of an outer loop): see check_folding."""
    torch.manual_seed(0)
    rec = torchrecorder.record(LoopProgram(spec), "net", input_data=torch.randn(1, spec.steps, 4))
    check_folding(rec, depth, fold, **options)


def test_a_state_read_after_the_loop_comes_from_the_loop() -> None:
    """``outs[-2]`` is the state of a later iteration: the folded drawing draws it from the loop's
    cell, never from the call before the loop (the first iteration's producer of the state)."""
    rec = torchrecorder.record(StatesReadAfter(), "net", input_data=torch.randn(1, 10, 4))
    for options in ({}, {"tensor_nodes": True}):
        r = _rendered_rec(rec, fold_repeats=True, **options)
        (loop,) = _loops(r)
        edges = {(a.key, b.key) for a, b in r.drawn_edges()}
        into_head = {a for a, b in edges if b == "head"}
        if options:  # the state tensor of the loop's iterations
            assert into_head == {"cell:out"} and r.projection.drawn_key("cell#9:out") == "cell:out"
        else:
            assert into_head == {"cell#2"} and ("cell", "head") not in edges
            assert r.projection.drawn_key("cell#9") == "cell#2" and "cell#2" in loop.subnet_keys


def test_a_loop_keeps_its_write_into_a_buffer_made_before_it() -> None:
    """Farthest-point sampling: ``centroids[:, i] = farthest`` writes, in each iteration, the index
    the iteration before found into a buffer of zeros.  In the first iteration the write reads
    nothing drawn (it is left out of the unfolded drawing); in the others it reads ``max``: the
    folded loop draws it, fed from ``max`` of the iteration before, and the buffer it fills
    feeds the write after the loop."""
    rec = torchrecorder.record(_fps(), "net", input_data=torch.randn(1, 64, 3))
    r = _rendered_rec(rec, fold_repeats=True)
    loop = next(n for n in _loops(r) if len(r.repeats(n)) == 9)
    kids = r.children(loop)
    assert [getattr(n, "op", "") for n in kids].count("setitem") == 2  # both writes
    assert ("net/setitem", "net/setitem_18") in {(a.key, b.key) for a, b in r.drawn_edges()}
    assert ("net/max", "net/setitem") in {(a.key, b.key) for a, b in r.projection.carried_edges}
    source = r.render().source
    assert '"net/max" -> "net/setitem" [' in source


def test_a_loop_inside_the_first_iteration_of_another_draws_no_cycle() -> None:
    """VITS' flows: the inner loop's value carried from one of its iterations to the next is,
    in a later flow (an iteration of the outer loop), carried too: a dashed back edge, never
    a plain edge from the last ``add`` back up to the first op (a cycle)."""
    rec = torchrecorder.record(Flows(), "net", (1, 4))
    for options in ({}, {"tensor_nodes": True, "all_ops": True}):
        r = _rendered_rec(rec, render_depth=3, fold_repeats=True, **options)
        assert len(_loops(r)) >= 2
        assert not find_cycle([(a.key, b.key) for a, b in r.drawn_edges()])
        assert r.projection.carried_edges


def test_mermaid_draws_the_loop_as_a_subgraph() -> None:
    rec = torchrecorder.record(Series(10), "series", (1, 4))
    text = MermaidRenderer(rec).render()
    assert 'subgraph n_series_mul_loop["loop : mul · pow · add ×10"]' in text
    assert text.count("subgraph") == 2  # the network and its loop


def test_same_recording_same_drawing() -> None:
    a = GraphvizRenderer(torchrecorder.record(Series(20), "s", (1, 4))).render().source
    b = GraphvizRenderer(torchrecorder.record(Series(20), "s", (1, 4))).render().source
    assert a == b


def as_tuples(stretches: list[Stretch]) -> list[tuple[int, int, int]]:
    return [(s.start, s.period, s.count) for s in stretches]


def test_choose_cuts_a_stretch_at_the_offset_that_leaves_most_iterations() -> None:
    taken = Stretch(0, 2, 10)  # covers children 0-19
    later = Stretch(18, 3, 3, span=11)  # periodic over children 18-28
    # from its own start, whole iterations begin at 21 once 18-19 are taken: two fit
    assert as_tuples(choose([taken, later], 2)) == [(0, 2, 10), (21, 3, 2)]
    # offset 2 (20, 23, 26) leaves three, and is taken; on a tie the preferred offset is
    assert as_tuples(choose([taken, later], 2, lambda s: [0, 2])) == [(0, 2, 10), (20, 3, 3)]
    assert as_tuples(choose([later], 2, lambda s: [2, 0])) == [(20, 3, 3)]
    assert as_tuples(choose([later], 2, lambda s: [0, 2])) == [(18, 3, 3)]


def _brute(numbers: list[int], min_count: int) -> int:
    """The most elements covered by one periodic stretch (period <= 48), the slow way."""
    best = 0
    n = len(numbers)
    for p in range(1, 49):
        for i in range(n):
            k = 1
            while i + (k + 1) * p <= n and numbers[i + k * p:i + (k + 1) * p] == numbers[i:i + p]:
                k += 1
            if k >= min_count:
                best = max(best, k * p)
    return best


@pytest.mark.parametrize("seed", range(30))
def test_stretch_finding_matches_a_brute_force_search(seed: int) -> None:
    rnd = random.Random(seed)
    body = [rnd.randrange(4) for _ in range(rnd.randrange(1, 6))]
    numbers = ([rnd.randrange(4) for _ in range(rnd.randrange(0, 6))] + body * rnd.randrange(1, 12)
               + [rnd.randrange(4) for _ in range(rnd.randrange(0, 6))])
    got = choose(periodic_stretches(numbers, 3), 3)
    covered = [i for s in got for i in range(s.start, s.start + s.count * s.period)]
    assert len(covered) == len(set(covered))  # no element in two loops
    for s in got:
        block = numbers[s.start:s.start + s.period]
        p = s.period
        assert all(numbers[s.start + k * p:s.start + (k + 1) * p] == block for k in range(s.count))
    assert max((s.count * s.period for s in got), default=0) == _brute(numbers, 3)


def _stretches_one_by_one(numbers: list[int], min_count: int) -> list[tuple[int, int, int]]:
    """What periodic_stretches finds, compared element by element: every maximal stretch where
    ``numbers[i] == numbers[i + p]`` holds at least ``p * (min_count - 1)`` times in a row."""
    out = []
    n = len(numbers)
    for p in range(1, min(48, n // max(min_count, 1)) + 1):
        need = p * (min_count - 1)
        i = 0
        while need > 0 and i < n - p:
            j = i
            while j < n - p and numbers[j] == numbers[j + p]:
                j += 1
            if j - i >= need:
                out.append((i, p, (j - i + p) // p))
            i = j + 1
    return out


@pytest.mark.parametrize("scale", [1, 300, 70_000, 1 << 40, 1 << 70])
def test_periodic_stretches_of_small_large_and_negative_numbers(scale: int) -> None:
    # packed 1, 2 or 8 bytes a number, or compared one by one (past 64 bits, below 0)
    rnd = random.Random(scale)
    for _ in range(40):
        body = [rnd.randrange(-1, 4) * scale for _ in range(rnd.randrange(1, 7))]
        numbers: list[int] = []
        while len(numbers) < 120:
            numbers += body * rnd.randrange(1, 12) if rnd.random() < 0.4 else [rnd.randrange(4) * scale]
        min_count = rnd.randrange(2, 6)
        got = [(s.start, s.period, s.count) for s in periodic_stretches(numbers, min_count)]
        assert got == _stretches_one_by_one(numbers, min_count)


def test_layer_table_marks_the_first_iteration_of_a_folded_loop() -> None:
    rec = torchrecorder.record(CellLoop(9), "net", (1, 4))
    folded, unfolded = rec.summary(), rec.summary(fold=False)
    assert "cell #2 (Linear) ×8 (loop)" in folded
    assert "cell #3" not in folded and "cell #9" in unfolded
