"""The model zoo: small models that each exercise one recording case (SPEC section 3).

Every entry is a :class:`Case`: a factory for the model, a factory for its
inputs, and what the checks may expect of it.  ``handwritten.CASES`` holds the
hand-written models, ``passthrough.CASES`` those of pass-through outputs and
of edges through code torch's function mode does not see, ``hf.CASES`` the
``transformers`` architectures (empty when ``transformers`` is not installed);
``stress.CASES`` the models that stress the size of a drawing and Python loops
(:func:`stress_cases`: drawn by ``tests/test_zoo_budget.py``, not compared with an oracle).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from torch import nn

__all__ = ["Case", "all_cases", "stress_cases"]

Inputs = tuple[tuple[Any, ...], dict[str, Any]]


@dataclass(frozen=True)
class Case:
    """One zoo model.

    Attributes:
        name: the pytest id.
        build: makes the model (in ``eval()`` mode unless ``train``).
        inputs: makes ``(args, kwargs)`` for one forward call.
        grad_mode: ``"grad"``, ``"no_grad"`` or ``"inference"``: how the
            forward pass is run, as a user would.
        oracle: ``None`` to compare with the torch.fx oracle, else the written
            reason why fx is not used (torch.export is the oracle then).
        fx_concrete: ``concrete_args`` for ``torch.fx.symbolic_trace``.
        meta: built on the meta device (outputs are compared by shape only).
        train: keep the model in training mode (for cases about train-mode state).
        approx: ``None`` when the output while recording must equal the plain
            output exactly, else the reason why it may differ by rounding.
        known_gap: ``None`` when the recording must agree with the oracle, else
            the written reason why it cannot (the test then checks that it
            really disagrees).
        no_export: when fx is not used either, the reason why torch.export is
            not the oracle: the model is then compared with neither.
    """

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], Inputs]
    grad_mode: str = "grad"
    oracle: Optional[str] = None
    fx_concrete: dict[str, Any] = field(default_factory=dict)
    meta: bool = False
    train: bool = False
    approx: Optional[str] = None
    known_gap: Optional[str] = None
    no_export: Optional[str] = None

    def __str__(self) -> str:
        return self.name


def all_cases() -> list[Case]:
    """Every zoo case: the hand-written models, the pass-through and missing-edge models,
    then the ``transformers`` ones."""
    from . import handwritten, hf, passthrough

    return [*handwritten.CASES, *passthrough.CASES, *hf.CASES]


def stress_cases() -> list[Case]:
    """The models that stress drawing size and loops (``stress.CASES``)."""
    from . import stress

    return list(stress.CASES)
