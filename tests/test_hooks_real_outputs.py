"""torchfunc's recorders and ``capture`` on what real models return (issues 21 and 24).

Outputs with ``None`` and non-tensor parts, dataclasses and ``ModelOutput``,
named tuples, ``torch.return_types``; values whose structure changes between
calls; backward recorders with in-place activations; atomic ``save``; gradients
after the ``with`` block; statistics of sparse and nested outputs.  Transformer
models are built from tiny configs with random weights, eager attention.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pickle
import threading
import warnings
from typing import Any, Optional

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder import capture
from torchrecorder.hooks._values import ReductionError, keep_value, reduce_values
from torchrecorder.hooks.recorders import (
    BackwardInput,
    BackwardOutput,
    ForwardInput,
    ForwardOutput,
    ForwardPre,
)

from .hook_checks import hooks_left, mlp

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

ADD = lambda a, b: a + b  # noqa: E731 - torchfunc's own example reduction


def _tiny(model_cls: str, config_cls: str, attn: str = "eager", **config: Any) -> nn.Module:
    cfg = getattr(transformers, config_cls)(attn_implementation=attn, **config)
    torch.manual_seed(0)
    return getattr(transformers, model_cls)(cfg)


def gpt2(attn: str = "eager") -> nn.Module:
    return _tiny("GPT2LMHeadModel", "GPT2Config", attn, vocab_size=99, n_positions=64, n_embd=16,
                 n_layer=2, n_head=2, bos_token_id=1, eos_token_id=2)


def bert() -> nn.Module:
    return _tiny("BertModel", "BertConfig", vocab_size=99, max_position_embeddings=64, hidden_size=16,
                 num_hidden_layers=2, num_attention_heads=2, intermediate_size=24)


def llama() -> nn.Module:
    return _tiny("LlamaForCausalLM", "LlamaConfig", vocab_size=99, max_position_embeddings=64,
                 hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=24,
                 num_key_value_heads=1)


def ids(seed: int = 0, length: int = 7) -> torch.Tensor:
    return torch.randint(3, 99, (2, length), generator=torch.Generator().manual_seed(seed))


# (model, what the recorders register on): an attention block (tuple output), the Llama
# decoder blocks, BERT's attention (tuple) and whole layers
MODELS = {
    "gpt2": (gpt2, dict(types=transformers.models.gpt2.modeling_gpt2.GPT2Attention)),
    "gpt2-sdpa": (lambda: gpt2("sdpa"), dict(types=transformers.models.gpt2.modeling_gpt2.GPT2Attention)),
    "bert": (bert, dict(names="encoder.layer.*.attention*")),
    "llama": (llama, dict(names="model.layers.*")),
}


def _loss(out: Any) -> torch.Tensor:
    logits = out.logits if hasattr(out, "logits") else out.last_hidden_state
    return logits.float().pow(2).mean()


@pytest.mark.parametrize("model", list(MODELS))
def test_torchfunc_recorders_with_a_sum_reduction_on_transformer_blocks(model: str, tmp_path: Any) -> None:
    build, where = MODELS[model]
    net = build().train()
    plain = build().train()
    plain.load_state_dict(net.state_dict())
    switch = {"on": True}
    recorders = [cls(reduction=ADD, condition=lambda: switch["on"]).modules(net, **where)
                 for cls in (ForwardPre, ForwardInput, ForwardOutput, BackwardOutput, BackwardInput)]
    lists = ForwardOutput().modules(net, **where)
    counts = []
    for seed in range(3):
        switch["on"] = seed != 1  # the second pass is not recorded
        torch.manual_seed(seed)
        loss = _loss(net(input_ids=ids(seed)))
        loss.backward()
        torch.manual_seed(seed)
        _loss(plain(input_ids=ids(seed))).backward()
        counts.append(list(lists.iter_samples()))
    # training with recorders on gives what a plain run gives, bit for bit
    for (name, p), q in zip(net.named_parameters(), plain.parameters(), strict=True):
        assert (p.grad is None) == (q.grad is None), name
        assert p.grad is None or torch.equal(p.grad, q.grad), name
    out = recorders[2]
    assert len(out) > 0 and list(out.iter_samples()) == [2] * len(out)
    for i in range(len(out)):
        calls = lists[i]
        assert len(calls) == 3
        reduced = out[i]
        # part by part: tensors summed over the recorded passes (0 and 2), None stays None
        want = reduce_values(calls[0], calls[2], ADD)
        flat_r, flat_w = _flatten(reduced), _flatten(want)
        assert len(flat_r) == len(flat_w) > 0
        for a, b in zip(flat_r, flat_w, strict=True):
            if isinstance(b, torch.Tensor):
                assert torch.equal(a, b)
            else:
                assert a is b or a == b
        if isinstance(calls[0], tuple):
            assert type(reduced) is type(calls[0]) and len(reduced) == len(calls[0])
            nones = [i for i, v in enumerate(calls[0]) if v is None]
            assert [i for i, v in enumerate(reduced) if v is None] == nones
    grads = recorders[3]
    assert all(g is not None for g in grads)
    assert list(recorders[4].iter_samples()) == [2] * len(out)
    # save, then apply: the files hold the reduced values, structure and all
    out.save(tmp_path)
    for i in range(len(out)):
        loaded = torch.load(tmp_path / f"{i}.pt", weights_only=False)
        assert type(loaded) is type(out[i])
        assert all(torch.equal(a, b) for a, b in zip(_flatten(loaded), _flatten(out[i]), strict=True)
                   if isinstance(b, torch.Tensor))
    out.apply(lambda data: keep_value(data, to=torch.device("cpu")))
    for r in [*recorders, lists]:
        r.remove()
    assert hooks_left(net) == []
    if model == "gpt2-sdpa":  # the attention weights are None there (the reported crash)
        assert all(v[1] is None for v in out)


def _flatten(value: Any) -> list[Any]:
    if dataclasses.is_dataclass(value):
        return [x for f in dataclasses.fields(value) for x in _flatten(getattr(value, f.name))]
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flatten(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _flatten(v)]
    return [value]


@pytest.mark.parametrize("model", ["gpt2", "bert", "llama"])
def test_capture_with_reduction_keeps_model_outputs_and_none_parts(model: str) -> None:
    net = MODELS[model][0]().eval()
    with torch.no_grad(), capture(net, ["", "**"], reduction=ADD) as cap:
        outs = [net(input_ids=ids(seed)) for seed in range(2)]
    top = cap[""]
    assert type(top) is type(outs[0]) and top is not outs[1]
    logits = outs[0][0] + outs[1][0]
    assert torch.equal(top[0], logits)
    for name in cap:
        for a in _flatten(cap[name]):
            assert a is None or not isinstance(a, torch.Tensor) or not a.requires_grad


def test_a_structure_change_names_the_layer_never_the_users_lambda() -> None:
    class Flaky(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def forward(self, x: torch.Tensor) -> Any:
            self.calls += 1
            return (x, None) if self.calls == 1 else (x, x)

    net = nn.Sequential(nn.Linear(3, 3), Flaky())
    rec = ForwardOutput(reduction=ADD).modules(net, names="1")
    net(torch.randn(2, 3))
    with pytest.raises(ReductionError, match=r"layer '1'.*changed between calls at \[1\] "
                                             r"\(kept: None, new: a tensor\)"):
        net(torch.randn(2, 3))
    rec.remove()
    net[1].calls = 0
    with pytest.raises(ReductionError, match=r"layer '1'"), capture(net, "1", reduction=ADD):
        net(torch.randn(2, 3))
        net(torch.randn(2, 3))
    assert hooks_left(net) == []
    # a tuple whose length changes, a dict whose keys change
    with pytest.raises(ReductionError, match=r"kept: a tuple of 2, new: a tuple of 3"):
        reduce_values((1, 2), (1, 2, 3), ADD, "x")
    with pytest.raises(ReductionError, match=r"at \['b'\]|keys"):
        reduce_values({"a": torch.ones(1)}, {"b": torch.ones(1)}, ADD, "x")
    # a lambda that fails on the values gets a note naming the layer and the shapes
    with pytest.raises(RuntimeError) as info:
        reduce_values(torch.ones(2), torch.ones(3), ADD, "enc.0")
    assert any("enc.0" in n and "(2,) and (3,)" in n for n in getattr(info.value, "__notes__", []))


@dataclasses.dataclass
class Out:
    hidden: torch.Tensor
    extra: Optional[torch.Tensor] = None
    label: str = "x"


Pair = collections.namedtuple("Pair", "a b")


class Containers(nn.Module):
    """Returns every container kind at once."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 4)

    def forward(self, x: torch.Tensor) -> Any:
        h = self.lin(x)
        return {"dc": Out(h, None), "nt": Pair(h, h * 2), "list": [h, None, 3],
                "max": torch.max(h, 1), "mo": transformers.modeling_outputs.BaseModelOutput(
                    last_hidden_state=h)}


def test_capture_copies_every_container_kind_as_it_copies_tensors() -> None:
    net = Containers()
    with capture(net, "") as cap:
        out = net(torch.randn(2, 3))
    kept = cap[""]
    assert kept is not out and type(kept) is dict
    assert type(kept["dc"]) is Out and kept["dc"] is not out["dc"] and kept["dc"].extra is None
    assert kept["dc"].label == "x"
    assert type(kept["nt"]) is Pair and kept["nt"] is not out["nt"]
    assert type(kept["list"]) is list and kept["list"][1:] == [None, 3]
    assert type(kept["max"]) is type(torch.max(torch.ones(2, 2), 1))  # torch.return_types.max
    assert torch.equal(kept["max"].indices, out["max"].indices)
    mo = kept["mo"]
    assert type(mo) is type(out["mo"]) and mo is not out["mo"] and list(mo.keys()) == ["last_hidden_state"]
    for t in [*_flatten([kept["dc"], kept["nt"], kept["list"], kept["max"]]), mo.last_hidden_state]:
        if isinstance(t, torch.Tensor):
            assert not t.requires_grad
    with torch.no_grad():  # a later in-place write to the model's output does not reach the capture
        before = kept["dc"].hidden.clone()
        out["dc"].hidden.add_(1)
        out["mo"].last_hidden_state.add_(1)
    assert torch.equal(kept["dc"].hidden, before) and torch.equal(mo.last_hidden_state, before)
    # detach=False, clone=False keeps the very tensors, in new containers
    with capture(net, "", detach=False, clone=False) as cap:
        out = net(torch.randn(2, 3))
    assert cap[""]["dc"] is not out["dc"] and cap[""]["dc"].hidden is out["dc"].hidden
    assert cap[""]["dc"].hidden.requires_grad


def test_torch_max_output_stays_a_named_result() -> None:
    class Max(nn.Module):
        def forward(self, x: torch.Tensor) -> Any:
            return torch.max(x, 1)

    net = nn.Sequential(nn.Linear(3, 4), Max())
    rec = ForwardOutput(reduction=ADD).modules(net, names="1")
    with capture(net, "1", keep="all") as cap:
        for _ in range(2):
            net(torch.randn(2, 3))
    rec.remove()
    for value in (*cap["1"], rec[0]):
        assert type(value).__name__ == "max" and hasattr(value, "values") and hasattr(value, "indices")


@pytest.mark.parametrize("recorder", [BackwardOutput, BackwardInput])
def test_backward_recorders_train_with_inplace_relu_and_leave_no_flag(recorder: type) -> None:
    net, plain = mlp(inplace=True), mlp(inplace=True)
    x = torch.randn(5, 4, requires_grad=True)
    rec = recorder().children(net, types=nn.Linear)
    net(x).pow(2).sum().backward()  # raised "... is a view and is being modified inplace" on main
    plain(x).pow(2).sum().backward()
    for p, q in zip(net.parameters(), plain.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad)
    assert list(rec.iter_samples()) == [1, 1, 1]
    # the values are those of torch's full backward hooks on a net without in-place ops
    ref = mlp(inplace=False)
    seen: list[Any] = []
    for m in ref:
        if isinstance(m, nn.Linear):
            m.register_full_backward_hook(
                lambda mod, gi, go: seen.append(go[0] if recorder is BackwardOutput else gi[0]))
    ref(x).pow(2).sum().backward()
    got = [rec[i][0] for i in range(3)]
    for a, b in zip(got, reversed(seen), strict=True):
        assert torch.equal(a, b)
    rec.remove()
    assert hooks_left(net) == []
    net[0].register_backward_hook(lambda *a: None)  # refused on main: the full-hook flag stayed set


class Block(nn.Module):
    """A ResNet basic block: conv-bn-relu(inplace)-conv-bn, plus the shortcut, relu(inplace)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 3, 3, padding=1, bias=False), nn.BatchNorm2d(3)
        self.relu = nn.ReLU(inplace=True)
        self.conv2, self.bn2 = nn.Conv2d(3, 3, 3, padding=1, bias=False), nn.BatchNorm2d(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)


def test_backward_recorders_on_a_resnet_block() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 3, 1), Block(), Block())
    plain = nn.Sequential(nn.Conv2d(3, 3, 1), Block(), Block())
    plain.load_state_dict(net.state_dict())
    x = torch.randn(2, 3, 6, 6, requires_grad=True)
    recs = [BackwardOutput().modules(net, types=(Block, nn.BatchNorm2d, nn.Conv2d)),
            BackwardInput().modules(net, types=(Block, nn.BatchNorm2d, nn.Conv2d))]
    net(x).sum().backward()
    plain(x).sum().backward()
    for p, q in zip(net.parameters(), plain.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad)
    assert all(n == 1 for r in recs for n in r.iter_samples())
    for r in recs:
        r.remove()
    assert hooks_left(net) == []


def test_save_is_atomic_and_a_value_that_cannot_be_pickled_leaves_no_file(tmp_path: Any) -> None:
    net = mlp()
    rec = ForwardOutput().modules(net, types=nn.Linear)
    net(torch.randn(2, 4))
    rec.save(tmp_path)
    good = (tmp_path / "1.pt").read_bytes()
    rec[1] = [threading.Lock()]  # cannot be pickled
    with pytest.raises((TypeError, pickle.PicklingError)) as info:
        rec.save(tmp_path)
    if hasattr(info.value, "add_note"):  # Python 3.11+
        assert any("subrecorder 1 ('2')" in n for n in info.value.__notes__)
    assert (tmp_path / "1.pt").read_bytes() == good  # the good file was not replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.pt", "1.pt", "2.pt"]  # no temporary left
    rec.remove()
    fresh = tmp_path / "new"
    rec2 = ForwardOutput().modules(net, types=nn.Linear)
    net(torch.randn(2, 4))
    rec2[1] = [threading.Lock()]
    with pytest.raises((TypeError, pickle.PicklingError)):
        rec2.save(fresh)
    assert sorted(p.name for p in fresh.iterdir()) == ["0.pt"]  # no truncated 1.pt
    assert torch.equal(torch.load(fresh / "0.pt")[0], rec2[0][0])
    rec2.remove()


def test_gradients_of_a_backward_after_the_block_are_kept() -> None:
    net = mlp()
    with capture(net, ["0", "4"], grads=True) as cap:
        y = net(torch.randn(3, 4))
    assert hooks_left(net) == []
    assert cap.grads == {}
    y.sum().backward()  # after the block: main left cap.grads silently empty
    assert sorted(cap.grads) == ["0", "4"]
    assert torch.equal(cap.grads["4"], torch.ones(3, 3))  # d sum(y) / d y
    with capture(net, ["0"], grads=True) as cap2:
        y = net(torch.randn(3, 4))
    cap2.remove(grads=True)  # takes the gradient hooks off as well
    y.sum().backward()
    assert cap2.grads == {}


def test_stats_skip_sparse_and_nested_outputs_and_say_so() -> None:
    class Sparse(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.to_sparse()

    class Nested(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return torch.nested.nested_tensor([x[0], x[1, :2]])

    for layer, kind in ((Sparse(), "sparse_coo"), (Nested(), "nested")):
        net = nn.Sequential(nn.Linear(3, 3), layer)
        x = torch.randn(2, 3)
        with capture(net, stats=True) as cap:
            net(x)  # crashed on main (aten::eq / aten::sum not implemented for the layout)
        assert cap.unsummarised == {"1": f"a {kind} tensor", "": f"a {kind} tensor"}
        with pytest.warns(RuntimeWarning, match=rf"not summarised.*'1' \(a {kind} tensor\)"):
            means = cap.stats("mean")
        assert set(means) == {"0"}
        assert means["0"] == pytest.approx(float(net[0](x).detach().double().mean()))
        assert hooks_left(net) == []


def test_package_exports() -> None:
    assert torchrecorder.capture is capture
    from torchrecorder.hooks import LayerRecorder

    assert LayerRecorder is torchrecorder.LayerRecorder is torchrecorder.hooks.LayerRecorder
    assert LayerRecorder.__module__ == "torchrecorder.layer_recorder"


@dataclasses.dataclass(frozen=True)
class Frozen:
    h: torch.Tensor
    n: int = dataclasses.field(init=False, default=3)


def test_non_tensor_parts_are_kept_and_unusual_containers_keep_their_type() -> None:
    a, b = torch.ones(2), torch.full((2,), 2.0)
    merged = reduce_values((a, None, 3, "first"), (b, None, 5, "second"), ADD, "x")
    assert torch.equal(merged[0], a + b) and merged[1:] == (None, 5, "second")
    kept = keep_value(Frozen(a.requires_grad_()))
    assert type(kept) is Frozen and kept.n == 3 and not kept.h.requires_grad
    dd = collections.defaultdict(list, x=a)
    kept_dd = keep_value(dd)
    assert type(kept_dd) is collections.defaultdict and kept_dd.default_factory is list
    assert kept_dd is not dd and kept_dd["x"] is not a
    od = collections.OrderedDict(y=a, x=b)
    assert list(keep_value(od)) == ["y", "x"] and type(keep_value(od)) is collections.OrderedDict
