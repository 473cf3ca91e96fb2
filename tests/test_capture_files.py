"""Captures saved in the safetensors format and read back; the per-layer bar chart."""

from __future__ import annotations

import json
import os
import struct
import sys
import tracemalloc
import warnings

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


# ------------------------------------------------------------ forged files (issue 33, item 14)
def _rewrite(data: bytes, change) -> bytes:
    """``data`` (a saved capture) with its safetensors header changed by ``change(header)``."""
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    change(header)
    new = json.dumps(header).encode()
    return struct.pack("<Q", len(new)) + new + data[8 + n:]


def _meta_change(**fields):
    def change(header):
        meta = json.loads(header["__metadata__"]["torchrecorder"])
        meta.update(fields)
        header["__metadata__"]["torchrecorder"] = json.dumps(meta)
    return change


def _raw_meta(text: str):
    def change(header):
        header["__metadata__"]["torchrecorder"] = text
    return change


DEEP = '{"list": [' * 5000 + "null" + "]}" * 5000
FORGED = {
    "metadata block is a list": lambda h: h.__setitem__("__metadata__", ["torchrecorder"]),
    "names is a number": _meta_change(names=5),
    "ops holds numbers": _meta_change(ops=[1, 2]),
    "passes is infinite": _raw_meta('{"format": "torchrecorder-capture", "version": 1, "passes": 1e400, '
                                    '"tables": {}}'),
    "passes is a list": _meta_change(passes=[1]),
    "passes is negative": _meta_change(passes=-1),
    "a statistic is a list": _meta_change(stats={"mean": {"0": [1]}}),
    "a statistic is out of range": _raw_meta('{"format": "torchrecorder-capture", "version": 1, '
                                             '"tables": {}, "stats": {"mean": {"0": 1' + "0" * 400 + '}}}'),
    "stats is a list": _meta_change(stats=[1]),
    "a tensor name is a list": _meta_change(tables={"outputs": {"0": {"tensor": ["t0"]}}}),
    "a dict entry is a number": _meta_change(tables={"outputs": {"0": {"dict": [5]}}}),
    "a dict key is a list": _meta_change(tables={"outputs": {"0": {"dict": [[[1], None]]}}}),
    "a value is an object": _meta_change(tables={"outputs": {"0": {"value": {"a": 1}}}}),
    "a nested tensor of numbers": _meta_change(tables={"outputs": {"0": {"nested": {
        "layout": "strided", "parts": [{"value": 1}]}}}}),
    "a table is a list": _meta_change(tables={"outputs": []}),
    "values nested deeply": _raw_meta('{"format": "torchrecorder-capture", "version": 1, '
                                      '"tables": {"outputs": {"0": ' + DEEP + "}}}"),
    "metadata nested too deep for JSON": _raw_meta("[" * 100_000 + "]" * 100_000),
    "values nested past the limit": _meta_change(tables={"outputs": {"0": json.loads(
        '{"list": [' * 150 + "null" + "]}" * 150)}}),
}


@pytest.fixture(scope="module")
def saved_bytes(tmp_path_factory) -> bytes:
    path = captured().save(tmp_path_factory.mktemp("c") / "c.safetensors")
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("case", list(FORGED))
def test_forged_metadata_is_refused_with_a_value_error(tmp_path, saved_bytes, case) -> None:
    path = tmp_path / "forged.safetensors"
    path.write_bytes(_rewrite(saved_bytes, FORGED[case]))
    with pytest.raises(ValueError, match="capture"):
        torchrecorder.load_capture(path)


@pytest.mark.parametrize("version", [True, False, -3, 0, "1", 1.0, None, [1]])
def test_a_version_that_is_not_a_number_from_one_is_refused(tmp_path, saved_bytes, version) -> None:
    path = tmp_path / "v.safetensors"
    path.write_bytes(_rewrite(saved_bytes, _meta_change(version=version)))
    with pytest.raises(ValueError, match="version"):
        torchrecorder.load_capture(path)


def _peak_of(fn) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as err:
            fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        assert "capture" in str(err.value)


def test_the_header_is_checked_before_the_rest_of_a_large_file_is_read(tmp_path) -> None:
    big = 256 * 2**20  # sparse files: nothing is written to disk
    other = tmp_path / "weights.safetensors"
    header = json.dumps({"w": {"dtype": "U8", "shape": [big], "data_offsets": [0, big]}}).encode()
    with open(other, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + big)
    noise = tmp_path / "noise.bin"
    with open(noise, "wb") as f:
        f.write(b"\x01" * 8)
        f.truncate(big)
    for path in (other, noise):
        assert _peak_of(lambda p=path: torchrecorder.load_capture(p)) < 2**20


# ------------------------------------------------------------ what is kept (item 15)
def _saved_back(tmp_path, value):
    net = nn.Identity()
    with torchrecorder.capture(net, [""]) as cap:
        net(torch.ones(1))
    cap.outputs[""] = value
    return torchrecorder.load_capture(cap.save(tmp_path / "v.safetensors"))[""]


def test_dict_keys_keep_their_types(tmp_path) -> None:
    a, b = torch.ones(2), torch.zeros(3)
    back = _saved_back(tmp_path, {1: a, "1": b, None: 3, 2.5: "x", False: [a]})
    assert list(back) == [1, "1", None, 2.5, False]
    assert [type(k) for k in back] == [int, str, type(None), float, bool]
    assert torch.equal(back[1], a) and torch.equal(back["1"], b)
    assert back[None] == 3 and back[2.5] == "x" and torch.equal(back[False][0], a)


def test_keys_of_other_types_are_refused_when_saving(tmp_path) -> None:
    with pytest.raises(TypeError, match=r"key \(1, 2\) is a tuple"):
        _saved_back(tmp_path, {(1, 2): torch.ones(1)})


def test_a_file_of_string_keys_stays_readable_by_format_version_one(tmp_path) -> None:
    path = captured().save(tmp_path / "c.safetensors")
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    assert json.loads(json.loads(data[8:8 + n])["__metadata__"]["torchrecorder"])["version"] == 1


@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
def test_nested_tensors_are_saved_and_read_back_nested(tmp_path, layout) -> None:
    parts = [torch.randn(2, 3), torch.randn(4, 3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype
        value = torch.nested.nested_tensor(parts, layout=layout)
        back = _saved_back(tmp_path, {"h": value})["h"]
    assert back.is_nested and back.layout == layout
    assert all(torch.equal(x, y) for x, y in zip(back.unbind(), parts, strict=True))


def test_a_quantized_tensor_is_refused_when_saving_with_what_to_do(tmp_path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensors are deprecated
        q = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8)
    with pytest.raises(ValueError, match=r"quantized tensor \(torch.qint8\).*dequantize"):
        _saved_back(tmp_path, q)
    assert not list(tmp_path.iterdir())


class _OpArgs(nn.Module):
    """Operations whose arguments hold torch's small objects: Hugging Face's eager attention
    calls ``softmax(x, dim=-1, dtype=torch.float32)``; slicing passes ``...`` and slices."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = nn.functional.softmax(x, dim=-1, dtype=torch.float32)
        q = p[..., 1:3, ::2].to(torch.device("cpu"), torch.bfloat16, memory_format=torch.contiguous_format)
        return q.reshape(q.shape) * 1j


def test_the_inputs_of_operations_that_take_dtypes_slices_and_devices_save_and_load(tmp_path) -> None:
    """``capture(ops=..., inputs=True)`` keeps such arguments, and ``save`` refused them ("a dtype
    is neither a tensor, a number ..."), so no attention softmax captured with its inputs saved."""
    net, x = _OpArgs(), torch.randn(2, 4, 5)
    with torchrecorder.capture(net, ops="net/*", inputs=True) as cap:
        net(x)
    path = cap.save(tmp_path / "ops.safetensors")
    saved = torchrecorder.load_capture(path)
    (arg,), kwargs = saved.inputs["net/softmax"]
    assert torch.equal(arg, x) and (kwargs["dim"], kwargs["dtype"]) == (-1, torch.float32)
    probs, index = saved.inputs["net/getitem"]
    assert torch.equal(probs, cap["net/softmax"])
    assert index == (Ellipsis, slice(1, 3, None), slice(None, None, 2))
    assert saved.inputs["net/to"][0][1:] == (torch.device("cpu"), torch.bfloat16)
    assert saved.inputs["net/to"][1] == {"memory_format": torch.contiguous_format}
    shape = saved.inputs["net/reshape"][1]
    assert type(shape) is torch.Size and shape == (2, 2, 3)
    assert saved.inputs["net/mul"][1] == 1j
    for key in cap.keys():
        assert torch.equal(saved[key], cap[key]), key
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        meta = json.loads(json.loads(f.read(n))["__metadata__"]["torchrecorder"])
    assert meta["version"] == 3 == FORMAT_VERSION  # older readers refuse it rather than misread


def test_a_saved_torch_object_that_is_not_one_is_malformed(tmp_path) -> None:
    net = nn.Sequential(nn.Softmax(-1))
    with torchrecorder.capture(net, ops="0/softmax", inputs=True) as cap:
        net(torch.randn(2, 3))
    path = str(cap.save(tmp_path / "a.safetensors"))
    tensors = safetensors.load_file(path)
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    meta = json.loads(header["__metadata__"]["torchrecorder"])
    for bad in (["dtype", "Tensor"], ["dtype", "contiguous_format"], ["device", "nowhere:x"], ["size", [1.5]],
                ["complex", [True, 1]], ["nothing", 1]):
        meta["tables"]["inputs"]["0/softmax"] = {"tuple": [{"torch": bad}]}
        safetensors.save_file(tensors, path, metadata={"torchrecorder": json.dumps(meta)})
        with pytest.raises(ValueError, match="malformed capture file"):
            torchrecorder.load_capture(path)
