"""What the drawing of a failed recording shows of the call that raised: the operation that
raised, with the inputs it was given, and every input of the call joined to it."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor, nn

import torchrecorder
from torchrecorder import OpNode, Recorder
from torchrecorder.renderer import GraphvizRenderer, GraphvizStyler
from torchrecorder.renderer._html_info import boundary_tensors, panel_info


class _Enc(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 16)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return torch.cat([self.a(x), y], 0)  # 2×16 and 2×5: cat raises


class _CatFails(nn.Module):
    """A call that runs an operation of its own, then raises in ``torch.cat``."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.Linear(8, 8)
        self.p2 = nn.Linear(8, 5)
        self.enc = _Enc()

    def forward(self, x: Tensor) -> Tensor:
        return self.enc(self.pre(x), self.p2(x))


class _Check(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 6)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        h = self.a(x)
        if h.shape[-1] != y.shape[-1]:  # the model's own Python code raises, no operation
            raise ValueError(f"widths differ: {h.shape[-1]} and {y.shape[-1]}")
        return h + y


class _ChecksFail(nn.Module):
    """A call that runs a module of its own, then raises in Python code before it reads ``y``."""

    def __init__(self) -> None:
        super().__init__()
        self.check = _Check()

    def forward(self, x: Tensor) -> Tensor:
        return self.check(x, torch.relu(x[:, :3]))


def _failing(net: nn.Module, *args: Any) -> Recorder:
    with pytest.raises(Exception) as info:
        torchrecorder.record(net, "net", input_data=args)
    rec = info.value.recording  # type: ignore[attr-defined]
    assert isinstance(rec, Recorder)
    rec.lint()
    return rec


def _edges(rec: Recorder, depth: Any, tensor_nodes: bool = False) -> set[tuple[Any, Any]]:
    return {(a.key, b.key) for a, b in GraphvizRenderer(rec, depth, tensor_nodes=tensor_nodes).drawn_edges()}


def test_the_operation_that_raised_is_drawn_with_its_inputs() -> None:
    rec = _failing(_CatFails(), torch.randn(2, 8))
    assert rec.failed_key == "enc"
    cat = rec.nodes["enc/cat"]
    assert isinstance(cat, OpNode) and cat.parent_key == "enc" and cat.output_shapes == []
    assert cat.error is not None and cat.error.startswith("RuntimeError")
    # what p2 computed before the failure reaches the cat that raised, beside enc.a's output
    assert {a for a, b in rec.links if b == "enc/cat"} == {"p2:out", "enc.a:out"}
    # the call at depth 1: both layers before it feed it
    assert {a for a, b in _edges(rec, 1) if b == "enc"} == {"pre", "p2"}
    # the call expanded: p2 ends at the failed cat, not at enc.a
    edges = _edges(rec, 2)
    assert {a for a, b in edges if b == "enc/cat"} == {"p2", "enc.a"}
    assert ("p2", "enc.a") not in edges
    styler = GraphvizStyler()
    failed_look = styler.style_node(cat)
    assert failed_look["color"] == styler.styles["failed"]["color"]
    source = torchrecorder.make_dot(rec, 2).source
    assert "raised RuntimeError" in source.split('"enc/cat" [', 1)[1].split("\n", 1)[0]
    mermaid = torchrecorder.make_mermaid(rec)
    assert "class n_enc_cat failed" in mermaid and "n_p2_out --> n_enc_cat" in mermaid
    info = panel_info(rec, cat, boundary_tensors(rec))  # the page's panel says it raised
    assert info["kind"] == "operation" and info["error"] == cat.error
    loaded = torchrecorder.load_json(rec.to_json())  # the error and the links are kept
    kept = loaded.nodes["enc/cat"]
    assert isinstance(kept, OpNode) and kept.error == cat.error
    assert {a for a, b in loaded.links if b == "enc/cat"} == {"p2:out", "enc.a:out"}


@pytest.mark.parametrize("tensor_nodes", [False, True])
def test_an_input_unread_when_python_code_raised_is_joined_to_the_call(tensor_nodes: bool) -> None:
    rec = _failing(_ChecksFail(), torch.randn(2, 4))
    assert rec.failed_key == "check"
    assert not any(isinstance(n, OpNode) and n.error for n in rec.nodes.values())  # no op raised
    for depth in (1, 2):
        into = {a for a, b in _edges(rec, depth, tensor_nodes) if b == "check"}
        if tensor_nodes:
            assert any(a.startswith("check:in") for a in into), into
        else:  # the relu passed as y ends at the call that raised
            assert "net/relu" in into, into


def test_an_input_read_inside_the_call_is_not_joined_to_it() -> None:
    rec = _failing(_CatFails(), torch.randn(2, 8))
    assert ("pre:out", "enc") not in rec.links and ("p2:out", "enc") not in rec.links


class _EinsumFails(nn.Module):
    """``torch.einsum`` is Python code in torch: it raises below the op mode's call of it."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        return torch.einsum("ij,jk->ik", self.a(x), x)  # 2×4 by 2×4: j is 4 and 2


class _HookFails(nn.Module):
    """A forward hook of ``a`` raises in ``torch.cat`` after ``a``'s forward returned."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.a.register_forward_hook(lambda m, i, o: torch.cat([o, o.sum(0)], 0))

    def forward(self, x: Tensor) -> Tensor:
        return self.a(x)


def test_an_operation_in_python_code_of_torch_that_raised_is_drawn() -> None:
    rec = _failing(_EinsumFails(), torch.randn(2, 4))
    op = rec.nodes["net/einsum"]
    assert isinstance(op, OpNode) and op.error is not None and op.parent_key == "net"
    assert {a for a, b in rec.links if b == "net/einsum"} == {"a:out", "input:x"}


def test_an_operation_of_a_hook_that_raised_is_not_drawn_inside_the_call() -> None:
    rec = _failing(_HookFails(), torch.randn(2, 4))
    assert rec.failed_key == "a"
    assert not any(isinstance(n, OpNode) and n.error for n in rec.nodes.values())
