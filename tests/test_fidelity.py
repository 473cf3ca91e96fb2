"""Output and fidelity (issue 10): recording computes what a plain call computes, and draws it.

PyTorch's fused fast paths (``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer``,
``nn.TransformerEncoder`` in inference), ``torch.compile``, lazy modules, buffers made
under ``inference_mode`` or with ``.expand()``, ``torch.jit`` modules and nested tensors.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
import torch
from torch import Tensor, nn
from torch.nn.parameter import is_lazy

import torchrecorder
from torchrecorder import LayerNode, OpNode, ParamNode, TensorNode

from .backends import needs_backend
from .graph_checks import check_invariants, check_state_unchanged, global_hook_counts, snapshot

B, S, E = 3, 6, 16


def _inputs() -> tuple[Tensor, Tensor]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(B, S, E, generator=gen)
    padding = torch.zeros(B, S, dtype=torch.bool)
    padding[1, 4:] = True
    padding[2, 2:] = True
    return x, padding


def _encoder(layers: int = 2, **kwargs: Any) -> nn.TransformerEncoder:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(E, 4, 32, batch_first=True, **kwargs)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=True).eval()


def _mha() -> nn.MultiheadAttention:
    torch.manual_seed(0)
    return nn.MultiheadAttention(E, 4, batch_first=True).eval()


def _outputs(out: Any) -> list[Tensor]:
    return [t for t in (out if isinstance(out, tuple) else (out,)) if isinstance(t, Tensor)]


def _record_call(net: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                 **options: Any) -> tuple[list[Tensor], torchrecorder.Recorder]:
    """The output of ``net(*args, **kwargs)`` computed while recording, and the recording."""
    with torchrecorder.recording(net, "net", **options) as rec:
        out = net(*args, **kwargs)
    return _outputs(out), rec


def _mode_stack_empty() -> bool:
    return not torch.overrides._get_current_function_mode_stack()


def _layer(rec: torchrecorder.Recorder, key: str) -> LayerNode:
    node = rec.nodes[key]
    assert isinstance(node, LayerNode)
    return node


def _inside(rec: torchrecorder.Recorder, key: str) -> list[Any]:
    return [rec.nodes[k] for k in _layer(rec, key).subnet_keys]


# ------------------------------------------------------------------ fused fast paths
FAST_CASES = {
    # the encoder turns the padded batch into nested tensors: one closed box
    "encoder+padding": (_encoder, lambda x, p: ((x,), {"src_key_padding_mask": p}),
                        {"net": "fused: nested tensor fast path"}),
    # no padding mask: the encoder runs its Python loop, each layer one fused kernel
    "encoder": (_encoder, lambda x, p: ((x,), {}),
                {"layers.0": "fused: _transformer_encoder_layer_fwd",
                 "layers.1": "fused: _transformer_encoder_layer_fwd"}),
    "attention+padding": (_mha, lambda x, p: ((x, x, x), {"key_padding_mask": p}),
                          {"net": "fused: _native_multi_head_attention"}),
    "layer+padding": (lambda: _encoder(1).layers[0],
                      lambda x, p: ((x,), {"src_key_padding_mask": p}),
                      {"net": "fused: _transformer_encoder_layer_fwd"}),
}


@pytest.mark.parametrize("case", sorted(FAST_CASES))
@pytest.mark.parametrize("grad_mode", ["no_grad", "inference_mode"])
def test_fused_fast_path_output_is_bit_identical_and_drawn_closed(case: str, grad_mode: str) -> None:
    build, call, fused = FAST_CASES[case]
    net = build()
    x, padding = _inputs()
    args, kwargs = call(x, padding)
    before = snapshot(net)
    hooks = global_hook_counts()
    with getattr(torch, grad_mode)():
        plain = _outputs(net(*args, **kwargs))
        got, rec = _record_call(net, args, kwargs)
    assert len(got) == len(plain)
    for a, b in zip(got, plain, strict=True):
        assert torch.equal(a, b), "recording changed what the model computes"
    check_state_unchanged(before, net)
    assert global_hook_counts() == hooks and _mode_stack_empty()
    check_invariants(rec)
    for key, note in fused.items():
        layer = _layer(rec, key)
        assert layer.opaque == note and not layer.unfused
        ops = [n for n in _inside(rec, key) if isinstance(n, OpNode)]
        assert [op.op for op in ops] == [note.removeprefix("fused: ")]
        assert not any(isinstance(n, LayerNode) for n in _inside(rec, key))
        # the op reads the call's inputs and every parameter of the module; it makes the outputs
        sources = {a for a, b in rec.links if b == ops[0].key}
        params = {n.key for n in _inside(rec, key) if isinstance(n, ParamNode)}
        assert params and params <= sources
        assert sum(p.numel() for p in layer.fn.parameters()) == sum(
            rec.nodes[k].numel for k in params)
        assert any(isinstance(rec.nodes[a], TensorNode) and not isinstance(rec.nodes[a], ParamNode)
                   for a in sources)
        assert any(a == ops[0].key for a, _ in rec.links)
    dot = torchrecorder.make_dot(rec).source
    for note in fused.values():
        assert note in dot
    assert "unfused" not in dot


def test_padded_positions_stay_zero_as_in_a_plain_call() -> None:
    """The issue's symptom: recorded, the fused encoder's padded rows were not zero."""
    net = _encoder()
    x, padding = _inputs()
    with torch.no_grad():
        got, _ = _record_call(net, (x,), {"src_key_padding_mask": padding})
    assert torch.count_nonzero(got[0][padding]) == 0


def test_unfuse_fast_paths_records_the_python_path_and_says_so() -> None:
    net = _encoder()
    x, padding = _inputs()
    with torch.no_grad():
        plain = net(x, src_key_padding_mask=padding)
        got, rec = _record_call(net, (x,), {"src_key_padding_mask": padding}, unfuse_fast_paths=True)
    check_invariants(rec)
    root = _layer(rec, "net")
    assert root.unfused == "nested tensor fast path" and not root.opaque
    layer = _layer(rec, "layers.0")
    assert layer.unfused == "_transformer_encoder_layer_fwd" and not layer.opaque
    children = {n.path for n in _inside(rec, "layers.0") if isinstance(n, LayerNode)}
    assert {"layers.0.self_attn", "layers.0.linear1", "layers.0.norm2"} <= children
    # the Python path ran: padded rows are no longer zero, the rest agrees up to rounding
    assert torch.count_nonzero(got[0][padding]) > 0
    torch.testing.assert_close(got[0][~padding], plain[~padding])
    dot = torchrecorder.make_dot(rec, 2).source
    assert "unfused path (plain call: _transformer_encoder_layer_fwd)" in dot
    assert "fused:" not in dot
    mermaid = torchrecorder.make_mermaid(rec, 2)
    assert "unfused path (plain call: _transformer_encoder_layer_fwd)" in mermaid


def test_record_and_render_network_take_unfuse_fast_paths(tmp_path: Any) -> None:
    net = _encoder()
    x, padding = _inputs()
    with torch.no_grad():
        fused = torchrecorder.record(net, "enc", input_data=x,
                                     input_kwargs={"src_key_padding_mask": padding})
        unfused = torchrecorder.record(net, "enc", input_data=x, unfuse_fast_paths=True,
                                       input_kwargs={"src_key_padding_mask": padding})
        path = torchrecorder.render_network(net, "enc", None, str(tmp_path), fmt="mmd",
                                            input_data=x, unfuse_fast_paths=True, render_depth=2,
                                            input_kwargs={"src_key_padding_mask": padding})
    assert _layer(fused, "enc").opaque == "fused: nested tensor fast path"
    assert len(list(fused.layers())) == 1 and len(list(unfused.layers())) > 10
    assert _layer(unfused, "enc").unfused == "nested tensor fast path"
    with open(path, encoding="utf-8") as fh:
        assert "unfused path" in fh.read()
    assert "(fused: nested tensor fast path)" in str(fused).replace("  ", " ")


def test_no_fast_path_when_a_plain_call_takes_none() -> None:
    """Gradients on, training, or a user's hook on a submodule: torch runs the Python path,
    and the recording shows it, unmarked."""
    x, padding = _inputs()
    net = _encoder()
    got, rec = _record_call(net, (x,), {"src_key_padding_mask": padding})  # grad enabled
    assert not any(layer.opaque or layer.unfused for layer in rec.layers())
    assert "layers.0.self_attn" in rec.nodes
    net = _encoder()
    handle = net.layers[1].linear1.register_forward_hook(lambda m, a, o: None)
    try:
        with torch.no_grad():
            plain = net(x)
            got, rec = _record_call(net, (x,), {})
    finally:
        handle.remove()
    assert torch.equal(got[0], plain)
    assert _layer(rec, "layers.0").opaque == "fused: _transformer_encoder_layer_fwd"
    assert not _layer(rec, "layers.1").opaque and "layers.1.linear1" in rec.nodes


class _Interrupting(nn.MultiheadAttention):
    """Raises from inside the fused path (``merge_masks`` runs only there)."""

    exc: BaseException = ValueError("bad mask")

    def merge_masks(self, *args: Any, **kwargs: Any) -> Any:
        raise self.exc


class _SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(E, E)
        self.attn = _Interrupting(E, 4, batch_first=True)

    def forward(self, x: Tensor) -> Tensor:
        h = self.fc(x)
        return self.attn(h, h, h)[0]


@pytest.mark.parametrize("exc", [ValueError("bad mask"), KeyboardInterrupt()])
def test_exception_inside_a_fused_call_leaves_no_hooks_and_no_mode(exc: BaseException) -> None:
    torch.manual_seed(0)
    net = _SelfAttention().eval()
    net.attn.exc = exc
    x, _ = _inputs()
    before = snapshot(net)
    hooks = global_hook_counts()
    with torch.no_grad(), pytest.raises(type(exc)):
        _record_call(net, (x,), {})
    check_state_unchanged(before, net)
    assert global_hook_counts() == hooks and _mode_stack_empty()
    # the recorder still works afterwards, and so does the fast path
    with torch.no_grad():
        _, rec = _record_call(_mha(), (x, x, x), {})
    assert _layer(rec, "net").opaque == "fused: _native_multi_head_attention"


def test_per_module_forward_hooks_keep_attention_fused(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a torch without global always-called forward hooks every module gets its own forward
    hook: an encoder layer, which refuses its fast path when it has hooks, runs its Python path
    (marked unfused); attention, which does not check hooks, still runs fused."""
    engine = importlib.import_module("torchrecorder.recording.engine")
    monkeypatch.setattr(engine, "GLOBAL_POST_HOOK", False)
    x, padding = _inputs()
    with torch.no_grad():
        net = _mha()
        plain = net(x, x, x, key_padding_mask=padding)[0]
        got, rec = _record_call(net, (x, x, x), {"key_padding_mask": padding})
        assert torch.equal(got[0], plain)
        assert _layer(rec, "net").opaque == "fused: _native_multi_head_attention"
        net = _encoder()
        _, rec = _record_call(net, (x,), {})
    assert _layer(rec, "layers.0").unfused == "_transformer_encoder_layer_fwd"
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in net.modules())
    assert _mode_stack_empty()


def test_fused_calls_round_trip_through_json() -> None:
    x, _ = _inputs()
    with torch.no_grad():
        _, fused = _record_call(_encoder(), (x,), {})
        _, unfused = _record_call(_encoder(), (x,), {}, unfuse_fast_paths=True)
    for rec in (fused, unfused):
        again = torchrecorder.loads_json(rec.to_json())
        assert torchrecorder.make_dot(again).source == torchrecorder.make_dot(rec).source
    layers = {d["key"]: d for d in json.loads(fused.to_json())["nodes"] if d["kind"] == "layer"}
    assert layers["layers.0"]["opaque"] == "fused: _transformer_encoder_layer_fwd"
    assert "opaque" not in layers["net"] and "unfused" not in layers["net"]
    doc = json.loads(fused.to_json())
    next(d for d in doc["nodes"] if d["key"] == "layers.0")["opaque"] = 7
    with pytest.raises(ValueError, match="opaque"):
        torchrecorder.loads_json(json.dumps(doc))


# ------------------------------------------------------------------ torch.compile
class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(torch.relu(self.bn(self.fc(x))))


@pytest.mark.parametrize("training", [True, False])
def test_compiled_model_with_batchnorm_and_dropout_records(training: bool) -> None:
    torch._dynamo.reset()
    net = _Net().train(training)
    compiled = torch.compile(net, backend="eager")
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    state = {k: v.clone() for k, v in net.state_dict().items()}
    torch.manual_seed(1)
    plain = compiled(x)
    net.load_state_dict(state)
    torch.manual_seed(1)
    with torchrecorder.recording(compiled, "c") as rec:
        got = compiled(x)
    assert torch.equal(got, plain)
    check_invariants(rec)
    paths = [layer.path for layer in rec.layers()]
    assert paths == ["", "_orig_mod", "_orig_mod.fc", "_orig_mod.bn", "_orig_mod.drop"]
    ops = {n.op for n in rec.nodes.values() if isinstance(n, OpNode)}
    assert {"linear", "batch_norm", "relu"} <= ops
    rec2 = torchrecorder.record(compiled, "c", (3, 4))
    assert [layer.path for layer in rec2.layers()] == paths


# ------------------------------------------------------------------ lazy modules
@pytest.mark.parametrize("lazy", [lambda: nn.LazyLinear(3), lambda: nn.LazyBatchNorm1d()])
def test_lazy_module_is_refused_before_the_forward_pass(lazy: Any) -> None:
    net = nn.Sequential(nn.Linear(4, 4), lazy())
    calls = []
    net[0].register_forward_hook(lambda m, a, o: calls.append(1))
    hooks = global_hook_counts()
    pre_hooks = [len(m._forward_pre_hooks) for m in net.modules()]  # a lazy module has its own
    with pytest.raises(TypeError, match=r"'1' \(Lazy.*uninitialized.*run one forward pass first"):
        torchrecorder.record(net, "lazy", (2, 4))
    with pytest.raises(TypeError, match="uninitialized"), torchrecorder.recording(net):
        net(torch.randn(2, 4))
    assert not calls, "the model ran"
    assert any(is_lazy(t) for t in (*net[1].parameters(), *net[1].buffers()))
    assert global_hook_counts() == hooks
    assert [len(m._forward_pre_hooks) for m in net.modules()] == pre_hooks
    net(torch.randn(2, 4))  # once initialized, it records
    assert "1" in torchrecorder.record(net, "lazy", (2, 4)).nodes


# ------------------------------------------------------------------ buffers
class _Buffered(nn.Module):
    def __init__(self, buffer: Tensor) -> None:
        super().__init__()
        self.register_buffer("b", buffer)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.b


def test_buffer_created_under_inference_mode() -> None:
    with torch.inference_mode():
        net = _Buffered(torch.ones(3))
    buf = net.b
    rec = torchrecorder.record(net, "n", (2, 3))
    assert net.b is buf and torch.equal(buf, torch.ones(3))
    assert _layer(rec, "n").output_shapes == [(2, 3)]


def test_inference_mode_buffers_updated_by_the_forward_pass_are_put_back() -> None:
    with torch.inference_mode():
        net = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)).train()
    mean = net[1].running_mean.clone()
    with torch.inference_mode():
        torchrecorder.record(net, "n", (4, 3))
        assert torch.equal(net[1].running_mean, mean)
        assert int(net[1].num_batches_tracked) == 0


def test_buffer_made_with_expand() -> None:
    net = _Buffered(torch.arange(3.0).expand(4, 3))
    buf = net.b
    rec = torchrecorder.record(net, "n", (4, 3))
    assert net.b is buf and buf.stride() == (0, 1)
    assert torch.equal(buf, torch.arange(3.0).expand(4, 3))
    assert "n" in rec.nodes


# ------------------------------------------------------------------ TorchScript
class _WithScriptedChild(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.jit.script(nn.Sequential(nn.Linear(3, 4), nn.ReLU()))
        self.head = nn.Linear(4, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.body(x))


def _check_closed_script(rec: torchrecorder.Recorder, key: str, type_name: str, numel: int) -> None:
    layer = _layer(rec, key)
    assert layer.opaque == "TorchScript" and layer.type_name == type_name
    inside = _inside(rec, key)
    ops = [n for n in inside if isinstance(n, OpNode)]
    assert [op.op for op in ops] == ["torchscript"]
    assert not any(isinstance(n, LayerNode) for n in inside)
    params = [n for n in inside if isinstance(n, ParamNode)]
    assert sum(p.numel for p in params) == numel
    sources = {a for a, b in rec.links if b == ops[0].key}
    assert {p.key for p in params} < sources
    assert any(a == ops[0].key for a, _ in rec.links)


def test_scripted_child_module_is_drawn_as_a_closed_box() -> None:
    net = _WithScriptedChild()
    x = torch.randn(2, 3)
    before = snapshot(net)
    hooks = global_hook_counts()
    plain = net(x)
    got, rec = _record_call(net, (x,), {})
    assert torch.equal(got[0], plain)
    check_state_unchanged(before, net)
    assert global_hook_counts() == hooks
    check_invariants(rec)
    _check_closed_script(rec, "body", "Sequential", 16)
    assert [layer.path for layer in rec.layers()] == ["", "body", "head"]
    assert "TorchScript" in torchrecorder.make_dot(rec).source
    assert "TorchScript" in torchrecorder.make_mermaid(rec)


def test_scripted_module_refused_where_its_calls_cannot_be_closed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.import_module("torchrecorder.recording.engine"),
                        "GLOBAL_POST_HOOK", False)
    net = _WithScriptedChild()
    hooks = global_hook_counts()
    with pytest.raises(TypeError, match="TorchScript module 'body'"):
        torchrecorder.record(net, "n", (2, 3))
    assert global_hook_counts() == hooks
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in net.modules())


@pytest.mark.parametrize("how", ["script", "trace"])
def test_scripted_or_traced_root_is_drawn_as_a_closed_box(how: str) -> None:
    eager = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    x = torch.randn(2, 3)
    net = torch.jit.script(eager) if how == "script" else torch.jit.trace(eager, x)
    hooks = global_hook_counts()
    rec = torchrecorder.record(net, "s", input_data=x)
    assert global_hook_counts() == hooks
    check_invariants(rec)
    _check_closed_script(rec, "s", "Sequential", 16)
    assert torchrecorder.loads_json(rec.to_json()).nodes["s"].opaque == "TorchScript"


def test_scripted_batchnorm_statistics_are_put_back() -> None:
    net = torch.jit.script(nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))).train()
    mean = net[1].running_mean.clone()
    rec = torchrecorder.record(net, "s", (4, 3))
    assert torch.equal(net[1].running_mean, mean) and int(net[1].num_batches_tracked) == 0
    _check_closed_script(rec, "s", "Sequential", 18)


# ------------------------------------------------------------------ nested tensors
class _Ragged(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 5)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(x).relu()


@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
def test_nested_tensors_record_with_a_ragged_dimension(layout: torch.layout) -> None:
    x = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], layout=layout)
    net = _Ragged()
    plain = net(x)
    got, rec = _record_call(net, (x,), {})
    assert all(torch.equal(a, b) for a, b in zip(got[0].unbind(), plain.unbind(), strict=True))
    check_invariants(rec)
    fc = _layer(rec, "fc")
    assert fc.input_shapes == [(2, -1, 3)] and fc.output_shapes == [(2, -1, 5)]
    assert rec.nodes["input:x"].shape == (2, -1, 3)
    text = rec.to_json()
    again = torchrecorder.loads_json(text)
    assert torchrecorder.make_dot(again).source == torchrecorder.make_dot(rec).source
    assert "2×*×5" in torchrecorder.make_dot(rec).source and "2×*×3" in str(rec)


@needs_backend
def test_fused_box_renders() -> None:
    x, _ = _inputs()
    with torch.no_grad():
        rec = torchrecorder.record(_encoder(), "enc", input_data=x)
    svg = torchrecorder.backend.render_source(torchrecorder.make_dot(rec, 2).source, "svg").decode()
    assert "fused: _transformer_encoder_layer_fwd" in svg


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_shapes_of_nested_tensors_and_parameters() -> None:
    """``shape_tuple`` (the engine's shared shapes) gives what ``shape_of`` gives: a ragged
    dimension is -1 for both nested layouts (a strided one has no sizes, a jagged one a
    symbolic size), never the jagged size itself."""
    from torchrecorder.recording.meta import shape_of, shape_tuple

    parts = [torch.zeros(2, 3), torch.zeros(4, 3)]
    strided = torch.nested.nested_tensor(parts)
    jagged = torch.nested.nested_tensor(parts, layout=torch.jagged)
    assert shape_tuple(strided) == shape_of(strided) == (2, -1, 3)
    assert shape_tuple(jagged) == shape_of(jagged) == (2, -1, 3)
    param = nn.Parameter(torch.zeros(5, 2))
    assert shape_tuple(param) == (5, 2) and shape_tuple(torch.zeros(())) == ()
    assert shape_tuple(torch.zeros(2, 3)) is shape_tuple(torch.ones(2, 3))
