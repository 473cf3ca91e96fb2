"""A drawing made by ``make_dot``, ``make_mermaid`` or ``make_html`` is freed when it is done: it leaves no
reference cycle for Python's garbage collector (whose next collection would walk every object
the drawing made, thousands for a large model)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.norm(torch.relu(self.fc(x)))


class Stack(nn.Module):
    """Nine identical blocks (folded by default) and a loop of operations."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(9))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        for _ in range(9):
            x = torch.tanh(x * 2)
        return x


@pytest.fixture(scope="module")
def rec() -> torchrecorder.Recorder:
    return torchrecorder.record(Stack(), "stack", (2, 8))


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


DRAWINGS: dict[str, Callable[[Any], Any]] = {
    "make_dot": lambda rec: torchrecorder.make_dot(rec).source,
    "make_dot depth 1": lambda rec: torchrecorder.make_dot(rec, 1, tensor_nodes=True).source,
    "make_dot unfolded": lambda rec: torchrecorder.make_dot(rec, fold_repeats=False).source,
    "make_mermaid": lambda rec: torchrecorder.make_mermaid(rec),
    "make_html": lambda rec: str(torchrecorder.make_html(rec)),
}


@pytest.mark.parametrize("how", list(DRAWINGS))
def test_a_drawing_leaves_no_cyclic_garbage(rec: torchrecorder.Recorder, collector_off: None,
                                            how: str) -> None:
    DRAWINGS[how](rec)  # once first: what a first drawing imports is not the drawing's garbage
    gc.collect()
    drawn = DRAWINGS[how](rec)
    assert "blocks" in drawn
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        found = gc.collect()
        kinds = sorted({getattr(o, "__qualname__", type(o).__name__) for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert found == 0, f"{how} left {found} objects in reference cycles: {kinds[:12]}"


def test_the_drawing_is_the_same_when_drawn_again(rec: torchrecorder.Recorder) -> None:
    # what the drawing dropped at the end is made afresh by the next one
    assert torchrecorder.make_dot(rec).source == torchrecorder.make_dot(rec).source
