"""The Mermaid renderer: structure of a known model, shapes per kind, escaping, options."""

from __future__ import annotations

import os
import re

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.renderer import MERMAID_STYLES, MermaidRenderer

from .zoo.handwritten import DoubledMLP

NODE = re.compile(r'^(\s*)(n_\w+)(\[\[|\[/|\[\(|\(\[|\[|\()"([^"]*)"(\]\]|/\]|\)\]|\]\)|\]|\))$')
SUBGRAPH = re.compile(r'^(\s*)subgraph (n_\w+)\["([^"]*)"\]$')
EDGE = re.compile(r"^\s*(n_\w+) (-->|-\.->)(?:\|\"([^\"]*)\"\|)? (n_\w+)$")


def parse(chart: str) -> dict[str, object]:
    """Nodes (id -> shape, label, enclosing subgraph), subgraphs, edges, classes of a chart."""
    lines = chart.splitlines()
    assert lines[0] in ("flowchart TB", "flowchart LR")
    nodes: dict[str, tuple[str, str, str]] = {}
    subgraphs: dict[str, tuple[str, str]] = {}
    edges: list[tuple[str, str]] = []
    classes: dict[str, list[str]] = {}
    stack = [""]
    for line in lines[1:]:
        if m := SUBGRAPH.match(line):
            subgraphs[m.group(2)] = (m.group(3), stack[-1])
            stack.append(m.group(2))
        elif line.strip() == "end":
            stack.pop()
        elif m := NODE.match(line):
            assert m.group(2) not in nodes, f"duplicate id {m.group(2)}"
            nodes[m.group(2)] = (m.group(3), m.group(4), stack[-1])
        elif m := EDGE.match(line):
            edges.append((m.group(1), m.group(4)))
        elif line.strip().startswith("class "):
            ids, kind = line.strip()[6:].rsplit(" ", 1)
            classes[kind] = ids.split(",")
        else:
            assert line.strip().startswith(("direction ", "classDef ")), f"unexpected line {line!r}"
    assert stack == [""], "unbalanced subgraph/end"
    return {"nodes": nodes, "subgraphs": subgraphs, "edges": edges, "classes": classes}


@pytest.fixture(scope="module")
def rec() -> torchrecorder.Recorder:
    return torchrecorder.record(DoubledMLP(), "mlp", (1, 4))


def test_structure_of_a_known_model(rec: torchrecorder.Recorder) -> None:
    chart = parse(MermaidRenderer(rec, render_depth=1).render())
    nodes = chart["nodes"]
    assert isinstance(nodes, dict)
    assert chart["subgraphs"] == {"n_mlp": ("mlp : DoubledMLP", "")}
    assert nodes["n_fc1"] == ("[", "fc1<br>Linear<br>weight: 8×4<br>bias: 8<br>40 params", "n_mlp")
    assert nodes["n_act"] == ("[", "act<br>ReLU", "n_mlp")
    assert nodes["n_mlp_mul"] == ("(", "mul", "n_mlp")
    assert nodes["n_fc1_out"] == ("[/", "1×8", "n_mlp")
    assert nodes["n_input_x"] == ("([", "x<br>1×4", "")
    assert nodes["n_fc2_out"] == ("([", "output<br>1×3", "")
    assert chart["edges"] == [
        ("n_input_x", "n_fc1"), ("n_fc1", "n_fc1_out"), ("n_fc1_out", "n_act"), ("n_act", "n_act_out"),
        ("n_act_out", "n_mlp_mul"), ("n_mlp_mul", "n_fc2_in"), ("n_fc2_in", "n_fc2"),
        ("n_fc2", "n_fc2_out"),
    ]
    classes = chart["classes"]
    assert isinstance(classes, dict)
    assert classes["layer"] == ["n_fc1", "n_act", "n_fc2"]
    assert classes["io"] == ["n_input_x", "n_fc2_out"]
    assert classes["op"] == ["n_mlp_mul"]


def test_edges_match_the_base_renderer(rec: torchrecorder.Recorder) -> None:
    for depth in (0, 1, 2):
        r = MermaidRenderer(rec, depth)
        chart = parse(r.render())
        want = [(r.node_id(a), r.node_id(b)) for a, b in r.drawn_edges()]
        assert chart["edges"] == want
        nodes = chart["nodes"]
        assert isinstance(nodes, dict)
        assert all(a in nodes and b in nodes for a, b in want)


def test_depth_zero_is_one_box(rec: torchrecorder.Recorder) -> None:
    chart = parse(MermaidRenderer(rec, render_depth=0).render())
    assert chart["subgraphs"] == {}
    nodes = chart["nodes"]
    assert isinstance(nodes, dict)
    assert set(nodes) == {"n_mlp", "n_input_x", "n_fc2_out"}


def test_expanded_leaf_shows_params_as_cylinders() -> None:
    class Scale(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gain = nn.Parameter(torch.ones(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.tanh(x * self.gain)

    rec = torchrecorder.record(Scale(), "scale", (1, 3))
    text = MermaidRenderer(rec).render()
    chart = parse(text)
    nodes = chart["nodes"]
    assert isinstance(nodes, dict)
    assert nodes["n_gain"] == ("[(", "gain<br>3", "n_scale")
    assert "n_gain -.-> n_scale_mul" in text


def test_options(rec: torchrecorder.Recorder) -> None:
    text = MermaidRenderer(rec, 1, direction="LR", styles={"layer": "fill:#fff"},
                           edge_shapes=True).render()
    assert text.startswith("flowchart LR\n")
    assert "classDef layer fill:#fff\n" in text
    assert 'n_mlp_mul -->|"1×8"| n_fc2_in' not in text  # into a tensor: its node shows the shape
    with pytest.raises(ValueError, match="direction"):
        MermaidRenderer(rec, direction="up")
    with pytest.raises(ValueError, match="style kind"):
        MermaidRenderer(rec, styles={"widget": "fill:red"})
    assert set(MERMAID_STYLES) >= {"layer", "tensor", "io", "param", "op", "folded", "failed"}


def test_edge_shapes_label_op_edges() -> None:
    class Net(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x * 2)

    rec = torchrecorder.record(Net(), "n", (1, 2))
    text = MermaidRenderer(rec, edge_shapes=True).render()
    assert 'n_n_mul -->|"1×2"| n_n_relu' in text


def test_render_network_writes_mermaid(tmp_path: os.PathLike[str]) -> None:
    path = torchrecorder.render_network(DoubledMLP(), "mlp", (1, 4), str(tmp_path), fmt="mmd")
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    assert path.endswith("mlp-1.mmd")
    assert text == torchrecorder.make_mermaid(torchrecorder.record(DoubledMLP(), "mlp", (1, 4)), 1)


def test_mermaid_is_deterministic() -> None:
    a = torchrecorder.make_mermaid(torchrecorder.record(DoubledMLP(), "m", (1, 4)))
    b = torchrecorder.make_mermaid(torchrecorder.record(DoubledMLP(), "m", (1, 4)))
    assert a == b


def test_colliding_ids_are_made_unique() -> None:
    net = nn.ModuleDict({"a b": nn.Linear(2, 2), "a_b": nn.Linear(2, 2)})

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.d = net

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.d["a_b"](self.d["a b"](x))

    chart = parse(torchrecorder.make_mermaid(torchrecorder.record(Net(), "n", (1, 2)), 2))
    nodes = chart["nodes"]
    assert isinstance(nodes, dict)
    assert {"n_d_a_b", "n_d_a_b_1"} <= set(nodes)


def test_tensor_shapes_on_edges(rec: torchrecorder.Recorder) -> None:
    text = MermaidRenderer(rec, 1, tensor_nodes=False).render()
    chart = parse(text)
    assert chart["edges"] == [("n_input_x", "n_fc1"), ("n_fc1", "n_act"), ("n_act", "n_mlp_mul"),
                              ("n_mlp_mul", "n_fc2"), ("n_fc2", "n_fc2_out")]
    assert 'n_fc1 -->|"1×8"| n_act' in text
    assert "classDef tensor" not in text


def test_too_many_edges_for_mermaid_warns() -> None:
    net = nn.Sequential(*[nn.Linear(2, 2) for _ in range(300)])
    rec = torchrecorder.record(net, "long", (1, 2))
    with pytest.warns(UserWarning, match="maxEdges"):
        MermaidRenderer(rec, 1, fold_repeats=False).render()
    MermaidRenderer(rec, 1, fold_repeats=True).render()  # folded: a handful of edges, no warning


class _Flattens(nn.Module):
    """A conv whose output is flattened into a Linear, and a parameter flattened into a matmul."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(1, 2, 3)
        self.f = nn.Linear(32, 6)
        self.w = nn.Parameter(torch.randn(2, 3, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(self.f(torch.flatten(self.c(x), 1)), torch.flatten(self.w, 0, 1).T)


@pytest.mark.parametrize("tensor_nodes", [True, False])
def test_edges_name_the_data_movement_ops_as_make_dot_does(tensor_nodes: bool) -> None:
    rec = torchrecorder.record(_Flattens(), "net", (1, 1, 6, 6))
    dot = torchrecorder.make_dot(rec, tensor_nodes=tensor_nodes).source
    chart = torchrecorder.make_mermaid(rec, tensor_nodes=tensor_nodes)
    assert "flatten" in dot  # the edge make_dot labels
    conv_to_linear = re.search(r"n_c(_out)? -->\|\"([^\"]*)\"\| n_f(_in)?\n", chart)
    assert conv_to_linear is not None, chart
    assert conv_to_linear.group(2).split("<br>")[-1] == "flatten"
    # a parameter's dotted edge too: the ops it went through before the matmul read it
    param_edge = re.search(r"n_w -\.->\|\"([^\"]*)\"\| ", chart)
    assert param_edge is not None and "flatten" in param_edge.group(1), chart


class _RaisesInside(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) @ torch.ones(3, 3)  # wrong shapes: raises


class _FailsInInner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.inner = _RaisesInside()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(self.a(x))


def test_an_expanded_call_that_raised_is_red_as_in_make_dot() -> None:
    """make_dot draws the cluster of every call that raised with a red border; the chart styles
    their subgraphs the same way, and only theirs."""
    with pytest.raises(RuntimeError) as info:
        torchrecorder.record(_FailsInInner(), "net", (2, 4))
    rec = info.value.recording  # type: ignore[attr-defined]
    red = MERMAID_STYLES["failed_module"]
    assert "#c0392b" in red
    text = torchrecorder.make_mermaid(rec, 2)
    styled = re.findall(r"^  style (\S+) (.*)$", text, re.M)
    assert styled == [("n_net", red), ("n_inner", red)]
    assert "class n_inner_matmul failed" in text
    text = torchrecorder.make_mermaid(rec, 1)  # inner a box: failed; its parent's subgraph red
    assert re.findall(r"^  style (\S+)", text, re.M) == ["n_net"] and "class n_inner failed" in text
    ok = torchrecorder.record(nn.Sequential(nn.Linear(4, 4)), "ok", (2, 4))
    assert "style " not in torchrecorder.make_mermaid(ok, 2)
    custom = MermaidRenderer(rec, 2, styles={"failed_module": "stroke:#ff0000"}).render()
    assert "  style n_inner stroke:#ff0000\n" in custom
