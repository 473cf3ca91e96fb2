"""The JSON loader on hostile files (issue 24, items 3, 13 and 16): special files, sizes,
numbers out of range, duplicate keys, a byte-order mark."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder import export


@pytest.fixture(scope="module")
def doc() -> dict[str, object]:
    rec = torchrecorder.record(nn.Sequential(nn.Linear(3, 4), nn.ReLU()), "net", (2, 3))
    return json.loads(rec.to_json())


# ---------------------------------------------------------------- 3: what is read, and how much
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            torchrecorder.load_json(str(fifo))
        except BaseException as exc:  # reported below
            outcome.append(exc)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(20)
    if thread.is_alive():  # unblock the reader so that the process can end
        with open(fifo, "w") as fh:
            fh.write("{}")
        thread.join(5)
        pytest.fail("load_json waited on a named pipe")
    assert len(outcome) == 1 and isinstance(outcome[0], ValueError)
    assert "not a regular file" in str(outcome[0]) and "pipe" in str(outcome[0])


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_a_device_is_refused_before_anything_is_read() -> None:
    with pytest.raises(ValueError, match=r"not a regular file.*character device"):
        torchrecorder.load_json("/dev/zero")


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError) as err:
        torchrecorder.load_json(str(tmp_path))
    assert err.value.filename == str(tmp_path) and str(tmp_path) in str(err.value)
    with pytest.raises(IsADirectoryError, match=re.escape(repr(str(tmp_path)))):
        torchrecorder.diff(str(tmp_path), str(tmp_path))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="no /proc/self/fd here")
def test_refusing_a_directory_or_a_device_leaves_no_descriptor_open(tmp_path: Path) -> None:
    before = _open_descriptors()
    for _ in range(20):
        for bad in (str(tmp_path), "/dev/zero"):
            with pytest.raises((IsADirectoryError, ValueError)):
                torchrecorder.load_json(bad)
            with pytest.raises((IsADirectoryError, ValueError)):
                torchrecorder.diff(bad, bad)
    assert _open_descriptors() == before


def test_a_file_over_the_limit_is_refused_and_the_limit_can_be_raised(
        tmp_path: Path, doc: dict[str, object]) -> None:
    path = tmp_path / "g.json"
    text = json.dumps(doc)
    path.write_text(text)
    with pytest.raises(ValueError, match=r"max_bytes"):
        torchrecorder.load_json(path, max_bytes=len(text) - 1)
    assert torchrecorder.load_json(path, max_bytes=len(text)).name == "net"
    assert torchrecorder.load_json(path, max_bytes=None).name == "net"
    assert export.MAX_JSON_BYTES >= 64 * 2**20  # the documented default: room for large models
    with pytest.raises(ValueError, match="max_bytes"):
        torchrecorder.load_json(path, max_bytes=-1)


def test_a_byte_order_mark_is_read_as_text_and_in_a_file(tmp_path: Path, doc: dict[str, object]) -> None:
    text = "\ufeff" + json.dumps(doc)
    assert torchrecorder.load_json(text).name == "net"  # the text itself, not a file name
    assert torchrecorder.loads_json(text).name == "net"
    path = tmp_path / "bom.json"
    path.write_bytes(text.encode("utf-8"))
    assert torchrecorder.load_json(path).name == "net"


# ---------------------------------------------------------------- 13: a file that loads also draws
def _layer(doc: dict[str, object]) -> dict[str, object]:
    return next(n for n in doc["nodes"] if n["kind"] == "layer")  # type: ignore[index, union-attr]


@pytest.mark.parametrize(("field", "value"), [
    ("num_params_total", 10**400), ("num_params", 2**64), ("num_buffers", 2**63),
    ("call_index", 2**70), ("depth", -(2**70)), ("input_shapes", [[2, 10**30]]),
], ids=["total-1e400", "params-2e64", "buffers-2e63", "call-2e70", "depth", "shape-1e30"])
def test_numbers_out_of_range_are_refused_naming_the_field(
        doc: dict[str, object], field: str, value: object) -> None:
    bad = json.loads(json.dumps(doc))
    _layer(bad)[field] = value
    with pytest.raises(ValueError, match=repr(field)):
        torchrecorder.loads_json(json.dumps(bad))


def test_the_largest_counts_in_range_load_and_draw(doc: dict[str, object]) -> None:
    big = json.loads(json.dumps(doc))
    for node in big["nodes"]:
        if node["kind"] == "layer":
            node["num_params_total"] = node["num_params"] = 2**63 - 1
        if node["kind"] == "param":
            node["numel"] = 2**63 - 1
            node["shape"] = [2**63 - 1]
    rec = torchrecorder.loads_json(json.dumps(big))
    assert "digraph" in torchrecorder.make_dot(rec, 5).source
    assert "<!DOCTYPE html>" in torchrecorder.make_html(rec).text
    assert "Total params" in str(rec)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_standard_json_constants_are_refused(doc: dict[str, object], constant: str) -> None:
    text = json.dumps(doc).replace('"depth": 0', f'"depth": {constant}', 1)
    with pytest.raises(ValueError, match=constant):
        torchrecorder.loads_json(text)


@pytest.mark.parametrize("where", ["top", "node"])
def test_duplicate_keys_are_refused_naming_the_key(doc: dict[str, object], where: str) -> None:
    text = json.dumps(doc)
    if where == "top":
        text = text.replace('"format": "torchrecorder.graph"',
                            '"format": "torchrecorder.graph", "format": "other"', 1)
        key = "format"
    else:
        text = text.replace('"kind": "layer"', '"kind": "layer", "kind": "op"', 1)
        key = "kind"
    with pytest.raises(ValueError, match=f"duplicate key '{key}'"):
        torchrecorder.loads_json(text)


def test_a_saved_recording_still_round_trips(tmp_path: Path) -> None:
    rec = torchrecorder.record(nn.Conv2d(1, 2, 3), "conv", (1, 1, 5, 5))
    path = tmp_path / "conv.json"
    rec.to_json(path)
    back = torchrecorder.load_json(path)
    assert back.to_json() == rec.to_json()
    assert torch.__version__  # (real torch recorded the graph)
