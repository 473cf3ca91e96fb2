"""More idioms from code outside the test zoo that once recorded wrongly (redteam8).

Each test builds a tiny hand-written model with the idiom and checks the
recording against what the model does.
"""

from __future__ import annotations

import concurrent.futures
import warnings
from typing import Any

import pytest
import torch
from torch import Tensor, nn

import torchrecorder
from torchrecorder import OpNode, ParamNode, TensorNode

from .graph_checks import check_invariants, check_state_unchanged, snapshot
from .oracle import recorded_relation


class _IntoOut(nn.Module):
    """Results written into preallocated tensors with ``out=``: a scratch tensor, the views of a
    running result, a pair of tensors, and a buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c, self.d = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 4)
        self.register_buffer("scratch", torch.zeros(3, 4))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        buf = torch.empty(3, 4)
        torch.add(self.a(x), self.b(x), out=buf)
        torch.mul(buf[:, :2], 2.0, out=buf[:, :2])
        values, indices = torch.empty(3), torch.empty(3, dtype=torch.long)
        torch.max(self.d(x), 1, out=(values, indices))
        torch.sub(buf, values[:, None], out=self.scratch)
        return self.c(torch.mul(self.scratch, 1.5, out=None)), indices  # out=None: a plain call


def test_results_written_with_out_keep_their_dataflow() -> None:
    net = _IntoOut()
    before = snapshot(net)
    x = torch.randn(3, 4)
    with torch.no_grad():
        want = net(x)
        net.scratch.zero_()
        rec = torchrecorder.record(net, "net", input_data=x)
    check_invariants(rec)
    check_state_unchanged(before, net)  # the buffer written with out= is put back
    relation = recorded_relation(rec)
    assert {("a#1", "c#1"), ("b#1", "c#1"), ("d#1", "c#1"), ("d#1", "OUTPUT")} <= relation
    assert ("INPUT", "c#1") not in relation  # what the scratch tensors held is no input
    ops = [n.op for n in rec.nodes.values() if isinstance(n, OpNode)]
    assert {"add", "max", "sub"} <= set(ops) and ops.count("mul") == 2
    with torch.no_grad(), torchrecorder.recording(net, "net"):
        got = net(x)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


class _ThreadedBranches(nn.Module):
    """Two branches handed to a thread pool, as some ensembles and multi-tower models do."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 2)

    def forward(self, x: Tensor) -> Tensor:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            left = pool.submit(self.a, x)
            return self.c(left.result() + self.b(x))


def test_modules_run_in_another_thread_are_named_in_a_warning_and_a_note() -> None:
    net = _ThreadedBranches()
    before = snapshot(net)
    with pytest.warns(RuntimeWarning, match=r"'a' \(Sequential\) and what it called ran in another thread"):
        rec = torchrecorder.record(net, "net", (3, 4))
    check_state_unchanged(before, net)
    assert [n for n in rec.notes if "another thread" in n] == [
        "'a' (Sequential) and what it called ran in another thread than the one recording: the recording "
        "follows one thread, and lacks those calls and what they computed"]
    assert "Note: 'a' (Sequential)" in rec.summary()
    assert {layer.path for layer in rec.layers()} == {"", "b", "c"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torchrecorder.record(nn.Sequential(nn.Linear(4, 4)), "one", (3, 4))  # one thread: no warning


class _Recursive(nn.Module):
    """A network that applies itself again through ``self(...)`` (a recursive or adaptive-depth
    model whose root is its own block)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.halt = nn.Linear(4, 1)

    def forward(self, x: Tensor, depth: int = 2) -> Tensor:
        for block in self.blocks:
            x = torch.tanh(block(x))
        if depth == 0:
            return x
        return self(x, depth - 1) + self.halt(x)


def test_the_layer_table_nests_what_runs_inside_a_call_the_network_makes_of_itself() -> None:
    rec = torchrecorder.record(_Recursive(), "u", (2, 4))
    rows = [line.rsplit(None, 1)[0].rstrip() for line in rec.summary(columns=["params"]).splitlines()[3:16]]
    assert rows == [
        "u (_Recursive)",
        "├─blocks (ModuleList)",
        "│ ├─blocks.0 (Linear)",
        "│ └─blocks.1 (Linear)",
        "├─u #2 (_Recursive)",
        "│ ├─blocks (ModuleList)",
        "│ │ ├─blocks.0 #2 (Linear)",
        "│ │ └─blocks.1 #2 (Linear)",
        "│ ├─u #3 (_Recursive)",
        "│ │ └─blocks (ModuleList)",
        "│ │   ├─blocks.0 #3 (Linear)",
        "│ │   └─blocks.1 #3 (Linear)",
        "│ └─halt (Linear)",
    ]
    assert "Total params: 45" in rec.summary()


class _AddsIntoScratch(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        scratch = torch.empty_like(x)
        torch.add(x, 1.0, out=scratch)
        return torch.add(scratch, 2.0)


def test_operation_capture_names_a_call_given_out_as_the_recording_does() -> None:
    model, x = _AddsIntoScratch(), torch.zeros(2, 3)
    with torch.no_grad():
        rec = torchrecorder.record(model, "net", input_data=x)
    assert [n.key for n in rec.nodes.values() if isinstance(n, OpNode)] == ["net/add", "net/add_1"]
    with torch.no_grad(), torchrecorder.capture(model, ops=["net/add", "net/add_1"]) as cap:
        model(x)
    assert torch.equal(cap["net/add"], torch.ones(2, 3))
    assert torch.equal(cap["net/add_1"], torch.full((2, 3), 3.0))


class _HeadsOnFirstUse(nn.Module):
    """A head made by ``forward`` the first time a task is seen, and a parameter made likewise
    (multi-task models, build-on-first-call modules)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.heads = nn.ModuleDict()

    def forward(self, x: Tensor, task: str = "a") -> Tensor:
        if task not in self.heads:
            self.heads[task] = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
        if not hasattr(self.body, "gain"):
            self.body.gain = nn.Parameter(torch.ones(4))
        return self.heads[task](self.body(x) * self.body.gain)


def test_modules_and_parameters_that_forward_registers_are_recorded() -> None:
    net = _HeadsOnFirstUse()
    registration_hooks = (len(torch.nn.modules.module._global_module_registration_hooks),
                          len(torch.nn.modules.module._global_parameter_registration_hooks))
    for _ in range(2):  # the second time the head is there from the start
        rec = torchrecorder.record(net, "net", (2, 4))
        check_invariants(rec)
        assert [layer.path for layer in rec.layers()] == ["", "body", "heads.a", "heads.a.0", "heads.a.1"]
        params = sorted(n.path for n in rec.nodes.values() if isinstance(n, ParamNode))
        assert params == ["body.bias", "body.gain", "body.weight", "heads.a.0.bias", "heads.a.0.weight"]
        assert not rec.notes, rec.notes
        assert {("body#1", "heads.a.0#1"), ("heads.a.0#1", "heads.a.1#1"),
                ("heads.a.1#1", "OUTPUT")} <= recorded_relation(rec)
        assert "Total params: 39" in rec.summary()
    assert not any(m._forward_pre_hooks or m._forward_hooks for m in net.modules())
    assert registration_hooks == (len(torch.nn.modules.module._global_module_registration_hooks),
                                  len(torch.nn.modules.module._global_parameter_registration_hooks))


def test_what_a_modules_own_pre_hooks_compute_is_inside_its_call() -> None:
    """torch's pruning makes a module's weight in a forward pre-hook of the module
    (``weight = weight_orig * weight_mask``), and a user's pre-hook may scale the input: that work
    is part of the call, as the module runs it, not of the caller; the hooks stay as they were."""
    import torch.nn.utils.prune as prune

    net = nn.Sequential(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), nn.Linear(4, 2))
    prune.l1_unstructured(net[0][0], "weight", amount=0.5)
    net[1].register_forward_pre_hook(lambda module, args: (args[0] * 2,))
    before = [list(m._forward_pre_hooks.values()) for m in net.modules()]
    rec = torchrecorder.record(net, "net", (2, 4))
    nodes = rec.nodes
    assert nodes["0.0/mul"].parent_key == "0.0"  # the pruning hook's product, in the Linear's call
    assert nodes["0.0.weight_orig"].parent_key == "0.0"
    assert ("0.0.weight_orig", "0.0/mul") in rec.links and ("0.0/mul", "0.0/linear") in rec.links
    assert nodes["1/mul"].parent_key == "1"  # the user's pre-hook scaling the input
    check_invariants(rec)
    assert [list(m._forward_pre_hooks.values()) for m in net.modules()] == before


class _Transformed(nn.Module):
    """torch.vmap and torch.func.grad called from forward."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8))
        self.fc = nn.Linear(8, 8)

    def forward(self, x: Tensor) -> Tensor:
        y = torch.vmap(lambda r: torch.tanh(self.w @ r))(self.fc(x))
        g = torch.func.grad(lambda v: (v * v).sum())(y)
        return y.relu() + g


def test_operations_inside_torch_func_transforms_are_joined_to_the_network() -> None:
    """The function a transform runs gets wrapped tensors (new objects around the ones outside):
    its operations are fed by what the wrappers wrap, and what it returns comes from them; a note
    says their shapes are one sample's."""
    net = _Transformed()
    before = snapshot(net)
    rec = torchrecorder.record(net, "t", (5, 8))
    links = set(rec.links)
    assert {("fc:out", "t/matmul"), ("w", "t/matmul"), ("t/matmul", "t/tanh")} <= links, sorted(links)
    assert rec.nodes["t/matmul"].output_shapes == [(8,)]  # one sample
    reached, todo = set(), ["t/tanh"]
    while todo:  # vmap's result reaches the network's output, through grad's function too
        a = todo.pop()
        for x, b in links:
            if x == a and b not in reached:
                reached.add(b)
                todo.append(b)
    assert {"t/grad", "t/relu", "t:out"} <= reached, sorted(links)
    assert any("torch.vmap" in note for note in rec.notes)
    assert "matmul" not in torchrecorder.cost(rec).uncounted  # counted once per sample
    check_invariants(rec)
    check_state_unchanged(before, net)


class _VmappedModule(nn.Module):
    """A module called inside torch.vmap from forward (``torch.vmap(self.fc)(h)``), its result
    used (``scale``) or returned as it is."""

    def __init__(self, scale: bool = True) -> None:
        super().__init__()
        self.pre = nn.Linear(6, 8)
        self.fc = nn.Linear(8, 4)
        self.scale = scale

    def forward(self, x: Tensor) -> Tensor:
        h = self.pre(x)
        y = torch.vmap(self.fc)(h)
        return y * 2 if self.scale else y


def test_a_module_called_inside_vmap_is_fed_by_the_network() -> None:
    """The call's input is a wrapper around ``pre``'s output: its edge comes from that output,
    as an operation's inside vmap does, and what vmap returns comes from the call (no
    operation made up from autograd's record, no note of a tensor from nowhere); returned as it
    is, it is the network's output with its own shape, not one sample's."""
    net = _VmappedModule()
    before = snapshot(net)
    rec = torchrecorder.record(net, "v", (5, 6))
    links = set(rec.links)
    into_fc = {u for u, v in links if v in ("fc:in", "fc/linear") and not u.startswith("fc.")}
    assert into_fc == {"pre:out"}, sorted(links)
    assert ("fc/linear", "v/mul") in links, sorted(links)
    assert sorted(k for k in rec.nodes if k and k.startswith("v/")) == ["v/mul"]
    assert not any("no recorded operation made" in note for note in rec.notes), rec.notes
    assert rec.nodes["fc"].input_shapes == [(8,)]  # one sample
    check_invariants(rec)
    check_state_unchanged(before, net)
    rec = torchrecorder.record(_VmappedModule(scale=False), "v", (5, 6))
    outputs = [n for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "output"]
    assert [n.shape for n in outputs] == [(5, 4)] and rec.nodes["v"].output_shapes == [(5, 4)]
    assert not any("no recorded operation made" in note for note in rec.notes), rec.notes
    check_invariants(rec)


def test_a_causal_mask_torch_does_not_read_draws_no_edge() -> None:
    """``nn.Transformer(...)(src, tgt, tgt_mask=m, tgt_is_causal=True)``: torch hands attention
    its causal flag and drops ``m`` (its values change nothing), so no edge runs from ``m``;
    with ``tgt_is_causal=False``, or with a padding mask merged into it, ``m`` is read."""
    torch.manual_seed(0)
    net = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                         dim_feedforward=16, dropout=0.0)
    src, tgt = torch.randn(5, 2, 8), torch.randn(4, 2, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    pad = torch.zeros(2, 4, dtype=torch.bool)
    pad[1, 3] = True
    with torch.no_grad():  # the oracle: torch ignores the values of the mask, or reads them
        junk = torch.randn(4, 4) * 100
        assert torch.equal(net(src, tgt, tgt_mask=mask, tgt_is_causal=True),
                           net(src, tgt, tgt_mask=junk, tgt_is_causal=True))
        assert not torch.allclose(net(src, tgt, tgt_mask=mask, tgt_key_padding_mask=pad, tgt_is_causal=True),
                                  net(src, tgt, tgt_mask=junk, tgt_key_padding_mask=pad, tgt_is_causal=True))
    before = snapshot(net)

    def read_from_mask(**kwargs: Any) -> list[tuple[str, str]]:
        rec = torchrecorder.record(net, "t", input_data=(src, tgt), input_kwargs={"tgt_mask": mask, **kwargs})
        check_invariants(rec)
        assert "multi_head_attention_forward" not in torchrecorder.cost(rec).uncounted
        return [(u, v) for u, v in rec.links if u == "input:tgt_mask"]

    assert read_from_mask(tgt_is_causal=True) == []
    assert read_from_mask(tgt_is_causal=False) == [("input:tgt_mask", "decoder.layers.0.self_attn/"
                                                                       "multi_head_attention_forward")]
    assert read_from_mask(tgt_is_causal=True, tgt_key_padding_mask=pad) != []
    check_state_unchanged(before, net)
