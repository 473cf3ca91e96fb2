"""Record every zoo model and check the recording (SPEC section 3).

Each model is recorded once (cached); the tests then check the graph
invariants, that the model is left as it was, that the output is unchanged,
and compare the recorded dataflow with an independent oracle (torch.fx where
it can trace the model, else torch.export).  The oracle's precision and recall
per model are printed as a table at the end of the module.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import resource
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder import LayerNode, OpNode, TensorNode
from torchrecorder.nodes import Key
from torchrecorder.renderer import GraphvizRenderer

from .backends import needs_backend
from .graph_checks import (
    check_acyclic,
    check_calls,
    check_invariants,
    check_metadata_only,
    check_outputs_equal,
    check_params,
    check_state_unchanged,
    count_calls,
    snapshot,
)
from .oracle import compare, export_relation, fx_relation, recorded_relation
from .zoo import Case, all_cases, hf

CASES = all_cases()
BY_NAME = {c.name: c for c in CASES}
HF_MISSING = not hf.CASES
_MODES = {"grad": contextlib.nullcontext, "no_grad": torch.no_grad, "inference": torch.inference_mode}


@dataclass
class Recorded:
    """A zoo model, recorded once, with what the checks need."""

    case: Case
    net: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    rec: torchrecorder.Recorder
    out: Any
    before: dict[str, Any]


@functools.cache
def recorded(name: str) -> Recorded:
    """Build, snapshot and record the zoo model ``name`` (once per test session)."""
    case = BY_NAME[name]
    net = case.build()
    args, kwargs = case.inputs()
    before = snapshot(net)
    if case.train:
        # record() puts back what a training-mode pass changes (BatchNorm statistics)
        rec = torchrecorder.record(net, case.name, input_data=args, input_kwargs=kwargs)
        return Recorded(case, net, args, kwargs, rec, None, before)
    with _MODES[case.grad_mode](), torchrecorder.recording(net, case.name) as rec:
        out = net(*args, **kwargs)
    return Recorded(case, net, args, kwargs, rec, out, before)


def _params(cases: list[Case]) -> list[Any]:
    return [pytest.param(c.name, id=c.name) for c in cases]


ALL = _params(CASES)


def test_zoo_size() -> None:
    handwritten = [c for c in CASES if not c.name.startswith("hf-")]
    assert len(handwritten) >= 25
    if not HF_MISSING:
        assert len({c.name for c in hf.CASES if not c.meta}) >= 12


@pytest.mark.parametrize("name", ALL)
def test_graph_invariants(name: str) -> None:
    check_invariants(recorded(name).rec)


@pytest.mark.parametrize("name", ALL)
def test_model_left_unchanged(name: str) -> None:
    r = recorded(name)
    check_state_unchanged(r.before, r.net)


@pytest.mark.parametrize("name", ALL)
def test_output_equals_plain_call(name: str) -> None:
    r = recorded(name)
    if r.case.train:
        # record() ran the pass; now a recording context gives the output itself
        # (train-mode BatchNorm normalises with batch statistics, so a repeated
        # call gives the same output)
        with _restored(r.net), torchrecorder.recording(r.net):
            out = r.net(*r.args, **r.kwargs)
    else:
        out = r.out
    with _MODES[r.case.grad_mode](), _restored(r.net):
        want = r.net(*r.args, **r.kwargs)
    if r.case.approx:
        assert torch.allclose(out, want, atol=1e-5), r.case.approx
        return
    check_outputs_equal(out, want)


@contextlib.contextmanager
def _restored(net: nn.Module) -> Iterator[None]:
    saved = {k: v.clone() for k, v in net.state_dict().items() if v.device.type != "meta"}
    try:
        yield
    finally:
        net.load_state_dict(saved, strict=False)


@pytest.mark.parametrize("name", ALL)
def test_calls_and_parameters(name: str) -> None:
    r = recorded(name)
    with _MODES[r.case.grad_mode](), _restored(r.net):
        _, counts = count_calls(r.net, r.args, r.kwargs)
    check_calls(r.rec, r.net, counts)
    check_params(r.rec, r.net, counts)


@pytest.mark.parametrize("name", ALL)  # every zoo model is feed-forward (loops unroll)
def test_drawn_graph_acyclic(name: str) -> None:
    check_acyclic(recorded(name).rec, depths=(1, 2, 256))


@pytest.mark.parametrize("name", ALL)
def test_metadata_not_tensors(name: str) -> None:
    check_metadata_only(recorded(name).rec)


@pytest.mark.parametrize("name", ALL)
def test_make_dot(name: str) -> None:
    rec = recorded(name).rec
    for depth in (1, 256):
        source = torchrecorder.make_dot(rec, render_depth=depth).source
        assert source.startswith("digraph") and source.rstrip().endswith("}")
        drawn = {e for e in GraphvizRenderer(rec, depth).drawn_edges()}
        assert source.count("->") >= len(drawn)


@needs_backend
@pytest.mark.dot
@pytest.mark.parametrize("name", ALL)
def test_svg(name: str) -> None:
    from torchrecorder.backend import render_source

    r = recorded(name)
    for depth in (1, 256):
        svg = render_source(torchrecorder.make_dot(r.rec, render_depth=depth).source, "svg")
        assert svg.lstrip().startswith(b"<?xml") and b"</svg>" in svg


# ------------------------------------------------------------------- the oracle
@dataclass
class OracleRow:
    name: str
    oracle: str
    pairs: int = 0
    precision: Optional[float] = None
    recall: Optional[float] = None
    note: str = ""
    diff: str = ""


ORACLE_ROWS: dict[str, OracleRow] = {}


def _oracle(r: Recorded) -> OracleRow:
    case = r.case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case.oracle is None:
            expected = fx_relation(r.net, r.args, r.kwargs, case.fx_concrete)
            got = recorded_relation(r.rec)
            source = "fx"
        elif case.no_export:
            return OracleRow(case.name, "none", note=f"{case.oracle}; no export: {case.no_export}")
        else:
            kwargs = r.kwargs
            if "use_cache" in inspect.signature(r.net.forward).parameters:
                # export cannot return a transformers Cache object; the cache is
                # written, never read, in one pass, so the dataflow is the same
                kwargs = {**kwargs, "use_cache": False}
            expected, visible = export_relation(r.net, r.args, kwargs)
            got = recorded_relation(r.rec, visible)
            source = "export"
    precision, recall, missing, extra = compare(expected, got)
    note = case.oracle or ""
    if case.known_gap:
        note = (note + "; " if note else "") + "known gap: " + case.known_gap
    row = OracleRow(case.name, source, len(expected), precision, recall, note)
    row.diff = "".join(f" missing {m}" for m in sorted(missing)[:3])
    row.diff += "".join(f" extra {e}" for e in sorted(extra)[:3])
    return row


@pytest.mark.parametrize("name", ALL)
def test_oracle(name: str) -> None:
    row = _oracle(recorded(name))
    ORACLE_ROWS[name] = row
    if row.oracle == "none":
        pytest.skip(row.note)
    if recorded(name).case.known_gap:
        assert (row.precision, row.recall) != (1.0, 1.0), "the known gap is gone: remove it"
        return
    assert (row.precision, row.recall) == (1.0, 1.0), row.diff


def test_oracle_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Print precision and recall per model (runs after every ``test_oracle``)."""
    if not ORACLE_ROWS:
        pytest.skip("no oracle comparison ran")
    lines = ["", "Oracle comparison: leaf-call dataflow pairs, recording vs oracle",
             f"{'model':26} {'oracle':7} {'pairs':>5} {'precision':>9} {'recall':>6}  note"]
    reasons: dict[str, int] = {}
    for row in ORACLE_ROWS.values():
        p = "-" if row.precision is None else f"{row.precision:.2f}"
        rc = "-" if row.recall is None else f"{row.recall:.2f}"
        ref = f"[{reasons.setdefault(row.note, len(reasons) + 1)}]" if row.note else ""
        lines.append(f"{row.name:26} {row.oracle:7} {row.pairs:5d} {p:>9} {rc:>6}  {ref}{row.diff}")
    lines.extend(f"[{number}] {reason}" for reason, number in reasons.items())
    with capsys.disabled():
        print("\n".join(lines))
    compared = [r for r in ORACLE_ROWS.values() if r.oracle != "none" and not BY_NAME[r.name].known_gap]
    assert all((r.precision, r.recall) == (1.0, 1.0) for r in compared)


_FX_NAMED = [c for c in CASES if c.oracle is not None and not c.meta]
_NO_EXPORT = [c for c in CASES if c.no_export and not c.meta]


@pytest.mark.parametrize("name", _params(_NO_EXPORT))
def test_export_exclusion_is_real(name: str) -> None:
    """A model compared with neither oracle really cannot be exported."""
    r = recorded(name)
    with warnings.catch_warnings(), pytest.raises(Exception):  # noqa: B017
        warnings.simplefilter("ignore")
        export_relation(r.net, r.args, r.kwargs)


@pytest.mark.parametrize("name", _params(_FX_NAMED))
def test_oracle_exclusion_is_real(name: str) -> None:
    """A model left out of the fx comparison really cannot be traced, or fx really disagrees."""
    r = recorded(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = fx_relation(r.net, r.args, r.kwargs, r.case.fx_concrete)
        except Exception:
            return
    precision, recall, _, _ = compare(expected, recorded_relation(r.rec))
    assert (precision, recall) != (1.0, 1.0), f"fx agrees with {name}: remove its exclusion"


def test_oracle_catches_a_wrong_edge() -> None:
    """The oracle is not vacuous: dropping an edge from a recording lowers recall."""
    rec = recorded("ResidualCNN").rec
    expected = recorded_relation(rec)
    layer = next(n for n in rec.layers() if n.path == "fc")
    inner = {k for k in rec.nodes if rec.nodes[k].parent == layer.key}
    rec2 = torchrecorder.Recorder("copy")
    rec2.nodes = rec.nodes
    rec2.edges = type(rec.edges)(e for e in rec.edges if e[1] not in inner)
    _, recall, missing, _ = compare(expected, recorded_relation(rec2))
    assert recall < 1.0 and any(b == "fc#1" for _, b in missing)


# ------------------------------------------------------ specific recording cases
def _path(rec: torchrecorder.Recorder, start: Key, goal: Key) -> bool:
    succ: dict[Any, list[Any]] = {}
    for a, b in rec.edges:
        succ.setdefault(a, []).append(b)
    todo, seen = [start], {start}
    while todo:
        k = todo.pop()
        if k == goal:
            return True
        for n in succ.get(k, ()):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return False


def test_integer_and_boolean_dataflow_is_recorded() -> None:
    """ids != pad -> cumsum -> positions -> pos embedding: autograd sees none of it."""
    r = recorded("TokenMask")
    rec = r.rec
    ops = {n.op: k for k, n in rec.nodes.items() if isinstance(n, OpNode)}
    assert {"ne", "cumsum", "masked_fill", "embedding"} <= set(ops)
    ids = next(k for k, n in rec.nodes.items() if isinstance(n, TensorNode) and n.role == "input")
    ids_node = rec.nodes[ids]
    assert isinstance(ids_node, TensorNode) and ids_node.dtype == "int64"
    pos_call = next(n for n in rec.layers() if n.path == "pos")
    inner = [k for k in rec.nodes if rec.nodes[k].parent == pos_call.key]
    assert _path(rec, ids, ops["ne"]) and _path(rec, ops["ne"], ops["cumsum"])
    assert any(_path(rec, ops["cumsum"], k) for k in inner), "positions do not reach the pos embedding"
    assert _path(rec, ops["ne"], ops["masked_fill"])
    # the same flow with the whole pass under no_grad, where autograd records nothing
    with torch.no_grad(), torchrecorder.recording(r.net) as rec2:
        r.net(*r.args)
    assert recorded_relation(rec2) == recorded_relation(rec)


def test_module_called_three_times_gives_three_nodes() -> None:
    rec = recorded("WeightSharing").rec
    calls = [n for n in rec.layers() if n.path == "shared"]
    assert [c.key for c in calls] == ["shared", "shared#2", "shared#3"]
    rel = recorded_relation(rec)
    assert {("shared#1", "shared#2"), ("shared#2", "shared#3"), ("shared#3", "out#1")} <= rel
    weights = [n for n in rec.nodes.values() if isinstance(n, torchrecorder.ParamNode)
               and n.path == "shared.weight"]
    assert len(weights) == 1


def test_output_container_types_kept() -> None:
    from .zoo.handwritten import DetOutput, FakeModelOutput, Pair

    assert type(recorded("DataclassOutput").out) is DetOutput
    assert recorded("DataclassOutput").out.aux is None
    assert type(recorded("ModelOutputLike").out) is FakeModelOutput
    assert type(recorded("NamedTupleOutput").out) is Pair
    out = recorded("NonTensorPassThrough").out
    assert out[1:] == (None, "eval", 3)
    assert isinstance(recorded("ListOutput").out[1], list)


def test_never_called_modules_not_drawn() -> None:
    rec = recorded("NeverCalled").rec
    paths = {n.path for n in rec.layers()}
    assert "spare" not in paths and "spare.0" not in paths
    assert "heads.unused" not in {n.path for n in recorded("ModuleDictModel").rec.layers()}
    source = torchrecorder.make_dot(rec, render_depth=256).source
    assert "spare" not in source


def test_inplace_ops_recorded() -> None:
    rec = recorded("InplaceOps").rec
    act = next(n for n in rec.layers() if n.path == "act")
    assert [n.op for k in act.subnets if isinstance(n := rec.nodes[k], OpNode)] == ["relu"]
    ops = [n.op for n in rec.nodes.values() if isinstance(n, OpNode)]
    assert "add_" in ops and "mul_" in ops
    rel = recorded_relation(rec)
    assert {("act#1", "c#1"), ("b#1", "c#1")} <= rel


def test_keep_tensors_opt_in() -> None:
    case = BY_NAME["DictOutput"]
    net = case.build()
    args, kwargs = case.inputs()
    with torchrecorder.recording(net, keep_tensors=True) as rec:
        out = net(*args, **kwargs)
    check_metadata_only(rec)
    outputs = [n for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "output"]
    assert {id(n.fn) for n in outputs} == {id(t) for t in out.values()}


def test_record_api_with_keyword_inputs() -> None:
    case = BY_NAME["KeywordInputs"]
    net = case.build()
    args, kwargs = case.inputs()
    rec = torchrecorder.record(net, "kw", input_data=args, input_kwargs=kwargs)
    inputs = {n.name for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "input"}
    assert inputs == {"x", "mask"}
    check_invariants(rec)


@pytest.mark.skipif(HF_MISSING, reason="transformers is not installed")
def test_record_api_on_a_transformers_model() -> None:
    """record() with keyword inputs only, as transformers models take them."""
    case = BY_NAME["hf-bert"]
    net = case.build()
    _, kwargs = case.inputs()
    before = snapshot(net)
    with torch.no_grad():
        rec = torchrecorder.record(net, "bert", input_kwargs=kwargs)
    check_state_unchanged(before, net)
    inputs = {n.name: n for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "input"}
    assert set(inputs) == {"input_ids", "attention_mask"}
    assert inputs["input_ids"].dtype == "int64"
    outputs = {n.name for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "output"}
    assert {"output.last_hidden_state", "output.pooler_output"} <= outputs
    check_invariants(rec)


@pytest.mark.skipif(bool(hf.LLAMA_70B_SKIP), reason=hf.LLAMA_70B_SKIP)
def test_llama_70b_on_meta_device() -> None:
    """A Llama with 70B dimensions records with no real memory for its weights."""
    r = recorded("hf-llama-70b-meta")
    net = r.net
    n_params = sum(p.numel() for p in net.parameters())
    assert n_params > 60e9
    assert all(p.device.type == "meta" for p in net.parameters())
    layers = [n for n in r.rec.layers() if type(n.fn).__name__ == "LlamaDecoderLayer"]
    assert len(layers) == 80
    # peak RSS of this process stays far below the 140 GB the bf16 weights would need
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    assert peak_gb < 8, f"peak RSS {peak_gb:.1f} GB"
    q = next(n for n in r.rec.nodes.values() if isinstance(n, torchrecorder.ParamNode)
             and n.path == "model.layers.0.self_attn.k_proj.weight")
    assert q.shape == (1024, 8192) and q.device == "meta"
    assert any(isinstance(n, LayerNode) and n.output_shapes == [(1, 16, 32000)] for n in r.rec.layers())


def test_ops_outside_submodules_in_the_scope_that_ran_them() -> None:
    rec = recorded("OpsOutsideSubmodules").rec
    root = next(n for n in rec.layers() if n.depth == 0)
    root_ops = [n.op for k in root.subnets if isinstance(n := rec.nodes[k], OpNode)]
    for op in ("cat", "view", "getitem", "mul", "add", "chunk", "mean"):
        assert op in root_ops, f"{op} is not recorded in the root's scope: {root_ops}"
    assert root_ops.count("cat") == 2


def test_buffers_counted_and_left_alone() -> None:
    rec = recorded("Buffers").rec
    layers = {n.path: n for n in rec.layers()}
    assert layers[""].num_buffers == 8  # mean and table
    assert layers["norm"].num_buffers == 9  # running_mean, running_var, num_batches_tracked
    assert not any(isinstance(n, torchrecorder.ParamNode) and "running" in n.path
                   for n in rec.nodes.values())


def test_deep_graph_needs_no_recursion() -> None:
    """Recording, checking and drawing 2,000 chained ops under a low recursion limit."""
    import sys

    case = BY_NAME["DeepChain"]
    net = case.build()
    args, _ = case.inputs()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    try:
        with torchrecorder.recording(net) as rec:
            net(*args)
        rec.lint()
        for depth in (1, 256):
            torchrecorder.make_dot(rec, render_depth=depth)
    finally:
        sys.setrecursionlimit(limit)
    assert sum(isinstance(n, OpNode) for n in rec.nodes.values()) >= 1600


def test_two_forward_calls_in_one_recording() -> None:
    """Each call of the root is its own node; the second reuses no node of the first."""
    case = BY_NAME["ResidualCNN"]
    net = case.build()
    args, _ = case.inputs()
    with torchrecorder.recording(net, "net") as rec:
        net(*args)
        net(args[0] * 2)
    check_invariants(rec)
    check_acyclic(rec)
    roots = [n for n in rec.layers() if n.depth == 0]
    assert [n.key for n in roots] == ["net", "net#2"]
    root_of: dict[str, Key] = {}
    for layer in rec.layers():
        k = layer.key
        while rec.nodes[k].depth > 0:
            k = rec.nodes[k].parent
        root_of[f"{layer.path}#{layer.call_index}"] = k
    rel = recorded_relation(rec)
    assert ("stem#1", "conv1#1") in rel and ("stem#2", "conv1#2") in rel
    crossing = [(a, b) for a, b in rel if a in root_of and b in root_of and root_of[a] != root_of[b]]
    assert not crossing
    assert len(rel) == 2 * len(recorded_relation(recorded("ResidualCNN").rec))


# ------------------------------------------------------- the checks can fail
def _mlp_recording() -> tuple[Any, torchrecorder.Recorder, Any]:
    case = BY_NAME["MLP"]
    net = case.build()
    args, _ = case.inputs()
    with torchrecorder.recording(net) as rec:
        out = net(*args)
    return net, rec, out


def test_checks_catch_a_cut_graph() -> None:
    _, rec, _ = _mlp_recording()
    rec.edges = type(rec.edges)(list(rec.edges)[:-1])  # the edge into the output tensor
    with pytest.raises(AssertionError, match="not reachable"):
        check_invariants(rec)


def test_checks_catch_a_cycle() -> None:
    _, rec, _ = _mlp_recording()
    edges = list(rec.edges)
    first, last = edges[0][0], edges[-1][1]
    rec.edges.add((last, first))
    with pytest.raises(AssertionError, match="cycle"):
        check_acyclic(rec, depths=(256,))


def test_checks_catch_a_changed_model() -> None:
    net, _, _ = _mlp_recording()
    before = snapshot(net)
    handle = net.net[0].register_forward_hook(lambda *a: None)
    with pytest.raises(AssertionError, match="hooks"):
        check_state_unchanged(before, net)
    handle.remove()
    with torch.no_grad():
        net.net[0].bias.add_(1)
    with pytest.raises(AssertionError, match="changed"):
        check_state_unchanged(before, net)


def test_checks_catch_a_changed_output() -> None:
    _, _, out = _mlp_recording()
    with pytest.raises(AssertionError, match="differs"):
        check_outputs_equal(out + 1e-6, out)
    with pytest.raises(AssertionError, match="list != tuple"):
        check_outputs_equal([out], (out,))


def test_checks_catch_a_missing_call() -> None:
    net, rec, _ = _mlp_recording()
    counts = {id(m): 1 for m in net.modules()}
    counts[id(net.net[2])] = 2
    with pytest.raises(AssertionError, match="ran 2 times"):
        check_calls(rec, net, counts)


def test_packed_sequence_dataflow_by_hand() -> None:
    """No tool traces PackedGRU; its leaf-call relation, written out by hand."""
    assert recorded_relation(recorded("PackedGRU").rec) == {
        ("INPUT", "rnn#1"), ("rnn#1", "fc#1"), ("fc#1", "OUTPUT"), ("rnn#1", "OUTPUT")}
    rec = recorded("PackedGRU").rec
    lengths = next(k for k, n in rec.nodes.items() if isinstance(n, TensorNode) and n.name == "lengths")
    lengths_node = rec.nodes[lengths]
    assert isinstance(lengths_node, TensorNode) and lengths_node.dtype == "int64"
    assert any(a == lengths for a, _ in rec.edges), "the lengths feed nothing"
