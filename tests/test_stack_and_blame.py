"""Issue 24, items 8 and 14: recording and drawing need no more stack than a plain call, and an
error raised by a user's hook (or ``StopForward``) is blamed on the module whose call raised."""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn
from torch.overrides import _get_current_function_mode_stack

import torchrecorder
from torchrecorder import OpNode
from torchrecorder.recording._failure import NOTE_PREFIX


class Wrap(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def nested(levels: int) -> nn.Module:
    net: nn.Module = nn.ReLU()
    for _ in range(levels):
        net = Wrap(net)
    return net


def deepest(fn, lo: int = 20, hi: int = 600) -> int:
    """The most levels of nesting for which ``fn(levels)`` raises no RecursionError."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        try:
            fn(mid)
            lo = mid
        except RecursionError:
            hi = mid - 1
    return lo


def test_record_goes_as_deep_as_a_plain_call() -> None:
    x = torch.randn(2)
    limit = sys.getrecursionlimit()
    plain = deepest(lambda n: nested(n)(x))
    recorded = deepest(lambda n: torchrecorder.record(nested(n), "n", input_data=x))
    assert recorded >= plain - 3, (plain, recorded)  # before: about 50 levels fewer
    assert sys.getrecursionlimit() == limit
    assert _get_current_function_mode_stack() == []
    rec = torchrecorder.record(nested(plain), "n", input_data=x)
    assert max(n.depth for n in rec.nodes.values()) == plain + 1  # the ReLU's relu op


def test_too_deep_a_model_raises_the_users_recursion_error() -> None:
    """Past the plain call's limit the RecursionError itself comes back (not an error of the
    mode stack), with the limit and torch's mode stack as they were."""
    limit = sys.getrecursionlimit()
    x = torch.randn(2)
    for levels in (limit // 3 + 20, limit // 3 + 40, limit):
        with pytest.raises(RecursionError):
            torchrecorder.record(nested(levels), "n", input_data=x)
        assert sys.getrecursionlimit() == limit
        assert _get_current_function_mode_stack() == []


def test_a_limit_set_by_forward_is_kept() -> None:
    """The recorder raises the limit for deep nesting; a limit the model sets meanwhile stays."""
    limit = sys.getrecursionlimit()

    class Sets(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            sys.setrecursionlimit(limit + 123)
            return x + 1

    net = nested(40)
    innermost = net
    while isinstance(innermost.inner, Wrap):
        innermost = innermost.inner
    innermost.inner = Sets()
    try:
        torchrecorder.record(net, "s", input_data=torch.randn(2))
        assert sys.getrecursionlimit() == limit + 123  # the model's value, not the recorder's
    finally:
        sys.setrecursionlimit(limit)


def test_a_deep_graph_from_json_draws_at_any_depth(tmp_path) -> None:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(4000)
    try:
        rec = torchrecorder.record(nested(500), "n", input_data=torch.randn(2))
    finally:
        sys.setrecursionlimit(limit)
    path = tmp_path / "deep.json"
    path.write_text(rec.to_json(), encoding="utf-8")
    loaded = torchrecorder.load_json(str(path))
    src = torchrecorder.make_dot(loaded, render_depth=10**6).source
    assert src.count("subgraph ") == 500  # every wrapper open; the ReLU alone stays a box
    assert sys.getrecursionlimit() == limit
    assert "n" in str(loaded)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
        self.head = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _failure(net: nn.Module, exc_type: type[BaseException] = ValueError) -> BaseException:
    with pytest.raises(exc_type) as info:
        torchrecorder.record(net, "n", input_data=torch.randn(1, 3))
    return info.value


def _blamed(exc: BaseException) -> tuple[str, str]:
    notes = [n for n in exc.__notes__ if n.startswith(NOTE_PREFIX)]
    assert len(notes) == 1
    return exc.recording.failed_key, notes[0].split("'")[1]


@pytest.mark.parametrize("where", ["body.0", "body.1", "head", "body"])
def test_a_users_forward_hook_error_names_its_module(where: str) -> None:
    net = Net()

    def bad(module: nn.Module, args: object, out: object) -> None:
        raise ValueError("the user's hook")

    handle = net.get_submodule(where).register_forward_hook(bad)
    try:
        exc = _failure(net)
    finally:
        handle.remove()
    assert _blamed(exc) == (where, where)  # before: ('n', 'n')
    assert exc.recording.nodes[where].error == "ValueError: the user's hook"
    assert str(exc) == "the user's hook"


def test_an_error_in_forward_is_still_blamed_on_the_innermost_call() -> None:
    net = Net()

    def boom(x: torch.Tensor) -> torch.Tensor:
        raise ValueError("in forward")

    net.body[1].forward = boom  # type: ignore[method-assign]
    assert _blamed(_failure(net)) == ("body.1", "body.1")


def test_a_hook_error_after_a_second_call_names_that_call() -> None:
    lin = nn.Linear(3, 3)

    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = lin

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(self.lin(x))

    calls = []

    def bad(module: nn.Module, args: object, out: object) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("second")

    handle = lin.register_forward_hook(bad)
    try:
        exc = _failure(Twice())
    finally:
        handle.remove()
    assert _blamed(exc) == ("lin#2", "lin")


def test_a_pre_hook_error_names_the_call_whose_pre_hook_raised() -> None:
    """A pre-hook registered before ``record`` runs after the recorder's (the recorder's goes
    first): the call has opened, and it is the one blamed, its forward not run."""
    net = Net()
    handle = net.head.register_forward_pre_hook(lambda m, a: 1 / 0)
    try:
        exc = _failure(net, ZeroDivisionError)
    finally:
        handle.remove()
    assert exc.recording.failed_key == "head"
    inside = [exc.recording.nodes[k] for k in exc.recording.nodes["head"].subnet_keys]
    assert not [n for n in inside if isinstance(n, OpNode)]  # nothing of its forward ran
    assert "in a forward pre-hook before its forward ran" in exc.__notes__[-1]


def test_stop_forward_names_the_module_it_stopped_after() -> None:
    net = Net()
    with torchrecorder.capture(net, stop="body.0"):
        exc = _failure(net, torchrecorder.StopForward)
    assert _blamed(exc) == ("body.0", "body.0")  # before: ('n', 'n')
    assert not net.body[0]._forward_hooks and not net._forward_pre_hooks


def test_overlapping_deep_recordings_in_two_threads_put_the_limit_back() -> None:
    import threading

    limit = sys.getrecursionlimit()
    inside = threading.Barrier(2, timeout=60)
    errors: list[BaseException] = []

    class Meet(nn.Module):  # both recordings are deep inside their models at the same time
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            inside.wait()
            return x * 2

    def run() -> None:
        net = nested(60)
        innermost = net
        while isinstance(innermost.inner, Wrap):
            innermost = innermost.inner
        innermost.inner = Meet()
        try:
            rec = torchrecorder.record(net, "t", input_data=torch.randn(2))
            assert any(n.kind == "op" and n.name == "mul" for n in rec.nodes.values())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sys.getrecursionlimit() == limit
