"""Activations on the picture: modules coloured by a statistic of a capture, with a legend."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.renderer.activations import ActivationStyler, call_name

from .backends import needs_backend
from .dot_parse import parse_dot


def _dead_net() -> nn.Sequential:
    net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2), nn.ReLU())
    with torch.no_grad():
        net[0].weight.zero_()
        net[0].bias.copy_(torch.tensor([-1.0, -1.0, -1.0, 1.0, 2.0, 3.0]))  # half of relu 1 dead
    return net


def _node_attrs(source: str, node_id: str) -> dict[str, str]:
    return {k: v.strip('"') for k, v in parse_dot(source).node_attrs[node_id].items()}


def test_capture_statistics_colour_the_modules_and_draw_a_legend() -> None:
    net = _dead_net()
    x = torch.randn(32, 4)
    with torchrecorder.capture(net, stats=True, record=False) as cap:
        net(x)
    rec = torchrecorder.record(net, "net", input_data=x)
    plain = torchrecorder.make_dot(rec).source
    dot = torchrecorder.make_dot(rec, activations=cap, stat="dead").source
    relu = _node_attrs(dot, "1")
    assert "dead 50%" in relu["label"] and relu["fillcolor"] == "#fc8d59"  # half way up the warm scale
    assert _node_attrs(dot, "0")["fillcolor"] == "#fff7ec"  # no dead units: the bottom of the scale
    assert "dead 50%" in relu["tooltip"]
    assert "dead-unit fraction" in dot and "100%" in dot  # the legend
    assert "dead" not in plain and "#fc8d59" not in plain
    # the root is expanded: its border takes the colour, its label the value
    assert re.search(r"cluster_net.*?dead 0%", dot, re.S)


def _legend_cells(source: str) -> list[str]:
    return re.findall(r'<TD BGCOLOR="[^"]*" WIDTH="\d+"><FONT[^>]*>([^<]*)</FONT>', source)


def test_a_legend_says_each_value_once() -> None:
    """A statistic that is the same everywhere (every unit dead, every call alike) is one
    cell saying so, not five cells of the same number; a narrow range shows each value once."""
    rec = torchrecorder.record(_dead_net(), "net", (2, 4))
    same = torchrecorder.make_dot(rec, 1, activations={"0": 1.0, "2": 1.0}, stat="mean").source
    assert _legend_cells(same) == ["1 everywhere"]
    spread = torchrecorder.make_dot(rec, 1, activations={"0": 1.0, "2": 3.0}, stat="mean").source
    cells = _legend_cells(spread)
    assert len(cells) == 5 and len(set(cells)) == 5, cells
    narrow = torchrecorder.make_dot(rec, 1, activations={"0": 1.0, "2": 1.0001}, stat="mean").source
    cells = _legend_cells(narrow)
    assert len(cells) == len(set(cells)), cells


def test_the_legend_says_how_many_values_the_drawing_does_not_show() -> None:
    """Values on calls inside a closed module, or on operations left out, colour nothing: the
    legend counts them and names the options that draw them; none is said when all are shown."""
    class Centre(nn.Module):  # a leaf module of two operations
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x - x.mean(-1, keepdim=True)

    inner = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), Centre())
    net = nn.Sequential(inner, nn.Linear(4, 2))
    x = torch.randn(8, 4)
    rec = torchrecorder.record(net, "net", input_data=x)

    def note(capture: torchrecorder.Capture, depth: int, **options: bool) -> str:
        source = torchrecorder.make_dot(rec, depth, activations=capture, stat="mean", **options).source
        return "".join(re.findall(r"\d+ of \d+ values not in view[^<]*", source))

    with torchrecorder.capture(net, ["0.0", "0.1", "1"], stats=True, record=False) as cap:
        net(x)
    # what would show them, said as such: not the depth this drawing was made at (1)
    assert note(cap, 1) == ("2 of 3 values not in view: inside closed modules or left out; "
                            "a drawing with render_depth=2 shows them")
    assert note(cap, 2) == ""
    with torchrecorder.capture(net, ops="0.1/relu", stats=True, record=False) as ops:
        net(x)
    assert note(ops, 1).endswith("; a drawing with render_depth=2 shows them")
    assert note(ops, 1).startswith("1 of 1 ")
    # the ReLU module ran one operation: its box, drawn at every depth, stands for it
    opened = torchrecorder.make_dot(rec, 2, activations=ops, stat="mean").source
    assert "not in view" not in opened and "mean " in _node_attrs(opened, "0.1")["label"]
    assert "mean " not in _node_attrs(opened, "0.0")["label"]
    # an operation inside a leaf of several opens with expand_leaves
    with torchrecorder.capture(net, ops="0.2/sub", stats=True, record=False) as sub:
        net(x)
    assert note(sub, 1).endswith("; a drawing with render_depth=3, expand_leaves=True shows them")
    assert note(sub, 3, expand_leaves=True) == ""


def test_the_networks_own_operations_are_coloured_whatever_the_recording_is_called() -> None:
    """A capture without rec= names the network's own operations ``net/tanh``; the recording
    names them after itself (``lb/tanh``).  They coloured nothing, under a legend that
    claimed them all; now the values reach their nodes."""

    class Loop(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for _ in range(2):
                x = torch.tanh(self.fc(x)) + x
            return x

    net, x = Loop(), torch.randn(8, 4)
    rec = torchrecorder.record(net, "lb", input_data=x)
    with torchrecorder.capture(net, ops="*/tanh", stats=True, record=False) as cap:
        net(x)
    assert sorted(cap.stats("mean")) == ["net/tanh", "net/tanh_1"]
    with torchrecorder.capture(net, ops="*/tanh", stats=True, record=False, rec=rec) as named:
        net(x)
    assert sorted(named.stats("mean")) == ["lb/tanh", "lb/tanh_1"]
    for values in (cap, named, {"net/tanh": 0.5, "net/tanh_1": 0.25}):
        dot = torchrecorder.make_dot(rec, None, activations=values, stat="mean").source
        for key in ("lb/tanh", "lb/tanh_1"):
            assert "mean " in _node_attrs(dot, key)["label"], key
        assert "not in view" not in dot


def test_a_mapping_of_values_scale_range_and_options() -> None:
    net = _dead_net()
    rec = torchrecorder.record(net, "net", (2, 4))
    dot = torchrecorder.make_dot(rec, 1, ActivationStyler, activations={"0": 1.0, "2": 3.0}, stat="mean",
                                 annotate=False).source
    assert _node_attrs(dot, "0")["fillcolor"] == "#f7fbff" and _node_attrs(dot, "2")["fillcolor"] == "#08306b"
    assert _node_attrs(dot, "2")["fontcolor"] == "white"  # readable on the dark end
    assert "mean" not in _node_attrs(dot, "0")["label"] and "mean 1" in _node_attrs(dot, "0")["tooltip"]
    assert "mean activation" in dot
    # a module without a value keeps the default style
    assert _node_attrs(dot, "1")["fillcolor"] == "#dbe8f5"
    custom = torchrecorder.make_dot(rec, 1, activations={"0": 5.0}, stat="time", vmin=0, vmax=10,
                                    scale=["#000000", "#ffffff"], legend=False).source
    assert _node_attrs(custom, "0")["fillcolor"] == "#808080" and "5 ms" in custom
    assert "time per call" not in custom
    with pytest.raises(TypeError, match="needs activations="):
        torchrecorder.make_dot(rec, styler_cls=ActivationStyler)
    with pytest.raises(ValueError, match="unknown scale"):
        torchrecorder.make_dot(rec, activations={}, scale="rainbow")
    with pytest.raises(TypeError, match="not a number"):
        torchrecorder.make_dot(rec, activations={"0": "high"})


def test_repeated_calls_and_folded_runs_take_their_own_values() -> None:
    class Loop(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.relu(self.fc(x)))

    net = Loop()
    rec = torchrecorder.record(net, "loop", (2, 3))
    assert [call_name(layer) for layer in rec.layers()] == ["", "fc", "fc#2"]
    with torchrecorder.capture(net, stats=True, timing=True, record=False) as cap:
        net(torch.randn(2, 3))
    assert set(cap.stats("time")) == {"", "fc", "fc#2"}
    dot = torchrecorder.make_dot(rec, fold_repeats=False, activations=cap, stat="time").source
    assert dot.count(" ms</I>") == 3 and "time per call (ms)" in dot  # the network, fc, fc#2
    # a folded run is coloured by the mean of its blocks
    blocks = nn.Sequential(*[nn.Linear(3, 3) for _ in range(3)])
    values = {"0": 0.0, "1": 0.5, "2": 1.0}
    folded = torchrecorder.make_dot(torchrecorder.record(blocks, "b", (1, 3)), 1, fold_repeats=True,
                                    activations=values, stat="zeros").source
    assert "zeros 50%" in folded and "×3" in folded


@needs_backend
def test_the_coloured_graph_renders(tmp_path) -> None:  # type: ignore[no-untyped-def]
    net = _dead_net()
    with torchrecorder.capture(net, stats=True, record=False) as cap:
        net(torch.randn(8, 4))
    path = torchrecorder.render_network(net, "net", (8, 4), tmp_path, render_depth=1, activations=cap,
                                        stat="zeros")
    svg = open(path, encoding="utf-8").read()
    assert "fraction of zeros" in svg and "zeros 50%" in svg


@pytest.mark.parametrize("scale", ["warm", "cool", "diverging"])
def test_every_fill_of_a_scale_keeps_its_text_readable(scale: str) -> None:
    """Whatever colour of the scale a box gets, its name and its grey type line keep a
    contrast of 4.5 (WCAG AA) with the fill: white on dark fills, and no grey on a mid tone."""
    from torchrecorder.renderer.activations import _contrast

    net = nn.Sequential(*[nn.Linear(4, 4) for _ in range(11)])
    rec = torchrecorder.record(net, "net", (2, 4))
    values = {str(i): float(i) for i in range(11)}  # one box per tenth of the scale
    dot = torchrecorder.make_dot(rec, 1, activations=values, stat="mean", scale=scale).source
    named = {"white": "#ffffff", "black": "#000000"}
    for i in range(11):
        attrs = _node_attrs(dot, str(i))
        fill = attrs["fillcolor"]
        texts = [attrs.get("fontcolor", "black"), *re.findall(r'COLOR="([^"]+)"', attrs["label"])]
        for text in texts:
            assert _contrast(fill, named.get(text, text)) >= 4.5, (i, fill, text)
