"""``capture(model, ops=...)`` lets PyTorch's fused fast paths run as in a plain call."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder._fused import FAST_PATHS
from torchrecorder.nodes import OpNode

from .hook_checks import hook_count

D, HEADS = 16, 4


def _x(seed: int, batch: int = 3, seq: int = 7) -> torch.Tensor:
    return torch.randn(batch, seq, D, generator=torch.Generator().manual_seed(seed))


PAD = torch.tensor([[False] * 7, [False] * 4 + [True] * 3, [False] * 2 + [True] * 5])


def _mha() -> nn.Module:
    return nn.MultiheadAttention(D, HEADS, batch_first=True)


def _layer() -> nn.Module:
    return nn.TransformerEncoderLayer(D, HEADS, 32, dropout=0.0, batch_first=True)


def _encoder() -> nn.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # enable_nested_tensor's notes
        return nn.TransformerEncoder(_layer(), 2)


class Stack(nn.Module):
    """Every fused module torch has, called inside one model."""

    def __init__(self) -> None:
        super().__init__()
        self.attn, self.layer, self.encoder = _mha(), _layer(), _encoder()

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        x = self.attn(x, x, x, need_weights=False)[0]
        x = self.layer(x)
        return self.encoder(x, src_key_padding_mask=pad)


def _run(name: str) -> Callable[[nn.Module, torch.Tensor], Any]:
    if name == "mha":
        return lambda m, x: m(x, x, x)
    if name == "encoder":
        return lambda m, x: m(x, src_key_padding_mask=PAD)
    if name == "stack":
        return lambda m, x: m(x, PAD)
    return lambda m, x: m(x)


MODELS: dict[str, tuple[Callable[[], nn.Module], str]] = {
    # name -> (model, the op a plain call runs fused, as the recording names it)
    "mha": (_mha, "_native_multi_head_attention"),
    "layer": (_layer, "_transformer_encoder_layer_fwd"),
    "encoder": (_encoder, "nested_tensor_fast_path"),
    "stack": (Stack, "nested_tensor_fast_path"),
}


def _leaves(out: Any) -> list[torch.Tensor]:
    return [t for t in (out if isinstance(out, tuple) else (out,)) if isinstance(t, torch.Tensor)]


def test_the_models_cover_every_fused_module_torch_has() -> None:
    covered = {type(m).forward for make, _ in MODELS.values() for m in make().modules()}
    assert set(FAST_PATHS) <= covered


@pytest.mark.parametrize("ops", ["*", "scoped"])
@pytest.mark.parametrize("name", list(MODELS))
def test_fused_modules_run_as_in_a_plain_call_bit_for_bit(name: str, ops: str) -> None:
    make, kernel = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    run = _run(name)
    # "scoped": the first module with a fast path inside, by its path, and every op of it
    path = next(p for p, m in model.named_modules() if type(m).forward in FAST_PATHS)
    pattern = "*" if ops == "*" else f"{path or 'net'}/*"
    with torch.no_grad():
        for seed in range(4):
            x = _x(seed)
            plain = _leaves(run(model, x))
            with torchrecorder.capture(model, ops=pattern) as cap:
                got = _leaves(run(model, x))
            assert len(got) == len(plain)
            for a, b in zip(got, plain, strict=True):
                assert torch.equal(a, b), f"{name} with ops={pattern!r}: differs from a plain call"
            # the fused call is one operation, named as the recording names it
            fused = [k for k in cap.outputs if k.rpartition("/")[2] in
                     ("_native_multi_head_attention", "_transformer_encoder_layer_fwd",
                      "nested_tensor_fast_path")]
            assert fused, f"{name}: no fused operation captured, got {list(cap.outputs)}"
            if ops == "*":
                assert any(k.endswith("/" + kernel) for k in fused)
    assert hook_count(model) == 0 and torch._C._len_torch_function_stack() == 0
    assert not torch.nn.modules.module._global_forward_hooks
    assert not torch.nn.modules.module._global_forward_pre_hooks


def test_a_padded_encoder_with_a_layer_chosen_runs_its_nested_fast_path() -> None:
    torch.manual_seed(0)
    enc = _encoder().eval()
    x = _x(1)
    with torch.no_grad():
        plain = enc(x, src_key_padding_mask=PAD)
        with torchrecorder.capture(enc, ops="layers.0/*") as cap:
            out = enc(x, src_key_padding_mask=PAD)
    assert torch.equal(out, plain)
    assert list(cap.outputs) == ["layers.0/_transformer_encoder_layer_fwd"]
    assert cap.outputs["layers.0/_transformer_encoder_layer_fwd"].is_nested


def test_fused_op_keys_are_the_recordings_and_edits_reach_the_output() -> None:
    torch.manual_seed(0)
    model = Stack().eval()
    x = _x(2)
    with torch.no_grad():
        rec = torchrecorder.record(model, "net", None, input_data=(x, PAD))
        ops = {str(k) for k, n in rec.nodes.items() if isinstance(n, OpNode)}
        with torchrecorder.capture(model, ops="*", rec=rec) as cap:
            model(x, PAD)
        fused = {k for k in cap.outputs if k in ops}
        assert fused >= {"attn/_native_multi_head_attention", "layer/_transformer_encoder_layer_fwd",
                         "encoder/nested_tensor_fast_path"}
        plain_layer = model.layer(model.attn(x, x, x, need_weights=False)[0])
        with torchrecorder.capture(model, ops="layer/*", edit=lambda k, o: o * 0) as cap:
            out = model(x, PAD)
        assert torch.equal(cap.outputs["layer/_transformer_encoder_layer_fwd"], plain_layer * 0)
        assert torch.equal(out, model.encoder(plain_layer * 0, src_key_padding_mask=PAD))


def test_with_gradients_the_python_path_runs_and_is_captured_op_by_op() -> None:
    torch.manual_seed(0)
    model = _layer().eval()
    x = _x(3)
    plain = model(x)
    with torchrecorder.capture(model, ops="*") as cap:
        out = model(x)
    assert torch.equal(out, plain)
    assert not any(k.endswith("_transformer_encoder_layer_fwd") for k in cap.outputs)
    assert any("self_attn/" in k for k in cap.outputs)


@pytest.mark.parametrize("name", list(MODELS))
def test_capturing_a_fused_module_by_name_keeps_its_fast_path(name: str) -> None:
    """A hook on an encoder layer (or inside it) turns torch's fused kernel off: the layers
    chosen by name are hooked globally instead, so the model runs as in a plain call, and each
    keeps what the fused kernel returned, its inputs (keywords too) and its edit."""
    make, _ = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    run = _run(name)
    paths = [p for p, m in model.named_modules() if type(m).forward in FAST_PATHS]
    x = _x(5)
    with torch.no_grad():
        plain = _leaves(run(model, x))
        layers = [p for p in paths if isinstance(model.get_submodule(p), nn.TransformerEncoderLayer)]
        with torchrecorder.capture(model, ops=[f"{p or 'net'}/*" for p in layers] or "*") as fused_ops:
            run(model, x)
        with torchrecorder.capture(model, paths, inputs=True) as cap:
            got = _leaves(run(model, x))
        assert all(torch.equal(a, b) for a, b in zip(got, plain, strict=True)), name
        for path in layers:  # what the fused kernel returned, nested where the encoder made it so
            kept, value = cap[path], fused_ops[f"{path or 'net'}/_transformer_encoder_layer_fwd"]
            assert kept.is_nested == value.is_nested
            assert torch.equal(*(t.to_padded_tensor(0.0) if t.is_nested else t for t in (kept, value)))
            assert isinstance(cap.inputs[path], (torch.Tensor, tuple))
        if layers:
            with torchrecorder.capture(model, layers[0], edit=lambda k, o: o * 0, record=False):
                edited = _leaves(run(model, x))
            assert not torch.equal(edited[0], plain[0])
    assert hook_count(model) == 0
    assert not torch.nn.modules.module._global_forward_hooks
    assert not torch.nn.modules.module._global_forward_pre_hooks
    assert not torch.nn.modules.module._global_forward_hooks_with_kwargs  # (torch's handle leaves it)


def test_an_encoder_layer_chosen_by_name_runs_fused_with_a_padding_mask() -> None:
    """With a padding mask the fused kernel and the Python path differ in the last bits: the
    capture of the layer by name gives the plain call's output, bit for bit."""
    torch.manual_seed(0)
    layer = _layer().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        enc = nn.TransformerEncoder(_layer(), 2, enable_nested_tensor=False).eval()
    x = _x(0)
    with torch.no_grad():
        plain = layer(x, src_key_padding_mask=PAD)
        with torchrecorder.capture(layer, "", inputs=True) as cap:
            out = layer(x, src_key_padding_mask=PAD)
        assert torch.equal(out, plain) and torch.equal(cap[""], plain)
        args, kwargs = cap.inputs[""]
        assert torch.equal(args[0], x) and torch.equal(kwargs["src_key_padding_mask"], PAD)
        plain = enc(x, src_key_padding_mask=PAD)
        with torchrecorder.capture(enc, ["layers.0", "layers.1"], stop="layers.1") as cap:
            enc(x, src_key_padding_mask=PAD)
        assert torch.equal(cap["layers.1"], plain)
    assert hook_count(layer) == hook_count(enc) == 0
    assert not torch.nn.modules.module._global_forward_hooks
