"""torchrecorder.diff on the pairs people compare: a model and its peft LoRA variant (Llama,
GPT-2, BERT from tiny configs), one block more, torch.compile's wrapper, dynamic quantisation."""

from __future__ import annotations

import copy
import html
import json
import re
import warnings
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.backend import render_source
from torchrecorder.diff.html import make_diff_html
from torchrecorder.renderer.labels import count_str

from .dot_parse import parse_dot

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")


def _llama(layers: int = 2) -> nn.Module:
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
                                   max_position_embeddings=32)
    return transformers.LlamaForCausalLM(cfg)


def _gpt2(layers: int = 2) -> nn.Module:
    cfg = transformers.GPT2Config(vocab_size=64, n_embd=16, n_layer=layers, n_head=2, n_positions=32)
    return transformers.GPT2LMHeadModel(cfg)


def _bert(layers: int = 2) -> nn.Module:
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=layers,
                                  num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)
    return transformers.BertModel(cfg)


def _record(model: nn.Module, name: str, inputs: Any) -> torchrecorder.Recorder:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torchrecorder.record(model.eval(), name, input_data=inputs)


_IDS = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(0))
_CASES = {"llama": (_llama, ("q_proj", "v_proj")), "gpt2": (_gpt2, ("c_attn",)),
          "bert": (_bert, ("query", "value"))}


@pytest.mark.parametrize("arch", sorted(_CASES))
def test_peft_lora_reports_exactly_the_targets_as_wrapped(arch: str) -> None:
    build, targets = _CASES[arch]
    torch.manual_seed(0)
    base = build()
    a = _record(base, arch, _IDS)
    lora = peft.get_peft_model(copy.deepcopy(base), peft.LoraConfig(r=2, target_modules=list(targets)))
    b = _record(lora, arch, _IDS)
    d = torchrecorder.diff(a, b)
    root_a = next(k for k, n in a.nodes.items() if k is not None and getattr(n, "depth", 1) == 0)
    wrapped = sorted(e.a for e in d.entries if e.kind == "layer" and e.status == "wrapped" and e.a != root_a)
    expected = sorted(n.path for n in a.layers() if n.path.rpartition(".")[2] in targets)
    assert wrapped == expected and len(expected) == 2 * len(targets)
    assert [e for e in d.entries if e.status == "removed"] == []  # nothing removed: no weight, op, input
    # nor any edge: each target's old edge to its output now runs through the wrapper, and the
    # edges to and from the LoRA parts are the wrapper's own, not free additions
    for forward, other in ((d, "added"), (torchrecorder.diff(b, a), "removed")):
        statuses = [s for *_, s in forward.edges]
        assert statuses.count("removed" if other == "added" else "added") == 0
        assert {i for i, s in enumerate(statuses) if s == other} == forward.wrapper_edges != set()
        assert statuses.count("wrapped") >= len(expected)
        assert "edges: +0 −0" in str(forward)
    assert d.to_dict()["summary"]["edges"]["removed"] == 0
    # the roots are paired: a's model is held by PeftModel; said in the header, and the root is
    # not counted among the wrapped layers (text, counts, JSON, HTML)
    root = d.entry_of("a", root_a)
    assert root is not None and root.status != "wrapped" and root.note == "wrapped by PeftModel"
    assert d.root_note == "wrapped by PeftModel" and any("PeftModel" in n for n in d.notes)
    assert d.counts("layer")["wrapped"] == len(expected) == d.to_dict()["summary"]["wrapped"]
    # the wrappers, their new children and those children's weights, operations and tensors are
    # the wrappers' parts, each naming the pair it belongs to; PeftModel's the roots'
    assert [e for e in d.entries if e.status == "added"] == [] and bool(d)
    parts = [e for e in d.entries if e.status == "wrapper"]
    assert parts and all(e.a is None and e.part_of is not None for e in parts)
    assert {e.part_of[0] for e in parts} == set(expected) | {root_a}
    assert d.root_pair == (root_a, root.b)
    of_layers = [e for e in parts if e.kind == "layer" and e.part_of[0] != root_a]
    of_root = [e for e in parts if e.kind == "layer" and e.part_of[0] == root_a]
    assert len(of_layers) == 4 * len(expected)  # peft's Linear, lora_A, lora_B, lora_dropout
    assert any(b.nodes[e.b].type_name == "PeftModel" for e in of_root)
    params = [e for e in parts if e.kind == "param"]
    assert len(params) == 2 * len(expected)  # lora_A's and lora_B's weights
    frozen = d.counts("param")["changed"]
    assert frozen > 0 and all(e.changes == {"requires_grad": ("True", "False")}
                              for e in d.entries if e.kind == "param" and e.status == "changed")
    head = str(d).split("\n\n", 1)[0]
    assert f"({len(expected)} wrapped ({len(of_layers)} wrapper parts), {len(of_root)} wrapping the model)" \
        in head
    assert f"({frozen} frozen, {len(params)} in wrappers)" in head and "added" not in head
    doc = d.to_dict()
    assert doc["summary"]["added"] == 0 and doc["summary"]["wrapper"] == len(parts)
    assert doc["summary"]["differ"] is True
    got = [n for n in doc["nodes"] if n["status"] == "wrapper"]
    assert len(got) == len(parts) and all(set(n["part_of"]) == {"a", "b"} for n in got)
    assert {n["part_of"]["a"] for n in got} == set(expected) | {root_a}
    head, body = str(d).split("\n\n", 1)
    assert "PeftModel" in head and "PeftModel" not in body
    assert sum(line.lstrip().startswith("⊐") for line in body.splitlines()) == 1  # the targets' line
    page = make_diff_html(d)
    data = json.loads(re.search(r'id="diff-data">(.*?)</script>', page, re.S).group(1))
    assert sorted(x["a"] for x in data["entries"].values() if x["status"] == "wrapped") == expected
    # the page says of each part whose wrapper it is (the target by a's name), not "added"
    for x in data["entries"].values():
        if x["status"] == "wrapper" and ".lora_A." in x["b"]:
            assert x["mark"] == "⊂" and x["text"].startswith("part of the wrapper of ")
            assert x["text"].split(" ")[5] in expected
    # the input is paired though peft's forward(*args, **kwargs) renames it
    ins = [e for e in d.entries if e.kind == "tensor" and e.a is not None and a.nodes[e.a].role == "input"]
    assert ins and all(e.b is not None for e in ins)
    # the LoRA parts are the wrapper's: one line per pattern, under the stripped prefix
    text = d.summary()
    assert "base_model.model." not in text.split("\n\n", 1)[1]
    assert "wrapped by peft Linear, +2 parameters" in text
    assert "lora_A" not in text and "removed" not in text.split("\n\n", 1)[1]
    back = torchrecorder.diff(b, a)
    assert [e for e in back.entries if e.status in ("added", "removed")] == []
    assert len([e for e in back.entries if e.status == "wrapper"]) == len(parts)
    assert sorted(map(repr, d.mirrored())) == sorted(repr((e.a, e.b, e.kind, e.status)) for e in back.entries)


def test_peft_ia3_scaling_an_input_adds_nothing_outside_its_wrapper() -> None:
    """IA3 on a feed-forward layer scales the layer's input inside its wrapper: the tensor the
    previous layer made pairs with its own counterpart (through the paired producer), and the
    scaled input is a part of the wrapper, not an added tensor with added and removed edges."""
    torch.manual_seed(0)
    base = _gpt2()
    a = _record(base, "gpt2", _IDS)
    ia3 = peft.get_peft_model(copy.deepcopy(base), peft.IA3Config(
        target_modules=["c_attn", "mlp.c_proj"], feedforward_modules=["mlp.c_proj"]))
    b = _record(ia3, "gpt2", _IDS)
    for d in (torchrecorder.diff(a, b), torchrecorder.diff(b, a)):
        assert [(e.a, e.b) for e in d.entries if e.status in ("added", "removed")] == []
        assert "edges: +0 −0" in str(d)
        acts = [e for e in d.entries if e.kind == "tensor" and (e.a or "").endswith("mlp.act:out")]
        assert len(acts) == 2 and all((e.b or "").endswith("mlp.act:out") for e in acts)
    wrapped = sorted(e.a for e in torchrecorder.diff(a, b).entries if e.status == "wrapped")
    targets = ("attn.c_attn", "mlp.c_proj")
    assert wrapped == sorted(f"transformer.h.{i}.{m}" for i in range(2) for m in targets)


def test_a_pruned_weight_pairs_with_what_prune_keeps_of_it() -> None:
    """``torch.nn.utils.prune`` keeps a module's ``weight`` as the parameter ``weight_orig``
    (``weight`` is it times a mask, made before each call): the two pair as parametrize's
    ``original`` does, and what the diff says is the product by the mask, not a weight removed
    and another added."""
    from torch.nn.utils import prune

    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    pruned = copy.deepcopy(base)
    prune.l1_unstructured(pruned[0], "weight", amount=0.5)
    a, b = _record(base, "net", torch.randn(2, 4)), _record(pruned, "net", torch.randn(2, 4))
    d, back = torchrecorder.diff(a, b), torchrecorder.diff(b, a)
    assert [(e.a, e.b, e.status) for e in d.entries if e.status != "same"] == [(None, "0/mul", "added")]
    assert [(e.a, e.b, e.status) for e in back.entries if e.status != "same"] == [("0/mul", None, "removed")]
    assert d.entry_of("a", "0.weight").b == "0.weight_orig"
    assert back.entry_of("a", "0.weight_orig").b == "0.weight"


def test_one_block_more() -> None:
    torch.manual_seed(0)
    short = _gpt2(2)
    longer = _gpt2(3)
    longer.load_state_dict(short.state_dict(), strict=False)
    d = torchrecorder.diff(_record(short, "gpt2", _IDS), _record(longer, "gpt2", _IDS))
    added = [e.b for e in d.entries if e.kind == "layer" and e.status == "added"]
    assert "transformer.h.2" in added and all(k.startswith("transformer.h.2") for k in added)
    assert [e for e in d.entries if e.kind == "layer" and e.status == "removed"] == []


def test_compiled_module_wraps_the_plain_one() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    a = _record(net, "net", torch.randn(1, 4))
    b = _record(torch.compile(net), "net", torch.randn(1, 4))
    d = torchrecorder.diff(a, b)
    root = d.entry_of("a", "net")
    assert root is not None and root.status == "same" and root.note == "wrapped by OptimizedModule"
    assert {e.status for e in d.entries if e.a not in (None, "net")} == {"same"}
    assert [e.b for e in d.entries if e.status == "wrapper"] == ["net"]
    assert d.root_pair == ("net", "_orig_mod")
    assert [e for e in d.entries if e.status == "added"] == [] and bool(d)
    assert "1 wrapping the model" in str(d) and "added" not in str(d)


def test_dynamic_quantisation_changes_the_class_behind_one_name() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = torch.ao.quantization.quantize_dynamic(copy.deepcopy(net), {nn.Linear}, dtype=torch.qint8)
    d = torchrecorder.diff(_record(net, "net", torch.randn(1, 4)), _record(q, "net", torch.randn(1, 4)))
    for key in ("0", "2"):
        e = d.entry_of("a", key)
        assert e is not None and e.status == "changed"
        assert e.changes["type"][1].endswith("quantized.dynamic.modules.linear.Linear")
        op = d.entry_of("a", f"{key}/linear")
        assert op is not None and op.changes["op"] == ("linear", "linear_dynamic")


@pytest.fixture(scope="module")
def q_lora() -> tuple[torchrecorder.Recorder, torchrecorder.Recorder, torchrecorder.Diff]:
    """A one-layer Llama, the same with a LoRA on ``q_proj``, and their diff (read only)."""
    torch.manual_seed(0)
    base = _llama(1)
    a = _record(base, "llama", _IDS)
    b = _record(peft.get_peft_model(copy.deepcopy(base), peft.LoraConfig(r=2, target_modules=["q_proj"])),
                "llama", _IDS)
    return a, b, torchrecorder.diff(a, b)


def test_lora_parts_are_told_apart_in_pictures(q_lora: tuple[Any, Any, torchrecorder.Diff]) -> None:
    _, b, d = q_lora
    source = torchrecorder.make_dot(b, render_depth=None).source
    for part in ("lora_A.default", "lora_B.default", "lora_dropout.default"):
        assert f"<B>{part}</B>" in source
    assert "<B>default</B>" not in source
    union = torchrecorder.make_dot(d, render_depth=None, changes_only=False).source
    assert "<B>default</B>" not in union and "lora_A.default" in union


def _texts(d: torchrecorder.Diff, view: str, **kwargs: Any) -> list[str]:
    """The texts drawn in the SVG of one view of ``d`` (what a reader sees: invisible nodes
    draw none)."""
    svg = render_source(torchrecorder.make_dot(d, view=view, **kwargs).source, "svg").decode()
    return [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def _count_texts(g: torchrecorder.Recorder) -> set[str]:
    return {f"{count_str(n.num_params_total)} params" for n in g.layers() if n.num_params_total > 1}


def test_view_a_draws_no_title_of_a_module_only_b_has() -> None:
    torch.manual_seed(0)
    d = torchrecorder.diff(_record(_gpt2(2), "gpt2", _IDS), _record(_gpt2(3), "gpt2", _IDS))
    source = torchrecorder.make_dot(d, view="a").source
    title = next(line for line in source.splitlines()
                 if line.strip().startswith('"transformer.h.2::title" ['))
    assert "style=invis" in title
    # each view reads its own parameter counts; the union both, old → new
    a_total, b_total = (next(n.num_params_total for n in g.layers() if n.depth == 0) for g in (d.a, d.b))
    a_text, b_text = f"{count_str(a_total)} params", f"{count_str(b_total)} params"
    texts = {view: " ".join(_texts(d, view)) for view in ("union", "a", "b")}
    assert a_text in texts["a"] and b_text not in texts["a"] and "→" not in texts["a"]
    assert b_text in texts["b"] and a_text not in texts["b"] and "→" not in texts["b"]
    assert re.search(rf"{re.escape(a_text)}\s*→\s*{re.escape(b_text)}", texts["union"])
    # no roll-up of what the view does not hold: b's additions are not counted in a
    assert not re.search(r"\+\d", texts["a"]) and re.search(r"\+\d", texts["b"])
    # the three views keep the union's nodes (the other side's invisible): the pictures line up
    plain = {view: render_source(torchrecorder.make_dot(d, view=view).source, "plain").decode()
             for view in ("union", "a", "b")}
    names = {view: sorted(line.split()[1] for line in text.splitlines() if line.startswith("node"))
             for view, text in plain.items()}
    assert names["a"] == names["union"] == names["b"]


def test_each_view_shows_its_own_shapes() -> None:
    torch.manual_seed(0)
    a = _record(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4)), "net", torch.randn(1, 4))
    b = _record(nn.Sequential(nn.Linear(4, 24), nn.ReLU(), nn.Linear(24, 4)), "net", torch.randn(1, 4))
    d = torchrecorder.diff(a, b)
    for kwargs in ({}, {"changes_only": False}, {"tensor_nodes": True}):
        ta, tb = (" ".join(_texts(d, view, **kwargs)) for view in ("a", "b"))
        assert "1×8" in ta and "1×24" not in ta and "→" not in ta
        assert "1×24" in tb and "1×8" not in tb and "→" not in tb
        for mine, other in ((a, b), (b, a)):
            own = ta if mine is a else tb
            assert all(t not in own for t in _count_texts(other) - _count_texts(mine))
            assert any(t in own for t in _count_texts(mine) - _count_texts(other))


def test_views_of_a_lora_pair_show_only_their_side(q_lora: tuple[Any, Any, torchrecorder.Diff]) -> None:
    a, b, d = q_lora
    for kwargs in ({}, {"changes_only": False}):
        ta, tb = (" ".join(_texts(d, view, **kwargs)) for view in ("a", "b"))
        for word in ("lora", "base_layer", "peft", "PeftModel", "→"):
            assert word not in ta
        assert all(t not in ta for t in _count_texts(b) - _count_texts(a))
        assert all(t not in tb for t in _count_texts(a) - _count_texts(b))
        assert "lora_A.default" in tb and "PeftModel" in tb and "→" not in tb
        assert not re.search(r"[+⊂]\d", ta)  # no count of what b adds, nor of b's wrapper parts
        assert re.search(r"⊂\d", tb)
        for view in ("union", "a", "b"):  # no edge drawn removed: the wrapper took q_proj's place
            source = torchrecorder.make_dot(d, view=view, **kwargs).source
            assert "diff-edge-removed" not in source
            # the LoRA parts are drawn as the wrapper's, not as free additions
            assert not re.search(r"diff-(edge-)?added", source)
            assert ("diff-wrapper side-b" in source) and ("diff-edge-wrapper side-b" in source)


def _visible_edges(source: str) -> list[tuple[str, str]]:
    """The drawn edges of a DOT text that are not laid out unseen (an edge drawn through its
    label node read as one edge)."""
    return parse_dot(source).edges


def test_a_wrapped_layer_feeds_only_its_wrapper_in_views_of_the_wrapped_side(
        q_lora: tuple[Any, Any, torchrecorder.Diff]) -> None:
    """The edges from the wrapped layer to its old consumers, drawn across operations written
    on the edge (view · transpose), are a's: view a draws them, view b and the union do not
    (there the wrapper's add feeds the consumers)."""
    d = q_lora[2]
    wrapper = "base_model.model.model.layers.0.self_attn.q_proj"
    for view in ("union", "b"):
        edges = _visible_edges(torchrecorder.make_dot(d, view=view).source)
        assert any(u == wrapper + "/add" and not v.startswith(wrapper) for u, v in edges)
        assert [(u, v) for u, v in edges if u == wrapper + ".base_layer" and not v.startswith(wrapper)] == []
    edges = _visible_edges(torchrecorder.make_dot(d, view="a").source)
    assert sum(u == wrapper + ".base_layer" and not v.startswith(wrapper) for u, v in edges) >= 2


def test_data_parallel_wraps_the_plain_model() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    d = torchrecorder.diff(_record(net, "net", torch.randn(1, 4)),
                           _record(nn.DataParallel(copy.deepcopy(net)), "net", torch.randn(1, 4)))
    root = d.entry_of("a", "net")
    assert root is not None and root.status == "same" and root.note == "wrapped by DataParallel"
    assert {e.status for e in d.entries if e.a not in (None, "net")} == {"same"}


class _Symmetric(nn.Module):
    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return w.triu() + w.triu(1).T


def test_parametrized_weight_is_not_removed() -> None:
    from torch.nn.utils import parametrize

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    other = copy.deepcopy(net)
    parametrize.register_parametrization(other[0], "weight", _Symmetric())
    a, b = _record(net, "net", torch.randn(1, 4)), _record(other, "net", torch.randn(1, 4))
    for d in (torchrecorder.diff(a, b), torchrecorder.diff(b, a)):
        assert [e for e in d.entries if e.kind == "param" and e.status in ("added", "removed")] == []
    e = torchrecorder.diff(a, b).entry_of("a", "0.weight")
    assert e is not None and e.b == "0.parametrizations.weight.original"


def test_lora_diff_pictures_keep_every_box_inside_its_cluster() -> None:
    from .label_geometry import layout, node_problems

    torch.manual_seed(0)
    base = _llama(1)
    a = _record(base, "llama", _IDS)
    config = peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"])
    b = _record(peft.get_peft_model(copy.deepcopy(base), config), "llama", _IDS)
    for d in (torchrecorder.diff(b, a), torchrecorder.diff(a, b)):
        for kwargs in ({"changes_only": False}, {}):
            for view in ("a", "b", "union"):
                data = layout(torchrecorder.make_dot(d, view=view, **kwargs).source)
                assert node_problems(data) == [], (view, kwargs)
    # the check sees a box on a border: the last layout (the union) with a wrapper's cluster narrowed
    cluster = next(o for o in data["objects"] if str(o.get("name", "")).endswith("self_attn.q_proj")
                   and "bb" in o)
    x0, y0, x1, y1 = (float(v) for v in cluster["bb"].split(","))
    cluster["bb"] = f"{x0},{y0},{x0 + (x1 - x0) / 3},{y1}"
    assert any("not inside its cluster" in p and "q_proj" in p for p in node_problems(data))
