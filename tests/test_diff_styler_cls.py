"""make_dot(diff, styler_cls=...): a DiffStyler subclass styles the union graph; another styler
is refused with a message naming DiffStyler (it once failed on the keyword ``info``)."""

from __future__ import annotations

import pytest
from torch import nn

import torchrecorder
from torchrecorder.diff import Diff
from torchrecorder.diff.draw import DiffStyler
from torchrecorder.renderer import GraphvizStyler


def _diff() -> Diff:
    a = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    b = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    return torchrecorder.diff(torchrecorder.record(a, "m", (1, 3)), torchrecorder.record(b, "m", (1, 3)))


class _Thick(DiffStyler):
    def style_node(self, node):
        return {**super().style_node(node), "penwidth": "3.5"}


def test_a_diff_styler_subclass_styles_the_union_graph() -> None:
    assert "penwidth=3.5" in torchrecorder.make_dot(_diff(), styler_cls=_Thick).source


def test_another_styler_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"DiffStyler.*GraphvizStyler"):
        torchrecorder.make_dot(_diff(), styler_cls=GraphvizStyler)
