"""Record every zoo model and check the recording (SPEC section 3).

Each model is recorded once per session (the ``zoo`` fixture of
``conftest.py`` holds the recordings); the tests then check the graph
invariants, that the model is left as it was, that the output is unchanged,
and compare the recorded dataflow with an independent oracle (torch.fx where
it can trace the model, else torch.export).  The oracle's precision and recall
per model are printed as a table at the end of the module.  Parametrisation
reads the static list of cases; no test depends on another having run.
"""

from __future__ import annotations

import resource
import warnings
from collections.abc import Iterable
from typing import Any

import pytest
import torch

import torchrecorder
from torchrecorder import LayerNode, OpNode, TensorNode
from torchrecorder.nodes import Key
from torchrecorder.renderer import GraphvizRenderer

from .backends import needs_backend
from .dot_parse import parse_dot
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
from .zoo.session import MODES, Zoo, restored

CASES: tuple[Case, ...] = tuple(all_cases())  # read at collection time, for the parametrisation only
HF_MISSING = not hf.CASES


def _params(cases: Iterable[Case]) -> list[Any]:
    return [pytest.param(c.name, id=c.name) for c in cases]


ALL = _params(CASES)


def test_zoo_size(zoo: Zoo) -> None:
    handwritten = [c for c in zoo.cases() if not c.name.startswith("hf-")]
    assert len(handwritten) >= 25
    if not HF_MISSING:
        assert len({c.name for c in hf.CASES if not c.meta}) >= 12


@pytest.mark.parametrize("name", ALL)
def test_graph_invariants(zoo: Zoo, name: str) -> None:
    check_invariants(zoo.recorded(name).rec)


@pytest.mark.parametrize("name", ALL)
def test_model_left_unchanged(zoo: Zoo, name: str) -> None:
    r = zoo.recorded(name)
    check_state_unchanged(r.before, r.net)


@pytest.mark.parametrize("name", ALL)
def test_output_equals_plain_call(zoo: Zoo, name: str) -> None:
    r = zoo.recorded(name)
    if r.case.train:
        # record() ran the pass; now a recording context gives the output itself
        # (train-mode BatchNorm normalises with batch statistics, so a repeated
        # call gives the same output)
        with restored(r.net), torchrecorder.recording(r.net):
            out = r.net(*r.args, **r.kwargs)
    else:
        out = r.out
    with MODES[r.case.grad_mode](), restored(r.net):
        want = r.net(*r.args, **r.kwargs)
    if r.case.approx:
        assert torch.allclose(out, want, atol=1e-5), r.case.approx
        return
    check_outputs_equal(out, want)


@pytest.mark.parametrize("name", ALL)
def test_calls_and_parameters(zoo: Zoo, name: str) -> None:
    r = zoo.recorded(name)
    with MODES[r.case.grad_mode](), restored(r.net):
        _, counts = count_calls(r.net, r.args, r.kwargs)
    check_calls(r.rec, r.net, counts)
    check_params(r.rec, r.net, counts)


@pytest.mark.parametrize("name", ALL)  # every zoo model is feed-forward (loops unroll)
def test_drawn_graph_acyclic(zoo: Zoo, name: str) -> None:
    check_acyclic(zoo.recorded(name).rec, depths=(1, 2, 256))


@pytest.mark.parametrize("name", ALL)
def test_metadata_not_tensors(zoo: Zoo, name: str) -> None:
    check_metadata_only(zoo.recorded(name).rec)


@pytest.mark.parametrize("name", ALL)
def test_make_dot(zoo: Zoo, name: str) -> None:
    rec = zoo.recorded(name).rec
    for depth in (1, 256):
        source = torchrecorder.make_dot(rec, render_depth=depth).source
        assert source.startswith("digraph") and source.rstrip().endswith("}")
        drawn = GraphvizRenderer(rec, depth).drawn_edges()
        assert len(parse_dot(source).edges) == len(drawn) > 0


@needs_backend
@pytest.mark.dot
@pytest.mark.parametrize("name", ALL)
def test_svg(zoo: Zoo, name: str) -> None:
    from torchrecorder.backend import render_source

    r = zoo.recorded(name)
    for depth in (1, 256):
        svg = render_source(torchrecorder.make_dot(r.rec, render_depth=depth).source, "svg")
        assert svg.lstrip().startswith(b"<?xml") and b"</svg>" in svg


# ------------------------------------------------------------------- the oracle
@pytest.mark.parametrize("name", ALL)
def test_oracle(zoo: Zoo, name: str) -> None:
    row = zoo.oracle(name)
    if row.oracle == "none":
        pytest.skip(row.note)
    if zoo.case(name).known_gap:
        assert (row.precision, row.recall) != (1.0, 1.0), "the known gap is gone: remove it"
        return
    assert (row.precision, row.recall) == (1.0, 1.0), row.diff


def test_oracle_table(zoo: Zoo, capsys: pytest.CaptureFixture[str]) -> None:
    """Print precision and recall per model (each comparison made once per session, by whichever
    test asks first: after the ``test_oracle`` cases this only reads them)."""
    rows = [zoo.oracle(c.name) for c in zoo.cases()]
    lines = ["", "Oracle comparison: leaf-call dataflow pairs, recording vs oracle",
             f"{'model':26} {'oracle':7} {'pairs':>5} {'precision':>9} {'recall':>6}  note"]
    reasons: dict[str, int] = {}
    for row in rows:
        p = "-" if row.precision is None else f"{row.precision:.2f}"
        rc = "-" if row.recall is None else f"{row.recall:.2f}"
        ref = f"[{reasons.setdefault(row.note, len(reasons) + 1)}]" if row.note else ""
        lines.append(f"{row.name:26} {row.oracle:7} {row.pairs:5d} {p:>9} {rc:>6}  {ref}{row.diff}")
    lines.extend(f"[{number}] {reason}" for reason, number in reasons.items())
    with capsys.disabled():
        print("\n".join(lines))
    compared = [r for r in rows if r.oracle != "none" and not zoo.case(r.name).known_gap]
    assert compared
    assert all((r.precision, r.recall) == (1.0, 1.0) for r in compared)


_FX_NAMED = [c for c in CASES if c.oracle is not None and not c.meta]
_NO_EXPORT = [c for c in CASES if c.no_export and not c.meta]


@pytest.mark.parametrize("name", _params(_NO_EXPORT))
def test_export_exclusion_is_real(zoo: Zoo, name: str) -> None:
    """A model compared with neither oracle really cannot be exported."""
    r = zoo.recorded(name)
    with warnings.catch_warnings(), restored(r.net), pytest.raises(Exception):  # noqa: B017
        warnings.simplefilter("ignore")
        export_relation(r.net, r.args, r.kwargs)


@pytest.mark.parametrize("name", _params(_FX_NAMED))
def test_oracle_exclusion_is_real(zoo: Zoo, name: str) -> None:
    """A model left out of the fx comparison really cannot be traced, or fx really disagrees."""
    r = zoo.recorded(name)
    with warnings.catch_warnings(), restored(r.net):
        warnings.simplefilter("ignore")
        try:
            expected = fx_relation(r.net, r.args, r.kwargs, r.case.fx_concrete)
        except Exception:
            return
    precision, recall, _, _ = compare(expected, recorded_relation(r.rec))
    assert (precision, recall) != (1.0, 1.0), f"fx agrees with {name}: remove its exclusion"


def test_oracle_catches_a_wrong_edge(zoo: Zoo) -> None:
    """The oracle is not vacuous: dropping an edge from a recording lowers recall."""
    rec = zoo.recorded("ResidualCNN").rec
    expected = recorded_relation(rec)
    layer = next(n for n in rec.layers() if n.path == "fc")
    inner = {k for k in rec.nodes if rec.nodes[k].parent_key == layer.key}
    rec2 = torchrecorder.Recorder("copy")
    rec2.nodes = rec.nodes
    rec2.links = type(rec.links)(e for e in rec.links if e[1] not in inner)
    _, recall, missing, _ = compare(expected, recorded_relation(rec2))
    assert recall < 1.0 and any(b == "fc#1" for _, b in missing)


# ------------------------------------------------------ specific recording cases
def _path(rec: torchrecorder.Recorder, start: Key, goal: Key) -> bool:
    succ: dict[Any, list[Any]] = {}
    for a, b in rec.links:
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


def test_integer_and_boolean_dataflow_is_recorded(zoo: Zoo) -> None:
    """ids != pad -> cumsum -> positions -> pos embedding: autograd sees none of it."""
    r = zoo.recorded("TokenMask")
    rec = r.rec
    ops = {n.op: k for k, n in rec.nodes.items() if isinstance(n, OpNode)}
    assert {"ne", "cumsum", "masked_fill", "embedding"} <= set(ops)
    ids = next(k for k, n in rec.nodes.items() if isinstance(n, TensorNode) and n.role == "input")
    ids_node = rec.nodes[ids]
    assert isinstance(ids_node, TensorNode) and ids_node.dtype == "int64"
    pos_call = next(n for n in rec.layers() if n.path == "pos")
    inner = [k for k in rec.nodes if rec.nodes[k].parent_key == pos_call.key]
    assert _path(rec, ids, ops["ne"]) and _path(rec, ops["ne"], ops["cumsum"])
    assert any(_path(rec, ops["cumsum"], k) for k in inner), "positions do not reach the pos embedding"
    assert _path(rec, ops["ne"], ops["masked_fill"])
    # the same flow with the whole pass under no_grad, where autograd records nothing
    with torch.no_grad(), restored(r.net), torchrecorder.recording(r.net) as rec2:
        r.net(*r.args)
    assert recorded_relation(rec2) == recorded_relation(rec)


def test_module_called_three_times_gives_three_nodes(zoo: Zoo) -> None:
    rec = zoo.recorded("WeightSharing").rec
    calls = [n for n in rec.layers() if n.path == "shared"]
    assert [c.key for c in calls] == ["shared", "shared#2", "shared#3"]
    rel = recorded_relation(rec)
    assert {("shared#1", "shared#2"), ("shared#2", "shared#3"), ("shared#3", "out#1")} <= rel
    weights = [n for n in rec.nodes.values() if isinstance(n, torchrecorder.ParamNode)
               and n.path == "shared.weight"]
    assert len(weights) == 1


def test_output_container_types_kept(zoo: Zoo) -> None:
    from .zoo.handwritten import DetOutput, FakeModelOutput, Pair

    assert type(zoo.recorded("DataclassOutput").out) is DetOutput
    assert zoo.recorded("DataclassOutput").out.aux is None
    assert type(zoo.recorded("ModelOutputLike").out) is FakeModelOutput
    assert type(zoo.recorded("NamedTupleOutput").out) is Pair
    out = zoo.recorded("NonTensorPassThrough").out
    assert out[1:] == (None, "eval", 3)
    assert isinstance(zoo.recorded("ListOutput").out[1], list)


def test_never_called_modules_not_drawn(zoo: Zoo) -> None:
    rec = zoo.recorded("NeverCalled").rec
    paths = {n.path for n in rec.layers()}
    assert "spare" not in paths and "spare.0" not in paths
    assert "heads.unused" not in {n.path for n in zoo.recorded("ModuleDictModel").rec.layers()}
    source = torchrecorder.make_dot(rec, render_depth=256).source
    assert "spare" not in source


def test_inplace_ops_recorded(zoo: Zoo) -> None:
    rec = zoo.recorded("InplaceOps").rec
    act = next(n for n in rec.layers() if n.path == "act")
    assert [n.op for k in act.subnet_keys if isinstance(n := rec.nodes[k], OpNode)] == ["relu"]
    ops = [n.op for n in rec.nodes.values() if isinstance(n, OpNode)]
    assert "add_" in ops and "mul_" in ops
    rel = recorded_relation(rec)
    assert {("act#1", "c#1"), ("b#1", "c#1")} <= rel


def test_keep_tensors_opt_in(zoo: Zoo) -> None:
    case = zoo.case("DictOutput")
    net = case.build()
    args, kwargs = case.inputs()
    with torchrecorder.recording(net, keep_tensors=True) as rec:
        out = net(*args, **kwargs)
    check_metadata_only(rec)
    outputs = [n for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "output"]
    assert {id(n.fn) for n in outputs} == {id(t) for t in out.values()}


def test_record_api_with_keyword_inputs(zoo: Zoo) -> None:
    case = zoo.case("KeywordInputs")
    net = case.build()
    args, kwargs = case.inputs()
    rec = torchrecorder.record(net, "kw", input_data=args, input_kwargs=kwargs)
    inputs = {n.name for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "input"}
    assert inputs == {"x", "mask"}
    check_invariants(rec)


@pytest.mark.skipif(HF_MISSING, reason="transformers is not installed")
def test_record_api_on_a_transformers_model(zoo: Zoo) -> None:
    """record() with keyword inputs only, as transformers models take them."""
    case = zoo.case("hf-bert")
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
def test_llama_70b_on_meta_device(zoo: Zoo) -> None:
    """A Llama with 70B dimensions records with no real memory for its weights."""
    r = zoo.recorded("hf-llama-70b-meta")
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


def test_ops_outside_submodules_in_the_scope_that_ran_them(zoo: Zoo) -> None:
    rec = zoo.recorded("OpsOutsideSubmodules").rec
    root = next(n for n in rec.layers() if n.depth == 0)
    root_ops = [n.op for k in root.subnet_keys if isinstance(n := rec.nodes[k], OpNode)]
    for op in ("cat", "view", "getitem", "mul", "add", "chunk", "mean"):
        assert op in root_ops, f"{op} is not recorded in the root's scope: {root_ops}"
    assert root_ops.count("cat") == 2


def test_buffers_counted_and_left_alone(zoo: Zoo) -> None:
    rec = zoo.recorded("Buffers").rec
    layers = {n.path: n for n in rec.layers()}
    assert layers[""].num_buffers == 8  # mean and table
    assert layers["norm"].num_buffers == 9  # running_mean, running_var, num_batches_tracked
    assert not any(isinstance(n, torchrecorder.ParamNode) and "running" in n.path
                   for n in rec.nodes.values())


def test_deep_graph_needs_no_recursion(zoo: Zoo) -> None:
    """Recording, checking and drawing 2,000 chained ops under a low recursion limit."""
    import sys

    case = zoo.case("DeepChain")
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


def test_two_forward_calls_in_one_recording(zoo: Zoo) -> None:
    """Each call of the root is its own node; the second reuses no node of the first."""
    case = zoo.case("ResidualCNN")
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
            k = rec.nodes[k].parent_key
        root_of[f"{layer.path}#{layer.call_index}"] = k
    rel = recorded_relation(rec)
    assert ("stem#1", "conv1#1") in rel and ("stem#2", "conv1#2") in rel
    crossing = [(a, b) for a, b in rel if a in root_of and b in root_of and root_of[a] != root_of[b]]
    assert not crossing
    assert len(rel) == 2 * len(recorded_relation(zoo.recorded("ResidualCNN").rec))


# ------------------------------------------------------- the checks can fail
def _mlp_recording(zoo: Zoo) -> tuple[Any, torchrecorder.Recorder, Any]:
    case = zoo.case("MLP")
    net = case.build()
    args, _ = case.inputs()
    with torchrecorder.recording(net) as rec:
        out = net(*args)
    return net, rec, out


def test_checks_catch_a_cut_graph(zoo: Zoo) -> None:
    _, rec, _ = _mlp_recording(zoo)
    rec.links = type(rec.links)(list(rec.links)[:-1])  # the edge into the output tensor
    with pytest.raises(AssertionError, match="not reachable"):
        check_invariants(rec)


def test_checks_catch_a_cycle(zoo: Zoo) -> None:
    _, rec, _ = _mlp_recording(zoo)
    edges = list(rec.links)
    first, last = edges[0][0], edges[-1][1]
    rec.links.add((last, first))
    with pytest.raises(AssertionError, match="cycle"):
        check_acyclic(rec, depths=(256,))


def test_checks_catch_a_changed_model(zoo: Zoo) -> None:
    net, _, _ = _mlp_recording(zoo)
    before = snapshot(net)
    handle = net.net[0].register_forward_hook(lambda *a: None)
    with pytest.raises(AssertionError, match="hooks"):
        check_state_unchanged(before, net)
    handle.remove()
    with torch.no_grad():
        net.net[0].bias.add_(1)
    with pytest.raises(AssertionError, match="changed"):
        check_state_unchanged(before, net)


def test_checks_catch_a_changed_output(zoo: Zoo) -> None:
    _, _, out = _mlp_recording(zoo)
    with pytest.raises(AssertionError, match="differs"):
        check_outputs_equal(out + 1e-6, out)
    with pytest.raises(AssertionError, match="list != tuple"):
        check_outputs_equal([out], (out,))


def test_checks_catch_a_missing_call(zoo: Zoo) -> None:
    net, rec, _ = _mlp_recording(zoo)
    counts = {id(m): 1 for m in net.modules()}
    counts[id(net.net[2])] = 2
    with pytest.raises(AssertionError, match="ran 2 times"):
        check_calls(rec, net, counts)


def test_packed_sequence_dataflow_by_hand(zoo: Zoo) -> None:
    """No tool traces PackedGRU; its leaf-call relation, written out by hand."""
    assert recorded_relation(zoo.recorded("PackedGRU").rec) == {
        ("INPUT", "rnn#1"), ("rnn#1", "fc#1"), ("fc#1", "OUTPUT"), ("rnn#1", "OUTPUT")}
    rec = zoo.recorded("PackedGRU").rec
    lengths = next(k for k, n in rec.nodes.items() if isinstance(n, TensorNode) and n.name == "lengths")
    lengths_node = rec.nodes[lengths]
    assert isinstance(lengths_node, TensorNode) and lengths_node.dtype == "int64"
    assert any(a == lengths for a, _ in rec.links), "the lengths feed nothing"
