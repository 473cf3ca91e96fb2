"""Captures saved in the safetensors format and read back; the per-layer bar chart."""

from __future__ import annotations

import json
import os
import struct
import sys

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.hooks.saved import FORMAT_VERSION

safetensors = pytest.importorskip("safetensors.torch")


class Pair(nn.Module):
    """Returns a tuple with a None and a dict: every container kind a capture keeps."""

    def forward(self, x: torch.Tensor) -> tuple:
        return x * 2, None, {"sum": x.sum(), "n": 3}


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 5), nn.Tanh(), Pair())


def captured(**kwargs) -> torchrecorder.Capture:
    net = model()
    with torchrecorder.capture(net, ["0", "2"], ops="1/tanh", inputs=True, grads=True, **kwargs) as cap:
        for _ in range(2):
            out = net(torch.randn(3, 4))
            out[0].sum().backward()
    return cap


def test_round_trip_gives_equal_tensors_structures_and_statistics(tmp_path) -> None:
    cap = captured(stats=True, keep="all")
    path = cap.save(tmp_path / "cap.safetensors")
    back = torchrecorder.load_capture(path)
    assert back.keys() == cap.keys() == ["0", "1/tanh", "2"]
    assert back.passes == 2 and back.names == ["0", "2"] and back.ops == ["1/tanh"]
    for table in ("outputs", "inputs", "grads"):
        mine, theirs = getattr(cap, table), getattr(back, table)
        assert list(mine) == list(theirs)
        for name in mine:
            assert len(mine[name]) == len(theirs[name]) == 2  # keep="all": one per pass
            for a, b in zip(mine[name], theirs[name], strict=True):
                flat_a, flat_b = _flat(a), _flat(b)
                assert len(flat_a) == len(flat_b)
                for x, y in zip(flat_a, flat_b, strict=True):
                    assert (x is None and y is None) or (torch.equal(x, y) if torch.is_tensor(x) else x == y)
    tup = back["2"][0]
    assert isinstance(tup, tuple) and tup[1] is None and tup[2]["n"] == 3
    for stat in ("mean", "zeros", "grad_norm"):
        assert back.stats(stat) == pytest.approx(cap.stats(stat))
    rec = torchrecorder.record(model(), "net", (3, 4))
    assert "grad_norm" in torchrecorder.make_dot(rec, activations=back, stat="grad_norm").source


def _flat(value):
    if isinstance(value, dict):
        return [x for v in value.values() for x in _flat(v)]
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flat(v)]
    return [value]


def test_the_file_is_safetensors_without_pickle(tmp_path) -> None:
    path = captured().save(tmp_path / "c.safetensors")
    tensors = safetensors.load_file(path)  # any safetensors reader opens it
    assert tensors and all(t.device.type == "cpu" for t in tensors.values())
    with open(path, "rb") as f:
        assert b"torch._utils" not in f.read()  # no pickled torch objects anywhere


def test_saving_is_atomic(tmp_path) -> None:
    path = tmp_path / "c.safetensors"
    good = captured().save(path)
    before = open(good, "rb").read()

    class Odd(nn.Module):
        def forward(self, x):
            return object()

    net = Odd()
    with torchrecorder.capture(net, [""]) as bad:
        net(torch.ones(1))
    bad.outputs[""] = object()  # kept as it came: something no file can hold
    with pytest.raises(TypeError, match="neither a tensor"):
        bad.save(path)
    assert open(path, "rb").read() == before
    assert sorted(os.listdir(tmp_path)) == ["c.safetensors"]


@pytest.mark.parametrize("content", [b"", b"hello world, not a capture", b"\xff" * 20])
def test_a_file_that_is_not_a_capture_is_refused(tmp_path, content) -> None:
    path = tmp_path / "x.safetensors"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"not a capture|truncated|not a torchrecorder"):
        torchrecorder.load_capture(path)


def test_other_safetensors_truncated_and_newer_files_are_refused(tmp_path) -> None:
    other = tmp_path / "weights.safetensors"
    safetensors.save_file({"w": torch.ones(2)}, other)
    with pytest.raises(ValueError, match="not a torchrecorder capture"):
        torchrecorder.load_capture(other)
    path = captured().save(tmp_path / "c.safetensors")
    data = open(path, "rb").read()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(data[:-7])
    with pytest.raises(ValueError, match="truncated"):
        torchrecorder.load_capture(cut)
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = json.loads(header["__metadata__"]["torchrecorder"])
    meta["version"] = FORMAT_VERSION + 1
    header["__metadata__"]["torchrecorder"] = json.dumps(meta)
    new_header = json.dumps(header).encode()
    newer = tmp_path / "newer.safetensors"
    newer.write_bytes(struct.pack("<Q", len(new_header)) + new_header + data[8 + n:])
    with pytest.raises(ValueError, match="newer torchrecorder"):
        torchrecorder.load_capture(newer)
    with pytest.raises(ValueError, match="not a regular file"):
        torchrecorder.load_capture(tmp_path)


def test_plot_draws_one_bar_per_layer_on_a_log_axis() -> None:
    pytest.importorskip("matplotlib")
    cap = captured(stats=True)
    fig = cap.plot("grad_norm")
    (ax,) = fig.axes
    assert len(ax.patches) == len(cap.stats("grad_norm")) == 3
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == list(cap.stats("grad_norm"))
    assert cap.plot("mean").axes[0].get_yscale() == "linear"
    with pytest.raises(ValueError, match="no statistics"):
        captured().plot("mean")


def test_plot_without_matplotlib_says_how_to_get_it(monkeypatch) -> None:
    cap = captured(stats=True)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        cap.plot("grad_norm")
