"""Issue 14's API points: render_network's optional input_shapes/directory, integer and bool
inputs made from shapes (valid token ids), load_json taking what to_json() returns."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.recording.tokens import id_limit, integer_inputs


class TokenModel(nn.Module):
    """Two embedding tables of different sizes, reached by the same ids."""

    def __init__(self) -> None:
        super().__init__()
        self.words = nn.Embedding(50, 8)
        self.extra = nn.Embedding(7, 8)
        self.head = nn.Linear(8, 50)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.words(ids) + self.extra(ids))


def test_render_network_with_input_data_only_writes_to_the_current_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    net = nn.Sequential(nn.Linear(3, 2))
    path = torchrecorder.render_network(net, "net", input_data=torch.randn(1, 3), fmt="dot")
    assert os.path.samefile(path, tmp_path / "net-1.dot")  # the name and the depth, as in 1.0.3
    assert (tmp_path / "net-1.dot").read_text().startswith("digraph")
    # the seed's positional meaning is kept
    path2 = torchrecorder.render_network(net, "net2", (1, 3), str(tmp_path / "figs"), None, "dot")
    assert Path(path2) == tmp_path / "figs" / "net2-1.dot"
    with pytest.raises(ValueError, match="input_shapes"):
        torchrecorder.render_network(net, "net3", fmt="dot")  # neither shapes nor data


@pytest.mark.parametrize("dtype", [torch.long, torch.int32])
def test_integer_dtype_makes_valid_token_ids(dtype: torch.dtype) -> None:
    model = TokenModel()
    assert id_limit(model) == 7
    rec = torchrecorder.record(model, "lm", (2, 9), dtype=dtype)  # was: "normal_kernel_cpu" not implemented
    assert [layer.path for layer in rec.layers()][1:] == ["words", "extra", "head"]


def test_a_list_of_ints_is_one_shape_as_torchinfo_reads_it(tmp_path: Path) -> None:
    """``input_size=[1, 3]`` in torchinfo is one input of that shape; here it raised TypeError."""
    net = nn.Sequential(nn.Linear(3, 2))
    rec = torchrecorder.record(net, "net", [4, 3])
    assert [n.shape for n in rec.nodes.values() if getattr(n, "role", "") == "input"] == [(4, 3)]
    path = torchrecorder.render_network(net, "net", [4, 3], tmp_path, fmt="json")
    assert torchrecorder.load_json(path).summary() == rec.summary()
    two = torchrecorder.record(nn.Bilinear(3, 5, 2), "bi", [[4, 3], [4, 5]])  # lists of lists: several
    assert [n.shape for n in two.nodes.values() if getattr(n, "role", "") == "input"] == [(4, 3), (4, 5)]
    with pytest.raises(TypeError, match="input_shapes"):
        torchrecorder.record(net, "net", [4, 3.0])
    # read where shapes are read, not in record() alone: the inputs every entry point makes
    from torchrecorder.recording import make_inputs

    assert [tuple(t.shape) for t in make_inputs(net, [4, 3], None, None, None)] == [(4, 3)]


class IdsMaskScale(nn.Module):
    """Token ids, a bool mask and a float scale: three inputs of three dtypes."""

    def __init__(self) -> None:
        super().__init__()
        self.words = nn.Embedding(11, 4)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return self.words(ids) * mask[..., None] * scale


def test_a_list_of_dtypes_gives_one_per_input_shape_as_torchinfos_dtypes(tmp_path: Path) -> None:
    """torchinfo's ``dtypes=[torch.long, torch.bool]``: once an AttributeError ('list' object has
    no attribute 'is_floating_point')."""
    model = IdsMaskScale()
    shapes = [(2, 5), (2, 5), (2, 5, 4)]
    recorded = torchrecorder.record(model, "m", shapes, dtype=[torch.long, torch.bool, torch.float32])
    drawn = torchrecorder.load_json(torchrecorder.render_network(
        model, "m", shapes, tmp_path, fmt="json", dtype=(torch.long, torch.bool, torch.float32)))
    for rec in (recorded, drawn):
        inputs = [n for n in rec.nodes.values() if getattr(n, "role", "") == "input"]
        assert [(n.name, n.dtype) for n in inputs] == [
            ("ids", "int64"), ("mask", "bool"), ("scale", "float32")]
    one = torchrecorder.record(TokenModel(), "lm", (2, 9), dtype=[torch.long])  # a list of one
    assert next(n for n in one.nodes.values() if getattr(n, "role", "") == "input").dtype == "int64"
    with pytest.raises(ValueError, match="2 dtypes for 3 input shapes"):
        torchrecorder.record(model, "m", shapes, dtype=[torch.long, torch.bool])
    with pytest.raises(TypeError, match=r"dtype must be a torch\.dtype.*got 'long'"):
        torchrecorder.record(model, "m", shapes, dtype="long")  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", [torch.long, torch.int32, torch.int8, torch.uint8, torch.int16])
def test_integer_inputs_stay_below_the_smallest_table(dtype: torch.dtype) -> None:
    model = TokenModel()
    (ids,) = integer_inputs(model, (2, 9), dtype)
    assert ids.dtype == dtype and ids.shape == (2, 9) and int(ids.min()) >= 0 and int(ids.max()) < 7
    assert len(set(ids.flatten().tolist())) > 1  # random, not all zeros


def test_integer_inputs_leave_the_global_random_state_and_work_on_meta() -> None:
    embedding = nn.Embedding(10, 2)
    state = torch.random.get_rng_state()
    first, second = integer_inputs(embedding, [(1, 4), (1, 3)], torch.long)
    assert torch.equal(state, torch.random.get_rng_state())
    assert first.shape == (1, 4) and second.shape == (1, 3)
    with torch.device("meta"):
        model = nn.Sequential(nn.Embedding(100, 4), nn.Linear(4, 2))
    rec = torchrecorder.record(model, "meta-lm", (1, 5), dtype=torch.long)
    assert [layer.type_name for layer in rec.layers()] == ["Sequential", "Embedding", "Linear"]


def test_bool_dtype_makes_masks() -> None:
    class Masked(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.float().sum(-1)

    rec = torchrecorder.record(Masked(), "m", (2, 3), dtype=torch.bool)
    (mask,) = integer_inputs(Masked(), (2, 3), torch.bool)
    assert mask.dtype == torch.bool and bool(mask.all()) and len(list(rec.layers())) == 1


def test_load_json_takes_the_text_to_json_returns(tmp_path: Path) -> None:
    rec = torchrecorder.record(nn.Sequential(nn.Linear(3, 2), nn.ReLU()), "mlp", (1, 3))
    text = rec.to_json()
    again = torchrecorder.load_json(text)  # was: FileNotFoundError (the text taken as a file name)
    assert again.to_json() == text
    assert torchrecorder.make_dot(again, 1).source == torchrecorder.make_dot(rec, 1).source
    path = tmp_path / "mlp.json"
    rec.to_json(path)
    assert torchrecorder.load_json(path).to_json() == text
    assert torchrecorder.load_json(str(path)).to_json() == text
    with pytest.raises(ValueError):
        torchrecorder.load_json("{not json")
