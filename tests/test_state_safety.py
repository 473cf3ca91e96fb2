"""What recording leaves behind under faults and unusual forwards (issue 10, "Hooks, state and
memory"): interrupted hook removal, the garbage collector, buffer copies, the random state seen
by other threads, in-place changes made by ``forward``, the user's own exception object, grad mode.
"""

from __future__ import annotations

import _thread
import dataclasses
import gc
import subprocess
import sys
import threading
import warnings
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

import torchrecorder
from torchrecorder.recording import state as state_module

from .graph_checks import global_hook_counts

ROOT = Path(__file__).resolve().parent.parent


def no_hooks(net: nn.Module) -> bool:
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in net.modules()) and not any(
        global_hook_counts())


# ------------------------------------------------------------------ interrupted hook removal
def _interrupt_on_remove_call(n: int) -> Any:
    """A profile function that simulates Ctrl-C (SIGINT) at the ``n``-th hook removal."""
    calls = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name == "remove" and "hooks" in frame.f_code.co_filename:
            calls[0] += 1
            if calls[0] == n:
                _thread.interrupt_main()

    return profile


@pytest.mark.parametrize("nth", [1, 2, 5])
def test_second_interrupt_during_hook_removal_still_removes_every_hook(nth: int) -> None:
    net = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 3), nn.Tanh()))
    x = torch.randn(1, 3)
    rec = None
    with pytest.raises(KeyboardInterrupt):
        try:
            with torchrecorder.recording(net, "net") as rec:
                net(x)
                sys.setprofile(_interrupt_on_remove_call(nth))
                raise KeyboardInterrupt  # the first Ctrl-C; the second comes while unhooking
        finally:
            sys.setprofile(None)
    assert rec is not None
    assert no_hooks(net)
    n_nodes, n_edges = len(rec.nodes), len(rec.links)
    for _ in range(200):
        net(x)
    assert (len(rec.nodes), len(rec.links)) == (n_nodes, n_edges)


def test_the_recordings_pre_hooks_keep_torchs_order_and_leave_the_users_hooks() -> None:
    """The recording's pre-hooks (put on without torch's handles, see recording/prehooks.py)
    run after a user's hook registered before, take keyword arguments, never share an id
    with a hook registered during the pass, and are all gone afterwards while the user's
    hooks stay, in their order."""
    order: list[str] = []

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)
            self.during: list[Any] = []

        def forward(self, x: Tensor) -> Tensor:
            if not self.during:
                self.during.append(self.fc.register_forward_pre_hook(
                    lambda m, a, k: order.append("during"), with_kwargs=True))
            return self.fc(input=x)

    net = Net()
    before = net.fc.register_forward_pre_hook(lambda m, a: order.append("before"))
    rec = torchrecorder.record(net, "net", (1, 3))
    during = net.during[0]
    assert order == ["before", "during"]
    assert rec.nodes["fc"].input_shapes == [(1, 3)]  # the keyword argument reached the recording
    assert list(net.fc._forward_pre_hooks) == [before.id, during.id]
    assert list(net.fc._forward_pre_hooks_with_kwargs) == [during.id]
    before.remove()
    during.remove()
    assert no_hooks(net)


def test_a_finished_recorders_hook_never_records() -> None:
    net = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    rec = torchrecorder.record(net, "net", (1, 3))
    n_nodes = len(rec.nodes)
    # a hook left behind (as an interrupted removal could leave it) does nothing and goes away
    handle = net[0].register_forward_pre_hook(rec.engine._pre_hook, with_kwargs=True)
    rec.engine._handles.append(handle)
    for _ in range(3):
        net(torch.randn(1, 3))
    assert len(rec.nodes) == n_nodes
    assert no_hooks(net)


# ------------------------------------------------------------------ the garbage collector
class _Cycles(nn.Module):
    """Leaves reference cycles behind; counts how many were collected before it returns."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.collected = [0]  # (a list: a rebound attribute is put back after a recording)
        self.enabled: list[bool] = []

    def forward(self, x: Tensor) -> Tensor:
        self.enabled.append(gc.isenabled())
        self.collected[0] = 0

        def gone() -> None:
            self.collected[0] += 1

        for _ in range(3000):
            node: dict[str, Any] = {}
            node["self"] = node  # a cycle: only the collector frees it
            holder = _Holder()
            holder.cycle = node
            weakref.finalize(holder, gone)
            node["holder"] = holder
        return self.fc(x)


class _Holder:
    cycle: Any = None


def test_garbage_collector_runs_while_the_forward_pass_runs() -> None:
    was = gc.isenabled()
    gc.enable()
    try:
        net = _Cycles()
        torchrecorder.record(net, "cycles", (1, 4))
        assert net.enabled == [True]
        assert net.collected[0] > 0  # cycles left by the forward were freed during the pass
        assert gc.isenabled()
    finally:
        gc.enable() if was else gc.disable()


_PEAK_SCRIPT = """
import sys, torch, torchrecorder
from torch import nn
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS'):
            return int(line.split()[1]) / 1024
class Leaky(nn.Module):
    grown = 0.0
    def forward(self, x):
        start = rss()
        for _ in range(4000):
            cycle = [torch.ones(16 * 1024)]  # 64 KiB, reachable only through a cycle
            cycle.append(cycle)
        Leaky.grown = rss() - start
        return x + 1
x = torch.randn(2, 3)
if sys.argv[1] == "record":
    torchrecorder.record(Leaky(), "leaky", input_data=x)
else:
    Leaky()(x)
print(Leaky.grown)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak RSS from /proc")
def test_peak_memory_of_a_forward_that_leaves_cycles_stays_near_a_plain_call() -> None:
    grown = float(subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, "record"], capture_output=True,
                                 text=True, check=True, cwd=ROOT).stdout.split()[-1])
    assert grown < 100  # MiB; with the collector paused the 4,000 cycles (250 MiB) all stay alive


# ------------------------------------------------------------------ buffer copies
_BUFFER_SCRIPT = """
import torch, torchrecorder
from torch import nn
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM'):
            return int(line.split()[1]) / 1024
class Big(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.rand(64, 1024, 1024))  # 256 MiB, read only
        self.fc = nn.Linear(4, 4)
    def forward(self, x):
        return self.fc(x) + self.table[0, 0, :4]
net = Big()
net(torch.randn(1, 4))
base = rss()
torchrecorder.record(net, "big", (1, 4))
print(rss() - base)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak RSS from /proc")
def test_a_buffer_the_forward_only_reads_is_not_copied() -> None:
    grown = float(subprocess.run([sys.executable, "-c", _BUFFER_SCRIPT], capture_output=True,
                                 text=True, check=True, cwd=ROOT).stdout.split()[-1])
    assert grown < 64  # MiB; a copy of the buffer is 256 MiB


class _Writes(nn.Module):
    """Changes its buffers in place in every way torch offers."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(n))
        self.register_buffer("counter", torch.zeros((), dtype=torch.long))
        self.register_buffer("queue", torch.zeros(4, n))
        self.register_buffer("out_target", torch.zeros(n))
        self.register_buffer("through_data", torch.zeros(n))
        self.register_buffer("swapped", torch.zeros(n))
        self.register_buffer("foreach", torch.zeros(n))
        self.bn = nn.BatchNorm1d(n)

    def forward(self, x: Tensor) -> Tensor:
        self.cache[:2] = x[0, :2]
        self.counter += 1
        self.queue[1].copy_(x[0])
        torch.add(x[0], 1, out=self.out_target)
        self.through_data.data.add_(5)
        self.swapped.data = torch.full_like(self.swapped, 7.0)
        torch._foreach_add_([self.foreach], 2.0)
        return self.bn(x) + self.cache


@pytest.mark.parametrize("eager_bytes", [0, 1 << 20])
def test_buffers_written_by_forward_are_put_back(eager_bytes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "EAGER_COPY_BYTES", eager_bytes)
    net = _Writes(6)
    before = {k: (b, b.clone()) for k, b in net.named_buffers()}
    torchrecorder.record(net, "w", (3, 6))
    for k, b in net.named_buffers():
        assert b is before[k][0], k
        assert torch.equal(b, before[k][1]), k


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.float32, torch.bfloat16])
def test_a_buffer_written_where_torchrecorder_cannot_see_is_put_back(dtype: torch.dtype) -> None:
    """Copied beforehand (within the budget), compared with its copy after the pass: one
    element changed unseen, of any dtype (numpy has no bfloat16: torch compares it), is put back."""

    class Unseen(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mask", torch.tensor([[1, 0, 1], [0, 1, 1]], dtype=dtype))

        def forward(self, x: Tensor) -> Tensor:
            with torch._C.DisableTorchFunction():
                self.mask[1, 0] = 1
            return x + 1

    net = Unseen()
    before = net.mask.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torchrecorder.record(net, "u", (1, 3))
    assert torch.equal(net.mask, before)


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("rebind", ["new", "transposed", "other dtype", "offset", "same"])
def test_data_rebound_to_any_other_view_is_put_back(device: str, rebind: str) -> None:
    """``.data = v`` inside forward, v a new tensor or another view of the same storage (its
    transpose, its bytes as another dtype, a slice at an offset): the original view comes back.
    (On ``meta`` a tensor has no data: there the layout is what can be told apart.)"""

    class Rebinds(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("w", torch.ones(4, 4, device=device))

        def forward(self, x: Tensor) -> Tensor:
            w = self.w.data
            self.w.data = {"new": torch.zeros(4, 4, device=device), "transposed": w.t(),
                           "other dtype": w.view(torch.int32), "offset": w.view(-1)[4:].view(3, 4),
                           "same": w}[rebind]
            return x + 1

    net = Rebinds()
    w, alias = net.w, net.w.detach()
    layout = (w.dtype, w.shape, w.stride(), w.storage_offset())
    torchrecorder.record(net, "r", (1, 4), device=device)
    assert net.w is w
    assert (w.dtype, w.shape, w.stride(), w.storage_offset()) == layout
    if device == "cpu":
        assert w.data_ptr() == alias.data_ptr() and torch.equal(w, torch.ones(4, 4))


def test_a_write_torchrecorder_cannot_see_is_reported() -> None:
    class Hidden(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("big", torch.zeros(8))

        def forward(self, x: Tensor) -> Tensor:
            with torch._C.DisableTorchFunction():
                self.big.add_(1)
            return x + 1

    net = Hidden()
    old = state_module.EAGER_COPY_BYTES
    state_module.EAGER_COPY_BYTES = 0
    try:
        with pytest.warns(RuntimeWarning, match="'big'"):
            torchrecorder.record(net, "h", (1, 8))
    finally:
        state_module.EAGER_COPY_BYTES = old
    assert torch.equal(net.big, torch.ones(8))  # documented: not put back, but reported


# ------------------------------------------------------------------ the random state
class _Waits(nn.Module):
    """Draws random numbers (if ``draw``), then waits for another thread inside forward."""

    def __init__(self, started: threading.Event, go_on: threading.Event, draw: bool = True) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.5)
        self.started, self.go_on, self.draw = started, go_on, draw

    def forward(self, x: Tensor) -> Tensor:
        y = self.drop(x) if self.draw else x + 1
        self.started.set()
        if not self.go_on.wait(30):
            raise TimeoutError("the other thread did not answer")
        return y


def test_another_threads_random_stream_is_not_rewound() -> None:
    started, go_on = threading.Event(), threading.Event()
    drawn: list[float] = []

    def other() -> None:
        started.wait(30)
        drawn.extend(torch.rand(20).tolist())  # while the recording runs
        go_on.set()

    thread = threading.Thread(target=other)
    thread.start()
    torchrecorder.record(_Waits(started, go_on, draw=False), "w", (1, 64))
    thread.join()
    drawn.extend(torch.rand(20).tolist())  # after it
    assert len(set(drawn)) == len(drawn)


def test_two_concurrent_recordings_leave_the_random_state_as_it_was() -> None:
    torch.manual_seed(1234)
    before = torch.get_rng_state()
    a_started, a_go = threading.Event(), threading.Event()
    b_started, b_go = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def second() -> None:
        try:
            a_started.wait(30)
            torchrecorder.record(_Waits(b_started, b_go), "b", (1, 64))
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=second)
    thread.start()

    def release() -> None:
        b_started.wait(30)
        a_go.set()  # A ends first, while B is still inside its forward

    releaser = threading.Thread(target=release)
    releaser.start()
    torchrecorder.record(_Waits(a_started, a_go), "a", (1, 64))
    b_go.set()
    thread.join()
    releaser.join()
    assert not errors
    assert torch.equal(torch.get_rng_state(), before)


# ------------------------------------------------------------------ changes made by forward
class _Momentum(nn.Module):
    """A MoCo-style key encoder updated by forward, a flag switched off, a backward inside."""

    def __init__(self) -> None:
        super().__init__()
        self.query = nn.Linear(4, 4)
        self.key = nn.Linear(4, 4)
        self.frozen = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        with torch.no_grad():
            for pk, pq in zip(self.key.parameters(), self.query.parameters(), strict=True):
                pk.data.mul_(0.5).add_(pq.data, alpha=0.5)
            self.key.weight.data = self.key.weight.data * 0.9 + 1  # a new tensor behind .data
            self.key.bias.mul_(3)
        self.frozen.weight.requires_grad_(False)
        self.frozen.bias.requires_grad = False
        loss = self.query(x).sum()
        loss.backward()
        return self.frozen(self.key(x))


def test_forward_changes_to_parameters_flags_and_grads_are_undone() -> None:
    net = _Momentum()
    net.frozen.weight.grad = torch.ones(4, 4)  # an existing gradient that backward adds to
    grad_obj = net.frozen.weight.grad
    before = {k: (p, p.detach().clone(), p.requires_grad) for k, p in net.named_parameters()}
    torchrecorder.record(net, "moco", (2, 4))
    for k, p in net.named_parameters():
        obj, value, flag = before[k]
        assert p is obj and torch.equal(p, value), k
        assert p.requires_grad is flag, k
    assert net.query.weight.grad is None and net.query.bias.grad is None
    assert net.frozen.weight.grad is grad_obj and torch.equal(grad_obj, torch.ones(4, 4))


def test_an_existing_grad_beyond_the_copy_budget_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "EAGER_COPY_BYTES", 0)
    net = _Momentum()
    net.query.weight.grad = torch.ones(4, 4)
    with pytest.warns(RuntimeWarning, match="gradient of 'query.weight'"):
        torchrecorder.record(net, "moco", (2, 4))
    assert net.query.weight.grad is not None and not torch.equal(net.query.weight.grad, torch.ones(4, 4))
    assert net.query.bias.grad is None


def test_grad_mode_switched_off_inside_forward_is_restored() -> None:
    class Off(nn.Module):
        def forward(self, x: Tensor) -> Tensor:
            torch.set_grad_enabled(False)
            return x * 2

    assert torch.is_grad_enabled()
    try:
        torchrecorder.record(Off(), "off", (1, 2))
        assert torch.is_grad_enabled()
        with torch.no_grad():
            torchrecorder.record(Off(), "off", (1, 2))
            assert not torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)


# ------------------------------------------------------------------ the user's own exception
class _Raises(nn.Module):
    def __init__(self, exc: BaseException) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.exc = exc

    def forward(self, x: Tensor) -> Tensor:
        self.fc(x)
        raise self.exc


class _BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class _TupleNotes(Exception):
    pass


class _Frozen(Exception):
    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"{type(self).__name__} is immutable")


@pytest.mark.parametrize("make", [
    lambda: _BadStr("x"),
    lambda: _with_tuple_notes(_TupleNotes("tuple notes")),
    lambda: _Frozen("frozen"),
])
def test_the_users_own_exception_object_comes_back(make: Any) -> None:
    exc = make()
    with pytest.raises(type(exc)) as info:
        torchrecorder.record(_Raises(exc), "net", (1, 2))
    assert info.value is exc


@dataclasses.dataclass(frozen=True)
class _FrozenData(Exception):
    code: int


def test_a_frozen_dataclass_exception_passes_through_record_and_recording() -> None:
    exc = _FrozenData(7)
    with pytest.raises(_FrozenData) as info:
        torchrecorder.record(_Raises(exc), "net", (1, 2))
    assert info.value is exc
    net = _Raises(exc)
    with pytest.raises(_FrozenData) as info, torchrecorder.recording(net, "net"):
        net(torch.randn(1, 2))
    assert info.value is exc and no_hooks(net)


def _with_tuple_notes(exc: BaseException) -> BaseException:
    exc.__notes__ = ("from the user",)  # type: ignore[attr-defined]
    return exc


def test_a_reraised_exception_carries_one_note_however_often_it_is_recorded() -> None:
    exc = ValueError("always the same object")
    net = _Raises(exc)
    for _ in range(3):
        with pytest.raises(ValueError) as info:
            torchrecorder.record(net, "net", (1, 2))
        assert info.value is exc
    notes = [n for n in getattr(exc, "__notes__", []) if n.startswith("torchrecorder:")]
    assert len(notes) == 1


def test_no_warning_when_nothing_was_changed() -> None:
    net = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torchrecorder.record(net, "net", (2, 3))


@pytest.mark.parametrize("draws_meanwhile", [0, 7])
def test_a_seed_set_by_another_thread_during_a_recording_stays(draws_meanwhile: int) -> None:
    """Issue 24.4: a thread seeding torch while another records kept its seed only until the
    recording ended, which put the state of before the recording back."""
    torch.manual_seed(5)
    started, go_on = threading.Event(), threading.Event()
    seen: list[Tensor] = []

    def other() -> None:
        started.wait(30)  # the recording has drawn what it draws and waits
        torch.manual_seed(77)
        seen.append(torch.rand(draws_meanwhile))
        go_on.set()

    thread = threading.Thread(target=other)
    thread.start()
    torchrecorder.record(_Waits(started, go_on), "w", (1, 64))
    thread.join()
    after = torch.rand(5)  # the seeded stream goes on where the other thread left it
    want = torch.Generator().manual_seed(77)
    assert torch.equal(seen[0], torch.rand(draws_meanwhile, generator=want))
    assert torch.equal(after, torch.rand(5, generator=want))


def test_the_recordings_own_seed_is_still_undone_without_another_seed() -> None:
    """The rule of 24.4 keeps the old promise: no seed from elsewhere, the state comes back."""
    net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    torch.manual_seed(3)
    before = torch.get_rng_state()
    seed_before = torch.initial_seed()
    torchrecorder.record(net, "d", (2, 4))
    assert torch.equal(torch.get_rng_state(), before) and torch.initial_seed() == seed_before


@pytest.mark.parametrize("numpy", [True, False])
def test_the_recordings_stream_is_seeded_from_the_callers_state_bytes(
        numpy: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pass's own stream: a digest of the caller's generator state, the same whichever
    way the state's bytes are read (numpy or, where torch has none, a list), so a recording
    is reproducible."""
    import hashlib

    if not numpy:
        def no_numpy(self: torch.Tensor, *args: object, **kwargs: object) -> None:
            raise RuntimeError("Numpy is not available")

        monkeypatch.setattr(torch.Tensor, "numpy", no_numpy)

    seen: list[int] = []

    class Seed(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(torch.initial_seed())
            return x + 1

    torch.manual_seed(11)
    state = torch.get_rng_state()
    digest = hashlib.blake2b(bytes(state.tolist()), digest_size=8, person=b"torchrecorder").digest()
    torchrecorder.record(Seed(), "s", (1, 2))
    assert seen == [int.from_bytes(digest, "little") >> 1]
    torch.manual_seed(11)
    torchrecorder.record(Seed(), "s", (1, 2))
    assert seen[1] == seen[0]
