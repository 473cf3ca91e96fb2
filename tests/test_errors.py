"""A forward pass that raises: the exception, the note, the hooks, the partial graph."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor, nn

import torchrecorder
from torchrecorder import LayerNode, Recorder
from torchrecorder.renderer import GraphvizRenderer, GraphvizStyler

from .backends import needs_backend
from .graph_checks import check_state_unchanged, global_hook_counts, snapshot


class Block(nn.Module):
    """Linear + norm; the ``proj`` of the second block has the wrong input size."""

    def __init__(self, d_in: int, d_proj: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_in)
        self.proj = nn.Linear(d_proj, d_in)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.proj(self.norm(x))


class Deep(nn.Module):
    """Three blocks in a ModuleList inside a Sequential; blocks.1.proj cannot take its input."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(3, 8)
        self.body = nn.Sequential(Stage())
        self.head = nn.Linear(8, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.body(self.stem(x)))


class Stage(nn.Module):
    """Holds the blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(8, 8), Block(8, 5), Block(8, 8)])

    def forward(self, x: Tensor) -> Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class ShapeError(ValueError):
    """A user-defined exception type with an extra attribute."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class RaisesCustom(nn.Module):
    """Raises a user-defined exception from a child's forward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.check = Checker()

    def forward(self, x: Tensor) -> Tensor:
        return self.check(self.fc(x), None, "strict")


class Checker(nn.Module):
    """Refuses any input (called with a None and a string next to the tensor)."""

    def forward(self, x: Tensor, extra: Any, mode: str) -> Tensor:
        raise ShapeError(f"{mode}: refusing {tuple(x.shape)}", code=7)


class CatAtRoot(nn.Module):
    """The failing op (torch.cat of mismatched shapes) runs in the root module itself."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.b = nn.Linear(4, 5)

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.a(x), self.b(x)], dim=0)


class CaughtInside(nn.Module):
    """A child raises, the parent catches it and falls back to another child."""

    def __init__(self) -> None:
        super().__init__()
        self.risky = nn.Linear(5, 4)
        self.fallback = nn.Linear(4, 4)
        self.after = nn.Linear(4, 2)

    def forward(self, x: Tensor) -> Tensor:
        try:
            h = self.risky(x)
        except RuntimeError:
            h = self.fallback(x)
        return self.after(h)


class SecondCallFails(nn.Module):
    """The same module is called twice; the second call gets a bad shape."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.fc(x))


def _no_hooks(net: nn.Module) -> bool:
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in net.modules()) and not any(
        global_hook_counts())


def _record_failing(net: nn.Module, *args: Any, grad: bool = True) -> tuple[BaseException, Recorder]:
    before = snapshot(net)
    with torch.set_grad_enabled(grad), pytest.raises(Exception) as info:
        torchrecorder.record(net, "net", input_data=args)
    assert _no_hooks(net)
    check_state_unchanged(before, net)
    rec = info.value.recording  # type: ignore[attr-defined]
    assert isinstance(rec, Recorder)
    return info.value, rec


def _notes(exc: BaseException) -> str:
    return "\n".join(getattr(exc, "__notes__", []))


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_deep_shape_mismatch(grad: bool) -> None:
    net = Deep().eval()
    exc, rec = _record_failing(net, torch.randn(2, 3), grad=grad)
    assert type(exc) is RuntimeError
    assert "mat1 and mat2 shapes cannot be multiplied" in str(exc)
    notes = _notes(exc)
    assert "'body.0.blocks.1.proj' (Linear)" in notes and "[2×8]" in notes
    assert rec.failed_key == "body.0.blocks.1.proj"
    failed = rec.nodes[rec.failed_key]
    assert isinstance(failed, LayerNode) and failed.error is not None
    assert failed.error.startswith("RuntimeError: mat1 and mat2")
    assert rec.error == failed.error
    rec.lint()
    paths = [n.path for n in rec.layers()]
    # everything up to the failure is there, nothing after it
    assert paths == ["", "stem", "body", "body.0", "body.0.blocks.0", "body.0.blocks.0.norm",
                     "body.0.blocks.0.proj", "body.0.blocks.1", "body.0.blocks.1.norm",
                     "body.0.blocks.1.proj"]
    # the enclosing calls raised too, so a shallow drawing still shows where it failed
    for path in ("", "body", "body.0", "body.0.blocks.1"):
        assert next(n for n in rec.layers() if n.path == path).error == failed.error
    assert next(n for n in rec.layers() if n.path == "body.0.blocks.0").error is None


def test_partial_recording_draws_with_the_failure_marked() -> None:
    _, rec = _record_failing(Deep().eval(), torch.randn(2, 3))
    styler = GraphvizStyler()
    failed = rec.nodes[rec.failed_key]
    ok = next(n for n in rec.layers() if n.path == "body.0.blocks.0.proj")
    assert styler.style_node(failed) != styler.style_node(ok)
    for depth in (1, 2, 256):
        source = torchrecorder.make_dot(rec, render_depth=depth).source
        assert "raised RuntimeError" in source, f"failure not shown at depth {depth}"
        GraphvizRenderer(rec, depth).drawn_edges()


class _TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.b = nn.Bilinear(8, 3, 2)  # takes 8 and 3 features; it gets 8 and 5

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return self.b(torch.relu(self.a(x)), y * 2)


@pytest.mark.parametrize("tensor_nodes", [False, True])
def test_the_call_that_raised_is_drawn_with_what_it_was_given(tensor_nodes: bool) -> None:
    """A call that raised in its first operation (a layer given the wrong width) is joined
    to its inputs (through that operation, drawn failed inside it): the relu and the mul it
    was given no longer end nowhere."""
    exc, rec = _record_failing(_TwoInputs(), torch.randn(2, 4), torch.randn(2, 5))
    assert rec.failed_key == "b" and "input shapes [2×8, 2×5]" in _notes(exc)
    rec.lint()
    for depth in (1, None):
        renderer = GraphvizRenderer(rec, depth, tensor_nodes=tensor_nodes)
        edges = {(a.key, b.key) for a, b in renderer.drawn_edges()}
        into_b = {a for a, b in edges if b == "b"}
        if tensor_nodes:  # each through the tensor node of the value passed
            assert into_b == {"b:in", "b:in_1"}, edges
            assert {a for a, b in edges if b in into_b} == {"net/relu", "net/mul"}
        else:
            assert into_b == {"net/relu", "net/mul"}, edges
    loaded = torchrecorder.load_json(rec.to_json())  # the links are kept
    loaded_edges = GraphvizRenderer(loaded, 1).drawn_edges()
    assert {a.key for a, b in loaded_edges if b.key == "b"} == {"net/relu", "net/mul"}


@needs_backend
@pytest.mark.dot
def test_partial_recording_renders_svg() -> None:
    from torchrecorder.backend import render_source

    _, rec = _record_failing(Deep().eval(), torch.randn(2, 3))
    svg = render_source(torchrecorder.make_dot(rec, render_depth=256).source, "svg")
    assert b"</svg>" in svg and b"raised RuntimeError" in svg


def test_user_exception_type_and_attributes_kept() -> None:
    net = RaisesCustom()
    exc, rec = _record_failing(net, torch.randn(2, 4))
    assert isinstance(exc, ShapeError) and type(exc) is ShapeError and exc.code == 7
    assert str(exc) == "strict: refusing (2, 4)"
    assert "'check' (Checker)" in _notes(exc) and "[2×4]" in _notes(exc)
    assert rec.failed_key == "check"


def test_failure_in_an_op_of_the_root_module() -> None:
    exc, rec = _record_failing(CatAtRoot(), torch.randn(2, 4))
    assert type(exc) is RuntimeError
    assert rec.failed_key == "net"
    assert "'net' (CatAtRoot)" in _notes(exc)
    assert {n.path for n in rec.layers()} == {"", "a", "b"}


def test_failure_in_the_second_call_of_a_module() -> None:
    exc, rec = _record_failing(SecondCallFails(), torch.randn(2, 4))
    assert rec.failed_key == "fc#2"
    assert "'fc' (Linear)" in _notes(exc) and "[2×6]" in _notes(exc)
    first = rec.nodes["fc"]
    assert isinstance(first, LayerNode) and first.error is None


def test_exception_caught_inside_the_model() -> None:
    """A handled exception does not end the recording, nor leave its call open."""
    net = CaughtInside()
    rec = torchrecorder.record(net, "net", (2, 4))
    rec.lint()
    assert rec.error is None and rec.failed_key is None
    layers = {n.path: n for n in rec.layers()}
    assert set(layers) == {"", "risky", "fallback", "after"}
    # the calls after the handled failure are children of the root, not of `risky`
    assert layers["fallback"].parent_key == "net" and layers["after"].parent_key == "net"
    assert layers["risky"].error is not None and layers["risky"].error.startswith("RuntimeError")
    assert _no_hooks(net)


def test_recording_context_restores_everything_on_error() -> None:
    net = Deep()
    before = snapshot(net)
    with pytest.raises(RuntimeError) as info, torchrecorder.recording(net) as rec:
        net(torch.randn(2, 3))
    assert info.value.recording is rec  # type: ignore[attr-defined]
    assert _no_hooks(net)
    check_state_unchanged(before, net)
    n_nodes = len(rec.nodes)
    torch.randn(3).add(1)  # the op mode is gone: nothing more is recorded
    net.stem(torch.randn(1, 3))
    assert len(rec.nodes) == n_nodes


def test_keyboard_interrupt_passes_through() -> None:
    class Interrupt(nn.Module):
        def forward(self, x: Tensor) -> Tensor:
            raise KeyboardInterrupt

    net = nn.Sequential(nn.Linear(2, 2), Interrupt())
    with pytest.raises(KeyboardInterrupt) as info:
        torchrecorder.record(net, "net", (1, 2))
    assert _no_hooks(net)
    assert info.value.recording.failed_key == "1"  # type: ignore[attr-defined]


class _Branching(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        return torch.cond(x.sum() > 0, lambda t: self.a(t).relu(), lambda t: self.b(t) * 2, (x,))


def test_torch_cond_fails_with_a_note_on_what_to_do_and_leaves_the_model_as_it_was() -> None:
    net = _Branching()
    x = torch.randn(2, 4)
    expected = net(x)  # a plain call runs (compiled)
    before, hooks = snapshot(net), global_hook_counts()
    with pytest.raises(Exception) as info:
        torchrecorder.record(net, "cond", input_data=x)
    assert type(info.value).__name__ == "UncapturedHigherOrderOpError"
    note = "\n".join(getattr(info.value, "__notes__", []))
    assert "raised in module 'cond'" in note and "Python `if`" in note
    check_state_unchanged(before, net)
    assert global_hook_counts() == hooks and _no_hooks(net)
    assert torch.equal(net(x), expected)
