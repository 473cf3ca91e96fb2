"""A backward pass that ``forward`` runs itself (MAML's inner step with ``torch.autograd.grad``)
costs what ``FlopCounterMode`` counts for it, in the call that ran it."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

import torchrecorder


class InnerStep(nn.Module):
    """One gradient step on ``fc``'s weight inside the forward pass, then the adapted layer."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: Tensor) -> Tensor:
        with torch.enable_grad():
            w = self.fc.weight
            loss = torch.tanh(x @ w.t() + self.fc.bias).pow(2).sum()
            g, = torch.autograd.grad(loss, w, create_graph=True)
        return torch.relu(x @ (w - 0.1 * g).t())


class Maml(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = InnerStep()
        self.out = nn.Linear(8, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.out(self.inner(x))


def _reference(net: nn.Module, x: Tensor) -> dict[str, int]:
    with FlopCounterMode(display=False) as counter:
        net(x)
    return {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}


def test_an_inner_gradient_step_counts_as_flop_counter_mode_counts_it() -> None:
    torch.manual_seed(0)
    net, x = Maml(), torch.randn(5, 8)
    want = _reference(net, x)
    rec = torchrecorder.record(net, "maml", input_data=x)
    c = torchrecorder.cost(rec)
    assert c.total.flops == want["Global"] == 2 * 5 * 8 * 8 * 3 + 2 * 5 * 8 * 2
    assert c["inner"].flops == want["Maml.inner"]
    assert c.ops["inner/grad"] == 2 * 5 * 8 * 8  # the weight's gradient: one mm (x needs none)
    assert "grad" not in c.uncounted
    again = torchrecorder.cost(torchrecorder.loads_json(rec.to_json()))
    assert again.total.flops == c.total.flops and again.ops == c.ops
    # on meta, where nothing is computed, the same count
    meta = torchrecorder.record(Maml().to("meta"), "maml", input_data=x.to("meta"))
    assert torchrecorder.cost(meta).total.flops == c.total.flops


def test_recording_with_the_backward_graph_keeps_the_count() -> None:
    torch.manual_seed(0)
    net, x = Maml(), torch.randn(5, 8)
    rec = torchrecorder.record(net, "maml", input_data=x, backward=True)
    c = torchrecorder.cost(rec)
    assert c.total.flops == _reference(net, x)["Global"]
    assert c.total.backward_flops is not None and c.total.backward_flops > 0
    out = net(x)  # the model runs as before: nothing of the counter stays behind
    out.sum().backward()
    assert net.inner.fc.weight.grad is not None


class PerSample(nn.Module):
    """Per-sample gradients (``vmap`` of ``grad``) and a Jacobian (``jacrev``) in ``forward``."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 3))

    def forward(self, x: Tensor) -> Tensor:
        def loss(w: Tensor, xi: Tensor) -> Tensor:
            return (xi @ w).pow(2).sum()

        g = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0))(self.w, x)
        h = torch.func.jacrev(lambda v: torch.tanh(v @ self.w))(x[0])
        return g.sum(0) + h.sum()


def test_torch_func_gradients_count_as_flop_counter_mode_counts_them() -> None:
    """The matrix product inside ``vmap(grad(...))`` counts batched (under grad's wrapper the
    vmap was missed: one sample's FLOPs), and each transform's backward pass is counted."""
    torch.manual_seed(0)
    net, x = PerSample(), torch.randn(5, 8)
    c = torchrecorder.cost(torchrecorder.record(net, "ps", input_data=x))
    assert c.total.flops == _reference(net, x)["Global"] == 672
    assert c.ops["ps/matmul"] == 2 * 5 * 8 * 3  # five samples' (8,) @ (8, 3)
    assert "grad" not in c.uncounted
