"""Jupyter display: a Recorder and make_dot's Digraph show an SVG at a readable size."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import graphviz
import pytest
import torch
from torch import nn

import torchrecorder

from .backends import needs_backend


@pytest.fixture(scope="module")
def rec() -> torchrecorder.Recorder:
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    return torchrecorder.record(net, "mlp", (1, 4))


@needs_backend
def test_recorder_mimebundle(rec: torchrecorder.Recorder) -> None:
    bundle = rec._repr_mimebundle_()
    assert set(bundle) == {"text/html", "image/svg+xml", "text/plain"}
    root = ET.fromstring(bundle["image/svg+xml"])
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.get("width", "").endswith("pt")  # natural size, not scaled to the cell
    html = bundle["text/html"]
    assert html.startswith('<div style="overflow-x:auto;max-width:100%">')
    assert '<svg style="max-width:none;height:auto"' in html
    assert "<?xml" not in html and "<!DOCTYPE" not in html
    assert bundle["text/plain"] == repr(rec)
    assert ">0</text>" in bundle["image/svg+xml"]  # drawn at render_depth=1: the children as boxes


@needs_backend
def test_include_and_exclude(rec: torchrecorder.Recorder) -> None:
    assert set(rec._repr_mimebundle_(include=["image/svg+xml"])) == {"image/svg+xml"}
    assert set(rec._repr_mimebundle_(exclude=["text/html"])) == {"image/svg+xml", "text/plain"}


@needs_backend
def test_recorder_svg(rec: torchrecorder.Recorder) -> None:
    svg = rec._repr_svg_()
    assert svg is not None
    ET.fromstring(svg)


@needs_backend
def test_make_dot_result_displays_itself(rec: torchrecorder.Recorder) -> None:
    dot = torchrecorder.make_dot(rec, render_depth=2)
    assert isinstance(dot, graphviz.Digraph)
    bundle = dot._repr_mimebundle_()
    assert set(bundle) == {"text/html", "image/svg+xml", "text/plain"}
    ET.fromstring(bundle["image/svg+xml"])
    assert "0x" not in bundle["text/plain"]  # no object ids in the output
    with dot.subgraph(name="cluster_extra") as sub:  # subgraphs keep working
        sub.node("extra")
    assert "extra" in dot.source


def test_without_graphviz_only_text(rec: torchrecorder.Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHRECORDER_BACKEND", "dot")
    monkeypatch.setenv("PATH", "")
    bundle = rec._repr_mimebundle_()
    assert set(bundle) == {"text/plain"}
    assert "no Graphviz" in bundle["text/plain"]
    assert rec._repr_svg_() is None


@needs_backend
def test_ipython_picks_the_bundle(rec: torchrecorder.Recorder) -> None:
    formatters = pytest.importorskip("IPython.core.formatters")
    data, _ = formatters.DisplayFormatter().format(rec)
    assert "text/html" in data and "image/svg+xml" in data


@needs_backend
def test_wide_graph_keeps_its_size() -> None:
    class Wide(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.branches = nn.ModuleList(nn.Linear(4, 4) for _ in range(30))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.stack([b(x) for b in self.branches]).sum(0)

    rec = torchrecorder.record(Wide(), "wide", (1, 4))
    bundle = rec._repr_mimebundle_()
    width = float(ET.fromstring(bundle["image/svg+xml"]).get("width", "0pt")[:-2])
    assert width > 1000  # wider than a notebook cell: it scrolls instead of shrinking
    assert "overflow-x:auto" in bundle["text/html"]
