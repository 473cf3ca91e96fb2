"""JSON export: a documented, versioned schema; a loader whose graphs draw exactly like the recording."""

from __future__ import annotations

import json
import os

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder import export
from torchrecorder.nodes import LayerNode, OpNode, ParamNode, TensorNode


class Residual(nn.Module):
    """conv-bn-relu plus the input; the add runs in the block itself."""

    def __init__(self, c: int = 4) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)) + x)


class TwoHeads(nn.Module):
    """Two inputs, a shared trunk called twice, a dict output and an int tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Linear(4, 4)
        self.emb = nn.Embedding(10, 4)

    def forward(self, a: torch.Tensor, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"a": self.trunk(a), "b": self.trunk(self.emb(ids)).sum(1)}


def models() -> list[tuple[str, torchrecorder.Recorder]]:
    cnn = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), Residual(), Residual(), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(4, 2))
    return [
        ("cnn", torchrecorder.record(cnn, "cnn", (1, 3, 8, 8))),
        ("two_heads", torchrecorder.record(TwoHeads(), "two", input_data=(
            torch.randn(1, 4), torch.randint(0, 10, (1, 3))))),
        ("stack", torchrecorder.record(nn.Sequential(*[nn.Linear(3, 3) for _ in range(9)]), "s", (1, 3))),
    ]


@pytest.mark.parametrize(("name", "rec"), models())
@pytest.mark.parametrize("depth", [0, 1, 2, 256])
def test_round_trip_draws_the_same(name: str, rec: torchrecorder.Recorder, depth: int) -> None:
    loaded = torchrecorder.loads_json(export.dumps(rec))
    loaded.lint()
    assert all(node.kept is None for node in loaded.nodes.values())
    assert torchrecorder.make_dot(loaded, depth).source == torchrecorder.make_dot(rec, depth).source
    assert torchrecorder.make_mermaid(loaded, depth) == torchrecorder.make_mermaid(rec, depth)
    assert export.dumps(loaded) == export.dumps(rec)
    assert loaded.summary() == rec.summary()


def test_schema_fields() -> None:
    rec = models()[0][1]
    doc = json.loads(rec.to_json())
    assert doc["format"] == export.FORMAT_NAME == "torchrecorder.graph"
    assert doc["version"] == export.SCHEMA_VERSION == 1
    assert doc["name"] == "cnn" and doc["error"] is None
    assert doc["context"] == list(rec.context.subnet_keys)
    kinds = {n["kind"] for n in doc["nodes"]}
    assert kinds == {"layer", "tensor", "param", "op"}
    by_key = {n["key"]: n for n in doc["nodes"]}
    conv = by_key["0"]
    assert conv["type"] == "Conv2d" and conv["path"] == "0" and conv["depth"] == 1
    assert conv["parent"] == "cnn" and conv["num_params"] == 3 * 4 * 9 + 4
    assert conv["input_shapes"] == [[1, 3, 8, 8]] and conv["output_shapes"] == [[1, 4, 8, 8]]
    weight = by_key["0.weight"]
    assert weight["kind"] == "param" and weight["shape"] == [4, 3, 3, 3] and weight["numel"] == 108
    assert weight["dtype"] == "float32" and weight["requires_grad"] is True
    x = by_key["input:input"]
    assert x["kind"] == "tensor" and x["role"] == "input" and x["shape"] == [1, 3, 8, 8]
    op = by_key["1/add"]
    assert op["op"] == "add" and op["output_shapes"] == [[1, 4, 8, 8]]
    assert [tuple(e) for e in doc["edges"]] == list(rec.links)
    for node in doc["nodes"]:
        assert {"key", "kind", "name", "depth", "parent"} <= node.keys()


def test_every_schema_field_is_documented() -> None:
    doc = export.__doc__ or ""
    rec = models()[1][1]
    data = export.to_dict(rec)
    fields = set(data) | {f for n in data["nodes"] for f in n}
    for field in fields:
        assert f"``{field}``" in doc or f'"{field}"' in doc, field


def test_node_classes_round_trip() -> None:
    rec = models()[1][1]
    loaded = export.from_dict(export.to_dict(rec))
    for key, node in rec.nodes.items():
        other = loaded.nodes[key]
        assert type(other) is type(node)
        assert (other.name, other.depth, other.parent_key) == (node.name, node.depth, node.parent_key)
        if isinstance(node, LayerNode):
            assert isinstance(other, LayerNode)
            assert list(other.subnet_keys) == list(node.subnet_keys)
            assert (other.type_name, other.path, other.call_index) == (node.type_name, node.path,
                                                                        node.call_index)
            assert other.input_shapes == node.input_shapes and other.output_shapes == node.output_shapes
        if isinstance(node, TensorNode):
            assert isinstance(other, TensorNode)
            assert (other.shape, other.dtype, other.device) == (node.shape, node.dtype, node.device)
        if isinstance(node, ParamNode):
            assert isinstance(other, ParamNode)
            assert (other.numel, other.path, other.requires_grad) == (node.numel, node.path,
                                                                     node.requires_grad)
        if isinstance(node, OpNode):
            assert isinstance(other, OpNode)
            assert (other.op, other.output_shapes) == (node.op, node.output_shapes)
    assert loaded.fn_types == rec.fn_types
    assert sum(rec.fn_types[n.type_name] for n in rec.layers() if n.call_index == 1) == len(
        [n for n in rec.layers() if n.call_index == 1])


def test_int_dtypes_and_odd_names_survive() -> None:
    rec = models()[1][1]
    text = rec.to_json()
    assert '"dtype": "int64"' in text
    named = torchrecorder.record(nn.ModuleDict({"ünï \"q\"": nn.Linear(2, 2)})["ünï \"q\""], "日本", (1, 2))
    again = torchrecorder.loads_json(named.to_json())
    assert again.name == "日本" and "日本" in named.to_json()


def test_failed_recording_keeps_its_error() -> None:
    class Boom(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise ValueError("bad input")

    with pytest.raises(ValueError) as info:
        torchrecorder.record(nn.Sequential(nn.Linear(2, 2), Boom()), "net", (1, 2))
    partial = info.value.recording  # type: ignore[attr-defined]
    loaded = torchrecorder.loads_json(export.dumps(partial))
    assert loaded.error == "ValueError: bad input" and loaded.failed_key == partial.failed_key
    assert torchrecorder.make_dot(loaded, 1).source == torchrecorder.make_dot(partial, 1).source


def test_save_load_and_render_network_json(tmp_path: os.PathLike[str]) -> None:
    rec = models()[0][1]
    path = os.path.join(tmp_path, "g.json")
    export.save(rec, path)
    assert torchrecorder.make_dot(torchrecorder.load_json(path)).source == torchrecorder.make_dot(rec).source
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    written = torchrecorder.render_network(net, "mlp", (1, 3), str(tmp_path), fmt="json")
    assert written.endswith("mlp.json")
    loaded = torchrecorder.load_json(written)
    assert [layer.type_name for layer in loaded.layers()] == ["Sequential", "Linear", "ReLU"]
    rec.to_json(os.path.join(tmp_path, "h.json"))
    assert export.load(os.path.join(tmp_path, "h.json")).name == "cnn"


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.update(format="other"), "not a torchrecorder graph"),
    (lambda d: d.update(version=99), "schema version 99"),
    (lambda d: d.update(version="1"), "invalid schema version"),
    (lambda d: d.pop("nodes"), "missing field 'nodes'"),
    (lambda d: d["edges"].append(["nope", "cnn"]), "not in the graph"),
    (lambda d: d["edges"].append(["a"]), "pair"),
    (lambda d: d["nodes"][0].update(kind="widget"), "unknown kind 'widget'"),
    (lambda d: d["nodes"][0].update(depth="0"), "'depth' has the wrong type"),
    (lambda d: d["nodes"].append(dict(d["nodes"][0])), "duplicate node key"),
    (lambda d: d["nodes"][1].update(parent="nowhere"), "inconsistent graph"),
    (lambda d: d["nodes"][1].update(shape="1x3"), r"field 'shape' has the wrong type .*a list of ints"),
])
def test_loader_rejects_bad_documents(mutate: object, message: str) -> None:
    data = export.to_dict(models()[0][1])
    mutate(data)  # type: ignore[operator]
    with pytest.raises(ValueError, match=message):
        export.from_dict(data)


def test_export_is_deterministic() -> None:
    # recorded from one line: the root call's line of code is part of the document
    a, b = (torchrecorder.record(nn.Sequential(nn.Linear(2, 3), nn.Tanh()), "n", (1, 2)).to_json()
            for _ in range(2))
    assert a == b
    assert a.count("\n") > 5  # one node per line: diffs stay readable


def test_notes_written_only_when_there_are_some() -> None:
    rec = torchrecorder.record(nn.Linear(3, 2), "fc", (1, 3))
    assert rec.notes == [] and "notes" not in export.to_dict(rec)
    rec.notes.append("'fc' read a 3 tensor that no recorded operation made")
    again = export.loads(export.dumps(rec))
    assert again.notes == rec.notes
    doc = export.to_dict(rec)
    doc["notes"] = "not a list"
    with pytest.raises(ValueError, match="notes"):
        export.from_dict(doc)
