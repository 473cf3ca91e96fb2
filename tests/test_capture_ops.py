"""``capture(model, ops=...)``: operations inside modules, by the recording's keys."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.hooks.select import UnknownLayerError
from torchrecorder.nodes import OpNode

from .dot_parse import parse_dot
from .hook_checks import hook_count

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()


def gpt2() -> nn.Module:
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=60, n_positions=32,
                                  attn_implementation="eager", bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg).eval()


def bert() -> nn.Module:
    torch.manual_seed(0)
    cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                  intermediate_size=64, vocab_size=60, attn_implementation="eager")
    return transformers.BertModel(cfg).eval()


IDS = torch.randint(0, 60, (2, 9), generator=torch.Generator().manual_seed(1))


def no_modes() -> bool:
    return torch._C._len_torch_function_stack() == 0


class Attention(nn.Module):
    """Single-head attention written out: scores, softmax, mix; a tanh outside any submodule."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        probs = torch.softmax(h @ h.transpose(-1, -2), dim=-1)
        return torch.tanh(probs @ h)


def test_attention_probabilities_of_gpt2_by_pattern_equal_those_computed_by_hand() -> None:
    model = gpt2()
    with torchrecorder.capture(model, ops=["transformer.h.*.attn/softmax", "transformer.h.*.attn/matmul"],
                               inputs=True) as cap:
        model(IDS)
    # an op name chooses every op of that name in the call: the scores' matmul and the mix's
    assert set(cap.keys()) == {f"transformer.h.{i}.attn/{op}" for i in (0, 1)
                               for op in ("softmax", "matmul", "matmul_1")}
    for i in (0, 1):
        q, kt = cap.inputs[f"transformer.h.{i}.attn/matmul"]
        scores = (q @ kt) / math.sqrt(q.shape[-1])
        causal = torch.ones(9, 9, dtype=torch.bool).triu(1)
        expected = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
        probs = cap[f"transformer.h.{i}.attn/softmax"]
        assert probs.shape == (2, 4, 9, 9)
        torch.testing.assert_close(probs, expected, atol=1e-6, rtol=1e-5)


def test_attention_probabilities_of_bert_equal_those_computed_by_hand() -> None:
    model = bert()
    with torchrecorder.capture(model, ops="*/softmax", inputs=True) as cap:
        model(IDS)
    keys = cap.keys()
    assert keys == ["encoder.layer.0.attention.self/softmax", "encoder.layer.1.attention.self/softmax"]
    for key in keys:
        (scores,), kwargs = cap.inputs[key]  # softmax(scores, dim=-1): args and keywords
        assert kwargs["dim"] == -1
        torch.testing.assert_close(cap[key], torch.softmax(scores, dim=-1))
        assert torch.allclose(cap[key].sum(-1), torch.ones(2, 4, 9))


def test_keys_are_the_recordings_and_colour_its_operation_nodes() -> None:
    model = gpt2()
    rec = torchrecorder.record(model, "gpt2", input_data=IDS)
    ops = {k for k, n in rec.nodes.items() if isinstance(n, OpNode) and n.op != "identity"}
    with torchrecorder.capture(model, ops="*", rec=rec, stats=True) as cap:
        model(IDS)
    assert ops <= set(cap.keys())  # the rest are operations the recording pruned (unused)
    extra = set(cap.keys()) - ops
    assert len(extra) < 0.1 * len(ops)
    stats = cap.stats("mean")
    assert "gpt2/add" not in ops or "gpt2/add" in stats  # the network's own ops: named after rec.name
    dot = torchrecorder.make_dot(rec, activations=cap, stat="absmax", expand_leaves=True)
    softmax = [a for a in parse_dot(dot.source).node_attrs.values()
               if a.get("label", "").startswith("<softmax")]
    assert len(softmax) == 2 and all("absmax" in a["label"] and "fillcolor" in a for a in softmax)


def test_an_edit_of_a_softmax_changes_the_output_as_computed_by_hand() -> None:
    torch.manual_seed(0)
    model, x = Attention(), torch.randn(3, 5, 4)
    uniform = torch.full((3, 5, 5), 1 / 5)
    with torchrecorder.capture(model, ops="softmax", edit=lambda name, out: uniform) as cap:
        y = model(x)
    h = model.proj(x)
    torch.testing.assert_close(y, torch.tanh(h.mean(dim=1, keepdim=True).expand(3, 5, 4)))
    assert torch.equal(cap["net/softmax"], uniform)  # what is kept is what the model received


def test_gradients_of_operations_equal_autograd() -> None:
    torch.manual_seed(0)
    model, x = Attention(), torch.randn(3, 5, 4)
    with torchrecorder.capture(model, ops=["net/softmax", "net/tanh"], grads=True) as cap:
        y = model(x)
        (y ** 2).sum().backward()
    h = model.proj(x)
    probs = torch.softmax(h @ h.transpose(-1, -2), dim=-1)
    out = torch.tanh(probs @ h)
    g_probs, g_out = torch.autograd.grad((out ** 2).sum(), [probs, out])
    torch.testing.assert_close(cap.grads["net/softmax"], g_probs)
    torch.testing.assert_close(cap.grads["net/tanh"], g_out)


def test_outputs_and_gradients_are_bit_identical_and_nothing_is_left() -> None:
    model = gpt2().train()
    torch.manual_seed(3)
    plain = model(IDS).logits
    plain.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    torch.manual_seed(3)
    with torchrecorder.capture(model, ops=["*/softmax", "transformer.h.0.mlp.act/*"], stats=True,
                               grads=True) as cap:
        out = model(IDS).logits
        out.sum().backward()
    assert torch.equal(out, plain)
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), grads, strict=True))
    assert hook_count(model) == 0 and no_modes()
    assert "transformer.h.0.mlp.act/mul" in cap.stats("grad_norm")
    assert set(cap.stats("grad_norm")) == set(cap.stats("mean"))


def test_a_pattern_that_names_no_layer_raises_before_the_model_runs() -> None:
    model = gpt2()
    with pytest.raises(UnknownLayerError, match=r"transformer\.h\.\*\.atn.*nearest"):
        torchrecorder.capture(model, ops="transformer.h.*.atn/softmax")
    rec = torchrecorder.record(model, "gpt2", input_data=IDS)
    with pytest.raises(UnknownLayerError, match=r"softmaks.*softmax"):
        torchrecorder.capture(model, ops="*/softmaks", rec=rec)
    assert hook_count(model) == 0


def test_a_recordings_own_op_key_without_rec_says_how_the_network_is_named() -> None:
    """``rec.nodes`` names the network's own operations after the recording (``lb/mul``);
    without ``rec=`` capture names them ``net/mul``, and the error says so."""
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    rec = torchrecorder.record(model, "lb", (2, 3))
    key = next(str(k) for k, n in rec.nodes.items() if isinstance(n, OpNode) and str(k).startswith("1/"))
    with pytest.raises(UnknownLayerError, match=r"'mynet/relu'.*own operations are 'net/relu'.*rec="):
        torchrecorder.capture(model, ops="mynet/relu")
    with pytest.raises(UnknownLayerError, match=r"own operations are 'lb/relu'"):
        torchrecorder.capture(model, ops="mynet/relu", rec=rec)
    with pytest.raises(UnknownLayerError) as info:  # a dotted path is a layer's, no such hint
        torchrecorder.capture(model, ops="0.x/relu")
    assert "own operations" not in str(info.value)
    with torchrecorder.capture(model, ops=key, rec=rec) as cap:
        model(torch.randn(2, 3))
    assert list(cap.keys()) == [key]
    assert hook_count(model) == 0


def test_a_layer_chosen_but_never_called_says_nothing_was_recorded() -> None:
    class Unused(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(2, 2), nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.a(x)

    model = Unused()
    with torchrecorder.capture(model, "b") as cap:
        model(torch.randn(1, 2))
    with pytest.raises(UnknownLayerError, match=r"'b' was chosen but no output.*recorded: nothing$"):
        cap["b"]
    assert hook_count(model) == 0


def test_a_pattern_that_chooses_nothing_in_a_pass_raises_with_the_nearest_keys() -> None:
    model = Attention()
    with pytest.raises(UnknownLayerError, match=r"softmx.*softmax"):
        with torchrecorder.capture(model, ops="softmx"):
            model(torch.randn(1, 2, 4))
    assert hook_count(model) == 0 and no_modes()


def test_a_softmax_inside_fused_attention_says_where_it_is_and_how_to_get_it() -> None:
    """GPT-2 with its default (SDPA) attention runs no softmax of its own: the error names the
    fused operation it runs inside and the eager attention that runs it as an operation."""
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=4, vocab_size=60, n_positions=32,
                                  attn_implementation="sdpa", bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    with pytest.raises(UnknownLayerError) as info:
        with torchrecorder.capture(model, ops="*/softmax"):
            model(torch.randint(0, 60, (1, 5)))
    message = str(info.value)
    assert "'softmax' runs inside 'scaled_dot_product_attention'" in message
    assert 'attn_implementation="eager"' in message
    assert hook_count(model) == 0 and no_modes()


def test_an_edit_of_the_wrong_shape_or_dtype_names_the_operation() -> None:
    model = Attention()
    x = torch.randn(1, 2, 4)
    with pytest.raises(ValueError, match=r"'net/softmax'.*shape \(1, 2, 2\)"):
        with torchrecorder.capture(model, ops="softmax", edit=lambda n, out: out[..., :1]):
            model(x)
    with pytest.raises(ValueError, match=r"dtype torch\.float64"):
        with torchrecorder.capture(model, ops="softmax", edit=lambda n, out: out.double()):
            model(x)
    assert hook_count(model) == 0 and no_modes()
    torch.testing.assert_close(model(x), Attention.forward(model, x))


def test_options_work_for_operations_as_for_modules() -> None:
    torch.manual_seed(0)
    model = Attention()
    xs = [torch.randn(2, 3, 4) for _ in range(3)]
    on = iter([True, False, True])
    with torchrecorder.capture(model, ops="tanh", reduction=lambda a, b: a + b,
                               condition=lambda: next(on)) as cap:
        for x in xs:
            model(x)
    with torch.no_grad():
        expected = model(xs[0]) + model(xs[2])
    torch.testing.assert_close(cap["net/tanh"], expected)
    with torchrecorder.capture(model, ops="tanh", keep="all") as cap:
        for x in xs:
            model(x)
    assert len(cap["net/tanh"]) == 3 and cap.passes == 3
    with torchrecorder.capture(model, ops="softmax", stop="net/softmax") as cap:
        assert cap.run(xs[0]) is None
    assert cap["net/softmax"].shape == (2, 3, 3)


def test_modules_and_operations_together_and_a_second_call() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.att = Attention()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.att(self.att(x))

    model = Twice()
    with torchrecorder.capture(model, "att.proj", ops="att/softmax") as cap:
        model(torch.randn(1, 3, 4))
    assert cap.keys() == ["att.proj", "att/softmax", "att.proj#2", "att#2/softmax"]
    with torchrecorder.capture(model, ops="att#2/softmax") as cap:
        model(torch.randn(1, 3, 4))
    assert cap.keys() == ["att#2/softmax"]


class _InPlace(nn.Module):
    """``g += h``, ``x.relu_()`` and ``F.relu(x, inplace=True)``: operations that change their input."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        g = self.b(h)
        g += h
        g.relu_()
        return nn.functional.relu(g - 1, inplace=True) + g.exp_()


def test_an_in_place_operation_keeps_as_its_input_what_it_was_given() -> None:
    """torchlens and nnsight users read an operation's inputs: an in-place one changes its first
    argument, so what is kept must be copied before it runs, not read after."""
    torch.manual_seed(0)
    net, x = _InPlace(), torch.randn(3, 4)
    with torch.no_grad():
        h = net.a(x)
        g = net.b(h)
        after_add = g + h
        after_relu = after_add.relu()
        shifted = after_relu - 1
    with torch.no_grad(), torchrecorder.capture(net, ops=["net/add_", "net/relu_", "net/relu", "net/add"],
                                                inputs=True) as cap:
        net(x)
    assert torch.equal(cap.inputs["net/add_"][0], g) and torch.equal(cap.inputs["net/add_"][1], h)
    assert torch.equal(cap["net/add_"], after_add)
    assert torch.equal(cap.inputs["net/relu_"], after_add) and torch.equal(cap["net/relu_"], after_relu)
    relu_args, relu_kwargs = cap.inputs["net/relu"]
    assert torch.equal(relu_args[0], shifted) and relu_kwargs == {"inplace": True}
    assert torch.equal(cap["net/relu"], shifted.relu())
    # the argument an unchosen in-place operation (exp_) changed is not copied: read after it ran
    assert torch.equal(cap.inputs["net/add"][1], after_relu.exp())
    assert no_modes() and hook_count(net) == 0


def test_operations_are_captured_from_a_pass_run_in_another_thread() -> None:
    """Hugging Face's streaming habit runs ``model.generate`` in a thread inside the block; the
    function mode is per thread, so the operations of such a pass were not seen and the pass ended
    with 'chose no operation ... there are no layers to choose from'."""
    import threading

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.Softmax(-1))
    xs = [torch.randn(2, 4) for _ in range(2)]
    left: list[int] = []

    def passes() -> None:
        for x in xs:
            net(x)
        left.append(torch._C._len_torch_function_stack())

    with torch.no_grad(), torchrecorder.capture(net, ops="1/softmax", keep="all") as cap:
        worker = threading.Thread(target=passes)
        worker.start()
        worker.join()
        net(xs[0])  # and the block's own thread again afterwards
    with torch.no_grad():
        want = [torch.softmax(net[0](x), -1) for x in (*xs, xs[0])]
    got = cap["1/softmax"]
    assert len(got) == 3 and all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    assert left == [0] and no_modes() and hook_count(net) == 0
