"""torchrecorder.diff at its limits: size, symmetry, hostile names, odd output files, mappings."""

from __future__ import annotations

import json
import os
import re
import stat
import tracemalloc
import warnings
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import torchrecorder
from torchrecorder.diff import render_diff

from .fifo import fifo_reader


def _linear_stack(n: int) -> tuple[torchrecorder.Recorder, torchrecorder.Recorder]:
    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Linear(2, 2) for _ in range(n)])
    a = torchrecorder.record(net, "net", (1, 2))
    b = torchrecorder.record(net.double(), "net", (1, 2), dtype=torch.float64)
    return a, b


def _diff_peak(n: int) -> tuple[torchrecorder.Diff, int]:
    a, b = _linear_stack(n)
    tracemalloc.start()
    try:
        d = torchrecorder.diff(a, b)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return d, peak


def test_diff_memory_grows_linearly_with_many_changed_siblings() -> None:
    # every child changed (float64): nothing pairs at the ends, so the children are aligned;
    # an alignment over all pairs of them is quadratic (1,500 x 1,500 scores)
    _, peak_small = _diff_peak(300)
    big, peak_big = _diff_peak(1500)
    assert big.counts("layer")["changed"] == 1500 and big.counts("layer")["added"] == 0
    assert [e.b for e in big.entries if e.a == "1499"] == ["1499"]
    assert peak_big < 40 * 2**20, peak_big
    assert peak_big < 8 * peak_small, (peak_small, peak_big)  # 5 x the size


# ------------------------------------------------ item 8: diff(b, a) mirrors diff(a, b)
_PARTS = ("linear", "linear_nobias", "relu", "tanh", "norm", "pair")


def _part(name: str) -> nn.Module:
    if name == "linear":
        return nn.Linear(3, 3)
    if name == "linear_nobias":
        return nn.Linear(3, 3, bias=False)
    if name == "relu":
        return nn.ReLU()
    if name == "tanh":
        return nn.Tanh()
    if name == "norm":
        return nn.LayerNorm(3)
    return nn.Sequential(nn.Linear(3, 3), nn.ReLU())


def _net(parts: list[str]) -> torchrecorder.Recorder:
    torch.manual_seed(0)
    return torchrecorder.record(nn.Sequential(*[_part(p) for p in parts]), "net", (1, 3))


def _assert_mirror(a: torchrecorder.Recorder, b: torchrecorder.Recorder) -> None:
    forward, backward = torchrecorder.diff(a, b), torchrecorder.diff(b, a)
    assert sorted(map(repr, forward.mirrored())) == sorted(
        repr((e.a, e.b, e.kind, e.status)) for e in backward.entries)
    mirror = {"added": "removed", "removed": "added", "same": "same", "wrapped": "wrapped"}
    assert sorted(map(repr, ((eb, ea, mirror[s]) for ea, eb, s in forward.edges))) == sorted(
        map(repr, backward.edges))


def test_swapping_two_modules_pairs_the_same_way_in_both_directions() -> None:
    _assert_mirror(_net(["linear", "relu"]), _net(["relu", "linear"]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PARTS), min_size=1, max_size=5),
       st.lists(st.tuples(st.sampled_from(("swap", "insert", "delete", "replace")),
                          st.integers(0, 5), st.sampled_from(_PARTS)), min_size=1, max_size=3))
def test_reverse_diff_is_the_mirror_property(parts: list[str], edits: list[tuple[str, int, str]]) -> None:
    other = list(parts)
    for what, at, part in edits:
        i = at % (len(other) + (what == "insert")) if other or what == "insert" else 0
        if what == "swap" and len(other) > 1:
            j = (i + 1) % len(other)
            other[i], other[j] = other[j], other[i]
        elif what == "insert":
            other.insert(i, part)
        elif what == "delete" and len(other) > 1:
            del other[i]
        elif what == "replace" and other:
            other[i] = part
    _assert_mirror(_net(parts), _net(other))


# ------------------------------------------------ item 9: no key of one side takes the place of another
class _SlashNames(nn.Module):
    """Modules named ``a/net`` and ``net`` (legal in torch) beside a model recorded as ``net``."""

    def __init__(self) -> None:
        super().__init__()
        self.add_module("a/net", nn.Conv1d(1, 1, 1))
        self.add_module("net", nn.GELU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(getattr(self, "a/net")(x))


def test_union_drawing_keeps_every_entry_when_names_hold_slashes() -> None:
    from torchrecorder.diff.draw import union_graph

    torch.manual_seed(0)
    a = torchrecorder.record(nn.Sequential(nn.Linear(3, 3), nn.ReLU()), "net", (1, 1, 3))
    b = torchrecorder.record(_SlashNames(), "net", (1, 1, 3))
    d = torchrecorder.diff(a, b)
    g, info = union_graph(d)
    assert len(g.nodes) - 1 == len(d.entries) == len(info)
    assert sorted(e.index for e in info.values()) == list(range(len(d.entries)))
    source = torchrecorder.make_dot(d, changes_only=False).source
    for e in d.entries:
        if e.kind == "layer":
            assert source.count(f'id=d{e.index} ') + source.count(f'id=d{e.index}\n') \
                + source.count(f'id="d{e.index}"') == 1, e


# ------------------------------------------------ item 10: names with surrogates and control characters
def _hostile(width: int) -> nn.Sequential:
    torch.manual_seed(0)
    m = nn.Sequential()
    m.add_module("fc\ud800", nn.Linear(3, width))
    m.add_module("x\nno difference\x1b[2J", nn.Linear(width, width))
    return m


def test_render_diff_writes_names_with_lone_surrogates_and_escapes_controls(tmp_path: Path) -> None:
    d = torchrecorder.diff(torchrecorder.record(_hostile(3), "net", (1, 3)),
                           torchrecorder.record(_hostile(4), "net", (1, 3)))
    for ext in ("json", "txt", "html"):
        render_diff(d, tmp_path / f"d.{ext}")
    data = json.loads((tmp_path / "d.json").read_text("utf-8"))
    assert {n["a"] for n in data["nodes"]} >= {"fc\ud800", "x\nno difference\x1b[2J"}
    text = (tmp_path / "d.txt").read_text("utf-8")
    assert text == d.summary() + "\n"
    assert "\x1b" not in text and "\\x1b[2J" in text and "fc\\ud800" in text
    assert not any(line.startswith("no difference") for line in text.splitlines())
    assert "x\\nno difference" in text
    page = (tmp_path / "d.html").read_text("utf-8")
    assert "\x1b" not in page.split("<script>")[0]


# ------------------------------------------------ item 11: -o on a FIFO, /dev/null, a link to a device
def _saved_pair(tmp_path: Path) -> tuple[str, str]:
    torch.manual_seed(0)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    torchrecorder.record(nn.Sequential(nn.Linear(3, 3)), "net", (1, 3)).to_json(str(a))
    torchrecorder.record(nn.Sequential(nn.Linear(3, 4)), "net", (1, 3)).to_json(str(b))
    return str(a), str(b)


def test_diff_command_writes_into_a_fifo_and_devices(tmp_path: Path) -> None:
    from torchrecorder.diff_cli import main

    a, b = _saved_pair(tmp_path)
    fifo = tmp_path / "out.txt"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = fifo_reader(fifo, got)
    assert main([a, b, "-o", str(fifo)]) == 0
    reader.join(timeout=30)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].decode("utf-8").startswith("diff 'net' → 'net': the models differ")
    assert main([a, b, "-o", "/dev/null"]) == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    link = tmp_path / "null.svg"
    link.symlink_to("/dev/null")
    assert main([a, b, "-o", str(link), "-f", "dot"]) == 0
    assert link.is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)


# ------------------------------------------------ item 12: a mapping pairs one module with one module
class _BlkHead(nn.Module):
    def __init__(self, width: int = 3) -> None:
        super().__init__()
        self.blk = nn.Linear(3, 3)
        self.head = nn.Linear(3, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blk(x))


def _every_node_has_an_entry(d: torchrecorder.Diff) -> None:
    for side, graph in (("a", d.a), ("b", d.b)):
        keys = [getattr(e, side) for e in d.entries if getattr(e, side) is not None]
        assert sorted(keys) == sorted(k for k in graph.nodes if k is not None), side


def test_mapping_two_modules_onto_one_is_an_error() -> None:
    torch.manual_seed(0)
    a = torchrecorder.record(_BlkHead(), "net", (1, 3))
    b = torchrecorder.record(_BlkHead(4), "net", (1, 3))
    with pytest.raises(ValueError, match="'blk' and 'head' are both mapped onto 'blk'"):
        torchrecorder.diff(a, b, mapping={"blk": "blk", "head": "blk"})
    for mapping in ({"blk": "head", "head": "blk"}, {"head": "blk"}, {"blk": "head"}, {"": "blk"}):
        d = torchrecorder.diff(a, b, mapping=mapping)
        _every_node_has_an_entry(d)
        for old, new in mapping.items():
            ka = next(k for k, n in a.nodes.items() if k is not None and getattr(n, "path", None) == old)
            kb = next(k for k, n in b.nodes.items() if k is not None and getattr(n, "path", None) == new)
            assert d.entry_of("a", ka) is d.entry_of("b", kb)


# ------------------------------------------------ item 13: the drawing budget holds for diffs
def test_diff_drawings_keep_to_the_drawing_budget(tmp_path: Path) -> None:
    from torchrecorder.diff_cli import main
    from torchrecorder.errors import LargeDrawingWarning
    from torchrecorder.projection.budget import MAX_NODES

    a, b = _linear_stack(1100)
    d = torchrecorder.diff(a, b)
    a.to_json(str(tmp_path / "a.json"))
    b.to_json(str(tmp_path / "b.json"))

    def boxes(source: str) -> int:
        return len(re.findall(r"^\s*\S+ \[.*\bid=d\d+", source, flags=re.M))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LargeDrawingWarning)  # it says what it collapsed
        made = torchrecorder.make_dot(d).source
        render_diff(d, tmp_path / "d.dot")
        assert main([str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(tmp_path / "c.dot")]) == 0
    for source in (made, (tmp_path / "d.dot").read_text("utf-8"), (tmp_path / "c.dot").read_text("utf-8")):
        assert 0 < boxes(source) <= MAX_NODES, boxes(source)
    with pytest.warns(LargeDrawingWarning):  # a depth asked for is drawn as asked, with a warning
        assert boxes(torchrecorder.make_dot(d, render_depth=1, fold_repeats=False).source) > 1100
