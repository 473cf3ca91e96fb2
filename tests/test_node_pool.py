"""Nodes made ahead of a pass (``recording/pool.py``): set aside with the old objects, so the
collector does not scan them during the pass; the same graph; nothing kept afterwards."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.export import dumps
from torchrecorder.nodes import LayerNode, OpNode, ParamNode, TensorNode
from torchrecorder.recording.collector import old_objects_aside, old_objects_back
from torchrecorder.recording.meta import check_model
from torchrecorder.recording.pool import NodePool


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    gc.enable() if was else gc.disable()


class Raises(nn.Module):
    """A chain of blocks whose last one raises while ``fail`` is set."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(m for _ in range(n) for m in (nn.Linear(4, 4), nn.ReLU())))
        self.fail = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.blocks(x) * 2
        if self.fail:
            raise ValueError("asked to fail")
        return y


def _kinds(rec: torchrecorder.Recorder) -> tuple[int, ...]:
    nodes = list(rec.nodes.values())
    return tuple(sum(type(n) is cls for n in nodes) for cls in (OpNode, LayerNode, TensorNode, ParamNode))


def _young_collections(fn: Callable[[], None]) -> int:
    """How many collections of the youngest generation run during ``fn()``."""
    seen: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 0:
            seen.append(1)

    gc.callbacks.append(count)
    try:
        fn()
    finally:
        gc.callbacks.remove(count)
    return len(seen)


def test_a_model_recorded_again_takes_its_nodes_made_ahead_and_set_aside() -> None:
    net = Raises(200)  # 401 calls, 201 operations, 400 parameters: thousands of tracked objects
    x = torch.randn(2, 4)
    recs: list[torchrecorder.Recorder] = []

    def record() -> None:  # (one line of code for the root call of every recording)
        recs.append(torchrecorder.record(net, "net", input_data=x))

    record()
    memo = check_model(net).memo
    assert memo is not None and memo.sizes == _kinds(recs[0])  # the next recording's pool
    with_pool = _young_collections(record)
    memo.sizes = None  # no pool: every node made during the pass
    without = _young_collections(record)
    first, pooled, plain = recs
    # the pool's nodes were set aside with the old objects: neither counted nor scanned; the
    # collector still runs during the pass, on what the pass makes otherwise (collector.py)
    assert 0 < with_pool < without, (with_pool, without)
    # the same recording, node for node
    assert dumps(pooled) == dumps(plain) == dumps(first)
    assert torchrecorder.make_dot(pooled, fold_repeats=False).source == \
        torchrecorder.make_dot(plain, fold_repeats=False).source
    assert memo.sizes == _kinds(plain)
    # nothing of the pool outlives its pass
    assert len(pooled.engine.pool) == 0 and len(plain.engine.pool) == 0
    assert gc.get_freeze_count() == 0


def test_a_failed_pass_leaves_the_sizes_and_drops_its_pool() -> None:
    net = Raises(3)
    x = torch.randn(2, 4)
    torchrecorder.record(net, "net", input_data=x)
    memo = check_model(net).memo
    assert memo is not None
    sizes = memo.sizes
    net.fail = True
    with pytest.raises(ValueError, match="asked to fail") as info:
        torchrecorder.record(net, "net", input_data=x)
    assert memo.sizes == sizes
    assert len(info.value.recording.engine.pool) == 0  # type: ignore[attr-defined]
    assert gc.get_freeze_count() == 0
    net.fail = False
    again = torchrecorder.record(net, "net", input_data=x)
    assert _kinds(again) == sizes


def test_a_pool_makes_what_it_is_told_and_tells_what_the_pass_took() -> None:
    pool = NodePool()
    pool.fill(None)
    pool.fill((1, 2))  # sizes of another length: a hint not to trust
    assert len(pool) == 0 and pool.used() is None
    pool.fill((3, 0, 2, 1))
    assert [len(p) for p in (pool.ops, pool.layers, pool.tensors, pool.params)] == [4, 1, 3, 2]
    assert all(type(n) is OpNode for n in pool.ops) and all(type(n) is ParamNode for n in pool.params)
    assert len({id(n) for n in (*pool.ops, *pool.layers, *pool.tensors, *pool.params)}) == 10
    pool.ops.pop()
    pool.tensors.pop()
    assert pool.used() == (1, 0, 1, 0)
    pool.layers.pop()  # one kind ran out: how many more the pass made is not known
    assert pool.used() is None
    pool.clear()
    assert len(pool) == 0 and pool.used() is None


def test_what_a_recording_makes_ahead_is_set_aside_with_the_old_objects() -> None:
    made: list[object] = []

    def prepare() -> None:
        assert not gc.isenabled()  # no collection between making them and setting them aside
        made.extend([object()] for _ in range(100))

    before = gc.get_freeze_count()
    assert before == 0
    old_objects_aside(prepare)
    try:
        assert len(made) == 100 and gc.isenabled()
        assert gc.get_freeze_count() >= 100
        assert all(not any(m is o for o in gc.get_objects()) for m in made[:3])  # not scanned
    finally:
        old_objects_back()
    assert gc.get_freeze_count() == 0

    gc.freeze()  # a process that froze objects of its own: nothing set aside, nothing made
    try:
        made.clear()
        old_objects_aside(prepare)
        old_objects_back()
        assert made == []
    finally:
        gc.unfreeze()

    def fails() -> None:
        raise OSError("no room")

    with pytest.raises(OSError, match="no room"):
        old_objects_aside(fails)
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    old_objects_aside()  # the count of active recordings was left as it was
    old_objects_back()
    assert gc.get_freeze_count() == 0


def _slots(node: object) -> dict[str, object]:
    """Every slot of ``node`` along its class's MRO, ``"<unset>"`` where none was set."""
    names = {name for cls in type(node).__mro__ for name in getattr(cls, "__slots__", ())}
    out: dict[str, object] = {}
    for name in sorted(names):
        value = getattr(node, name, "<unset>")
        if name == "_table":  # a weak reference to the node's own graph
            value = value is not None and value != "<unset>"
        # containers compared by what they hold (OrderedSet by its items)
        out[name] = list(value) if type(value).__name__ == "OrderedSet" else value
    return out


def test_a_node_from_the_pool_has_every_field_a_new_node_has() -> None:
    """The pool sets a reused layer's and operation's fields itself (``begin_layer``,
    ``begin_op``): a field added to a node class and set by its constructor must be set
    there too, which this test finds slot by slot."""
    class Twice(nn.Module):  # a module called twice, one with buffers, a nested one
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.norm = nn.BatchNorm1d(4)
            self.head = nn.Sequential(nn.Linear(4, 2), nn.Tanh())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.norm(self.fc(torch.relu(self.fc(x)))))

    net = Twice().eval()
    x = torch.randn(3, 4)

    def record() -> torchrecorder.Recorder:  # (one line of code for every root call)
        return torchrecorder.record(net, "net", input_data=x)

    record()
    memo = check_model(net).memo
    assert memo is not None and memo.sizes is not None
    pooled = record()
    memo.sizes = None
    plain = record()
    assert list(pooled.nodes) == list(plain.nodes)
    compared = 0
    for key, node in plain.nodes.items():
        other = pooled.nodes[key]
        assert type(other) is type(node)
        assert _slots(other) == _slots(node), key
        compared += isinstance(node, (LayerNode, OpNode))
    assert compared >= 7
