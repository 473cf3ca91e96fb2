"""What a recording leaves of the Python side of the program for the next tool: the global
random generators of Python and numpy, which a model may draw from in ``forward``, are where
they were, as torch's are."""

from __future__ import annotations

import random

import numpy as np
from torch import Tensor, nn

import torchrecorder


class _Noisy(nn.Module):
    """Draws from Python's and numpy's global generators in ``forward`` (a random crop, jitter)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(x) + random.random() + float(np.random.rand())


def test_python_and_numpy_random_state_is_where_it_was() -> None:
    net = _Noisy()
    random.seed(3)
    np.random.seed(3)
    torchrecorder.record(net, input_shapes=(2, 4))
    got = (random.random(), float(np.random.rand()))
    random.seed(3)
    np.random.seed(3)
    assert got == (random.random(), float(np.random.rand()))


def test_random_state_comes_back_when_forward_raises() -> None:
    class Fails(_Noisy):
        def forward(self, x: Tensor) -> Tensor:
            super().forward(x)
            raise ValueError("late")

    random.seed(5)
    np.random.seed(5)
    try:
        torchrecorder.record(Fails(), input_shapes=(2, 4))
    except ValueError:
        pass
    got = (random.random(), float(np.random.rand()))
    random.seed(5)
    np.random.seed(5)
    assert got == (random.random(), float(np.random.rand()))
