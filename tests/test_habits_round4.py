"""Programs written the way users of torchrecorder 1.0.3, scio and torchfunc wrote them, round 4:
each test is a habit that gave a different answer here than in the package it was written for."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchrecorder.hooks import LayerRecorder


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x)) + x


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 2, 1)
        self.block = _Block()
        self.fc = nn.Linear(2, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.block(self.stem(x)).mean((2, 3)))


def test_scio_recorded_modules_follow_the_layer_table() -> None:
    # scio lists recorded_modules in the order of its summary (call order, a layer before its
    # insides): 1-2 (block), 2-1 (block.conv), 1-3 (fc); zipping them with names relied on it
    rnet = LayerRecorder(_Net(), input_size=(1, 1, 4, 4))
    rnet.record((1, 3), (2, 1), (1, 2))
    assert list(rnet.recorded_modules) == [(1, 2), (2, 1), (1, 3)]
    assert [type(m).__name__ for m in rnet.recorded_modules.values()] == ["_Block", "Conv2d", "Linear"]


def test_scio_a_pass_that_raises_leaves_no_activations() -> None:
    # scio empties activations when a pass fails; reading them after catching the error must
    # not give the previous pass's outputs as if they were this one's
    net = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 2))
    rnet = LayerRecorder(net, input_size=(2, 3))
    rnet.record((1, 1), (1, 3))
    rnet(torch.randn(2, 3))
    assert len(rnet.activations) == 2

    def boom(t: torch.Tensor) -> torch.Tensor:
        raise ArithmeticError("postprocessing failed")

    with pytest.raises(ArithmeticError):
        rnet(torch.randn(2, 3), activation_postproc=[None, boom])
    assert dict(rnet.activations) == {}
    rnet(torch.randn(2, 3))
    with pytest.raises(RuntimeError):  # the network itself fails: wrong input width
        rnet(torch.randn(2, 4))
    assert dict(rnet.activations) == {}


def test_103_layer_node_back_is_none() -> None:
    # 1.0.3's LayerNode had pre, post and back (back always None); cleanup loops read all three
    import torchrecorder

    net = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    rec = torchrecorder.record(net, "net", (1, 3))
    removed = 0
    for node in rec.nodes.values():
        if isinstance(node, torchrecorder.nodes.LayerNode):
            for handle in (node.pre, node.post, node.back):
                if handle is not None:
                    handle.remove()
                    removed += 1
            assert node.back is None
    assert removed == 2 * len(list(rec.layers()))


class _TwoOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.a(x * 2 + y)
        return self.b(h - y).sum(-1), h


def _names_drawn_by_103_exporter(rec: object) -> list[str]:
    from torchrecorder.nodes import LayerNode
    from torchrecorder.renderer.base import BaseRenderer

    class Names(BaseRenderer):
        def render_node(self, dest: list[str], node: object) -> None:
            if isinstance(node, LayerNode) and node.depth < self.render_depth:
                self.render_recursive_node(dest, node)
            else:
                dest.append(node.name)  # type: ignore[attr-defined]

        def render_recursive_node(self, dest: list[str], node: LayerNode) -> None:
            for s in node.subnets:
                self.render_node(dest, self.rec.nodes[s])
            for s in node.subnets:
                self.processed.pop(self.rec.nodes[s])

        def render_edge(self, dest: list[str], fnode: object, tnode: object) -> None:
            pass

    return Names(rec, 1)([])


def test_103_manual_workflow_keeps_the_names_given_to_outputs() -> None:
    # 1.0.3's manual workflow names the outputs itself (r.nodes[y].name = ...); a 1.0.3 exporter
    # drew those names, not Output-1 / Output-2
    from torchrecorder.recorder import Recorder

    net = _TwoOut()
    r = Recorder()
    r.register_hooks(net, name="two")
    x, y = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3, requires_grad=True)
    r.add_node(x, name="X")
    r.add_node(y, name="Y")
    s, h = net(x, y)
    r.nodes[s].name = "score"
    r.nodes[h].name = "hidden"
    r.remove_hooks()
    names = _names_drawn_by_103_exporter(r)
    assert {"X", "Y", "score", "hidden"} <= set(names)
    assert not any(n.startswith("Output") for n in names)
    assert r.nodes[s].name == "score"  # and the names stay after the drawing


def test_103_outputs_not_renamed_are_output_1_and_2() -> None:
    import torchrecorder

    rec = torchrecorder.record(_TwoOut(), "two", [(2, 3), (2, 3)])
    names = _names_drawn_by_103_exporter(rec)
    assert {"Input-1", "Input-2", "Output-1", "Output-2"} <= set(names)


def test_scio_torchinfo_batch_dim_adds_the_batch_dimension() -> None:
    # torchinfo's batch_dim, passed on by scio: input_size leaves the batch dimension out
    net = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))
    rnet = LayerRecorder(net, input_size=(5,), batch_dim=0)
    assert "1×5" in repr(rnet)
    rnet.record((1, 3))
    x = torch.randn(2, 5)
    assert torch.equal(rnet(x), net(x)) and rnet.activations[(1, 3)].shape == (2, 3)

    class Two(nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a.sum(-1) + b.sum(-1)

    two = LayerRecorder(Two(), input_size=[(3, 4), (3, 2)], batch_dim=-2)
    assert "3×1×4, 3×1×2" in repr(two)
    with pytest.raises(ValueError, match="batch_dim=3 is out of range"):
        LayerRecorder(net, input_size=(5,), batch_dim=3)


def test_103_styler_reads_requires_grad_of_a_loaded_graphs_parameters() -> None:
    # a 1.0.3 styler greys frozen parameters with node.fn.requires_grad; on a graph loaded from
    # JSON node.fn was a plain meta tensor (requires_grad False), so every parameter looked frozen
    import torchrecorder
    from torchrecorder.nodes import ParamNode
    from torchrecorder.renderer.gv import GraphvizStyler

    class Frozen(GraphvizStyler):
        def style_node(self, node: object) -> dict[str, object]:
            z = super().style_node(node)
            if isinstance(node, ParamNode) and not node.fn.requires_grad:
                z["fillcolor"] = "grey"
            return z

    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    net[0].weight.requires_grad_(False)
    rec = torchrecorder.record(net, "mlp", (1, 3))
    loaded = torchrecorder.load_json(rec.to_json())
    for graph in (rec, loaded):
        params = {k: n for k, n in graph.nodes.items() if isinstance(n, ParamNode)}
        assert {k: n.fn.requires_grad for k, n in params.items()} == {
            "0.weight": False, "0.bias": True, "2.weight": True, "2.bias": True}
        assert all(type(n.fn).__name__ == "Parameter" for n in params.values())
        drawn = torchrecorder.make_dot(graph, 2, Frozen).source
        assert drawn.count("fillcolor=grey") == 1
