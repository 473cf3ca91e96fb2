"""The backward graph: ``record(..., backward=True)`` and ``make_dot(rec, backward=True)``."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.nodes import LayerNode, OpNode, ParamNode, TensorNode
from torchrecorder.projection.backward import backward_view
from torchrecorder.recorder import recording

from .dot_parse import parse_dot
from .hook_checks import hook_count


class Block(nn.Module):
    """A residual block with a shared activation and an op outside any submodule."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 6)
        self.fc2 = nn.Linear(6, 6)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(self.act(self.fc1(x))) * 0.5


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), Block(), nn.LayerNorm(6), nn.Linear(6, 3))


def autograd_walk(roots: list[torch.Tensor]) -> tuple[Counter, Counter]:
    """Names and (from, to) name pairs of the autograd graph reached from ``roots``."""
    seen: dict[int, object] = {}
    stack = [t.grad_fn for t in roots if t.grad_fn is not None]
    for gf in stack:
        seen[id(gf)] = gf
    names: Counter = Counter()
    pairs: Counter = Counter()
    while stack:
        gf = stack.pop()
        names[gf.name().rpartition("::")[2]] += 1
        for nxt, _ in gf.next_functions:
            if nxt is None:
                continue
            pairs[(nxt.name().rpartition("::")[2], gf.name().rpartition("::")[2])] += 1
            if id(nxt) not in seen:
                seen[id(nxt)] = nxt
                stack.append(nxt)
    return names, pairs


def recorded_walk(rec: torchrecorder.Recorder) -> tuple[Counter, Counter]:
    bw = rec.backward
    names = Counter(n.name for n in bw.nodes)
    pairs = Counter((bw.nodes[a].name, bw.nodes[b].name) for a, b in bw.edges)
    return names, pairs


def test_nodes_and_edges_are_those_autograd_reaches_from_the_outputs() -> None:
    model = net()
    x = torch.randn(2, 4)
    with recording(model, "net", backward=True) as rec:
        y = model(x)
    assert recorded_walk(rec) == autograd_walk([y])
    assert sum(recorded_walk(rec)[1].values()) == len(rec.backward.edges) > 10


def test_every_node_sits_in_the_call_whose_forward_made_it() -> None:
    model = net()
    rec = torchrecorder.record(model, "net", (2, 4), backward=True)
    by_name = {(n.name, n.scope) for n in rec.backward.nodes}
    assert ("GeluBackward0", "1.act") in by_name
    assert ("NativeLayerNormBackward0", "2") in by_name
    # the residual add and the scaling ran in the block's own forward, outside any child
    assert ("AddBackward0", "1") in by_name and ("MulBackward0", "1") in by_name
    # the transpose inside linear has no op of its own: it belongs to the linear's call
    assert {n.scope for n in rec.backward.nodes if n.name == "TBackward0"} == {"0", "1.fc1", "1.fc2", "3"}
    params = {n.param: n.scope for n in rec.backward.nodes if n.param}
    assert params == {name: name.rpartition(".")[0] for name, _ in model.named_parameters()}
    forward_keys = {n.forward for n in rec.backward.nodes if n.forward}
    assert forward_keys <= set(rec.nodes) and "1.act/gelu" in forward_keys


class _Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        (x,) = ctx.saved_tensors
        return 2 * x * grad


def test_a_custom_function_node_sits_where_the_function_ran_not_with_its_reader() -> None:
    """A custom Function's backward node is put on its output when ``apply`` returns, after
    the operation inside it was recorded: it belongs to the call that ran the Function (and
    to that operation), not to the module that reads the output next."""

    class Custom(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.out = nn.Linear(4, 2)
            self.inner = nn.Sequential(nn.Linear(4, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.out(_Square.apply(self.fc(x)))  # read by a module
            return y + torch.tanh(_Square.apply(self.inner(x))).sum()  # read by an op

    rec = torchrecorder.record(Custom(), "c", (2, 4), backward=True)
    squares = [n for n in rec.backward.nodes if n.name == "_SquareBackward"]
    assert len(squares) == 2
    assert {n.scope for n in squares} == {"c"}
    assert {n.forward for n in squares} == {"c/mul", "c/mul_1"}
    assert all(isinstance(rec.nodes[n.forward], OpNode) for n in squares)


def test_edges_run_forward_from_parameters_to_outputs() -> None:
    rec = torchrecorder.record(net(), "net", (2, 4), backward=True)
    bw = rec.backward
    assert all(a < b for a, b in bw.edges)  # forward order: every edge points later
    (out_index, out_key), = bw.outputs
    assert bw.nodes[out_index].name == "AddmmBackward0" and rec.nodes[out_key].role == "output"


def test_drawing_groups_autograd_nodes_in_module_clusters() -> None:
    rec = torchrecorder.record(net(), "net", (2, 4), backward=True)
    view = backward_view(rec)
    view.lint()
    ops = [n for n in view.nodes.values() if isinstance(n, OpNode)]
    assert len(ops) == sum(1 for n in rec.backward.nodes if not n.name.startswith("AccumulateGrad"))
    assert {n.path for n in view.nodes.values() if isinstance(n, ParamNode)} == {
        name for name, _ in net().named_parameters()}
    dot = parse_dot(torchrecorder.make_dot(rec, backward=True).source)
    assert {"cluster_1.act", "cluster_1.fc1"} <= set(dot.clusters)
    labels = " ".join(a.get("label", "") for a in dot.node_attrs.values())
    assert "GeluBackward0" in labels and "NativeLayerNormBackward0" in labels
    assert len(dot.edges) >= len(rec.backward.edges) - len(ops)
    # at depth 1 the modules are boxes and their autograd nodes hidden inside them
    shallow = parse_dot(torchrecorder.make_dot(rec, backward=True, render_depth=1).source)
    assert "GeluBackward0" not in " ".join(a.get("label", "") for a in shallow.node_attrs.values())
    assert len(shallow.nodes) < len(dot.nodes)


def test_saved_tensors_are_drawn_on_request() -> None:
    rec = torchrecorder.record(net(), "net", (2, 4), backward=True)
    mm = next(n for n in rec.backward.nodes if n.name == "AddmmBackward0")
    assert ("mat1", (2, 4)) in mm.saved
    plain = torchrecorder.make_dot(rec, backward=True).source
    saved = torchrecorder.make_dot(rec, backward=True, show_saved=True).source
    assert "mat1" not in plain and "mat1" in saved
    view = backward_view(rec, saved=True)
    assert any(isinstance(n, TensorNode) and n.name == "mat1" and n.shape == (2, 4)
               for n in view.nodes.values())
    with pytest.raises(ValueError, match="backward=True"):
        torchrecorder.make_dot(rec, show_saved=True)
    # a saved tensor is drawn as a tensor, not in the style of the network's inputs and outputs
    # (green, bold: torchviz draws saved tensors apart from the leaves and outputs too)
    styles = torchrecorder.GraphvizStyler().styles
    attrs = parse_dot(saved).node_attrs
    mat1 = next(v for k, v in attrs.items() if k.endswith("saved@mat1"))
    output = next(v for k, v in attrs.items() if k.startswith("output"))
    assert mat1["fillcolor"].strip('"') == styles["tensor"]["fillcolor"] != styles["io"]["fillcolor"]
    assert output["fillcolor"].strip('"') == styles["io"]["fillcolor"]


def test_a_recording_without_backward_says_how_to_get_one() -> None:
    rec = torchrecorder.record(net(), "net", (2, 4))
    assert rec.backward is None
    with pytest.raises(ValueError, match=r"record\(\.\.\., backward=True\)"):
        torchrecorder.make_dot(rec, backward=True)


def test_render_network_draws_the_backward_graph_as_its_error_message_says(tmp_path) -> None:
    """The error above names ``render_network(..., backward=True)``, which raised 'unknown
    keyword argument'; it draws what make_dot draws from record(..., backward=True)."""
    model = net()
    path = torchrecorder.render_network(model, "net", (2, 4), tmp_path, fmt="dot", backward=True,
                                        show_saved=True, render_depth=None)
    rec = torchrecorder.record(model, "net", (2, 4), backward=True)
    assert open(path).read() == torchrecorder.make_dot(rec, None, backward=True, show_saved=True).source
    loaded = torchrecorder.load_json(torchrecorder.render_network(model, "net", (2, 4), tmp_path, fmt="json",
                                                                  backward=True))
    assert [n.name for n in loaded.backward.nodes] == [n.name for n in rec.backward.nodes]
    assert "AddmmBackward0" in open(torchrecorder.render_network(
        model, "net", (2, 4), tmp_path, filename="page", fmt="html", backward=True)).read()
    calls = []
    model.register_forward_pre_hook(lambda *a: calls.append(1))
    for bad in ({"show_saved": True}, {"backward": True, "fmt": "mmd"},
                {"backward": True, "stat": "flops", "fmt": "dot"}):
        with pytest.raises(ValueError, match="backward"):
            torchrecorder.render_network(model, "bad", (2, 4), tmp_path, **bad)
    assert calls == [] and not list(tmp_path.glob("bad*"))  # refused before the model ran


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_no_backward_graph_without_gradients(mode) -> None:
    with mode():
        rec = torchrecorder.record(net(), "net", (2, 4), backward=True)
    with pytest.raises(ValueError, match="without gradients"):
        torchrecorder.make_dot(rec, backward=True)


def test_frozen_model_and_plain_input_build_no_graph() -> None:
    model = net().requires_grad_(False)
    rec = torchrecorder.record(model, "net", (2, 4), backward=True)
    with pytest.raises(ValueError, match="requires gradients"):
        torchrecorder.make_dot(rec, backward=True)
    assert all(not p.requires_grad for p in model.parameters())


def test_input_leaves_that_require_grad_are_drawn_at_the_top_level() -> None:
    x = torch.randn(2, 4, requires_grad=True)
    rec = torchrecorder.record(net(), "net", input_data=x, backward=True)
    leaves = [n for n in rec.backward.nodes if n.name == "AccumulateGrad" and not n.param]
    assert [(n.scope, n.shape) for n in leaves] == [(None, (2, 4))]
    assert x.grad is None


def test_the_model_is_left_as_it_was_and_nothing_stays_alive() -> None:
    model = net()
    x = torch.randn(2, 4)
    expected = model(x)
    rec = torchrecorder.record(model, "net", input_data=x, backward=True)
    assert hook_count(model) == 0
    assert all(p.grad is None for p in model.parameters())
    with recording(model, "net", backward=True):
        out = model(x)
    assert torch.equal(out, expected)
    for node in rec.backward.nodes:  # plain data only: no autograd node, no tensor
        assert all(isinstance(v, (str, tuple, list, type(None))) for v in
                   (node.name, node.scope, node.forward, node.param, node.shape, node.saved))


def test_a_module_called_twice_gives_each_call_its_nodes() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.tanh(self.fc(x)))

    rec = torchrecorder.record(Twice(), "twice", (1, 3), backward=True)
    scopes = Counter(n.scope for n in rec.backward.nodes if n.name == "AddmmBackward0")
    assert scopes == Counter({"fc": 1, "fc#2": 1})
    view = backward_view(rec)
    assert isinstance(view.nodes["fc#2"], LayerNode)


def test_a_one_shot_offload_hook_is_not_run_by_the_recording() -> None:
    # an offload that hands each saved tensor back once: unpacking during the recording
    # would leave the user's own backward without its tensors
    store: dict[int, torch.Tensor] = {}
    unpacked: list[int] = []

    def pack(t: torch.Tensor) -> int:
        store[len(store)] = t
        return len(store) - 1

    def unpack(k: int) -> torch.Tensor:
        unpacked.append(k)
        return store.pop(k)

    model = net()
    x = torch.randn(2, 4)
    model(x).sum().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        with recording(model, "net", backward=True) as rec:
            out = model(x)
    assert not unpacked
    out.sum().backward()
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), expected, strict=True))
    mm = next(n for n in rec.backward.nodes if n.name == "AddmmBackward0")
    assert "mat1" in mm.unread and "mat1" not in dict(mm.saved)


def test_checkpointed_blocks_are_not_recomputed_by_the_recording() -> None:
    class Checkpointed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.block = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU())
            self.head = nn.Linear(6, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=False)
            return self.head(h)

    x = torch.randn(5, 4)
    plain = Checkpointed()
    plain(x).sum().backward()
    recorded = Checkpointed()
    with recording(recorded, "net", backward=True) as rec:
        out = recorded(x)
    assert recorded.block[1].num_batches_tracked.item() == 1  # the forward only
    out.sum().backward()
    assert recorded.block[1].num_batches_tracked.item() == plain.block[1].num_batches_tracked.item()
    assert torch.equal(recorded.block[0].weight.grad, plain.block[0].weight.grad)
    assert any(n.unread for n in rec.backward.nodes)
    head = next(n for n in rec.backward.nodes if n.name == "AddmmBackward0" and n.scope == "head")
    assert dict(head.saved)["mat1"] == (5, 6)  # saved outside the checkpoint: read


def test_a_model_with_full_backward_hooks_has_the_backward_graph_it_has_without_them() -> None:
    def net() -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))

    x = torch.randn(2, 4, requires_grad=True)
    plain = torchrecorder.record(net(), "net", input_data=x, backward=True)
    hooked_net, seen = net(), []
    hooked_net[0].register_full_backward_hook(lambda m, gi, go: seen.append("0"))
    hooked_net[2].register_full_backward_pre_hook(lambda m, go: seen.append("2"))
    hooked_net.register_full_backward_hook(lambda m, gi, go: seen.append("net"))
    hooked = torchrecorder.record(hooked_net, "net", input_data=x, backward=True)
    assert plain.backward is not None and hooked.backward is not None
    names = [n.name for n in hooked.backward.nodes]
    assert "BackwardHookFunctionBackward" not in names  # torch's plumbing, not the model's
    assert names == [n.name for n in plain.backward.nodes]
    assert hooked.backward.edges == plain.backward.edges
    drawn = torchrecorder.make_dot(hooked, backward=True).source
    assert drawn == torchrecorder.make_dot(plain, backward=True).source
    hooked_net(x).sum().backward()  # the user's hooks still run
    assert sorted(seen) == ["0", "2", "net"]


def test_parameters_of_the_backward_view_keep_their_dtype_and_size() -> None:
    """The backward page's panel lists a module's parameters as the forward page does: the
    backward view's parameter nodes had no dtype and 0 elements (``weight 4096×14336  0``)."""
    rec = torchrecorder.record(net().to(torch.float64), "net", (2, 4), backward=True,
                               dtype=torch.float64)
    view = backward_view(rec)
    params = {n.path: n for n in view.nodes.values() if isinstance(n, ParamNode)}
    forward = {n.path: n for n in rec.nodes.values() if isinstance(n, ParamNode)}
    assert set(params) == set(forward) and len(params) == 10
    for path, p in params.items():
        f = forward[path]
        assert (p.dtype, p.device, p.numel, p.shape) == ("float64", "cpu", f.numel, f.shape) and p.numel > 0
    page = torchrecorder.make_html(rec, backward=True).text
    assert '[\\"weight\\",\\"6×4\\",\\"float64\\",24]' in page.replace("\\u00d7", "×")


def test_the_views_that_give_a_pass_through_output_its_own_node_are_not_drawn() -> None:
    """A call that returns its input (``nn.Identity``, dropout in ``eval()``) gets a view of it
    from the recorder, so that its output has its own node; that view's ``ViewBackward0`` is the
    recorder's: the backward graph is the one a plain run builds."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.Dropout(0.5), nn.Identity(), nn.Tanh(), nn.Linear(6, 3)).eval()
    x = torch.randn(2, 4)
    plain = autograd_walk([model(x)])
    rec = torchrecorder.record(model, "net", input_data=x, backward=True)
    assert recorded_walk(rec) == plain
    assert "ViewBackward0" not in plain[0]
    assert {"1", "2"} <= {str(n.key) for n in rec.nodes.values() if isinstance(n, LayerNode)}
