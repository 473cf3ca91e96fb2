"""render_network passes ``styler_cls=`` and ``stat=`` on as make_dot and make_html take them,
for every format (its early option check once rejected both)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from torch import nn

import torchrecorder
from torchrecorder.nodes import LayerNode
from torchrecorder.renderer import GraphvizStyler


class _Marked(GraphvizStyler):
    """Colours every module call: a styler of today's kind, given by class."""

    def style_node(self, node: Any) -> dict[str, Any]:
        style = dict(super().style_node(node))
        if isinstance(node, LayerNode):
            style["fillcolor"] = "#123456"
        return style


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


@pytest.mark.parametrize("fmt", ["dot", "html"])
def test_a_styler_class_reaches_the_drawing(fmt: str, tmp_path: Path) -> None:
    path = torchrecorder.render_network(_net(), "net", (1, 3), str(tmp_path), None, fmt, None, 1,
                                        styler_cls=_Marked)
    assert "#123456" in Path(path).read_text()


def test_the_page_colours_by_a_cost(tmp_path: Path) -> None:
    path = torchrecorder.render_network(_net(), "net", (1, 3), str(tmp_path), fmt="html", stat="flops")
    assert "FLOPs per call" in Path(path).read_text()
