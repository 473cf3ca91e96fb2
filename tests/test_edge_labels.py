"""Edge labels inside one cluster or outside all, and no edge through a label, in the DEFAULT
drawing: checked on the geometry ``dot -Tjson`` lays out (:mod:`tests.label_geometry`), on the
networks of ``docs/figures.md``, a sample of the zoo and a peft LoRA Llama, at depths 1, 2 and
everything open.  Each label is a node of its own (``label_nodes``, on by default) in the
innermost cluster holding both ends of its edge; Graphviz's own edge labels
(``label_nodes=False``) can lie across a cluster's border.  Every other zoo model too, with
``TORCHRECORDER_ALL_ZOO=1`` in the environment (a minute more)."""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import torchrecorder

from .backends import needs_dot
from .label_geometry import edges_outside_their_cluster, label_problems, layout
from .zoo import all_cases
from .zoo.session import Zoo

pytestmark = needs_dot

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
try:
    from figure_models import MODELS
finally:
    sys.path.pop(0)

#: zoo models of different kinds (skips, U-Net, attention, encoder-decoder, grouped-query
#: attention, windows), drawn at every depth in the default run
ZOO_SAMPLE = ("TinyUNet", "ResidualCNN", "AttentionBlock", "TorchTransformer", "hf-gpt2", "hf-llama",
              "hf-t5", "hf-swin")
DEPTHS = (1, 2, None)


def _problems(rec: torchrecorder.Recorder, **kwargs: Any) -> dict[Any, list[str]]:
    """The label problems of each depth's drawing, the depths without any left out."""
    found = {d: label_problems(torchrecorder.make_dot(rec, d, **kwargs).source) for d in DEPTHS}
    return {d: p for d, p in found.items() if p}


@pytest.fixture(scope="module")
def recordings() -> dict[str, Any]:
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, build in MODELS.items():
            net, args = build()
            out[name] = torchrecorder.record(net, name, input_data=args)
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_default_drawing_keeps_every_label_clear_of_borders_and_edges(recordings: dict[str, Any],
                                                                      name: str) -> None:
    assert _problems(recordings[name]) == {}


@pytest.mark.parametrize("name", ZOO_SAMPLE)
def test_zoo_sample_labels_clear(zoo: Zoo, name: str) -> None:
    assert _problems(zoo.recorded(name).rec) == {}


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("TORCHRECORDER_ALL_ZOO") != "1", reason="TORCHRECORDER_ALL_ZOO=1 runs it")
@pytest.mark.parametrize("name", [c.name for c in all_cases() if c.name not in ZOO_SAMPLE])
def test_every_zoo_model_labels_clear(zoo: Zoo, name: str) -> None:
    assert _problems(zoo.recorded(name).rec) == {}


def test_lora_llama_labels_clear() -> None:
    """The picture of the issue: a peft LoRA Llama put an ``unsqueeze`` label across two borders."""
    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    torch.manual_seed(0)
    net = peft.get_peft_model(transformers.LlamaForCausalLM(cfg),
                              peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    ids = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = torchrecorder.record(net.eval(), "lora", input_data=(ids,))
    assert _problems(rec) == {}


def test_the_check_finds_graphvizs_own_labels_across_a_border(recordings: dict[str, Any]) -> None:
    """What ``label_nodes`` is for: without it, the U-Net's drawing has edge labels that a
    cluster's border crosses."""
    problems = _problems(recordings["unet"], label_nodes=False)
    assert any("border of cluster" in p for found in problems.values() for p in found), problems


def test_a_label_node_sits_in_the_innermost_cluster_of_both_ends(recordings: dict[str, Any]) -> None:
    source = torchrecorder.make_dot(recordings["transformer_encoder"], 2).source
    line = next(ln for ln in source.splitlines() if "::label\" [" in ln)
    assert line.lstrip().startswith('subgraph cluster_transformer_encoder { subgraph "cluster_layers.0" { '
                                    '"layers.0.'), line
    assert "shape=plain" in line
    assert source.count('::label" [label=') > 0
    # every part of an edge but its last has no arrowhead: one per label node and per point
    points = len(re.findall(r'::via\d+" \[label=""', source))
    assert source.count("arrowhead=none") == source.count('::label" [label=') + points


@pytest.mark.parametrize("name", list(MODELS))
def test_edges_stay_inside_their_clusters(recordings: dict[str, Any], name: str) -> None:
    """Depth-2 tidiness: an edge between stacked stages stays inside the cluster holding
    both, and an edge into a cluster crosses its border once (it passes the cluster's title
    rank on a point inside it, not outside the cluster and around the title)."""
    found = {d: edges_outside_their_cluster(torchrecorder.make_dot(recordings[name], d).source)
             for d in DEPTHS}
    assert {d: p for d, p in found.items() if p} == {}


class _MaskedStack(torch.nn.Module):
    """A mask read again before each layer of a stack (a VITS duration predictor, a WaveNet
    flow): the edges from the input ``mask`` enter the model's cluster at ranks far below its
    title."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = torch.nn.Conv1d(4, 8, 1)
        self.convs = torch.nn.ModuleList(torch.nn.Conv1d(8, 8, 3, padding=1) for _ in range(3))
        self.out = torch.nn.Conv1d(8, 1, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.pre(x)
        for conv in self.convs:
            x = x + torch.relu(conv(x * mask))
        return self.out(x * mask)


def test_edges_entering_far_below_a_title_stay_inside_the_cluster() -> None:
    """The point such an edge passes lies on the cluster's title rank (``rank=same``): left
    free, ``dot`` put it beside a layer far down, and the edge ran outside the cluster down to
    it and turned back in."""
    inputs = (torch.randn(1, 4, 10), torch.ones(1, 1, 10))
    rec = torchrecorder.record(_MaskedStack(), "stack", input_data=inputs)
    found = {(d, fold): edges_outside_their_cluster(torchrecorder.make_dot(rec, d, fold_repeats=fold).source)
             for d in DEPTHS for fold in (False, True)}
    assert {k: p for k, p in found.items() if p} == {}


def test_an_edge_into_titled_clusters_passes_a_point_in_each(recordings: dict[str, Any]) -> None:
    source = torchrecorder.make_dot(recordings["transformer_encoder"], 2).source
    assert ('subgraph cluster_transformer_encoder { "input@src -> layers.0.self_attn::via1" [label="" '
            'fillcolor="#555555" fixedsize=true group=input0 height=0.03 penwidth=0 shape=box '
            'style=filled') in source
    # each point on its cluster's title rank, the second nested in the first's statement
    assert ('style=filled width=0.0139] {rank=same; "transformer_encoder::title"; '
            '"input@src -> layers.0.self_attn::via1"} subgraph "cluster_layers.0" { '
            '"input@src -> layers.0.self_attn::via2" [') in source
    assert ('{rank=same; "layers.0::title"; "input@src -> layers.0.self_attn::via2"} } }'
            in source)
    first, last = "input@src -> layers.0.self_attn::via1", "input@src -> layers.0.self_attn::via2"
    assert re.search(rf'"input@src" -> "{first}" \[arrowhead=none [^\n]*headclip=false', source)
    assert re.search(rf'"{last}" -> "layers.0.self_attn" \[arrowsize[^\n]*tailclip=false', source)
    # stage to stage: one point, in the second stage
    assert '"layers.0.norm2 -> layers.1.self_attn::via1"' in source
    assert "layers.0.norm2 -> layers.1.self_attn::via2" not in source


@pytest.mark.parametrize(("name", "consumer"),
                         [("gpt2", "transformer.wte"), ("bert", "embeddings.word_embeddings")])
def test_the_input_sits_above_the_first_module_it_feeds(recordings: dict[str, Any], name: str,
                                                         consumer: str) -> None:
    """Depth-2 tidiness: ``input_ids`` straight above the embedding it feeds (its edge passes
    two cluster titles and, for GPT-2, has a label), not pushed aside by a title or a label
    and joined to it by an S-shaped edge: the input and every point its edge passes lie within
    the consumer's width."""
    data = layout(torchrecorder.make_dot(recordings[name], 2).source)
    nodes = {o["name"]: o for o in data["objects"] if "pos" in o}
    x_of = {n: float(o["pos"].split(",")[0]) for n, o in nodes.items()}
    half = 36 * float(nodes[consumer]["width"])
    path = [n for n in nodes if n.startswith(f"input@input_ids -> {consumer}::")]
    assert path  # the edge enters titled clusters: it passes a point on each title's rank
    for node in ["input@input_ids", *path]:
        assert abs(x_of[node] - x_of[consumer]) < half, (node, x_of[node], x_of[consumer], half)
