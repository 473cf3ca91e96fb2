"""A drawing over the budget shares the edges of a value fed to many boxes: one edge to a mark
that names them (the page does the same), before anything is folded or collapsed."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.nodes import BaseNode
from torchrecorder.projection.budget import MAX_FANOUT, MAX_NODES, edge_spans, layout_spans
from torchrecorder.renderer import GraphvizRenderer, GraphvizStyler
from torchrecorder.renderer.graphviz import TITLE_SUFFIX

from .backends import budget_said, lays_out, needs_backend
from .dot_parse import parse_dot

NOTE = "torchrecorder note"
MARK = "::fanout"


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + pos


class Fan(nn.Module):
    """``pos`` (one value) read by each of ``n`` blocks in a row, as rotary tables are."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.pos = nn.Linear(4, 4)
        self.blocks = nn.ModuleList(Block() for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = self.pos(x)
        for block in self.blocks:
            x = block(x, pos)
        return x


def _fan(n: int = 30) -> torchrecorder.Recorder:
    return torchrecorder.record(Fan(n), f"fan{n}", input_data=(torch.randn(2, 4),))


def _dot(rec: torchrecorder.Recorder, *args: Any, **kwargs: Any) -> tuple[str, list[str]]:
    with budget_said() as said:
        source = torchrecorder.make_dot(rec, *args, **kwargs).source
    return source, said


def _lays_out(source: str) -> None:
    """Graphviz lays the drawing out (a liveness bound, not a speed claim)."""
    lays_out(source)


@needs_backend
def test_an_explicit_drawing_over_the_budget_shares_a_wide_values_edges() -> None:
    rec = _fan(30)
    # 30 blocks, each fed by pos from further above: within 60 nodes, over its 150 ranks
    source, said = _dot(rec, 1, fold_repeats=False, max_nodes=60)
    dot = parse_dot(source)
    from_pos = [b for a, b in dot.edges if a == "pos"]
    assert from_pos == ["pos" + MARK]  # one edge, to the mark
    # (as on the page: named by the boxes' last name where they share it, blocks.0 ... differ)
    assert dot.node_attrs["pos" + MARK]["label"] == '"→ 30 boxes"'
    assert dot.node_attrs["pos" + MARK]["tooltip"].startswith('"to 30: blocks.0, blocks.1')
    assert all(f"blocks.{i}" in dot.nodes for i in range(30))  # no box lost
    assert not any(a == "pos" for a, _ in dot.invisible)
    assert NOTE in dot.nodes and "the edges of pos to the boxes each feeds drawn as one" in said[0]
    assert "Draw everything with max_nodes=None" in said[0]
    _lays_out(source)


def test_without_a_budget_or_within_it_every_edge_is_drawn() -> None:
    rec = _fan(30)
    for kwargs in ({"max_nodes": None}, {}):  # no budget; the default one (it fits)
        source, said = _dot(rec, 1, fold_repeats=False, **kwargs)
        dot = parse_dot(source)
        assert MARK not in source and said == [] and NOTE not in dot.nodes
        assert sorted(b for a, b in dot.edges if a == "pos") == sorted(f"blocks.{i}" for i in range(30))


def test_the_fit_counts_the_shared_drawing() -> None:
    r = GraphvizRenderer(_fan(30), 1, fold_repeats=False, max_nodes=60)
    with budget_said():
        p = r.projection
    assert r.budget is not None and r.budget.shared == ("pos",) and r.budget.reduced
    assert not r.budget.over and r.budget.depth == 1 and r.budget.min_run == 0
    assert edge_spans(p) > 150 >= max(edge_spans(p, ("pos",)), layout_spans(p, ("pos",)))
    dot = parse_dot(r.render().source)
    nodes = [n for n in dot.nodes if n != NOTE and not n.endswith(TITLE_SUFFIX)]  # (counted as clusters)
    assert (len(nodes) + len(dot.clusters), len(dot.edges)) == r.budget.size


def test_the_mark_is_drawn_by_the_styler() -> None:
    class Boxed(GraphvizStyler):
        def style_fanout(self, fnode: BaseNode, tnodes: Any) -> dict[str, str]:
            return {"shape": "box", "label": f"{fnode.name} feeds {len(tnodes)}"}

    with budget_said():  # (still over: a warning says so)
        source = GraphvizRenderer(_fan(12), 1, Boxed, fold_repeats=False, max_nodes=16).render().source
    assert parse_dot(source).node_attrs["pos" + MARK] == {"shape": "box", "label": '"pos feeds 12"'}


def test_a_value_fed_to_few_boxes_is_not_shared() -> None:
    # MAX_FANOUT blocks: over a tiny budget, collapsed as before, never shared
    rec = _fan(MAX_FANOUT)
    source, said = _dot(rec, 1, fold_repeats=False, max_nodes=4)
    assert MARK not in source and said and "the edges of" not in said[0]


@pytest.fixture(scope="module")
def llama8b() -> torchrecorder.Recorder:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=128256, hidden_size=4096, num_hidden_layers=32,
                                   num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336,
                                   attn_implementation="eager")
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.zeros(1, 8, dtype=torch.long, device="meta")
    with torch.no_grad():
        return torchrecorder.record(model, "llama8b", input_kwargs={
            "input_ids": ids, "use_cache": False, "attention_mask": torch.ones_like(ids)})


@needs_backend
def test_the_unfolded_8b_llama_shares_the_rotary_embeddings_edges(llama8b: torchrecorder.Recorder) -> None:
    """Unshared, its 235 boxes pass 14,282 ranks and ``dot`` had not laid it out in 2 minutes."""
    r = GraphvizRenderer(llama8b, 3, fold_repeats=False)
    with budget_said():
        source = r.render().source
    assert r.budget is not None and not r.budget.over and r.budget.depth == 3
    assert r.budget.full_spans is not None and r.budget.full_spans > 2500 >= r.budget.spans
    dot = parse_dot(source)
    rotary = [b for a, b in dot.edges if a == "model.rotary_emb"]
    assert rotary == ["model.rotary_emb" + MARK]
    assert dot.node_attrs[rotary[0]]["label"] == '"→ 32 × self_attn"'
    assert dot.node_attrs[rotary[0]]["tooltip"].startswith('"to 32: model.layers.0.self_attn, ')
    assert dot.node_attrs[rotary[0]]["shape"] == "plain"
    assert all(f"model.layers.{i}.self_attn" in dot.nodes for i in range(32))
    nodes = [n for n in dot.nodes if n != NOTE and not n.endswith(TITLE_SUFFIX)]
    assert len(nodes) + len(dot.clusters) <= MAX_NODES
    _lays_out(source)


class _Body(nn.Module):
    """The value fed to every block is an operation inside a module (``body``), not a box."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = x.sin()
        for block in self.blocks:
            x = block(x, pos)
        return x


def test_the_note_names_a_shared_operation_with_its_module_live_and_loaded() -> None:
    """The note named the shared ``sin`` after the module it ran in only for a graph loaded
    from JSON: on a live recording it looked the scope up by the module object (``parent``,
    the 1.0.3 view) and found none (redteam12; SAM's backward drawing said ``CatBackward0`` live
    and ``CatBackward0 in mask_decoder`` loaded)."""
    net = nn.Sequential()
    net.add_module("body", _Body(30))
    rec = torchrecorder.record(net, "net", input_data=(torch.randn(2, 4),))
    notes = []
    for r in (rec, torchrecorder.load_json(rec.to_json())):
        _, said = _dot(r, 3, fold_repeats=False, max_nodes=80)
        notes.append(said[0])
    assert "the edges of sin in body to the boxes each feeds" in notes[0]
    assert notes[0] == notes[1]
