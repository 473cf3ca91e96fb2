"""render_depth: which modules are clusters, which are boxes, and where edges go."""

from __future__ import annotations

import re

import pytest

import torchrecorder
from torchrecorder.renderer import GraphvizRenderer
from torchrecorder.renderer.graphviz import TITLE_SUFFIX

from .zoo.handwritten import Nested, ResNetish


def drawn(rec: torchrecorder.Recorder, depth: int,
          **options: bool) -> tuple[set[str], set[str], set[tuple[str, str]]]:
    """(clusters, single nodes, edges) of the DOT drawn at ``depth``, with tensors drawn as
    nodes unless ``options`` say otherwise."""
    options.setdefault("tensor_nodes", True)
    renderer = GraphvizRenderer(rec, depth, **options)
    src = renderer.render().source
    clusters = set(re.findall(r'subgraph "?cluster_([^"\s{]+)"? \{', src))
    boxes = {m.group(1) for m in re.finditer(r'^\t+"?([^"\s]+)"? \[label=', src, re.M)
             if not m.group(1).endswith(TITLE_SUFFIX)}  # the nodes drawing cluster titles
    edges = {(str(a.key), str(b.key)) for a, b in renderer.drawn_edges()}
    return clusters, boxes, edges


@pytest.fixture(scope="module")
def nested() -> torchrecorder.Recorder:
    return torchrecorder.record(Nested(), "nest", (1, 6))


def test_depth_zero_is_one_box(nested: torchrecorder.Recorder) -> None:
    clusters, boxes, edges = drawn(nested, 0)
    assert clusters == set()
    assert boxes == {"nest", "input@x", "head@out"}
    assert edges == {("input:x", "nest"), ("nest", "head:out")}


def test_depth_one_expands_the_root(nested: torchrecorder.Recorder) -> None:
    clusters, boxes, edges = drawn(nested, 1)
    assert clusters == {"nest"}
    assert boxes == {"input@x", "mid", "mid.b@out", "head", "head@out"}
    assert edges == {("input:x", "mid"), ("mid", "mid.b:out"), ("mid.b:out", "head"),
                     ("head", "head:out")}


def test_depth_two_expands_middle(nested: torchrecorder.Recorder) -> None:
    clusters, boxes, edges = drawn(nested, 2)
    assert clusters == {"nest", "mid"}
    assert {"mid.a", "mid.b", "mid.a@out", "head"} <= boxes
    assert "mid.a.lin" not in boxes
    assert ("input:x", "mid.a") in edges and ("mid.a", "mid.a:out") in edges
    assert ("mid.a:out", "mid.b") in edges


def test_full_depth_shows_ops_and_keeps_leaf_modules_as_boxes(nested: torchrecorder.Recorder) -> None:
    clusters, boxes, edges = drawn(nested, 256)
    assert clusters == {"nest", "mid", "mid.a", "mid.b"}
    # a Linear ran one op: drawn as a box, not a cluster around its op
    assert {"mid.a.lin", "mid.a/tanh", "mid.b.lin", "head"} <= boxes
    assert ("mid.a.lin", "mid.a.lin@out") not in edges
    assert ("mid.a.lin", "mid.a.lin:out") in edges and ("mid.a.lin:out", "mid.a/tanh") in edges


def test_hidden_parameters_draw_no_edges_and_no_self_loops() -> None:
    rec = torchrecorder.record(ResNetish(), "res", (1, 3, 6, 6))
    for depth in (0, 1, 2, 256):
        _, _, edges = drawn(rec, depth)
        assert all(a != b for a, b in edges)
        assert not any(a.endswith((".weight", ".bias")) for a, _ in edges)
    _, _, edges = drawn(rec, 1)
    # the residual add sits inside the block box: one edge in, one edge out
    assert ("stem:out", "block") in edges and ("block", "block:out") in edges


def test_render_depth_must_be_a_non_negative_int(nested: torchrecorder.Recorder) -> None:
    with pytest.raises(ValueError, match="render_depth"):
        torchrecorder.make_dot(nested, -1)
    with pytest.raises(ValueError, match="render_depth"):
        torchrecorder.make_dot(nested, 1.5)  # type: ignore[arg-type]
