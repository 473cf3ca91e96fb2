"""Numbers given to Graphviz are checked before any work (issue 24, item 6): ``dpi=inf`` wrote
a 0-byte PNG and reported success; ``nan`` and ``-5`` were passed on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.renderer.attr_values import check_attribute_values

ROOT = Path(__file__).resolve().parent.parent


class Refuses(nn.Module):
    """A model that must not run: the drawing options are checked before it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("the model ran")


@pytest.fixture(scope="module")
def rec() -> torchrecorder.Recorder:
    return torchrecorder.record(nn.Sequential(nn.Linear(2, 3), nn.ReLU()), "net", (1, 2))


BAD: list[tuple[dict[str, Any], str]] = [
    ({"dpi": float("inf")}, "dpi"), ({"dpi": "1e400"}, "dpi"), ({"dpi": float("nan")}, "dpi"),
    ({"dpi": -5}, "dpi"), ({"dpi": 0}, "dpi"), ({"dpi": "96 dpi"}, "dpi"),
    ({"size": "inf,3"}, "size"), ({"size": "3,nan!"}, "size"), ({"size": "-1,2"}, "size"),
    ({"graph_attrs": {"ranksep": "nan"}}, "ranksep"), ({"nodesep": -1}, "nodesep"),
    ({"fontsize": "0"}, "fontsize"), ({"layer_attrs": {"margin": "-0.1,0.2"}}, "margin"),
    ({"edge_attrs": {"penwidth": "inf"}}, "penwidth"), ({"edge_attrs": {"arrowsize": "1e999"}}, "arrowsize"),
    ({"width": "Infinity"}, "width"), ({"graph_attrs": {"pad": "nan"}}, "pad"),
    ({"cluster_attrs": {"fontsize": "-3"}}, "fontsize"),
]


@pytest.mark.parametrize(("args", "name"), BAD, ids=[f"{n}-{i}" for i, (_, n) in enumerate(BAD)])
def test_bad_numbers_are_refused_naming_the_attribute(rec: torchrecorder.Recorder, args: dict[str, Any],
                                                      name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=f"'{name}'"):
        torchrecorder.make_dot(rec, 2, **args)
    with pytest.raises(ValueError, match=f"'{name}'"):
        torchrecorder.make_html(rec, 2, **args)
    with pytest.raises(ValueError, match=f"'{name}'"):  # before the model runs
        torchrecorder.render_network(Refuses(), "r", (1, 2), tmp_path, fmt="dot", **args)
    assert list(tmp_path.iterdir()) == []


GOOD: list[dict[str, Any]] = [
    {"dpi": 300}, {"dpi": "72.5"}, {"size": "3.5,8"}, {"size": "7.5,10!"}, {"size": "4"},
    {"graph_attrs": {"ranksep": "0.5 equally"}}, {"ranksep": "1.2"}, {"nodesep": 0},
    {"fontsize": 14}, {"layer_attrs": {"margin": "0.1,0.04"}}, {"edge_attrs": {"penwidth": "2"}},
    {"preset": "paper"}, {"preset": "compact"}, {"graph_attrs": {"pad": "0.2"}}, {"size": "1e1,.5"},
]


@pytest.mark.parametrize("args", GOOD, ids=range(len(GOOD)))
def test_good_numbers_draw(rec: torchrecorder.Recorder, args: dict[str, Any]) -> None:
    assert torchrecorder.make_dot(rec, 2, **args).source.startswith("digraph")


def test_the_checker_names_the_kind() -> None:
    with pytest.raises(ValueError, match=r"'dpi' of the graph.*'inf'.*finite number > 0"):
        check_attribute_values({"graph": {"dpi": "inf"}})
    check_attribute_values({"graph": {"dpi": "96", "label": "inf", "fontname": "nan"}})  # not numbers


def test_the_command_line_refuses_an_infinite_dpi(tmp_path: Path) -> None:
    out = tmp_path / "x.png"
    proc = subprocess.run([sys.executable, "-m", "torchrecorder", "tests.core_models:TinyMLP", "-s", "1,4",
                           "-o", str(out), "--dpi", "inf"], capture_output=True, text=True, cwd=ROOT,
                          check=False, timeout=300)
    assert proc.returncode == 1 and "torchrecorder: error:" in proc.stderr and "'dpi'" in proc.stderr
    assert not out.exists()
