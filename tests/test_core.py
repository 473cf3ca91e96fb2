"""Recording structure on small models whose graph is known exactly."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder import LayerNode, OpNode, ParamNode, TensorNode
from torchrecorder.recorder import Recorder

from .dot_parse import parse_dot
from .zoo.handwritten import ConvBN, Nested, ResNetish, TinyMLP, TwoInputs


def kinds(rec: Recorder, cls: type) -> list[str]:
    return [k for k, n in rec.nodes.items() if type(n) is cls]


def test_mlp_nodes_parents_depths_and_edges() -> None:
    rec = torchrecorder.record(TinyMLP(), "mlp", (2, 4))
    rec.lint()
    assert kinds(rec, LayerNode) == ["mlp", "fc1", "act", "fc2"]
    layers = {n.key: n for n in rec.layers()}
    assert layers["mlp"].parent_key is None and layers["mlp"].depth == 0
    assert all(layers[k].parent_key == "mlp" and layers[k].depth == 1 for k in ("fc1", "act", "fc2"))
    assert [layers[k].type_name for k in ("fc1", "act", "fc2")] == ["Linear", "ReLU", "Linear"]
    assert kinds(rec, ParamNode) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    w = rec.nodes["fc1.weight"]
    assert isinstance(w, ParamNode) and w.shape == (8, 4) and w.parent_key == "fc1" and w.depth == 2
    assert kinds(rec, OpNode) == ["fc1/linear", "act/relu", "fc2/linear"]
    assert rec.nodes["act/relu"].parent_key == "act"
    x, out = rec.nodes["input:x"], rec.nodes["fc2:out"]
    assert isinstance(x, TensorNode) and x.role == "input" and x.shape == (2, 4) and x.parent_key is None
    assert isinstance(out, TensorNode) and out.role == "output" and out.shape == (2, 3)
    assert out.parent_key is None and out.dtype == "float32" and out.device == "cpu"
    assert rec.nodes["fc1:out"].parent_key == "mlp" and rec.nodes["fc1:out"].shape == (2, 8)
    assert list(rec.links) == [
        ("input:x", "fc1/linear"), ("fc1.weight", "fc1/linear"), ("fc1.bias", "fc1/linear"),
        ("fc1/linear", "fc1:out"), ("fc1:out", "act/relu"), ("act/relu", "act:out"),
        ("act:out", "fc2/linear"), ("fc2.weight", "fc2/linear"), ("fc2.bias", "fc2/linear"),
        ("fc2/linear", "fc2:out"),
    ]
    assert layers["fc1"].input_shapes == [(2, 4)] and layers["fc1"].output_shapes == [(2, 8)]
    assert layers["fc1"].num_params == 40 and layers["mlp"].num_params_total == 67


def test_cnn_with_batchnorm_records_buffers_as_counts_and_flatten_as_op() -> None:
    rec = torchrecorder.record(ConvBN().eval(), "cnn", (1, 3, 8, 8))
    rec.lint()
    assert kinds(rec, LayerNode) == ["cnn", "conv", "bn", "relu", "head"]
    bn = rec.nodes["bn"]
    assert isinstance(bn, LayerNode) and bn.num_params == 8 and bn.num_buffers == 4 + 4 + 1
    flatten = rec.nodes["cnn/flatten"]
    assert isinstance(flatten, OpNode) and flatten.parent_key == "cnn" and flatten.output_shapes == [(1, 256)]
    assert ("relu:out", "cnn/flatten") in rec.links
    assert ("cnn/flatten", "head:in") in rec.links
    assert ("head:in", "head/linear") in rec.links


def test_residual_add_outside_submodules_joins_both_branches() -> None:
    rec = torchrecorder.record(ResNetish(), "res", (1, 3, 6, 6))
    rec.lint()
    add = rec.nodes["block/add"]
    assert isinstance(add, OpNode) and add.parent_key == "block" and add.depth == 2
    into_add = {a for a, b in rec.links if b == "block/add"}
    assert into_add == {"block.conv2:out", "stem:out"}  # the branch and the skip
    assert ("block/add", "block:out") in rec.links
    block_out = rec.nodes["block:out"]
    assert isinstance(block_out, TensorNode) and block_out.parent_key == "res"
    # the skip connection: the block's input feeds both conv1 and the add
    assert {b for a, b in rec.links if a == "stem:out"} == {"block.conv1/conv2d", "block/add"}
    mean = rec.nodes["res/mean"]
    assert isinstance(mean, OpNode) and ("block:out", "res/mean") in rec.links


def test_two_inputs_are_named_after_forward_arguments() -> None:
    rec = torchrecorder.record(TwoInputs(), "two", [(2, 3), (2, 5)])
    rec.lint()
    a, b = rec.nodes["input:a"], rec.nodes["input:b"]
    assert isinstance(a, TensorNode) and a.shape == (2, 3) and a.role == "input"
    assert isinstance(b, TensorNode) and b.shape == (2, 5)
    assert ("input:a", "left/linear") in rec.links and ("input:b", "right/linear") in rec.links
    assert {a for a, b in rec.links if b == "two/cat"} == {"left:out", "right:out"}
    assert ("two/cat", "out:in") in rec.links


def test_three_level_nesting_depths_and_parents() -> None:
    rec = torchrecorder.record(Nested(), "nest", (1, 6))
    rec.lint()
    expect = {"nest": (0, None), "mid": (1, "nest"), "mid.a": (2, "mid"), "mid.a.lin": (3, "mid.a"),
              "mid.b": (2, "mid"), "mid.b.lin": (3, "mid.b"), "head": (1, "nest")}
    assert {n.key: (n.depth, n.parent_key) for n in rec.layers()} == expect
    tanh = rec.nodes["mid.a/tanh"]
    assert tanh.parent_key == "mid.a" and tanh.depth == 3
    # mid returns b's output: that tensor node is moved up to the root's scope, not copied
    assert rec.nodes["mid.b:out"].parent_key == "nest" and "mid:out" not in rec.nodes
    assert ("mid.b/tanh", "mid.b:out") in rec.links and ("mid.b:out", "head/linear") in rec.links


def test_module_called_twice_gets_two_layer_nodes_and_one_set_of_params() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(torch.relu(self.lin(x)))

    net = Twice()
    rec = torchrecorder.record(net, "twice", (1, 3))
    rec.lint()
    calls = rec.calls_of(net.lin)
    assert [c.key for c in calls] == ["lin", "lin#2"] and [c.call_index for c in calls] == [1, 2]
    assert kinds(rec, ParamNode) == ["lin.weight", "lin.bias"]
    assert ("lin.weight", "lin#2/linear") in rec.links
    assert ("lin:out", "twice/relu") in rec.links and ("twice/relu", "lin#2:in") in rec.links


def test_five_thousand_op_chain_records_without_recursion() -> None:
    class Chain(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for _ in range(5000):
                x = x + 1
            return x

    rec = torchrecorder.record(Chain(), "chain", (1,))
    ops = kinds(rec, OpNode)
    assert len(ops) == 5000 and ops[0] == "chain/add" and ops[-1] == "chain/add_4999"
    assert ("chain/add_4998", "chain/add_4999") in rec.links
    # every op drawn (the loop unfolded, no budget): no recursion in drawing either
    src = torchrecorder.make_dot(rec, expand_leaves=True, fold_repeats=False, max_nodes=None).source
    assert len(parse_dot(src).edges) == 5001  # drawn edges (the input's through a point on a title rank)


def test_keep_tensors_is_opt_in() -> None:
    x = torch.randn(2, 4)
    rec = torchrecorder.record(TinyMLP(), "mlp", input_data=x)
    assert all(n.kept is None for n in rec.nodes.values() if type(n) is TensorNode)
    kept = torchrecorder.record(TinyMLP(), "mlp", input_data=x, keep_tensors=True)
    assert kept.nodes["input:x"].fn is x
    assert isinstance(kept.nodes["fc1:out"].fn, torch.Tensor)


def test_summary_table_lists_layers_and_parameter_total() -> None:
    text = str(torchrecorder.record(TinyMLP(), "mlp", (2, 4)))
    assert "fc1" in text and "Linear" in text and "2×8" in text
    assert "Total params: 67" in text


def test_one_global_forward_hook_while_recording_and_none_after() -> None:
    """Calls are closed by one process-wide forward hook, present only inside the recording."""
    from torchrecorder.recorder import recording

    from .graph_checks import global_hook_counts

    before = global_hook_counts()
    net = TinyMLP()
    with recording(net, "mlp") as rec:
        during = global_hook_counts()
        net(torch.randn(2, 4))
    assert global_hook_counts() == before
    assert during[0] == before[0] + 1 and during[3] == before[3] + 1  # a forward hook, always called
    assert during[2] == before[2]  # without kwargs: torch would not remove that entry
    assert all(len(m._forward_pre_hooks) == 0 and len(m._forward_hooks) == 0 for m in net.modules())
    assert [layer.key for layer in rec.layers()] == ["mlp", "fc1", "act", "fc2"]


def test_a_user_forward_hook_that_replaces_an_output_keeps_the_graph_connected() -> None:
    """The call closes on what forward returned; the hook's ops follow it in the caller's scope."""
    net = TinyMLP()
    handle = net.act.register_forward_hook(lambda m, args, out: out * 2)
    try:
        rec = torchrecorder.record(net, "mlp", (2, 4))
    finally:
        handle.remove()
    rec.lint()
    assert ("act:out", "mlp/mul") in rec.links and ("mlp/mul", "fc2/linear") not in rec.links
    assert rec.nodes["mlp/mul"].parent_key == "mlp"
    # fc2 receives the doubled tensor: an input node made from mul's result
    fc2_in = [a for a, b in rec.links if b == "fc2/linear" and not a.startswith("fc2.")]
    assert len(fc2_in) == 1 and ("mlp/mul", fc2_in[0]) in rec.links


def test_modules_made_during_forward_are_ops_of_the_caller() -> None:
    """A module the root does not hold (made inside forward) is not a layer; its ops are the caller's."""

    class MakesSoftmax(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return nn.Softmax(dim=-1)(self.fc(x))

    rec = torchrecorder.record(MakesSoftmax(), "net", (2, 4))
    rec.lint()
    assert [layer.key for layer in rec.layers()] == ["net", "fc"]
    assert rec.nodes["net/softmax"].parent_key == "net" and ("fc:out", "net/softmax") in rec.links


def test_per_module_forward_hooks_where_torch_has_no_global_always_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback for torch versions whose global forward hooks lack ``always_call``:
    the same graph, failures included, and no hook left behind."""
    from torchrecorder import recorder
    from torchrecorder.recording import engine

    from .graph_checks import global_hook_counts

    class Fails(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mlp = TinyMLP()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.mlp(x[:, :3])  # fc1 expects 4 features

    def graphs() -> tuple[str, tuple[list[str], list[str], str | None]]:
        ok = torchrecorder.make_dot(torchrecorder.record(ResNetish(), "r", (1, 3, 6, 6))).source
        try:
            torchrecorder.record(Fails(), "f", (2, 4))
        except RuntimeError as exc:
            rec = exc.recording  # type: ignore[attr-defined]
        return ok, (list(rec.nodes), [n.key for n in rec.layers() if n.error], rec.failed_key)

    with_global = graphs()
    monkeypatch.setattr(engine, "GLOBAL_POST_HOOK", False)
    net = TinyMLP()
    with recorder.recording(net, "mlp"):
        assert all(len(m._forward_hooks) == 1 for m in net.modules())
        net(torch.randn(1, 4))
    assert graphs() == with_global
    assert with_global[1][2] == "mlp.fc1" and not any(global_hook_counts())
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in net.modules())


def test_operations_whose_results_nothing_uses_are_dropped_transitively() -> None:
    class Checks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.abs().mul(2).sum().item() < 0:  # a check: abs -> mul -> sum feed nothing drawn
                raise ValueError("negative")
            return self.fc(x.neg())

    rec = torchrecorder.record(Checks(), "net", (1, 4))
    ops = {n.op for n in rec.nodes.values() if isinstance(n, OpNode)}
    assert {"neg", "linear"} <= ops
    assert not ops & {"abs", "mul", "sum"}, ops
    assert all(a in rec.nodes and b in rec.nodes for a, b in rec.links)


class _Leaf(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.w.sum()


class _Tree(nn.Module):
    """Children run in order; shared modules and parameters are called more than once."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for child in self.children():
            x = child(x)
        return x


def _shared_tree(seed: int) -> nn.Module:
    """A random module tree with tied parameters, a module under two paths and a parameter
    under two names."""
    import random

    rnd = random.Random(seed)
    leaves = [_Leaf(rnd.randint(1, 9)) for _ in range(6)]

    def build(depth: int) -> nn.Module:
        node = _Tree()
        for i in range(rnd.randint(1, 3)):
            kid = build(depth + 1) if depth < 3 and rnd.random() < 0.5 else rnd.choice(leaves)
            node.add_module(f"c{i}", kid)
        if rnd.random() < 0.3:
            node.own = nn.Parameter(torch.zeros(rnd.randint(1, 5)))
            node.register_parameter("alias", node.own)  # one tensor under two names
        if rnd.random() < 0.3:  # tied to a leaf's parameter
            node.tied = rnd.choice(leaves).w
        return node

    return build(0)


@pytest.mark.parametrize("seed", range(12))
def test_parameter_counts_count_a_shared_parameter_once_per_module(seed: int) -> None:
    net = _shared_tree(seed)
    rec = torchrecorder.record(net, "t", (1,))
    for path, module in net.named_modules():
        call = next(n for n in rec.layers() if n.fn is module and n.call_index == 1)
        assert call.num_params == sum(p.numel() for p in module.parameters(recurse=False)), path
        assert call.num_params_total == sum(p.numel() for p in module.parameters()), path


def test_index_of_a_prefixed_walk_with_tied_and_empty_parameters() -> None:
    """A module indexed under a prefix (met outside the recorded root), with a parameter tied
    between two children and an empty one shared too: counts as ``module.parameters()``."""
    from torchrecorder.recording.modules import index_modules

    a, b = nn.Linear(3, 2), nn.Linear(3, 2)
    b.weight = a.weight
    a.empty = nn.Parameter(torch.zeros(0))
    b.empty = a.empty
    outer = nn.Sequential(a, b)
    modules: dict = {}
    index_modules(outer, "outer", "model.part", modules, {}, set())
    for module in (outer, a, b):
        info = modules[id(module)]
        assert info.total == sum(p.numel() for p in module.parameters())
        assert info.num_params == sum(p.numel() for p in module.parameters(recurse=False))
    assert modules[id(b)].path == "model.part.1"
