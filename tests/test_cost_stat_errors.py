"""``stat=`` of a cost through every drawing entry point: render_network colours by it, and a
statistic the recording cannot give is a ValueError that names it (not a TypeError about the
keyword ``stat``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch import nn

import torchrecorder


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def test_render_network_colours_by_a_cost(tmp_path: Path) -> None:
    path = torchrecorder.render_network(_net(), "net", (1, 4), directory=str(tmp_path), fmt="dot",
                                        stat="flops")
    assert "FLOPs per call" in Path(path).read_text()


@pytest.mark.parametrize("stat, says", [("flop", "choose from"), ("zeros", "activations="),
                                        ("time", "timing=True"), ("saved_bytes", "backward=True")])
def test_a_stat_the_recording_cannot_give_is_named(stat: str, says: str, tmp_path: Path) -> None:
    rec = torchrecorder.record(_net(), "net", (1, 4))
    for draw in (torchrecorder.make_dot, torchrecorder.make_html):
        with pytest.raises(ValueError, match=f"stat={stat!r}.*{says}"):
            draw(rec, stat=stat)
    net, calls = _net(), []
    net.register_forward_pre_hook(lambda m, i: calls.append(1))
    with pytest.raises(ValueError, match=f"stat={stat!r}.*{says}"):
        torchrecorder.render_network(net, "net", (1, 4), directory=str(tmp_path), stat=stat)
    assert not calls and not list(tmp_path.iterdir())  # refused before the model ran


def test_the_page_colours_by_measured_time() -> None:
    rec = torchrecorder.record(_net(), "net", (1, 4), timing=True)
    assert "time per call (ms)" in torchrecorder.make_html(rec, stat="time").text
    assert "time per call (ms)" in torchrecorder.make_dot(rec, stat="time").source


@pytest.mark.parametrize("option", [{"stat": "saved_bytes"}, {"stat": "flops"}, {"activations": {}}])
def test_the_backward_drawing_refuses_a_colouring_by_name(option: dict) -> None:
    """make_dot and make_html with backward=True refuse stat= and activations= saying why, as
    render_network does; they raised a TypeError that called stat= an unknown keyword."""
    rec = torchrecorder.record(_net(), "net", (1, 4), backward=True)
    for draw in (torchrecorder.make_dot, torchrecorder.make_html):
        with pytest.raises(ValueError, match=r"colour the forward drawing.*backward=True"):
            draw(rec, backward=True, **option)
