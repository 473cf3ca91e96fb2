"""Idioms from models outside the test zoo that once recorded wrongly (redteam5).

Each test builds a tiny hand-written model with the idiom of a real architecture
and checks the recording against what the model does.
"""

from __future__ import annotations

import inspect
import types
import warnings
from typing import Any, Optional

import pytest
import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

import torchrecorder
from torchrecorder import ParamNode, TensorNode

from .graph_checks import check_invariants, check_state_unchanged, snapshot


class _RelativeBias(nn.Module):
    """Reads a bias table given as its input (DeBERTa-v2 hands ``rel_embeddings.weight`` on)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: Tensor, table: Tensor) -> Tensor:
        return self.proj(x) + self.proj(table).mean(0)


class _TableUser(nn.Module):
    """DeBERTa-v2's pattern: the weight of a module that is never called goes into a call."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(6, 4)  # never called: only its weight is read
        self.layers = nn.ModuleList([_RelativeBias(), _RelativeBias()])

    def forward(self, x: Tensor) -> Tensor:
        table = self.table.weight
        for layer in self.layers:
            x = layer(x, table=table)
        return x


def _consumers(rec: torchrecorder.Recorder, key: object) -> set[object]:
    """The nodes other than tensor nodes that ``key`` feeds, looking through tensor nodes."""
    found: set[object] = set()
    todo = [key]
    while todo:
        k = todo.pop()
        for a, b in rec.links:
            if a == k:
                (todo.append(b) if isinstance(rec.nodes[b], TensorNode) else found.add(b))
    return found


def test_a_parameter_given_to_a_call_as_its_input_is_recorded_once_and_feeds_each_call() -> None:
    net = _TableUser()
    before = snapshot(net)
    rec = torchrecorder.record(net, "net", (2, 4))
    check_state_unchanged(before, net)
    check_invariants(rec)
    weight = [n for n in rec.nodes.values() if isinstance(n, ParamNode) and n.fn is net.table.weight]
    assert len(weight) == 1, "the table's weight is one parameter node"
    assert weight[0].path == "table.weight" and weight[0].parent_key == "net"
    assert weight[0].name == "table.weight"  # named from where it is used, not just "weight"
    # through the `table` input of both layer calls, into the second call of each `proj`
    fed = _consumers(rec, weight[0].key)
    assert {rec.nodes[b].parent_key for b in fed} == {"layers.0.proj#2", "layers.1.proj#2"}
    total = sum(p.numel() for p in net.parameters())
    assert f"Total params: {total}" in rec.summary()


class _AutocastConvs(nn.Module):
    """Convolutions and a linear layer under bf16 autocast: later layers get bf16 inputs
    while their weights stay float32 (autocast casts them inside the operation)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, stride=2)
        self.fc = nn.Linear(4, 2)
        self.fc2 = nn.Linear(2, 2)

    def forward(self, x: Tensor) -> Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = self.conv2(torch.relu(self.conv(x)))
            return self.fc2(self.fc(h.mean((2, 3))))


def test_operations_under_autocast_count_their_flops() -> None:
    net = _AutocastConvs().eval()
    x = torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        net(x)
    want = {k.removeprefix("_AutocastConvs."): sum(v.values())
            for k, v in counter.get_flop_counts().items() if "." in k}
    with torch.no_grad():
        rec = torchrecorder.record(net, "net", input_data=x)
    c = torchrecorder.cost(rec)
    assert {k: c[k].flops for k in want} == want
    assert set(want) == {"conv", "conv2", "fc", "fc2"}
    assert c.total.flops == counter.get_total_flops()


class _KVCache:
    """A key/value cache as transformers' ``DynamicCache`` is one: a plain object (no
    container) whose attributes hold the tensors of earlier steps, grown in place."""

    def __init__(self, keys: Tensor) -> None:
        self.layers = [self._Layer(keys)]

    class _Layer:
        def __init__(self, keys: Tensor) -> None:
            self.keys = keys

        def update(self, new: Tensor) -> Tensor:
            self.keys = torch.cat([self.keys, new], dim=1)
            return self.keys


class _DecodeStep(nn.Module):
    """One decoding step: the new token's key joins the cached keys."""

    def __init__(self) -> None:
        super().__init__()
        self.k = nn.Linear(4, 4)
        self.q = nn.Linear(4, 4)

    def forward(self, x: Tensor, past: _KVCache) -> Tensor:
        keys = past.layers[0].update(self.k(x))
        return self.q(x) @ keys.transpose(1, 2)


def test_tensors_of_a_cache_object_given_to_the_network_are_its_inputs() -> None:
    net = _DecodeStep()
    past = _KVCache(torch.randn(1, 3, 4))
    cached = past.layers[0].keys
    rec = torchrecorder.record(net, "step", input_data=(torch.randn(1, 1, 4), past))
    check_invariants(rec)
    inputs = {n.name: n for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "input"}
    assert set(inputs) == {"x", "past.layers[0].keys"}
    assert inputs["past.layers[0].keys"].shape == tuple(cached.shape)
    cat = next(k for k, n in rec.nodes.items() if getattr(n, "op", None) == "cat")
    fed_by = {a for a, b in rec.links if b == cat}
    assert inputs["past.layers[0].keys"].key in fed_by and len(fed_by) == 2


class _Handle:
    """An object given to the network that holds one of its parameters (not an input)."""

    def __init__(self, weight: Tensor, scale: Tensor) -> None:
        self.weight = weight
        self.scale = scale


class _UsesHandle(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x: Tensor, handle: _Handle) -> Tensor:
        return self.fc(x) @ handle.weight * handle.scale


def test_a_parameter_held_by_an_object_given_to_the_network_stays_a_parameter() -> None:
    net = _UsesHandle()
    handle = _Handle(net.fc.weight, torch.ones(3))
    rec = torchrecorder.record(net, "net", input_data=(torch.randn(2, 3), handle))
    check_invariants(rec)
    inputs = {n.name for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "input"}
    assert inputs == {"x", "handle.scale"}
    weights = [n for n in rec.nodes.values() if isinstance(n, ParamNode) and n.fn is net.fc.weight]
    assert len(weights) == 1
    assert {rec.nodes[b].op for a, b in rec.links if a == weights[0].key} == {"linear", "matmul"}


class _MaxNormLookup(nn.Module):
    """``nn.Embedding(max_norm=...)`` and ``nn.EmbeddingBag(max_norm=...)`` renormalise the rows
    they look up in place, inside the one operation the recording sees."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4, max_norm=0.5)
        self.bag = nn.EmbeddingBag(10, 4, max_norm=0.5, mode="sum")
        self.fc = nn.Linear(4, 2)

    def forward(self, ids: Tensor) -> Tensor:
        return self.fc(self.emb(ids).sum(1) + self.bag(ids))


def test_rows_that_embedding_max_norm_renormalises_are_put_back() -> None:
    torch.manual_seed(0)
    net = _MaxNormLookup()
    with torch.no_grad():
        net.emb.weight.mul_(3.0)  # rows longer than max_norm: the lookup rewrites them
        net.bag.weight.mul_(3.0)
    ids = torch.tensor([[1, 2, 3], [4, 5, 1]])
    before = snapshot(net)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing 'changed in place where torchrecorder could not see it'
        torchrecorder.record(net, "net", input_data=ids)
    check_state_unchanged(before, net)
    # the plain call does write them (so the test would see a recording that did not put back)
    with torch.no_grad():
        net(ids)
    assert not torch.equal(net.emb.weight, before["params"]["emb.weight"][1])
    assert not torch.equal(net.bag.weight, before["params"]["bag.weight"][1])


# ------------------------------------------------------------------ the real models behind them
def test_deberta_v2_relative_embeddings_weight_feeds_every_layer() -> None:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.DebertaV2Config(hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                       intermediate_size=32, vocab_size=99, max_position_embeddings=32,
                                       relative_attention=True, pos_att_type=["p2c", "c2p"])
    net = transformers.DebertaV2Model(cfg).eval()
    with torch.no_grad():
        rec = torchrecorder.record(net, "deberta", input_data=torch.randint(0, 99, (1, 6)))
    check_invariants(rec)
    table = net.encoder.rel_embeddings.weight
    nodes = [n for n in rec.nodes.values() if isinstance(n, ParamNode) and n.fn is table]
    assert len(nodes) == 1 and nodes[0].path == "encoder.rel_embeddings.weight"
    assert nodes[0].parent_key == "encoder" and nodes[0].name == "rel_embeddings.weight"
    layers = {str(rec.nodes[k].parent_key).split(".attention")[0] for k in _consumers(rec, nodes[0].key)}
    assert {"encoder.layer.0", "encoder.layer.1"} <= layers
    assert f"Total params: {sum(p.numel() for p in net.parameters()):,}" in rec.summary()


def test_a_cached_decoding_step_of_t5_reads_the_cached_keys_and_values() -> None:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.T5Config(vocab_size=99, d_model=16, d_kv=8, d_ff=32, num_layers=1,
                                num_decoder_layers=1, num_heads=2, decoder_start_token_id=0)
    net = transformers.T5ForConditionalGeneration(cfg).eval()
    ids = torch.randint(0, 99, (1, 5))
    with torch.no_grad():
        first = net(input_ids=ids, decoder_input_ids=ids[:, :2], use_cache=True)
        # (transformers 5.24 renames past_key_values to cache)
        name = "cache" if "cache" in inspect.signature(net.forward).parameters else "past_key_values"
        past = getattr(first, name)
        rec = torchrecorder.record(net, "t5", input_kwargs={
            "input_ids": ids, "decoder_input_ids": ids[:, 2:3], name: past})
    check_invariants(rec)
    inputs = {n.name: n.key for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "input"}
    for part in ("self_attention_cache", "cross_attention_cache"):
        for what in ("keys", "values"):
            key = inputs[f"{name}.{part}.layers[0].{what}"]
            used = {str(rec.nodes[k].parent_key) for k in _consumers(rec, key)}
            attn = "layer.0.SelfAttention" if part == "self_attention_cache" else "layer.1.EncDecAttention"
            assert used == {f"decoder.block.0.{attn}"}, (part, what, used)


class _Policy(nn.Module):
    """Returns a distribution, as policy networks do: no tensor in a container."""

    def __init__(self) -> None:
        super().__init__()
        self.body, self.mu = nn.Linear(4, 8), nn.Linear(8, 2)
        self.log_std = nn.Parameter(torch.zeros(2))

    def forward(self, x: Tensor) -> torch.distributions.Normal:
        return torch.distributions.Normal(self.mu(self.body(x).tanh()), self.log_std.exp())


def test_the_tensors_of_an_object_the_network_returns_are_its_outputs() -> None:
    rec = torchrecorder.record(_Policy(), "policy", input_data=torch.randn(3, 4))
    check_invariants(rec)
    outputs = {n.name: n for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "output"}
    assert sorted(outputs) == ["output.loc", "output.scale"]
    assert all(n.shape == (3, 2) for n in outputs.values())
    assert {a for a, b in rec.links if b == outputs["output.loc"].key} == {"mu:out"}


def test_an_object_returned_beside_tensors_adds_no_outputs() -> None:
    class WithCache(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x: Tensor) -> tuple[Tensor, Any]:
            y = self.lin(x)
            return y, types.SimpleNamespace(key=y * 2)

    rec = torchrecorder.record(WithCache(), "net", input_data=torch.randn(1, 4))
    outputs = [n.name for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "output"]
    assert len(outputs) == 1


class _SameTensorTwice(nn.Module):
    """Returns one tensor at several places: a dataclass-like output with the last layer's
    state both as ``emb`` and at the end of ``per_layer`` (redteam12)."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

    def forward(self, x: Tensor) -> dict[str, Any]:
        outs = []
        for m in self.mix:
            x = m(x)
            outs.append(x)
        return {"emb": x, "per_layer": outs, "scaled": (x * 2, x)}


def test_a_tensor_returned_at_several_places_is_named_after_each() -> None:
    """The output node of a tensor returned twice was named after its first place only:
    the picture showed ``output.emb`` and no ``output.per_layer[1]``, as if the list held one
    tensor.  It is one node (one tensor), named after every place it is returned at."""
    net = _SameTensorTwice()
    rec = torchrecorder.record(net, "net", (2, 4))
    outputs = {n.name: n for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "output"}
    assert set(outputs) == {"output.emb, output.per_layer[1], output.scaled[1]", "output.per_layer[0]",
                            "output.scaled[0]"}
    check_invariants(rec)
    source = torchrecorder.make_dot(rec).source
    assert "output.emb, output.per_layer[1], output.scaled[1]" in source
    # past three places the name counts the rest
    many = torchrecorder.record(nn.Sequential(nn.Linear(4, 4), _Repeat(5)), "net", (2, 4))
    names = [n.name for n in many.nodes.values() if isinstance(n, TensorNode) and n.role == "output"]
    assert names == ["output[0], output[1], output[2] and 2 more"]
    # inputs are named alike (one node for a tensor given twice, named after both arguments)
    twice = torchrecorder.record(_TwoInputs(), "net", input_data=(torch.ones(2, 4),) * 2)
    inputs = [n.name for n in twice.nodes.values() if isinstance(n, TensorNode) and n.role == "input"]
    assert inputs == ["a, b"]


class _TwoArguments(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, a: Tensor, b: Tensor, c: Optional[Tensor] = None) -> Tensor:
        return self.fc(a) + b + (0 if c is None else c)


def test_a_tensor_passed_as_two_arguments_is_named_after_both() -> None:
    """``net(x, x)``: one input node (one tensor), named after both arguments, as a tensor
    returned at several places is named after each; it was named ``a`` only."""
    x = torch.randn(2, 4)
    rec = torchrecorder.record(_TwoArguments(), "net", input_data=(x, x))
    inputs = [n for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "input"]
    assert [n.name for n in inputs] == ["a, b"]
    check_invariants(rec)
    assert ">a, b<" in torchrecorder.make_dot(rec).source
    # a keyword argument too; distinct tensors keep their own names
    rec = torchrecorder.record(_TwoArguments(), "net", input_data=(x, torch.randn(2, 4)),
                               input_kwargs={"c": x})
    names = sorted(n.name for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "input")
    assert names == ["a, c", "b"]


class _Repeat(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def forward(self, x: Tensor) -> list[Tensor]:
        return [x.relu()] * self.n


class _TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        return self.fc(a) + b
