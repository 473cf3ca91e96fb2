"""The storages of a model's tensors as recording leaves them: the model's buffers and
gradients are compared with their copies after the pass without changing what their storages
allow (``resize_``, as a cache that grows does)."""

from __future__ import annotations

import torch
from torch import nn

import torchrecorder


class _Cache(nn.Module):
    """A buffer read by ``forward`` and one written in place by it (a running count)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.zeros(1, 6))
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count += 1
        return x + self.table


def test_a_recorded_models_buffers_and_grads_stay_resizable() -> None:
    """Comparing a buffer with its copy through ``Tensor.numpy()`` marked its storage as not
    resizable for good: a ``resize_`` of the buffer after recording failed."""
    net = nn.Sequential(_Cache(), nn.BatchNorm1d(6), nn.Linear(6, 2))
    net(torch.randn(3, 6)).sum().backward()  # every parameter has a .grad
    tensors = [*net.buffers(), *(p.grad for p in net.parameters() if p.grad is not None)]
    assert all(t.untyped_storage().resizable() for t in tensors)
    values = [t.clone() for t in net.buffers()]
    torchrecorder.record(net, "net", (3, 6))
    assert [t.untyped_storage().resizable() for t in tensors] == [True] * len(tensors)
    assert all(torch.equal(a, b) for a, b in zip(net.buffers(), values, strict=True))
    net[0].table.resize_(1, 12)  # a cache that grows
    assert net[0].table.shape == (1, 12)
