"""Habits of baukit, nnsight and TransformerLens users that broke a capture: statistics asked of
a model on ``meta``."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder

from .hook_checks import hooks_left


def test_stats_on_meta_say_why_nothing_was_summarised() -> None:
    with torch.device("meta"):
        net = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
    with torchrecorder.capture(net, ["0", "1"], stats=True, record=False) as cap:
        net(torch.randn(3, 4, device="meta"))
    assert cap.unsummarised == {"0": "a meta tensor, which has no values",
                                "1": "a meta tensor, which has no values"}
    with pytest.warns(RuntimeWarning, match=r"not summarised.*'0' \(a meta tensor"):
        assert cap.stats("mean") == {}
    assert hooks_left(net) == []


def test_an_edit_that_changes_a_shape_is_named_when_the_model_then_fails() -> None:
    """nnsight and baukit users replace outputs by hand; one of the wrong width fails in a later
    layer, whose message alone does not say that an edit made the value."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    want = net(x)
    with pytest.raises(RuntimeError) as info:
        with torchrecorder.capture(net, "1", edit=lambda name, out: out[:, :5]):
            net(x)
    assert "torchrecorder: edit changed the output of '1' from (3, 8) float32 to (3, 5) float32" \
        in getattr(info.value, "__notes__", [])
    assert hooks_left(net) == [] and torch.equal(net(x), want)
    with pytest.raises(RuntimeError) as info:  # cap.run outside the block, a tuple of outputs
        torchrecorder.capture(net, "0", edit=lambda name, out: torch.zeros(3, 2)).run(x)
    assert "torchrecorder: edit changed the output of '0' from (3, 8) float32 to (3, 2) float32" \
        in getattr(info.value, "__notes__", [])
    with pytest.raises(TypeError) as info:  # a number where the model wants a tensor
        torchrecorder.capture(net, "1", edit=lambda name, out: 0.5).run(x)
    assert "torchrecorder: edit changed the output of '1' from (3, 8) float32 to a float (no tensor)" \
        in getattr(info.value, "__notes__", [])
    # an edit that keeps the shape, and a later pass with no edit at all, add no note
    with pytest.raises(RuntimeError) as info:
        with torchrecorder.capture(net, "1", edit=lambda name, out: out * 2) as cap:
            cap.run(x)
            net(torch.randn(3, 5))
    assert not any("torchrecorder" in n for n in getattr(info.value, "__notes__", []))


def test_a_stop_operation_never_reached_warns_with_the_nearest_keys() -> None:
    """``stop=`` on an operation's key with a typo let every pass run to its end silently; a
    layer's name never reached warns, and so does an operation's now."""

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(self.lin(x), -1)

    net = Net()
    with pytest.warns(RuntimeWarning, match=r"stop='net/sofmax' was not reached.*nearest: 'net/softmax'"):
        with torchrecorder.capture(net, ops="*/softmax", stop="net/sofmax") as cap:
            assert cap.run(torch.randn(2, 4)) is not None
    with torchrecorder.capture(net, ops="*/softmax", stop="net/softmax") as cap:
        assert cap.run(torch.randn(2, 4)) is None  # reached: the pass ends there, no warning
    assert hooks_left(net) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without a usable CUDA device")
def test_to_a_device_torch_cannot_use_is_refused_before_the_model_runs() -> None:
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    ran: list[int] = []
    net.register_forward_hook(lambda *args: ran.append(1))
    with pytest.raises(ValueError, match=r"to='cuda' is not a device this torch can use"):
        with torchrecorder.capture(net, "0", to="cuda"):
            net(torch.randn(2, 4))
    assert ran == [] and len(net[0]._forward_hooks) == 0


def test_a_module_or_bytes_among_the_names_is_named_briefly_with_what_to_pass() -> None:
    """nnsight users hand over the module itself (``[model.transformer.h[1], "..."]``): the message
    names its class, not its whole ``repr``; ``b"0"`` is not read as the numbers of its bytes."""
    net = nn.Sequential(nn.Linear(4, 8), nn.Sequential(nn.ReLU(), nn.Linear(8, 8), nn.ReLU()))
    with pytest.raises(TypeError) as info:
        torchrecorder.capture(net, [net[1], "0"])
    said = str(info.value)
    assert said == ("names must be strings (dotted paths or glob patterns), got a module (Sequential): "
                    "name it by its dotted path, as model.named_modules() gives it")
    said_bytes = r"got (bytearray\()?b'0'\)? \(bytes\): pass it as a str \(names='0'\)"
    for names in (b"0", bytearray(b"0"), ["1", b"0"]):
        with pytest.raises(TypeError, match=said_bytes):
            torchrecorder.capture(net, names)  # type: ignore[arg-type]
    assert hooks_left(net) == []


def test_a_module_registered_under_a_second_name_is_refused_naming_the_first() -> None:
    """nnsight reaches a module by any attribute that holds it (``model.dec`` where ``dec`` is
    ``enc``); ``named_modules()`` lists it once, under its first name, so the second name read as a
    layer that does not exist ("nearest: 'enc'")."""
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc = nn.Linear(4, 4)
            self.dec = self.enc
            self.out = nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(self.dec(torch.relu(self.enc(x))))

    net = Tied()
    said = ("'dec' is the module 'enc' registered under a second name (the same object, one hook for "
            "both): choose it as 'enc'; its calls under either name are kept as 'enc', 'enc#2', ...")
    with pytest.raises(torchrecorder.hooks.UnknownLayerError) as info:
        torchrecorder.capture(net, ["out", "dec"])
    assert str(info.value) == said
    with pytest.raises(torchrecorder.hooks.UnknownLayerError, match="registered under a second name"):
        torchrecorder.hooks.ForwardOutput().children(net, names=["dec"])
    with torchrecorder.capture(net, "enc") as cap:
        net(torch.randn(2, 4))
    assert list(cap.keys()) == ["enc", "enc#2"]
    with pytest.raises(torchrecorder.hooks.UnknownLayerError, match="no layer named 'dex'; available"):
        torchrecorder.capture(net, "dex")
    assert hooks_left(net) == []


def test_a_name_with_a_call_number_chooses_only_that_call() -> None:
    """nnsight users edit one call of a shared layer (``tracer.iter[1]``), torchlens users read
    ``"label:2"``; ``capture(net, "blk#2")`` was refused as a layer that does not exist."""
    torch.manual_seed(0)
    blk = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    net = nn.Sequential(blk, blk, blk)
    x = torch.randn(2, 4)
    calls: list[int] = []

    def second_doubled(module: nn.Module, args: Any, out: torch.Tensor) -> Any:
        calls.append(1)
        return out * 2 if len(calls) == 2 else None

    handle = blk.register_forward_hook(second_doubled)
    with torch.no_grad():
        want = net(x)
    handle.remove()
    with torch.no_grad(), torchrecorder.capture(net, "0#2", edit=lambda n, o: o * 2) as cap:
        got = net(x)
    assert torch.equal(got, want) and list(cap.keys()) == ["0#2"]
    with torch.no_grad(), torchrecorder.capture(net, ["0#2", "0.1#3"]) as cap:
        net(x)
    assert list(cap.keys()) == ["0#2", "0.1#3"]
    with torch.no_grad(), torchrecorder.capture(net, ["0#2", "0"]) as cap:  # the whole layer too: every call
        net(x)
    assert list(cap.keys()) == ["0", "0#2", "0#3"]
    with torch.no_grad(), torchrecorder.capture(net, ["*#1", "0.*#3"]) as cap:  # patterns, #1 the first call
        net(x)
    assert list(cap.keys()) == ["0", "0.0#3", "0.1#3"]
    with pytest.raises(ValueError, match=r"'0#0': calls are numbered from 1"):
        torchrecorder.capture(net, "0#0")
    with pytest.raises(torchrecorder.hooks.UnknownLayerError, match="no layer named '9'"):
        torchrecorder.capture(net, "9#2")
    assert hooks_left(net) == []
