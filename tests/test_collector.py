"""The garbage collector during a recording: objects older than the pass set aside, the
pass's own cycles collected, everything as it was afterwards."""

from __future__ import annotations

import gc
import threading
import tracemalloc
from collections.abc import Callable

import pytest
import torch
from torch import nn

import torchrecorder


class Cycle:
    """An object in a reference cycle with itself; counts the live ones."""

    live = 0

    def __init__(self) -> None:
        Cycle.live += 1
        self.me = self

    def __del__(self) -> None:
        Cycle.live -= 1


class Cyclic(nn.Module):
    """Leaves ``n`` dropped reference cycles per call, and notes the most alive at a time."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.n = n
        self.most_alive = 0
        self.frozen: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.frozen.append(gc.get_freeze_count())
        for _ in range(self.n):
            Cycle()
            self.most_alive = max(self.most_alive, Cycle.live)
        return self.fc(x).relu()


@pytest.fixture(autouse=True)
def _collector_on():
    was = gc.isenabled()
    gc.enable()
    gc.collect()
    yield
    gc.enable() if was else gc.disable()


def test_cycles_made_by_the_pass_are_collected_during_it() -> None:
    net = Cyclic(50_000)
    rec = torchrecorder.record(net, "cyclic", (1, 4))
    assert "fc" in rec.nodes
    # a paused collector would hold all 50,000 until the end
    assert net.most_alive < 10_000, net.most_alive
    # the objects older than the pass were set aside while it ran, and put back after
    assert net.frozen[0] > 0
    assert gc.get_freeze_count() == 0


def test_a_failing_pass_puts_the_old_objects_back() -> None:
    class Fails(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("no")

    with pytest.raises(RuntimeError, match="no"):
        torchrecorder.record(Fails(), "f", (1, 2))
    assert gc.get_freeze_count() == 0


def test_objects_the_caller_froze_stay_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        net = Cyclic(1)
        torchrecorder.record(net, "cyclic", (1, 4))
        # nothing more set aside (unfreezing at the end would put theirs back too), nothing of
        # theirs put back; a frozen object that dies meanwhile leaves the count (a cache emptied
        # by an earlier test), so fewer is fine
        assert len(net.frozen) == 1 and 0 < net.frozen[0] <= frozen
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_recording_block_and_nested_and_threaded_recordings_put_everything_back() -> None:
    net = Cyclic(1)
    with torchrecorder.recording(net, "outer"):
        net(torch.randn(1, 4))
        inner = torchrecorder.record(Cyclic(1), "inner", (1, 4))
        assert gc.get_freeze_count() > 0  # the outer block is still active
    assert "fc" in inner.nodes
    assert gc.get_freeze_count() == 0

    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                torchrecorder.record(Cyclic(100), "t", (1, 4))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert gc.get_freeze_count() == 0


def test_collector_off_stays_off_and_on_stays_on() -> None:
    gc.disable()
    net = Cyclic(10)
    torchrecorder.record(net, "cyclic", (1, 4))
    assert not gc.isenabled()
    gc.enable()
    torchrecorder.record(net, "cyclic", (1, 4))
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


class Thresholds(nn.Module):
    """Notes the collector's thresholds during each call; can set them itself."""

    def __init__(self, set_to: tuple[int, ...] | None = None, fail: bool = False) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.seen: list[tuple[int, ...]] = []
        self.set_to, self.fail = set_to, fail

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(gc.get_threshold())
        if self.set_to is not None:
            gc.set_threshold(*self.set_to)
        if self.fail:
            raise ValueError("fails")
        return self.fc(x)


@pytest.fixture()
def thresholds():
    was = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*was)


@pytest.mark.usefixtures("thresholds")
def test_thresholds_are_the_callers_during_the_pass_and_after() -> None:
    net = Thresholds()
    torchrecorder.record(net, "t", (1, 2))
    assert net.seen == [(700, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)
    with pytest.raises(ValueError, match="fails"):
        torchrecorder.record(Thresholds(fail=True), "t", (1, 2))
    assert gc.get_threshold() == (700, 10, 10)
    with torchrecorder.recording(net, "outer"):
        torchrecorder.record(Thresholds(), "inner", (1, 2))
        assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


class Holder:
    """A reference cycle holding a tensor whose storage comes from Python's allocator (a
    ``bytearray``), so that :mod:`tracemalloc` counts it."""

    def __init__(self, nbytes: int) -> None:
        self.me = self
        self.tensor = torch.frombuffer(bytearray(nbytes), dtype=torch.uint8)
        self.more = [[] for _ in range(4)]


class Garbage(nn.Module):
    """Leaves ``n`` cycles holding a tensor of ``nbytes`` each, then one layer."""

    def __init__(self, n: int, nbytes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.n, self.nbytes = n, nbytes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.n):
            Holder(self.nbytes)
        return self.fc(x)


def _peak_growth(fn: Callable[[], object]) -> int:
    """Bytes allocated at the peak of ``fn()`` above what was allocated before it."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


@pytest.mark.usefixtures("thresholds")
def test_cyclic_garbage_holding_tensors_does_not_raise_the_peak_memory_of_a_recording() -> None:
    net = Garbage(2000, 64 * 1024)  # 125 MiB of tensors in all, garbage as soon as made
    x = torch.randn(1, 4)
    plain = _peak_growth(lambda: net(x))
    recorded = _peak_growth(lambda: torchrecorder.record(net, "garbage", None, input_data=x))
    assert plain < 20 * 2**20  # the collector keeps a plain call's garbage low
    assert recorded <= 2 * plain, (recorded / 2**20, plain / 2**20)


@pytest.mark.usefixtures("thresholds")
def test_thresholds_set_during_the_pass_stay_and_automatic_collection_off_stays_off() -> None:
    torchrecorder.record(Thresholds(set_to=(123, 4, 5)), "t", (1, 2))
    assert gc.get_threshold() == (123, 4, 5)  # the model's own setting is not undone
    gc.set_threshold(0, 10, 10)  # 0: no automatic collection at all
    net = Thresholds()
    torchrecorder.record(net, "t", (1, 2))
    assert net.seen == [(0, 10, 10)]
    assert gc.get_threshold() == (0, 10, 10)
