"""Folding repeated blocks: identical consecutive blocks drawn once, marked ×N, with correct edges."""

from __future__ import annotations

import itertools
import re

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.projection import structure_ids
from torchrecorder.renderer import AUTO_FOLD_MIN, BaseRenderer, GraphvizRenderer, MermaidRenderer


class Block(nn.Module):
    """Linear, ReLU, LayerNorm and a residual add: a small transformer-ish block."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.norm(torch.relu(self.fc(x)))


class Stack(nn.Module):
    """embed -> blocks (a ModuleList, run in a loop) -> head."""

    def __init__(self, blocks: list[nn.Module], d: int = 8) -> None:
        super().__init__()
        self.embed = nn.Linear(4, d)
        self.layers = nn.ModuleList(blocks)
        self.head = nn.Linear(blocks[-1].fc.out_features if blocks else d, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


class Gated(Block):
    """Same type signature as Block but a different inside (an extra sigmoid gate)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.sigmoid(self.norm(self.fc(x)))


class Widen(nn.Module):
    """Changes the width, so the next blocks have other shapes."""

    def __init__(self, a: int, b: int) -> None:
        super().__init__()
        self.fc = nn.Linear(a, b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


def stack(n: int) -> torchrecorder.Recorder:
    return torchrecorder.record(Stack([Block() for _ in range(n)]), "net", (1, 4))


def drawn(renderer: BaseRenderer) -> list[str]:
    """Keys of every node the renderer draws, depth first."""
    out: list[str] = []
    todo = list(reversed(renderer.children(renderer.rec.context)))
    while todo:
        node = todo.pop()
        out.append(str(node.key))
        if renderer.is_expanded(node):
            todo.extend(reversed(renderer.children(node)))
    return out


def edges(renderer: BaseRenderer) -> list[tuple[str, str]]:
    return [(str(a.key), str(b.key)) for a, b in renderer.drawn_edges()]


def is_acyclic(pairs: list[tuple[str, str]]) -> bool:
    succ: dict[str, list[str]] = {}
    indeg: dict[str, int] = {}
    for a, b in pairs:
        succ.setdefault(a, []).append(b)
        indeg[b] = indeg.get(b, 0) + 1
        indeg.setdefault(a, 0)
    ready = [k for k, d in indeg.items() if d == 0]
    seen = 0
    while ready:
        k = ready.pop()
        seen += 1
        for b in succ.get(k, ()):
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    return seen == len(indeg)


@pytest.mark.parametrize("depth", [1, 2])
def test_twelve_blocks_fold_into_one_marked_x12(depth: int) -> None:
    rec = stack(12)
    r = GraphvizRenderer(rec, depth, fold_repeats=True, tensor_nodes=True)
    source = r.render().source
    assert r.repeats(rec.nodes["layers.0"]) == [rec.nodes[f"layers.{i}"] for i in range(12)]
    keys = drawn(r)
    assert "layers.0" in keys
    assert not any(k.startswith(f"layers.{i}") and not k.startswith("layers.11:")
                   for k in keys for i in range(1, 12)), keys
    assert len(re.findall(r"×12(?:&#160;)*</B>", source)) == 1
    # named as the blocks are unfolded: a box by their names, a cluster by their dotted paths
    assert ("<B>0 … 11" if depth == 1 else "<B>layers.0 … layers.11") in source
    e = edges(r)
    assert is_acyclic(e)
    if depth == 1:  # the block is a box: one edge in, one edge out
        assert ("embed:out", "layers.0") in e
        out = [b for a, b in e if a == "layers.0"]
        assert len(out) == 1
        assert (out[0], "head") in e
        assert 'peripheries=2' in source
    else:  # a cluster: its first op gets the input, its last op feeds the last block's output
        assert ("embed:out", "layers.0.fc") in e
        assert any(a.startswith("layers.0") and b.startswith("layers.11") for a, b in e)
        assert 'subgraph "cluster_layers.0"' in source
    assert not any(a.startswith(tuple(f"layers.{i}." for i in range(1, 11))) for a, _ in e)


def test_unfolded_draws_every_block() -> None:
    rec = stack(12)
    r = GraphvizRenderer(rec, 1, fold_repeats=False)
    source = r.render().source
    assert "<B>×" not in source
    assert all(f"layers.{i}" in drawn(r) for i in range(12))


def test_auto_folds_long_runs_only() -> None:
    assert AUTO_FOLD_MIN == 8
    short = stack(AUTO_FOLD_MIN - 1)
    long = stack(AUTO_FOLD_MIN)
    assert "<B>×" not in torchrecorder.make_dot(short, 1).source
    assert f"<B>×{AUTO_FOLD_MIN}</B>" in torchrecorder.make_dot(long, 1).source
    assert "<B>×" not in torchrecorder.make_dot(long, 1, fold_repeats=False).source


def test_an_int_sets_the_shortest_run() -> None:
    rec = stack(3)
    assert "<B>×3</B>" in torchrecorder.make_dot(rec, 1, fold_repeats=3).source
    assert "<B>×" not in torchrecorder.make_dot(rec, 1, fold_repeats=4).source
    with pytest.raises(ValueError, match="fold_repeats"):
        GraphvizRenderer(rec, fold_repeats="often")


def test_different_blocks_are_left_alone() -> None:
    blocks = [Block(), Block(), Gated(), Gated(), Gated(), Widen(8, 16), Block(16), Block(16)]
    rec = torchrecorder.record(Stack(blocks), "net", (1, 4))
    ids = structure_ids(rec)
    assert ids["layers.0"] == ids["layers.1"]
    assert ids["layers.1"] != ids["layers.2"]  # same type and shapes, other inside
    assert ids["layers.6"] != ids["layers.0"]  # same type, other shapes
    r = GraphvizRenderer(rec, 1, fold_repeats=True)
    source = r.render().source
    runs = {str(k): len(v) for k, v in r.fold_plan.runs.items()}
    assert runs == {"layers.0": 2, "layers.2": 3, "layers.6": 2}
    assert "layers.5" in drawn(r)
    assert is_acyclic(edges(r))
    assert source.count("<B>×2</B>") == 2 and source.count("<B>×3</B>") == 1


def test_names_do_not_matter_but_structure_does() -> None:
    class Named(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = Block()
            self.b = Block()
            self.c = Block()
            self.d = Block()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.d(self.c(self.b(self.a(x))))

    rec = torchrecorder.record(Named(), "named", (1, 8))
    r = GraphvizRenderer(rec, 1, fold_repeats=True)
    assert "a … d" in r.render().source


def test_a_shared_module_called_in_a_loop_folds() -> None:
    block = Block()
    rec = torchrecorder.record(Stack([block] * 10), "net", (1, 4))
    r = GraphvizRenderer(rec, 2, fold_repeats=True, param_shapes=True)
    source = r.render().source
    assert re.search(r"×10(?:&#160;)*</B>", source)
    assert len(r.repeats(rec.nodes["layers.0"])) == 10
    assert "weight: 8×8" in source  # the shared parameters are shown on the first call
    assert is_acyclic(edges(r))


def test_an_input_fed_to_every_block_keeps_its_edge() -> None:
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.fc(x) * mask

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(Masked() for _ in range(6))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            mask = torch.ones(8, 8).tril()[0]
            for layer in self.layers:
                x = layer(x, mask)
            return x

    rec = torchrecorder.record(Net(), "net", (1, 8))
    r = GraphvizRenderer(rec, 1, fold_repeats=True, all_ops=True)  # the mask's ops read no input
    r.render()
    e = edges(r)
    into_block = {a for a, b in e if b == "layers.0"}
    assert "input:x" in into_block and len(into_block) == 2  # the data and the mask
    assert is_acyclic(e)


def test_nested_runs_fold_inside_a_folded_block() -> None:
    class Stage(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.Sequential(*[Block() for _ in range(3)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.blocks(x)

    net = nn.Sequential(*[Stage() for _ in range(4)])
    rec = torchrecorder.record(net, "net", (1, 8))
    r = GraphvizRenderer(rec, 3, fold_repeats=True)
    source = r.render().source
    assert re.search(r"×4(?:&#160;)*</B>", source) and re.search(r"×3(?:&#160;)*</B>", source)
    assert is_acyclic(edges(r))
    assert drawn(r) == ["net", "0", "0.blocks", "0.blocks.0", "input:input", "3.blocks.2:out"]


def test_mermaid_folds_too() -> None:
    rec = stack(12)
    chart = MermaidRenderer(rec, 1, fold_repeats=True).render()
    assert re.search(r'n_layers_0\[\["layers\.0 … layers\.11<br>Block<br>.*<br>×12"\]\]', chart)
    assert "n_layers_5" not in chart
    chart2 = MermaidRenderer(rec, 2, fold_repeats=True).render()
    assert 'subgraph n_layers_0["layers.0 … layers.11 : Block ×12"]' in chart2


def test_thirty_two_layer_model_default_render_is_small(tmp_path: object) -> None:
    net = Stack([Block() for _ in range(32)])
    path = torchrecorder.render_network(net, "deep", (1, 4), str(tmp_path), fmt="dot")
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    assert "<B>×32</B>" in source
    n_nodes = len(re.findall(r"^\s+\S+ \[label=", source, re.M))
    assert n_nodes <= 12, source


def test_folding_reads_metadata_only() -> None:
    rec = stack(12)
    again = torchrecorder.loads_json(rec.to_json())
    assert torchrecorder.make_dot(again, 2, fold_repeats=True).source == \
        torchrecorder.make_dot(rec, 2, fold_repeats=True).source


def test_parallel_identical_branches_are_not_folded() -> None:
    class Heads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.heads = nn.ModuleList(nn.Linear(4, 4) for _ in range(10))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.stack([head(x) for head in self.heads]).sum(0)

    rec = torchrecorder.record(Heads(), "heads", (1, 4))
    r = GraphvizRenderer(rec, 1, fold_repeats=True)
    assert r.fold_plan.runs == {}
    assert all(f"heads.{i}" in drawn(r) for i in range(10))


def test_a_chain_breaks_where_a_block_does_not_feed_the_next() -> None:
    class TwoChains(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(6))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a = x
            for block in self.blocks[:3]:
                a = block(a)
            b = x
            for block in self.blocks[3:]:
                b = block(b)
            return a + b

    rec = torchrecorder.record(TwoChains(), "two", (1, 8))
    r = GraphvizRenderer(rec, 1, fold_repeats=True)
    assert {str(k): len(v) for k, v in r.fold_plan.runs.items()} == {"blocks.0": 3, "blocks.3": 3}
    e = edges(r)
    assert is_acyclic(e)
    assert ("input:x", "blocks.0") in e and ("input:x", "blocks.3") in e


def test_blocks_compare_as_structure_ids_do() -> None:
    from torchrecorder.nodes import LayerNode
    from torchrecorder.projection.structures import BlockStructures

    blocks = [Block(), Block(), Gated(), Gated(), Gated(), Widen(8, 16), Block(16), Block(16)]
    shared = Block()
    for net in (Stack(blocks), Stack([shared] * 4), Stack([Block() for _ in range(3)])):
        rec = torchrecorder.record(net, "net", (1, 4))
        ids = structure_ids(rec)
        numbers = BlockStructures(rec)
        layers = [n for n in rec.nodes.values() if isinstance(n, LayerNode) and n.key is not None]
        for a in layers:
            for b in layers:
                same = numbers.number(a) == numbers.number(b)
                assert same == (ids[a.key] == ids[b.key]), (a.key, b.key)


@pytest.mark.parametrize("depth", [1, 2])
def test_a_folded_run_is_named_as_its_blocks_are_unfolded(depth: int) -> None:
    rec = stack(12)
    unfolded = GraphvizRenderer(rec, depth, fold_repeats=False).render().source
    folded = GraphvizRenderer(rec, depth, fold_repeats=True).render().source
    first = re.search(r"<B>([^<]*)</B>", unfolded[unfolded.index('"layers.0'):]).group(1)
    last = re.search(r"<B>([^<]*)</B>", unfolded[unfolded.index('"layers.11'):]).group(1)
    assert f"<B>{first} … {last}" in folded, (first, last)


class _ViewedOut(nn.Module):
    """A block whose output is made by a data-movement operation (left out of a drawing)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).view(1, 8)


class _Remembers(nn.Module):
    """A block that reads a value the block before it kept (not passed as its input)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.kept: torch.Tensor | None = None
        self.before: list[_Remembers] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        if self.before and self.before[0].kept is not None:
            h = h + self.before[0].kept
        self.kept = torch.relu(h)
        return h * 2


@pytest.mark.parametrize("block, told_apart", [(Block, False), (_ViewedOut, True), (_Remembers, True)])
def test_copies_are_told_apart_where_blocks_are_wired_otherwise(block: type[nn.Module],
                                                                told_apart: bool) -> None:
    # the copies of a run's blocks are recorded only when a block is wired otherwise than
    # the first: an edge from one block into the next that is not the tensor passed on, or
    # the last block's output made by an operation a drawing leaves out
    blocks = [block() for _ in range(10)]
    for before, after in itertools.pairwise(blocks):
        if isinstance(after, _Remembers):
            after.before.append(before)  # (a plain list: not a submodule)
    rec = torchrecorder.record(Stack(blocks), "net", (1, 4))
    r = GraphvizRenderer(rec, 2, fold_repeats=True)
    assert len(next(iter(r.fold_plan.runs.values()))) >= 8  # (the first reads nothing kept)
    assert bool(r.fold_plan.copies) == told_apart
    carried = {(a.key, b.key) for a, b in r.projection.carried_edges}
    # the value one block keeps for the next is drawn as carried to the next block
    assert bool(carried) == (block is _Remembers)
