"""Models written as popular repositories write them, that once recorded wrongly (redteam24).

Each test builds a tiny hand-written model with the idiom and checks the recording
against what the model does.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

import torchrecorder
from torchrecorder import ParamNode

from .graph_checks import check_invariants, check_state_unchanged, snapshot


class _CopiesASubmodule(nn.Module):
    """``copy.deepcopy`` of a submodule inside ``forward`` (a lazily made EMA teacher, the
    ``torch.func`` ensemble recipe's base model), then the copy is called."""

    def __init__(self) -> None:
        super().__init__()
        self.student = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.copies: list[nn.Module] = []

    def forward(self, x: Tensor) -> Tensor:
        out = self.student(x)  # the recording holds what autograd made: that cannot be copied
        teacher = copy.deepcopy(self.student)
        self.copies += [teacher, copy.deepcopy(self.student)]  # the second one is not called
        return out - teacher(x).detach()


def _hooks(m: nn.Module) -> int:
    return sum(len(getattr(m, name)) for name in ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs",
                                                   "_forward_hooks", "_forward_hooks_with_kwargs"))


def test_a_submodule_deep_copied_in_forward_records_and_its_copy_keeps_no_hook() -> None:
    net = _CopiesASubmodule()
    before = snapshot(net)
    x = torch.randn(3, 4)
    want = net(x)
    net.copies.clear()
    rec = torchrecorder.record(net, "net", input_data=x)  # gradients on: the graph holds grad_fns
    check_invariants(rec)
    check_state_unchanged(before, net)
    teacher, spare = net.copies
    for module in teacher.modules():  # the copy is the user's: no recorder's hook on it
        assert _hooks(module) == 0
    assert torch.equal(spare(x), teacher(x))  # the copy not called in the pass: its hook is inert,
    for module in spare.modules():  # and takes itself off when called
        assert _hooks(module) == 0
    calls = [layer for layer in rec.layers() if layer.depth == 1]
    assert [c.fn for c in calls] == [net.student, teacher]  # the copy's call is recorded, as one of its own
    assert [c.path for c in calls] == ["student", "Sequential"]  # named by its type, not as the root
    assert {n.path for n in rec.nodes.values() if isinstance(n, ParamNode)} == {
        f"{m}.{i}.{p}" for m in ("student", "Sequential") for i in (0, 2) for p in ("weight", "bias")}
    with torchrecorder.recording(net, "net"):
        got = net(x)
    assert torch.equal(got, want)
