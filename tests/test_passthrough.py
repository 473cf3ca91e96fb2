"""Edges that match the code (issue 16): pass-through module outputs, and edges through code
torch's function mode does not see.

The zoo's pass-through models (``tests/zoo/passthrough.py``) are compared with torch.fx by
``test_zoo.py::test_oracle``; here they are compared with torch.export too, and the
missing-edge models are checked for the path from producer to consumer, with gradients on
and (as notes) with them off.  The rest checks what the aliases promise: outputs and
gradients as in a plain call, in-place writes through either name, a clear fallback.
"""

from __future__ import annotations

import types
import warnings
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import pytest
import torch
from torch import Tensor, nn

import torchrecorder
from torchrecorder import OpNode

from .graph_checks import check_invariants, check_outputs_equal
from .oracle import compare, export_relation, recorded_relation
from .zoo import Case, handwritten, passthrough
from .zoo.session import Zoo, restored

PASS_THROUGH = [pytest.param(c.name, id=c.name) for c in passthrough.PASS_THROUGH]
MISSING = [pytest.param(c.name, pairs, id=c.name) for c, pairs in passthrough.MISSING_EDGES]


def _record(net: nn.Module, *args: Any, mode: Any = None) -> tuple[torchrecorder.Recorder, Any]:
    with (mode or torch.enable_grad)(), torchrecorder.recording(net, "net") as rec:
        out = net(*args)
    return rec, out


# ------------------------------------------------------------------ the oracles
@pytest.mark.parametrize("name", PASS_THROUGH)
def test_pass_through_agrees_with_export(zoo: Zoo, name: str) -> None:
    """torch.export (functionalised, op-level) gives the same leaf-call dataflow as the recording."""
    r = zoo.recorded(name)
    with warnings.catch_warnings(), restored(r.net):
        warnings.simplefilter("ignore")
        expected, visible = export_relation(r.net, r.args, r.kwargs)
    precision, recall, missing, extra = compare(expected, recorded_relation(r.rec, visible))
    assert (precision, recall) == (1.0, 1.0), f"missing {sorted(missing)}, extra {sorted(extra)}"


def test_no_known_gap_left(zoo: Zoo) -> None:
    """No recording disagrees with its oracle, but where the oracle itself cannot see what runs:
    torch.export traces the unfused Python path of a module a plain call runs as one fused kernel."""
    gaps = {c.name: c.known_gap for c in zoo.cases() if c.known_gap}
    assert all("fused kernel" in gap for gap in gaps.values()), gaps


def test_pass_through_calls_share_no_edge(zoo: Zoo) -> None:
    """The buffer-returning module's two calls, the Identity and the Dropout feed nothing they
    did not get."""
    rel = recorded_relation(zoo.recorded("AllPassThroughs").rec)
    assert ("rope#1", "rope#2") not in rel
    assert not {("shortcut#1", "drop#1"), ("drop#1", "norm#1"), ("embed#1", "c#1")} & rel
    assert {("a#1", "shortcut#1"), ("a#1", "drop#1"), ("a#1", "norm#1"), ("a#1", "c#1")} <= rel
    rel = recorded_relation(zoo.recorded("IdentityShortcut").rec)
    assert ("stem#1", "bn1#1") in rel and ("shortcut#1", "bn1#1") not in rel


# -------------------------------------------------------------- missing edges
@pytest.mark.parametrize(("name", "pairs"), MISSING)
def test_missing_edges_joined_with_gradients(zoo: Zoo, name: str, pairs: list[tuple[str, str]]) -> None:
    rec = zoo.recorded(name).rec
    rel = recorded_relation(rec)
    assert set(pairs) <= rel, f"missing {sorted(set(pairs) - rel)}"
    assert rec.notes == []


@pytest.mark.parametrize(("name", "pairs"), MISSING)
def test_missing_edges_without_gradients(zoo: Zoo, name: str, pairs: list[tuple[str, str]]) -> None:
    """Under no_grad the edge is kept where the recording can see it (.data), else noted."""
    case = zoo.case(name)
    net = case.build()
    args, _ = case.inputs()
    rec, _ = _record(net, *args, mode=torch.no_grad)
    rel = recorded_relation(rec)
    lost = set(pairs) - rel
    if name == "DataInplace":
        assert not lost and rec.notes == []
        return
    assert lost, "the edge is recovered without autograd: make this a gradient-free case"
    text = " ".join(rec.notes)
    assert "with gradients off" in text
    assert ("ItemRound" in text) if name == "CustomFunction" else ("torch.jit.script" in text)
    assert "Note: " in str(rec)  # the layer table shows them
    again = torchrecorder.load_json(_json_path(rec))
    assert again.notes == rec.notes


def _json_path(rec: torchrecorder.Recorder) -> str:
    import os
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(rec.to_json())
    return path


def test_recovered_ops_are_named_after_the_function(zoo: Zoo) -> None:
    ops = {n.op for n in zoo.recorded("CustomFunction").rec.nodes.values() if isinstance(n, OpNode)}
    assert "ItemRound" in ops
    scripted = zoo.recorded("ScriptedFunction").rec
    gate = next(n for n in scripted.layers() if n.path == "gate")
    # one op for the scripted function, named after its autograd node: MulBackward0 gives "mul",
    # TorchScript's fused DifferentiableGraphBackward (after a few calls) "differentiable_graph"
    ops = [scripted.nodes[k].op for k in gate.subnet_keys if isinstance(scripted.nodes[k], OpNode)]
    assert len(ops) == 1 and ops[0] in ("mul", "differentiable_graph")


# ------------------------------------------------- what the alias keeps as it was
class IsCheck(nn.Module):
    """User code that compares identities: ``self.ident(x) is x``."""

    def __init__(self) -> None:
        super().__init__()
        self.ident = nn.Identity()
        self.fc = nn.Linear(3, 3)

    def forward(self, x: Tensor) -> tuple[Tensor, bool]:
        y = self.ident(x)
        return self.fc(y), y is x


def test_identity_comparison_in_user_code() -> None:
    net = IsCheck()
    x = torch.randn(2, 3)
    out, same = net(x)
    assert same is True
    _, (out2, same2) = _record(net, x)
    assert same2 is False  # while recording, the Identity hands on an alias of x
    assert torch.equal(out, out2)
    readme = open("README.md", encoding="utf-8").read()
    assert "self.ident(x) is x" in readme


def _grad_cases() -> Iterable[Case]:
    for case in [*handwritten.CASES, *passthrough.CASES]:
        if case.grad_mode == "grad" and not case.meta and not case.train:
            yield case


def _float_sum(out: Any) -> Tensor:
    from torchrecorder.recording._walk import iter_tensors

    parts = [t.float().sum() for t in iter_tensors(out) if t.is_floating_point() and t.requires_grad]
    return torch.stack(parts).sum() if parts else torch.zeros(())


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in _grad_cases()])
def test_gradients_equal_plain_call(case: Case) -> None:
    """Backward through the recorded output fills the same parameters' gradients as a plain
    call's, equal to float rounding (an alias may change the order of accumulation)."""
    grads: list[Any] = []
    for recording in (False, True):
        net = case.build()
        args, kwargs = case.inputs()
        if recording:
            with torchrecorder.recording(net):
                out = net(*args, **kwargs)
        else:
            out = net(*args, **kwargs)
        loss = _float_sum(out)
        if loss.requires_grad:
            try:
                loss.backward()
            except RuntimeError as exc:  # InplaceOps: ReLU(inplace=True)'s output changed in place
                assert "modified by an inplace operation" in str(exc)
                grads.append(None)
                continue
        grads.append({n: p.grad for n, p in net.named_parameters()})
    plain, recorded = grads
    if plain is None or recorded is None:
        assert plain is recorded is None, "backward fails in one call only"
        return
    assert plain.keys() == recorded.keys()
    for name, want in plain.items():
        got = recorded[name]
        assert (got is None) == (want is None), name
        if want is not None:
            assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), name


class ShareStorage(nn.Module):
    """In-place writes through the alias an Identity hands on, and through the original."""

    def __init__(self, through_alias: bool) -> None:
        super().__init__()
        self.through_alias = through_alias
        self.a = nn.Linear(4, 6)
        self.ident = nn.Identity()
        self.c = nn.Linear(4, 2)
        self.b = nn.Linear(2, 2)

    def forward(self, x: Tensor) -> Tensor:
        v = self.a(x)[:, :2]  # a view: the alias's _base is a's output, not v
        h = self.ident(v)
        if self.through_alias:
            h.add_(self.c(x))
            return self.b(v)
        v.add_(self.c(x))
        return self.b(h)


@pytest.mark.parametrize("through_alias", [True, False])
def test_inplace_write_reaches_the_other_name(through_alias: bool) -> None:
    net = ShareStorage(through_alias)
    x = torch.randn(3, 4)
    with torch.no_grad():
        want = net(x)
        rec, out = _record(net, x, mode=torch.no_grad)
    assert torch.equal(out, want)
    assert ("c#1", "b#1") in recorded_relation(rec)


class Tagged(torch.Tensor):
    """A tensor subclass: it is not aliased."""


class Fallbacks(nn.Module):
    """Pass-through outputs that cannot be aliased or whose container cannot be copied."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.ident = nn.Identity()
        self.fc = nn.Linear(3, 3)

    def forward(self, x: Tensor) -> Any:
        if self.kind == "subclass":
            return self.fc(self.ident(x))
        return self.fc(x), self.ident(types.MappingProxyType({"x": x}))


@pytest.mark.parametrize(("kind", "why"), [("subclass", "tensor subclass"), ("mapping", "cannot be copied")])
def test_alias_fallback_is_noted(kind: str, why: str) -> None:
    net = Fallbacks(kind)
    x = torch.randn(2, 3)
    if kind == "subclass":
        x = x.as_subclass(Tagged)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = net(x)
        rec, out = _record(net, x)
    assert any(why in n and "'ident'" in n for n in rec.notes), rec.notes
    check_invariants(rec)
    if kind == "mapping":
        assert out[1]["x"] is x  # handed on as it was
        assert torch.equal(out[0], want[0])
    else:
        assert torch.equal(out, want)


# ----------------------------------------------------- containers are rebuilt
class Pair(NamedTuple):
    left: Tensor
    right: Tensor


@dataclass(frozen=True)
class Frozen:
    value: Tensor
    extra: int = 0


class FakeOutput(OrderedDict):
    """An OrderedDict subclass, as transformers' ModelOutput."""


class Containers(nn.Module):
    """Returns its input inside every container type, and a list it owns."""

    def __init__(self) -> None:
        super().__init__()
        self.kept = [torch.ones(2)]

    def forward(self, x: Tensor) -> tuple[Any, ...]:
        return Pair(x, x + 1), Frozen(x, 3), FakeOutput(a=x), [x], self.kept, {"k": (x,)}


class UsesContainers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Containers()

    def forward(self, x: Tensor) -> Any:
        return self.inner(x)


def test_containers_rebuilt_with_their_types() -> None:
    net = UsesContainers()
    own = net.inner.kept[0]
    x = torch.randn(2)
    want = net(x)
    rec, out = _record(net, x)
    check_outputs_equal(out, want)
    pair, frozen, fake, lst, kept, nested = out
    for value in (pair.left, frozen.value, fake["a"], lst[0], nested["k"][0]):
        assert value is not x and value.data_ptr() == x.data_ptr()
    assert kept is not net.inner.kept and net.inner.kept == [own]  # the module's list is not changed
    assert kept[0] is not own and kept[0].data_ptr() == own.data_ptr()
    assert rec.notes == []


def test_posthook_hands_on_the_alias() -> None:
    """The original API's posthook returns the outputs to hand on; a hook returning it gives
    the module's output its own identity."""
    from torchrecorder.recorder import posthook, prehook

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x: Tensor, extra: nn.Module) -> Tensor:
            return self.fc(extra(x)) + x

    net, extra = Outer(), nn.Identity()
    template = torchrecorder.LayerNode("extra", path="extra")
    x = torch.randn(2, 3)
    with torchrecorder.recording(net, "net") as rec:
        handles = [
            extra.register_forward_pre_hook(lambda m, a, k: prehook(m, a, rec, template, k),
                                            with_kwargs=True),
            extra.register_forward_hook(lambda m, a, k, o: posthook(m, a, o, rec, template, k),
                                        with_kwargs=True),
        ]
        try:
            out = net(x, extra)
        finally:
            for h in handles:
                h.remove()
    assert torch.equal(out, net.fc(x) + x)
    rel = recorded_relation(rec)
    assert ("extra#1", "fc#1") in rel and ("INPUT", "OUTPUT") in rel


class BufferFedTwice(nn.Module):
    """Two calls read the same buffer, as an argument and inside an op; neither feeds the other."""

    table: Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.arange(4.0))
        self.left = nn.Bilinear(4, 4, 4)
        self.right = nn.Bilinear(4, 4, 4)
        self.scale = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        table = self.table.expand_as(x)
        return self.left(x, table) + self.right(x, table) + self.scale(x * self.table)


def test_a_buffer_read_by_two_calls_joins_them_not() -> None:
    net = BufferFedTwice()
    rec, _ = _record(net, torch.randn(2, 4))
    rel = recorded_relation(rec)
    assert {("INPUT", "left#1"), ("INPUT", "right#1"), ("INPUT", "scale#1")} <= rel
    calls = {"left#1", "right#1", "scale#1"}
    assert not [(a, b) for a, b in rel if a in calls and b in calls]
    assert rec.notes == []


# ------------------------------------------- untraced code whose inputs are gone
def _fresh_script(fn: Any) -> Any:
    """A new TorchScript function compiled from ``fn``'s code (torch.jit.script caches by the
    function object): its executor starts unwarmed whatever ran before."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.script(copy)


@pytest.mark.parametrize("warmup", [(3, 0), (3, 3), (0, 3)], ids=["grad", "grad+no_grad", "no_grad"])
def test_scripted_function_after_warmup(monkeypatch: pytest.MonkeyPatch, warmup: tuple[int, int]) -> None:
    """Once TorchScript's profiling executor has optimised a scripted function (after a few
    calls with gradients), its result's grad_fn is one fused node and the temporary it was
    given (``scripted_gate(self.a(x))``) is freed: the edge is still found through autograd."""
    monkeypatch.setattr(passthrough, "scripted_gate", _fresh_script(passthrough._gate))
    torch.manual_seed(0)
    net = passthrough.ScriptedFunction()
    x = torch.randn(2, 4)
    with_grad, without = warmup
    for _ in range(with_grad):
        net(x).sum().backward()
    with torch.no_grad():
        for _ in range(without):
            net(x)
    net.zero_grad()
    rec, out = _record(net, x)
    check_invariants(rec)
    (pairs,) = [p for c, p in passthrough.MISSING_EDGES if c.name == "ScriptedFunction"]
    rel = recorded_relation(rec)
    assert set(pairs) <= rel, f"missing {sorted(set(pairs) - rel)}"
    assert rec.notes == []
    torch.testing.assert_close(out, net(x))


class _TemporaryIntoScript(nn.Module):
    """``twice(self.a(x) + 1)``: no backward node saves the sum, so the tensor is freed before
    the scripted result is read, while autograd still links the result to it."""

    def __init__(self, twice: Any) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 2)
        self.twice = twice

    def forward(self, x: Tensor) -> Tensor:
        return self.b(self.twice(self.a(x) + 1))


def _twice(x: Tensor) -> Tensor:
    return x * 2


def test_untraced_call_on_freed_temporary() -> None:
    """The producer of a tensor that only an untraced call read, and that is gone when its
    result is read, is still joined to that result (not only the parameters behind it)."""
    net = _TemporaryIntoScript(_fresh_script(_twice))
    rec, _ = _record(net, torch.randn(2, 4))
    check_invariants(rec)
    assert ("a#1", "b#1") in recorded_relation(rec)
    assert rec.notes == []
    g = rec
    untraced = [k for k, n in g.nodes.items() if isinstance(n, OpNode) and n.op == "mul"]
    assert len(untraced) == 1
    assert {s for s, d in g.links if d == untraced[0]} == {"net/add"}
