"""Shared fixtures: the golden-file comparison and the ``--update-golden`` option; the zoo; two
notebook views."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.renderer.html import HtmlPage

from .zoo.session import Zoo

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite the golden files under tests/golden from the current output")


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """``golden(name, text)``: compare ``text`` with ``tests/golden/<name>``.

    With ``--update-golden`` the file is written instead (and the test still
    runs its structural asserts).  A missing golden file fails the test.
    """
    update = bool(request.config.getoption("--update-golden"))

    def check(name: str, text: str) -> None:
        path = os.path.join(GOLDEN_DIR, name)
        if update:
            os.makedirs(GOLDEN_DIR, exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
            return
        if not os.path.exists(path):
            pytest.fail(f"no golden file {name}: run pytest --update-golden once and review it")
        with open(path, encoding="utf-8", newline="\n") as fh:
            want = fh.read()
        if text != want:
            got_lines, want_lines = text.splitlines(), want.splitlines()
            for n, (a, b) in enumerate(zip(got_lines, want_lines, strict=False), 1):
                if a != b:
                    pytest.fail(f"{name} differs at line {n}:\n  golden: {b}\n  now:    {a}")
            pytest.fail(f"{name} differs in length: golden {len(want_lines)} lines, now {len(got_lines)}")

    return check


@pytest.fixture(scope="session")
def zoo() -> Zoo:
    """The zoo's models, each recorded once per session, and their oracle comparison.

    ``zoo.recorded(name)`` builds, snapshots and records the model on the first
    request; ``zoo.oracle(name)`` compares that recording with torch.fx or
    torch.export on the first request.  Any test may ask first.
    """
    return Zoo()


@pytest.fixture(scope="module")
def pages() -> tuple[HtmlPage, HtmlPage]:
    """Two notebook views (``rec.show()``) of two small models, made once per test module in
    the order a notebook would show them."""
    torch.manual_seed(0)
    mlp = torchrecorder.record(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), "mlp", (1, 4))
    cnn = torchrecorder.record(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten()), "cnn",
                               (1, 3, 8, 8))
    return mlp.show(), cnn.show()
