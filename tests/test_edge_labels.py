"""Edge labels inside one cluster or outside all, and no edge through a label: checked on the
geometry ``dot -Tjson`` lays out (:mod:`tests.label_geometry`), on the networks of
``docs/figures.md`` at depths 1, 2 and everything open.  With ``label_nodes=True`` each label
is a node of its own in the innermost cluster holding both ends of its edge; Graphviz's own
edge labels (the default) can lie across a cluster's border."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import torchrecorder

from .backends import needs_dot
from .label_geometry import label_problems

pytestmark = needs_dot

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
try:
    from figure_models import MODELS
finally:
    sys.path.pop(0)


@pytest.fixture(scope="module")
def recordings() -> dict[str, Any]:
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, build in MODELS.items():
            net, args = build()
            out[name] = torchrecorder.record(net, name, input_data=args)
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_label_nodes_keep_every_label_clear_of_borders_and_edges(recordings: dict[str, Any],
                                                                  name: str) -> None:
    for depth in (1, 2, None):
        source = torchrecorder.make_dot(recordings[name], depth, label_nodes=True).source
        assert "::label" in source or "label=<" not in source.split("->", 1)[-1]
        assert label_problems(source) == [], (name, depth)


def test_the_check_finds_graphvizs_own_labels_across_a_border(recordings: dict[str, Any]) -> None:
    """What ``label_nodes`` is for: the U-Net's default drawing, everything open, has edge
    labels that a cluster's border crosses."""
    problems = label_problems(torchrecorder.make_dot(recordings["unet"], None).source)
    assert any("border of cluster" in p for p in problems), problems


def test_a_label_node_sits_in_the_innermost_cluster_of_both_ends(recordings: dict[str, Any]) -> None:
    source = torchrecorder.make_dot(recordings["transformer_encoder"], 2, label_nodes=True).source
    line = next(ln for ln in source.splitlines() if "::label\" [" in ln)
    assert line.lstrip().startswith('subgraph cluster_transformer_encoder { subgraph "cluster_layers.0" { '
                                    '"layers.0.'), line
    assert "shape=plain" in line
    assert source.count("arrowhead=none") == source.count('::label" [label=') > 0
