"""Models written as popular repositories write them, that once recorded wrongly (redteam24).

Each test builds a tiny hand-written model with the idiom and checks the recording
against what the model does.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state
from torch.utils.checkpoint import checkpoint_sequential
from torch.utils.flop_counter import FlopCounterMode

import torchrecorder
from torchrecorder import OpNode, ParamNode, TensorNode

from .graph_checks import check_invariants, check_state_unchanged, snapshot
from .oracle import export_relation, recorded_relation


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


class _VmapEnsemble(nn.Module):
    """The ``torch.func`` model-ensembling recipe inside ``forward``: the members' parameters
    stacked, a copy of one member moved to ``meta`` as the stateless base, and
    ``vmap(functional_call(base, ...))`` over the stacked parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.members = nn.ModuleList([nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
                                      for _ in range(3)])

    def forward(self, x: Tensor) -> Tensor:
        params, buffers = stack_module_state(list(self.members))
        base = copy.deepcopy(self.members[0]).to("meta")

        def member(p: dict[str, Tensor], b: dict[str, Tensor], x: Tensor) -> Tensor:
            return functional_call(base, (p, b), (x,))

        return torch.vmap(member, in_dims=(0, 0, None))(params, buffers, x)


def test_a_copied_base_model_called_with_stacked_parameters_under_vmap_reads_them() -> None:
    net = _VmapEnsemble()
    x = torch.randn(5, 4)
    with FlopCounterMode(display=False) as counter:
        want = net(x)
    rec = torchrecorder.record(net, "net", input_data=x)
    check_invariants(rec)  # the output is reached from the input, through the base's calls
    assert not [n for n in rec.nodes.values() if isinstance(n, ParamNode) and n.path.startswith("Sequential")]
    stacked = {k for k, n in rec.nodes.items() if isinstance(n, OpNode) and n.op == "requires_grad_"}
    feeds = {b for a, b in rec.links if a in stacked}  # the stacked parameters, what the base reads
    assert {"Sequential.0/linear", "Sequential.2/linear"} <= {str(k) for k in feeds}
    assert torchrecorder.cost(rec).total.flops == counter.get_total_flops()
    with torchrecorder.recording(net, "net"):
        assert torch.equal(net(x), want)


class _Checkpointed(nn.Module):
    """timm's ``forward_features`` with gradient checkpointing on: the stages run through
    ``checkpoint_sequential``, whose backward runs their forward again."""

    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.reentrant = reentrant
        self.stages = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU())
        self.head = nn.Linear(8, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(checkpoint_sequential(self.stages, 2, x, use_reentrant=self.reentrant))


@pytest.mark.parametrize("reentrant", [False, True])
def test_a_training_step_in_the_recording_block_adds_no_call_of_checkpoints_recomputation(
        reentrant: bool) -> None:
    torch.manual_seed(0)
    net = _Checkpointed(reentrant).train()
    x = torch.randn(3, 4, requires_grad=True)
    net(x).sum().backward()
    want = [p.grad.clone() for p in net.parameters() if p.grad is not None]
    net.zero_grad(set_to_none=True)
    with torchrecorder.recording(net, "net") as rec:
        net(x).sum().backward()  # the backward runs stages.0 and stages.1 again
    assert [layer.key for layer in rec.layers()] == [
        "net", "stages.0", "stages.1", "stages.2", "stages.3", "head"]
    assert not [layer for layer in rec.layers() if layer.error]
    assert len([n for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "output"]) == 1
    check_invariants(rec)
    got = [p.grad for p in net.parameters() if p.grad is not None]
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


class _ComplexRope(nn.Module):
    """Llama's reference code: rotary embeddings as complex numbers (``torch.polar`` table as a
    plain attribute, ``view_as_complex`` / ``view_as_real``) and a causal mask cast with
    ``type_as(h)`` (its dtype only: no dataflow from ``h``)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, 8)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(8, 8, bias=False) for _ in range(4))
        angles = torch.outer(torch.arange(16).float(), 1.0 / 10000 ** (torch.arange(0, 4, 2).float() / 4))
        self.freqs_cis = torch.polar(torch.ones_like(angles), angles)

    def forward(self, tokens: Tensor) -> Tensor:
        b, s = tokens.shape
        h = self.emb(tokens)
        mask = torch.full((s, s), float("-inf")).triu(1).type_as(h)
        q, k, v = (f(h).view(b, s, 2, 4) for f in (self.wq, self.wk, self.wv))
        rot = self.freqs_cis[:s].view(1, s, 1, 2)
        q = torch.view_as_real(torch.view_as_complex(q.reshape(b, s, 2, 2, 2)) * rot).flatten(3)
        k = torch.view_as_real(torch.view_as_complex(k.reshape(b, s, 2, 2, 2)) * rot).flatten(3)
        scores = (q.transpose(1, 2) @ k.transpose(1, 2).transpose(2, 3)) / 2.0 + mask
        out = (scores.softmax(-1) @ v.transpose(1, 2)).transpose(1, 2).reshape(b, s, 8)
        return h + self.wo(out)


def test_complex_rotary_embeddings_record_the_dataflow_export_sees() -> None:
    net = _ComplexRope().eval()
    tokens = torch.randint(0, 30, (2, 6))
    rec = torchrecorder.record(net, "net", input_data=tokens)
    check_invariants(rec)
    expected, visible = export_relation(net, (tokens,), {})
    assert ("emb#1", "wo#1") not in expected  # the mask's type_as(h) is no dataflow (the oracle)
    assert recorded_relation(rec, visible=visible) == expected
    assert {"view_as_complex", "view_as_real"} <= {n.op for n in rec.nodes.values() if isinstance(n, OpNode)}


def test_a_recording_made_from_a_hook_that_autograd_runs_records_its_pass() -> None:
    """What autograd calls after a call of the pass is skipped (above); a pass that starts
    inside a backward (a tensor hook that draws the model) is recorded."""
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    got: list[torchrecorder.Recorder] = []
    x = torch.randn(2, 4, requires_grad=True)
    x.register_hook(lambda grad: got.append(torchrecorder.record(net, "net", (2, 4))))
    (x * 2).sum().backward()
    assert [layer.key for layer in got[0].layers()] == ["net", "0", "1"]
