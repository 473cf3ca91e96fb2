"""Golden DOT, Mermaid and JSON output for a handful of zoo models, beside structural asserts.

The golden files under ``tests/golden`` pin the exact text torchrecorder writes;
``pytest --update-golden`` rewrites them (review the diff before committing).
Each comparison stands next to checks that hold whatever the text looks like:
the edge statements of the DOT are the renderer's drawn edges, every edge joins
declared nodes, no id is declared twice, and a JSON round trip draws the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.renderer import GraphvizRenderer, MermaidRenderer

from .dot_parse import parse_dot
from .zoo.session import MODES, Zoo

GOLDEN_MODELS = ("MLP", "ResidualCNN", "TinyUNet", "LSTMTagger", "WeightSharing", "DictOutput",
                 "AttentionBlock", "InplaceOps", "ModuleListModel", "MetaTransformerish", "Failing")

DOT_VARIANTS: dict[str, dict[str, Any]] = {
    "d1": {"render_depth": 1},
    "d2": {"render_depth": 2},
    "full": {},
    "edges": {"tensor_nodes": False, "fold_repeats": True},
    "print": {"render_depth": 2, "preset": "print", "fold_repeats": True},
    "compact": {"preset": "compact"},
}
MMD_VARIANTS: dict[str, dict[str, Any]] = {
    "d1": {"render_depth": 1},
    "full": {"tensor_nodes": False, "fold_repeats": True},
}


class Failing(nn.Module):
    """A model whose second layer raises: the failed call is drawn in red."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.bad = nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bad(torch.relu(self.fc(x)))


def _record(zoo: Zoo, name: str) -> torchrecorder.Recorder:
    """``record()`` on the model ``name``, as a user would call it, without lines of code: a
    tooltip's ``file:line`` and the JSON's absolute paths would tie the golden files to the
    line numbers of the zoo's files and to this checkout's directory (``test_source`` checks
    the lines)."""
    if name == "Failing":
        torch.manual_seed(0)
        with pytest.raises(RuntimeError) as info:
            torchrecorder.record(Failing(), "Failing", (2, 4), source=False)
        rec = info.value.recording  # type: ignore[attr-defined]
        assert isinstance(rec, torchrecorder.Recorder)
        return rec
    case = zoo.case(name)
    net = case.build()
    args, kwargs = case.inputs()
    with MODES[case.grad_mode]():
        return torchrecorder.record(net, name, input_data=args, input_kwargs=kwargs, source=False)


@pytest.fixture(scope="module")
def recording(zoo: Zoo) -> Callable[[str], torchrecorder.Recorder]:
    """``recording(name)``: the golden model ``name`` recorded once per module, on first request."""
    cache: dict[str, torchrecorder.Recorder] = {}

    def get(name: str) -> torchrecorder.Recorder:
        if name not in cache:
            cache[name] = _record(zoo, name)
        return cache[name]

    return get


@pytest.mark.parametrize("variant", list(DOT_VARIANTS))
@pytest.mark.parametrize("model", GOLDEN_MODELS)
def test_golden_dot(model: str, variant: str, golden: Callable[[str, str], None],
                    recording: Callable[[str], torchrecorder.Recorder]) -> None:
    rec = recording(model)
    options = DOT_VARIANTS[variant]
    source = torchrecorder.make_dot(rec, **options).source
    golden(f"{model}.{variant}.gv", source)

    parsed = parse_dot(source)
    renderer = GraphvizRenderer(rec, **options)
    drawn = renderer.drawn_edges()
    carried = renderer.projection.carried_edges  # drawn dashed, not ranking their ends
    assert len(parsed.edges) == len(drawn) + len(carried) and drawn
    assert sum(attrs.get("constraint") == "false" and attrs.get("style") == "dashed"
               for attrs in parsed.edge_attrs) >= len(carried)
    assert len(set(parsed.nodes)) == len(parsed.nodes), "a node id is declared twice"
    declared = set(parsed.nodes)
    for a, b in parsed.edges:
        assert a in declared and b in declared, (a, b)
        assert a != b, f"self-loop on {a}"
    assert len(set(parsed.clusters)) == len(parsed.clusters)


@pytest.mark.parametrize("variant", list(MMD_VARIANTS))
@pytest.mark.parametrize("model", GOLDEN_MODELS)
def test_golden_mermaid(model: str, variant: str, golden: Callable[[str, str], None],
                        recording: Callable[[str], torchrecorder.Recorder]) -> None:
    rec = recording(model)
    options = MMD_VARIANTS[variant]
    text = torchrecorder.make_mermaid(rec, **options)
    golden(f"{model}.{variant}.mmd", text)

    arrows = [line for line in text.splitlines()
              if line.strip().startswith("n_") and ("-->" in line or "-.->" in line)]
    assert len(arrows) == len(MermaidRenderer(rec, **options).drawn_edges())


@pytest.mark.parametrize("model", GOLDEN_MODELS)
def test_golden_json(model: str, golden: Callable[[str, str], None],
                     recording: Callable[[str], torchrecorder.Recorder]) -> None:
    rec = recording(model)
    text = rec.to_json()
    golden(f"{model}.json", text)

    again = torchrecorder.loads_json(text)
    assert len(again.nodes) == len(rec.nodes) and list(again.links) == list(rec.links)
    assert torchrecorder.make_dot(again, 2).source == torchrecorder.make_dot(rec, 2).source
