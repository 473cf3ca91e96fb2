"""Measure the cells of docs/comparison.md that are marked "measured here".

Each check runs the installed peer on a small model and prints one line:
``peer | question | answer``.  A peer that is not installed prints ``not installed``.
Run with ``python examples/peer_facts.py`` (torchview, torchviz, torchlens and
torchinfo come with the ``bench`` and ``test`` extras).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import io
import shutil
import subprocess
import sys
from collections.abc import Callable

import torch
from torch import nn


class TokenNet(nn.Module):
    """Token ids in, no gradient anywhere before the embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.head = nn.Linear(8, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(ids))


def _ids() -> torch.Tensor:
    return torch.randint(0, 20, (2, 5))


def _peer(name: str) -> object:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def torchviz_no_grad() -> str:
    """How many nodes torchviz draws for a model run under ``torch.no_grad``, and with gradients."""
    torchviz = _peer("torchviz")
    if torchviz is None:
        return "not installed"
    counts = []
    for mode in (torch.no_grad, torch.enable_grad):
        with mode():
            y = TokenNet()(_ids())
        source = torchviz.make_dot(y).source  # type: ignore[attr-defined]
        counts.append(sum("[label=" in line for line in source.splitlines()))
    return f"{counts[0]} nodes under no_grad (no operation: y.grad_fn is None), {counts[1]} with gradients"


def torchview_meta() -> str:
    """Whether torchview draws a model built on the meta device."""
    torchview = _peer("torchview")
    if torchview is None:
        return "not installed"
    with torch.device("meta"):
        net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
    graph = torchview.draw_graph(net, input_size=(2, 64), device="meta")  # type: ignore[attr-defined]
    return f"drawn: {'Linear' in graph.visual_graph.source}"


def torchview_token_ids() -> str:
    """Whether torchview draws a model fed integer token ids (no gradients)."""
    torchview = _peer("torchview")
    if torchview is None:
        return "not installed"
    graph = torchview.draw_graph(TokenNet(), input_data=_ids())  # type: ignore[attr-defined]
    return f"drawn: {'Embedding' in graph.visual_graph.source}"


def torchlens_meta() -> str:
    """What torchlens does with a model and input on the meta device."""
    torchlens = _peer("torchlens")
    if torchlens is None:
        return "not installed"
    with torch.device("meta"):
        net = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            torchlens.trace(net, torch.empty(2, 8, device="meta"))  # type: ignore[attr-defined]
    except Exception as exc:  # the answer is the exception
        return f"refused: {type(exc).__name__}"
    return "traced"


def torchlens_cli() -> str:
    """What the ``torchlens`` command line offers."""
    if _peer("torchlens") is None:
        return "not installed"
    proc = subprocess.run([sys.executable, "-m", "torchlens", "--help"], capture_output=True, text=True,
                          timeout=300, check=False)
    first = next((line for line in proc.stdout.splitlines() if line.strip().startswith("{")), "")
    return f"script {'on PATH' if shutil.which('torchlens') else 'absent'}; verbs {first.strip()}"


def torchlens_exports() -> str:
    """The export targets torchlens registers."""
    if _peer("torchlens") is None:
        return "not installed"
    registry = importlib.import_module("torchlens.export._registry")
    return ", ".join(registry.export_targets())


def command_line(name: str) -> Callable[[], str]:
    """Whether the installed package ``name`` has a console script or a ``python -m`` entry."""

    def check() -> str:
        if _peer(name) is None:
            return "not installed"
        scripts = [e.name for e in importlib.metadata.entry_points(group="console_scripts")
                   if e.dist is not None and e.dist.name == name]
        main = importlib.util.find_spec(f"{name}.__main__") is not None
        return f"console scripts {scripts or 'none'}; python -m {name}: {'yes' if main else 'no'}"

    return check


CHECKS: list[tuple[str, str, Callable[[], str]]] = [
    ("torchview", "a command line", command_line("torchview")),
    ("torchviz", "a command line", command_line("torchviz")),
    ("torchinfo", "a command line", command_line("torchinfo")),
    ("torchviz", "a model run under torch.no_grad", torchviz_no_grad),
    ("torchview", "a model on the meta device", torchview_meta),
    ("torchview", "integer token ids", torchview_token_ids),
    ("torchlens", "a model on the meta device", torchlens_meta),
    ("torchlens", "the command line", torchlens_cli),
    ("torchlens", "export targets", torchlens_exports),
]


def main() -> None:
    """Print one line per check."""
    for peer, question, check in CHECKS:
        version = _version(peer)
        print(f"{peer} {version} | {question} | {check()}")


if __name__ == "__main__":
    main()
