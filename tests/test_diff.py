"""torchrecorder.diff on synthetic edits: the exact pairing and status of each node that changed."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.diff import DIFF_VERSION, Diff

from .diff_models import (
    After,
    Before,
    Block,
    ConvBnRelu,
    Decoder,
    Fused,
    QuantLinear,
    Residual,
    Stack,
    Twice,
    lora_wrap,
)


def rec(model: nn.Module, shape: tuple[int, ...] = (1, 8), name: str = "net") -> torchrecorder.Recorder:
    torch.manual_seed(0)
    return torchrecorder.record(model, name, shape)


def layer_changes(d: Diff) -> list[tuple[object, object, str]]:
    return [(e.a, e.b, e.status) for e in d.entries if e.kind == "layer" and e.status != "same"]


def by_status(d: Diff, kind: str, status: str) -> list[tuple[object, object]]:
    return [(e.a, e.b) for e in d.entries if e.kind == kind and e.status == status]


def test_same_model_is_empty() -> None:
    a = rec(Stack())
    d = torchrecorder.diff(a, a)
    assert not d and len(d) == 0
    assert all(e.status == "same" for e in d.entries)
    assert len(d.entries) == len(a.nodes) - 1
    assert "no difference" in d.summary()
    assert json.loads(d.to_json())["summary"]["differ"] is False


def test_inserted_block_renumbers_the_later_blocks() -> None:
    a, b = rec(Stack((8, 8, 8))), rec(Stack((8, 16, 8, 8)))
    d = torchrecorder.diff(a, b)
    assert layer_changes(d) == [
        (None, "layers.1", "added"), (None, "layers.1.fc", "added"), (None, "layers.1.act", "added"),
        (None, "layers.1.out", "added"),
        ("layers.1", "layers.2", "renamed"), ("layers.2", "layers.3", "renamed")]
    assert d.entry_of("a", "layers.1.fc").status == "same"  # inside a renumbered block: unchanged
    assert d.entry_of("a", "layers.2").note == "renumbered +1"
    assert d.entry_of("a", "layers.2/add").b == "layers.3/add"
    assert "2 × layers.*: renumbered +1" in d.summary()


def test_deleted_block_mirrors_the_insertion() -> None:
    a, b = rec(Stack((8, 16, 8, 8))), rec(Stack((8, 8, 8)))
    d = torchrecorder.diff(a, b)
    assert layer_changes(d)[:1] == [("layers.1", None, "removed")]
    assert [(x, y) for x, y, s in layer_changes(d) if s == "renamed"] == [("layers.2", "layers.1"),
                                                                         ("layers.3", "layers.2")]


def test_identical_inserted_block_is_ambiguous() -> None:
    a, b = rec(Stack((8, 8))), rec(Stack((8, 8, 8)))
    d = torchrecorder.diff(a, b)
    added = [e for e in d.entries if e.kind == "layer" and e.status == "added" and e.b == "layers.2"]
    assert len(added) == 1 and added[0].ambiguous
    assert "ambiguous" in d.summary()


def test_renamed_submodule() -> None:
    a, b = rec(Stack(head="head")), rec(Stack(head="classifier"))
    d = torchrecorder.diff(a, b)
    assert layer_changes(d) == [("head", "classifier", "renamed")]
    assert d.entry_of("a", "head.weight").b == "classifier.weight"
    assert d.entry_of("a", "head.weight").status == "same"


def test_lora_wrap_with_prefix() -> None:
    torch.manual_seed(0)
    model = Decoder(2)
    a = rec(model, (1, 3, 8), "dec")
    b = rec(lora_wrap(copy.deepcopy(model)), (1, 3, 8), "dec")
    d = torchrecorder.diff(a, b)
    pre = "base_model.model."
    wrapped = by_status(d, "layer", "wrapped")
    # the targets are wrapped; the root, held by the wrapping model's root (through the prefix),
    # is paired with a note, not counted as a wrapped layer
    assert wrapped == [
        (f"layers.{i}.self_attn.{p}", f"{pre}layers.{i}.self_attn.{p}.base_layer")
        for i in range(2) for p in ("q_proj", "v_proj")]
    assert d.entry_of("a", "dec").note == "wrapped by PeftLike" and d.root_note == "wrapped by PeftLike"
    assert all(d.entry_of("a", x).note == "wrapped by LoraLinear" for x, _ in wrapped)
    # the wrappers and their parts are the wrapper's, not added: each names the pair it wraps
    assert by_status(d, "layer", "added") == []
    parts = {y for x, y in by_status(d, "layer", "wrapper")}
    assert parts == {"dec", "base_model"} | {f"{pre}layers.{i}.self_attn.{p}{s}" for i in range(2)
                                            for p in ("q_proj", "v_proj") for s in ("", ".lora_A", ".lora_B")}
    for e in d.entries:
        if e.b in parts and e.b.endswith((".lora_A", ".lora_B")):
            assert e.part_of == (e.b[len(pre):].rsplit(".", 1)[0], e.b.rsplit(".", 1)[0] + ".base_layer")
        elif e.b in parts and e.b.endswith("_proj"):
            assert e.part_of == (e.b[len(pre):], e.b + ".base_layer")
        elif e.b in parts:  # the wrapper of the whole model and the module between: the roots'
            assert e.part_of == ("dec", pre[:-1]) == d.root_pair
    assert d.entry_of("a", "dec").b == pre[:-1]  # the root paired through the stripped prefix
    assert d.entry_of("a", "layers.1.self_attn.k_proj").status == "same"
    assert by_status(d, "layer", "removed") == [] and by_status(d, "layer", "changed") == []
    assert "4 × layers.*.self_attn.{q,v}_proj: wrapped by LoraLinear, +2 parameters" in d.summary()
    assert any("base_model.model." in n for n in d.notes)


def test_type_swap_and_dtype_change() -> None:
    net = Stack()
    other = copy.deepcopy(net)
    q = QuantLinear(8, 2)
    q.load_state_dict(net.head.state_dict())
    other.head = q
    other = other.double()  # every parameter, and the inputs made from them
    a, b = rec(net), rec(other)
    d = torchrecorder.diff(a, b)
    e = d.entry_of("a", "head")
    assert (e.b, e.status, e.changes["type"]) == ("head", "changed", ("Linear", "QuantLinear"))
    f = d.entry_of("a", "layers.0.fc")
    assert f.status == "changed" and f.changes["dtype"] == ("float32", "float64")
    assert d.entry_of("a", "layers.0.fc.weight").changes == {"dtype": ("float32", "float64")}


def test_pruned_shapes() -> None:
    a, b = rec(Stack((8, 8, 8))), rec(Stack((8, 4, 8)))
    d = torchrecorder.diff(a, b)
    assert layer_changes(d) == [("layers.1.fc", "layers.1.fc", "changed"),
                                ("layers.1.act", "layers.1.act", "changed"),
                                ("layers.1.out", "layers.1.out", "changed")]
    assert d.entry_of("a", "layers.1.act").changes == {"input_shapes": ("1×8", "1×4"),
                                                       "output_shapes": ("1×8", "1×4")}
    assert d.entry_of("a", "layers.1").rollup == {"changed": 5}  # 3 modules, 2 operations
    fc = d.entry_of("a", "layers.1.fc")
    assert fc.changes["output_shapes"] == ("1×8", "1×4")
    assert d.entry_of("a", "layers.1.fc.weight").changes == {"shape": ("8×8", "4×8")}


def test_fused_conv_bn_relu_with_a_mapping() -> None:
    a, b = rec(ConvBnRelu(), (1, 3, 8, 8)), rec(Fused(), (1, 3, 8, 8))
    d = torchrecorder.diff(a, b, mapping={"conv": "conv.0", "relu": "conv.1"})
    assert d.entry_of("a", "conv").b == "conv.0" and d.entry_of("a", "conv").via == "user"
    assert d.entry_of("a", "relu").b == "conv.1"
    assert d.entry_of("a", "bn").status == "removed"
    assert d.entry_of("b", "conv").status == "added"
    assert d.entry_of("a", "head").status == "same"
    with pytest.raises(ValueError, match="'nope' is not a module path of the first model"):
        torchrecorder.diff(a, b, mapping={"nope": "conv"})


def test_rename_regex() -> None:
    a, b = rec(Stack(head="head")), rec(Stack(head="classifier"))
    d = torchrecorder.diff(a, b, rename={r"^head$": "classifier"})
    assert d.entry_of("a", "head").status == "same" and d.entry_of("a", "head").b == "classifier"


def test_module_called_a_second_time() -> None:
    a, b = rec(Twice(False), (1, 4)), rec(Twice(True), (1, 4))
    d = torchrecorder.diff(a, b)
    assert layer_changes(d) == [("fc", "fc", "changed"), (None, "fc#2", "added")]
    assert d.entry_of("a", "fc").changes["calls"] == ("1", "2")


def test_op_inserted_before_an_add() -> None:
    a, b = rec(Residual(False), (1, 4)), rec(Residual(True), (1, 4))
    d = torchrecorder.diff(a, b)
    assert by_status(d, "op", "added") == [(None, "net/mul")]
    assert [(x, y) for x, y in by_status(d, "op", "same") if x and "add" in x] == [
        ("net/add", "net/add"), ("net/add_1", "net/add_1")]
    assert layer_changes(d) == []


def test_unrelated_models() -> None:
    a = rec(Block(), (1, 8))
    b = rec(ConvBnRelu(), (1, 3, 8, 8))
    d = torchrecorder.diff(a, b)
    # the two roots are always paired (type Block -> ConvBnRelu); nothing else is
    assert d and by_status(d, "layer", "same") == [] and by_status(d, "layer", "changed") == [("net", "net")]
    assert d.entry_of("a", "net").changes["type"] == ("Block", "ConvBnRelu")
    assert "share no module" in d.summary()


@pytest.mark.parametrize("pair", ["insert", "lora", "fuse", "twice"])
def test_reverse_diff_mirrors(pair: str) -> None:
    if pair == "insert":
        a, b = rec(Stack((8, 8, 8))), rec(Stack((8, 16, 8, 8)))
    elif pair == "lora":
        torch.manual_seed(0)
        m = Decoder(2)
        a, b = rec(m, (1, 3, 8)), rec(lora_wrap(copy.deepcopy(m)), (1, 3, 8))
    elif pair == "fuse":
        a, b = rec(ConvBnRelu(), (1, 3, 8, 8)), rec(Fused(), (1, 3, 8, 8))
    else:
        a, b = rec(Twice(False), (1, 4)), rec(Twice(True), (1, 4))
    forward = torchrecorder.diff(a, b)
    backward = torchrecorder.diff(b, a)
    assert sorted(map(repr, forward.mirrored())) == sorted(
        repr((e.a, e.b, e.kind, e.status)) for e in backward.entries)


def test_output_is_deterministic_and_round_trips_json(tmp_path: object) -> None:
    a, b = rec(Stack((8, 8, 8))), rec(Stack((8, 16, 8, 8)))
    one = torchrecorder.diff(a, b)
    two = torchrecorder.diff(torchrecorder.load_json(a.to_json()), b.to_json())
    assert one.to_json() == two.to_json() and one.summary() == two.summary()
    assert torchrecorder.make_dot(one).source == torchrecorder.make_dot(two).source
    data = json.loads(one.to_json())
    assert data["format"] == "torchrecorder.diff" and data["version"] == DIFF_VERSION
    assert data["summary"]["added"] == sum(1 for n in data["nodes"] if n["status"] == "added")
    assert {"a", "b", "kind", "status"} <= set(data["nodes"][0])


def test_bad_inputs_fail_before_work(tmp_path: object) -> None:
    a = rec(Block(), (1, 8))
    with pytest.raises(ValueError, match="diff: b: not a torchrecorder graph"):
        torchrecorder.diff(a, '{"format": "something else"}')
    newer = json.loads(a.to_json())
    newer["version"] = 999
    with pytest.raises(ValueError, match=r"diff: a: .*upgrade torchrecorder"):
        torchrecorder.diff(json.dumps(newer), a)
    with pytest.raises(ValueError, match="diff: b: "):
        torchrecorder.diff(a, '{"format": "torchrecorder.graph", "version": 1, "nodes": [')
    with pytest.raises(TypeError, match="diff: a must be a recording"):
        torchrecorder.diff(nn.Linear(2, 2), a)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rename: '\\(' is not a regular expression"):
        torchrecorder.diff(a, a, rename={"(": "x"})


def test_moved_block_found_by_signature_then_its_container_bottom_up() -> None:
    a, b = rec(Before()), rec(After())
    d = torchrecorder.diff(a, b)
    block = d.entry_of("a", "features.block")
    # same: it kept its name inside the container it moved with
    assert (block.b, block.via, block.status) == ("trunk.block", "signature", "same")
    container = d.entry_of("a", "features")
    assert (container.b, container.via, container.status) == ("trunk", "bottom-up", "changed")
    assert container.changes["type"] == ("Features", "Trunk")
    assert container.changes["path"] == ("features", "trunk")
    assert d.entry_of("a", "features.block.fc").b == "trunk.block.fc"
    assert d.entry_of("b", "trunk.norm").status == "added"


def test_strip_prefix_off_leaves_the_wrapper_paths_apart() -> None:
    torch.manual_seed(0)
    m = Decoder(1)
    a, b = rec(m, (1, 3, 8), "dec"), rec(lora_wrap(copy.deepcopy(m)), (1, 3, 8), "dec")
    d = torchrecorder.diff(a, b, strip_prefix=None)
    assert not any("prefix" in n for n in d.notes)
    # without the prefix nothing lines up: the models read as unrelated
    assert d.entry_of("a", "layers.0").status == "removed"
    assert any("share no module" in n for n in d.notes)
