"""The module index kept per model between recordings (issue 38): reused only for a model
that has not changed, rebuilt on any change to its modules, parameters or buffers, never
keeping a model alive; the model's flags, modes and tensors put back as without it.

Each mutation test records a model, changes it, records it again, and compares the second
recording with one made after the kept index was dropped (what a first recording gives).
"""

from __future__ import annotations

import gc
import warnings
import weakref
from collections.abc import Callable

import pytest
import torch
from torch import Tensor, nn

import torchrecorder
from torchrecorder.export import dumps
from torchrecorder.recording import memo as memo_module

from .graph_checks import global_hook_counts


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 6)
        self.bn = nn.BatchNorm1d(6)
        self.body = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 6))
        self.fc2 = nn.Linear(6, 3)
        self.register_buffer("offset", torch.zeros(3))

    def forward(self, x: Tensor) -> Tensor:
        h = self.body(self.bn(self.fc1(x)))
        for _name, p in self.named_parameters(recurse=False):  # parameters added on the root
            if p.dim() == 1 and p.numel() == 6:
                h = h * p
        return self.fc2(h) + self.offset


def _index(net: nn.Module) -> object:
    """The module index kept on ``net``'s memo."""
    return memo_module._MEMOS[id(net)][1].index


def _record(net: nn.Module) -> torchrecorder.Recorder:
    return torchrecorder.record(net, "net", None, input_data=torch.randn(5, 4))


def _layers(rec: torchrecorder.Recorder) -> list[tuple[object, ...]]:
    return [(n.path, n.name, n.type_name, n.num_params, n.num_params_total, n.num_buffers)
            for n in rec.nodes.values() if isinstance(n, torchrecorder.LayerNode)]


def _state(net: nn.Module) -> tuple[object, ...]:
    return ([(k, v.clone()) for k, v in net.state_dict().items()],
            [(n, p, p.requires_grad) for n, p in net.named_parameters()],
            [m.training for m in net.modules()])


def _same_state(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    (sa, pa, ta), (sb, pb, tb) = a, b  # type: ignore[misc]
    return (len(sa) == len(sb) and len(pa) == len(pb) and ta == tb
            and all(ka == kb and torch.equal(va, vb) for (ka, va), (kb, vb) in zip(sa, sb, strict=True))
            and all(x[0] == y[0] and x[1] is y[1] and x[2] == y[2] for x, y in zip(pa, pb, strict=True)))


def _add_module(net: Net) -> None:
    net.extra = nn.Linear(2, 2)  # called by no one: still indexed (the root's parameter total)


def _remove_module(net: Net) -> None:
    del net.body[1]


def _replace_module(net: Net) -> None:
    net.fc2 = nn.Linear(6, 3)


def _add_parameter(net: Net) -> None:
    net.scale = nn.Parameter(torch.ones(6))


def _remove_parameter(net: Net) -> None:
    net.fc2.bias = None


def _replace_parameter_same_shape(net: Net) -> None:
    net.fc1.weight = nn.Parameter(torch.randn(6, 4))


def _tie_parameters(net: Net) -> None:
    net.body[2].weight = net.body[0].weight  # the same shapes and names: counted once now


def _parameter_data_of_another_shape(net: Net) -> None:
    net.unused = nn.Parameter(torch.ones(2))
    net.unused.data = torch.ones(7)


def _add_buffer(net: Net) -> None:
    net.fc1.register_buffer("counter", torch.zeros(5))


def _remove_buffer(net: Net) -> None:
    del net.bn.num_batches_tracked


def _replace_buffer(net: Net) -> None:
    net.offset = torch.ones(3)


MUTATIONS = [_add_module, _remove_module, _replace_module, _add_parameter, _remove_parameter,
             _replace_parameter_same_shape, _tie_parameters, _parameter_data_of_another_shape, _add_buffer,
             _remove_buffer, _replace_buffer]



@pytest.mark.parametrize("mutate", MUTATIONS, ids=lambda f: f.__name__.strip("_"))
def test_a_change_between_two_recordings_builds_the_index_anew(mutate: Callable[[Net], None]) -> None:
    torch.manual_seed(0)
    net = Net().eval()
    if mutate is _parameter_data_of_another_shape:
        net.unused = nn.Parameter(torch.ones(2))
    _record(net)
    kept = _index(net)
    mutate(net)
    before = _state(net)
    second = _record(net)
    assert _index(net) is not kept  # rebuilt, and kept again
    assert _same_state(before, _state(net))
    memo_module.forget_all()
    fresh = _record(net)
    assert _layers(second) == _layers(fresh)
    assert dumps(second) == dumps(fresh)


def test_a_replaced_parameter_is_recorded_as_the_parameter_it_is() -> None:
    torch.manual_seed(0)
    net = Net().eval()
    _record(net)
    _replace_parameter_same_shape(net)
    rec = _record(net)
    params = [n for n in rec.nodes.values() if isinstance(n, torchrecorder.ParamNode)]
    assert any(n.name == "fc1.weight" or n.name.endswith("weight") for n in params)
    assert rec.nodes[net.fc1.weight] is not None  # the live parameter finds its node


@pytest.mark.parametrize("flip", ["requires_grad", "training", "root name"])
def test_flags_modes_and_names_are_read_fresh(flip: str) -> None:
    torch.manual_seed(0)
    net = Net().eval()
    first = _record(net)
    if flip == "requires_grad":
        net.fc1.weight.requires_grad_(False)
    elif flip == "training":
        net.train()
    before = _state(net)
    second = torchrecorder.record(net, "other" if flip == "root name" else "net", None,
                                  input_data=torch.randn(5, 4))
    assert _same_state(before, _state(net))  # put back as it was before this recording
    assert no_hooks(net)
    if flip == "root name":
        roots = [(lay[1], lay[2]) for rec in (first, second) for lay in _layers(rec) if lay[2] == "Net"]
        assert roots == [("net", "Net"), ("other", "Net")]
    memo_module.forget_all()
    fresh = torchrecorder.record(net, "other" if flip == "root name" else "net", None,
                                 input_data=torch.randn(5, 4))
    assert _layers(second) == _layers(fresh)


def test_parameter_nodes_take_shapes_from_the_index_and_the_rest_fresh() -> None:
    # the kept index gives each parameter node its name, shape and element count; the dtype,
    # the device and requires_grad may change without changing the model's stamp
    torch.manual_seed(0)
    net = Net().eval()
    _record(net)
    kept = _index(net)
    for t in [*net.parameters(), *net.buffers()]:  # the same objects, of another dtype
        t.data = t.data.double()
    net.fc1.bias.requires_grad_(False)

    def again() -> torchrecorder.Recorder:
        return torchrecorder.record(net, "net", None, input_data=torch.randn(5, 4, dtype=torch.float64))

    second = again()
    assert _index(net) is kept
    params = {n.path: n for n in second.nodes.values() if isinstance(n, torchrecorder.ParamNode)}
    weight = params["fc1.weight"]
    assert (weight.name, weight.shape, weight.numel, weight.dtype) == ("weight", (6, 4), 24, "float64")
    assert params["fc1.bias"].requires_grad is False and params["fc1.weight"].requires_grad is True
    memo_module.forget_all()
    assert dumps(second) == dumps(again())


def test_an_unchanged_model_reuses_its_index_and_records_the_same() -> None:
    torch.manual_seed(0)
    net = Net().eval()
    memo_module._MEMOS.pop(id(net), None)
    first = _record(net)
    kept = _index(net)
    second = _record(net)
    assert _index(net) is kept
    assert _layers(first) == _layers(second)
    assert dumps(first) == dumps(second)
    assert no_hooks(net)


def test_the_kept_index_keeps_no_model_module_or_tensor_alive() -> None:
    net = Net()
    _record(net)
    _record(net)
    refs = [weakref.ref(net), weakref.ref(net.fc1), weakref.ref(net.fc1.weight), weakref.ref(net.offset)]
    key = id(net)
    assert key in memo_module._MEMOS
    del net
    gc.collect()
    assert all(r() is None for r in refs)
    assert key not in memo_module._MEMOS


def _same_id_as(old_id: int, make: Callable[[], object]) -> object:
    """An object from ``make`` that has the id of an object gone meanwhile (CPython gives a
    freed address again soon), or ``None`` when none turned up."""
    kept = []
    for _ in range(2000):
        got = make()
        if id(got) == old_id:
            return got
        kept.append(got)
    return None


def test_a_new_parameter_at_the_address_of_a_collected_one_is_not_trusted() -> None:
    """The stamp compares ids: an id given again to a new object (the old one collected) is
    seen, so the kept index is not reused for a model whose parts are other objects."""
    torch.manual_seed(0)
    net = Net().eval()
    _record(net)
    kept = _index(net)
    old_id = id(net.fc1.weight)
    net.fc1.weight = None  # (the slot kept, in its place among the others)
    gc.collect()
    new = _same_id_as(old_id, lambda: nn.Parameter(torch.randn(6, 4)))
    if new is None:
        pytest.skip("CPython gave the parameter's address to no new parameter")
    net.fc1.weight = new
    second = _record(net)
    assert _index(net) is not kept
    assert rec_node_of(second, new) is not None  # the live parameter finds its node
    memo_module.forget_all()
    assert dumps(second) == dumps(_record(net))


def rec_node_of(rec: torchrecorder.Recorder, obj: object) -> object:
    return rec.nodes[obj]


def no_hooks(net: nn.Module) -> bool:
    return all(not m._forward_hooks and not m._forward_pre_hooks and not m._forward_pre_hooks_with_kwargs
               for m in net.modules()) and not any(global_hook_counts())


# ----------------------------------------------------- the model state's layout, kept on the memo
class Vandal(Net):
    """:class:`Net` whose forward, once ``vandal`` is set, changes everything a recording must
    put back: every parameter's and buffer's values, one ``.data`` rebound, a parameter and a
    buffer replaced by other objects, every ``requires_grad`` flag and training flag, and the
    existing gradients."""

    vandal = False

    def forward(self, x: Tensor) -> Tensor:
        if self.vandal:
            with torch.no_grad():
                for p in self.parameters():
                    p.add_(1)
                    if p.grad is not None:
                        p.grad.add_(1)
                for b in self.buffers():
                    if b.dtype != torch.bool:
                        b.add_(1)
            for p in self.parameters():
                p.requires_grad_(not p.requires_grad)
            for m in self.modules():
                if m is not self.bn:  # (trained, it needs the buffer that one change removes)
                    m.training = not m.training
            self.fc1.weight.data = torch.zeros_like(self.fc1.weight)
            self.fc2.bias = nn.Parameter(torch.zeros(3))  # other objects in the slots
            self.offset = torch.full((3,), 5.0)
        return super().forward(x)


def _to_double(net: Net) -> None:
    net.offset.data = net.offset.data.double()  # the same object and shape, another dtype


def _new_strides(net: Net) -> None:
    net.fc2.weight.data = net.fc2.weight.data.t().contiguous().t()  # the same shape, other strides


def _new_storage(net: Net) -> None:
    net.fc1.bias.data = net.fc1.bias.data.clone()  # the same object, shape and strides


def _flip_requires_grad(net: Net) -> None:
    net.fc1.weight.requires_grad_(False)


def _train(net: Net) -> None:
    net.train()


def _add_grad(net: Net) -> None:
    net.fc2.weight.grad = torch.ones_like(net.fc2.weight)


#: changes that keep the model's stamp: what the kept layout does not hold, read again
UNSTAMPED = [_to_double, _new_strides, _new_storage, _flip_requires_grad, _train, _add_grad]


def _full_state(net: nn.Module) -> tuple[object, ...]:
    """:func:`_state`, and each tensor's layout, storage and gradient values."""
    tensors = [*net.named_parameters(), *net.named_buffers()]
    return (_state(net), [(n, t.dtype, t.stride(), t.data_ptr()) for n, t in tensors],
            [(n, None if p.grad is None else (p.grad, p.grad.clone())) for n, p in net.named_parameters()])


def _same_full_state(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    (sa, la, ga), (sb, lb, gb) = a, b  # type: ignore[misc]
    return (_same_state(sa, sb) and la == lb and len(ga) == len(gb)  # type: ignore[arg-type]
            and all(x[0] == y[0] and (x[1] is None) == (y[1] is None)
                    and (x[1] is None or (x[1][0] is y[1][0] and torch.equal(x[1][1], y[1][1])))
                    for x, y in zip(ga, gb, strict=True)))  # type: ignore[attr-defined]


@pytest.mark.parametrize("mutate", [None, *MUTATIONS, *UNSTAMPED],
                         ids=lambda f: "unchanged" if f is None else f.__name__.strip("_"))
def test_the_kept_state_layout_puts_back_the_model_as_it_is_now(mutate: Callable[[Net], None]) -> None:
    """A model recorded, changed (or not) and recorded again with a forward that changes
    everything: the model comes back as it was just before the second recording; the layout
    kept on the memo is reused only where the stamp is unchanged."""
    torch.manual_seed(0)
    net = Vandal().eval()
    if mutate is _parameter_data_of_another_shape:
        net.unused = nn.Parameter(torch.ones(2))
    _record(net)
    memo = memo_module._MEMOS[id(net)][1]
    assert memo.state is not None
    if mutate is not None:
        mutate(net)
    before = _full_state(net)
    net.vandal = True
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every change was seen or copied: nothing to report
        _record(net)
    net.vandal = False
    assert _same_full_state(before, _full_state(net))
    assert no_hooks(net)
    kept = memo_module._MEMOS[id(net)][1]
    assert (kept is memo) == (mutate is None or mutate in UNSTAMPED)
