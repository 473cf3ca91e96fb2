"""Programs written for torchrecorder 1.0.3 run unchanged: its renderer, styler and recorder.

Each test is code in the style of 1.0.3's documentation and source: a renderer
called on a destination, ``BaseRenderer`` subclasses with the three documented
methods, ``render_node`` / ``render_edge`` overrides that name nodes
``str(id(node))``, a styler reading ``node.fn``, ``rec.nodes[obj]`` and the
manual recording workflow.  They draw through today's projection.
"""

from __future__ import annotations

import copy
import gc
import json
import pickle
import weakref
from collections import OrderedDict

import graphviz
import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.backend import render_source
from torchrecorder.errors import RenderError
from torchrecorder.nodes import BaseNode, LayerNode, OpNode, ParamNode, TensorNode
from torchrecorder.recorder import Recorder
from torchrecorder.renderer import GraphvizRenderer, GraphvizStyler
from torchrecorder.renderer.base import BaseRenderer
from torchrecorder.renderer.graphviz import TITLE_SUFFIX

from .backends import needs_backend
from .dot_parse import parse_dot


class TwoBranch(nn.Module):
    """Two branches joined by ``torch.cat`` outside any submodule, then a head."""

    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Linear(3, 3)
        self.right = nn.Linear(3, 3)
        self.merge = nn.Linear(6, 1)
        self.act = nn.ReLU()

    def forward(self, inputs):
        both = torch.cat([self.left(inputs), self.right(inputs)], dim=1)
        return self.act(self.merge(both))


class ConvPair(nn.Module):
    """Two convolutions and a residual sum."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=5, stride=2, padding=2)
        self.conv2 = nn.Conv2d(4, 4, kernel_size=3, padding=1)
        self.relu = nn.ReLU()

    def forward(self, x):
        y = self.conv1(x)
        return self.relu(y + self.conv2(y))


class Nested(nn.Module):
    """Blocks inside blocks, a module called twice, an op outside any submodule."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.block = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Sequential(nn.Linear(8, 8), nn.ReLU()))
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        h = self.stem(x)
        h = self.block(h) + h
        h = self.block(h)
        return self.head(h * 2)


@pytest.fixture(scope="module")
def sample_rec():
    return torchrecorder.record(TwoBranch(), name="two branches", input_shapes=(1, 3))


@pytest.fixture(scope="module")
def nested_rec():
    return torchrecorder.record(Nested(), name="nested", input_shapes=(2, 4))


def _reaches(edges, start, goal):
    """Whether ``goal`` can be reached from ``start`` along ``edges``."""
    succ: dict[str, list[str]] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    seen, todo = {start}, [start]
    while todo:
        for nxt in succ.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return goal in seen


def _labelled(dot, text):
    """The ids of the nodes whose label holds ``text``."""
    return [n for n, attrs in dot.node_attrs.items() if text in attrs.get("label", "")]


def _drawn_nodes(dot):
    """The node statements of the drawing's own nodes: not the cluster titles (title nodes)."""
    return {n: a for n, a in dot.node_attrs.items() if not n.endswith(TITLE_SUFFIX)}


# ------------------------------------------------------------------ 1.0.3 subclasses
class PinkRenderer(GraphvizRenderer):
    """1.0.3's render_node with pink nodes, named as 1.0.3 named them."""

    def render_node(self, g, node):
        if isinstance(node, LayerNode) and node.depth < self.render_depth:
            self.recursion_trace.append(g)
            self.render_recursive_node(g, node)
            self.recursion_trace.remove(g)
        else:
            style = self.styler.style_node(node)
            style["fillcolor"] = "pink"
            g.node(name=str(id(node)), **style)


class RedRenderer(GraphvizRenderer):
    """1.0.3's render_edge, in red."""

    def render_edge(self, g, fnode, tnode):
        style = self.styler.style_edge(fnode, tnode)
        style["color"] = "red"
        g.edge(str(id(fnode)), str(id(tnode)), **style)


class DictRenderer(BaseRenderer):
    """A renderer into a dict, with only the three methods 1.0.3 documents."""

    def render_node(self, dest, node):
        if isinstance(node, LayerNode) and node.depth < self.render_depth:
            self.render_recursive_node(dest, node)
        else:
            dest.setdefault("nodes", {})[str(id(node))] = node.name

    def render_recursive_node(self, dest, node):
        inner = dest.setdefault("clusters", {}).setdefault(str(id(node)), [])
        for s in node.subnets:
            child = self.rec.nodes[s]
            if child in self.processed:  # drawn at this depth
                inner.append(str(id(child)))
                self.render_node(dest, child)

    def render_edge(self, dest, fnode, tnode):
        dest.setdefault("edges", []).append((str(id(fnode)), str(id(tnode))))


# ------------------------------------------------------------------ renderer contract
def test_renderer_called_on_a_digraph_fills_and_returns_it(sample_rec):
    g = graphviz.Digraph()
    out = GraphvizRenderer(sample_rec, 2)(g)
    assert out is g
    got = parse_dot(g.source)
    seed = GraphvizRenderer(sample_rec, 2)
    seed.seed_view = True  # what renderer(dest) draws: the 1.0.3 view, through the same hooks
    want = parse_dot(seed.render().source)
    assert set(got.nodes) == set(want.nodes) and set(got.edges) == set(want.edges)
    assert set(got.clusters) == set(want.clusters) and len(got.edges) >= 7
    today = parse_dot(torchrecorder.make_dot(sample_rec, 2).source)
    assert len(today.nodes) < len(got.nodes) and len(today.clusters) < len(got.clusters)  # today's


def test_renderer_keeps_the_destinations_graph_attributes(sample_rec):
    # 1.0.3's make_dot made the Digraph itself and handed it to the renderer
    g = graphviz.Digraph(graph_attr=dict(compound="true", ranksep="0.5", fontsize="24", rankdir="LR"),
                         node_attr=dict(fontsize="20"))
    renderer = GraphvizRenderer(rec=sample_rec, render_depth=1, styler_cls=None, fontname="Lato")
    assert renderer(g) is g
    assert g.graph_attr["rankdir"] == "LR" and g.graph_attr["ranksep"] == "0.5"
    assert g.graph_attr["newrank"] == "true"  # filled in from the styler
    assert parse_dot(g.source).edges


def test_renderer_refuses_an_undirected_graph(sample_rec):
    with pytest.raises(TypeError, match="Digraph"):
        GraphvizRenderer(sample_rec, 1)(graphviz.Graph())


def test_a_renderer_called_twice_draws_the_same(nested_rec):
    renderer = PinkRenderer(nested_rec, 2)
    first = renderer(graphviz.Digraph()).source
    assert renderer(graphviz.Digraph()).source == first
    plain = GraphvizRenderer(nested_rec, 2)
    assert plain(graphviz.Digraph()).source == plain(graphviz.Digraph()).source


def test_dict_renderer_with_the_three_methods(nested_rec):
    renderer = DictRenderer(nested_rec, render_depth=2)
    dest = {}
    assert renderer(dest) is dest
    names = dest["nodes"]
    assert dest["edges"] and all(a in names and b in names for a, b in dest["edges"])
    inputs = [i for i, name in names.items() if name == "Input"]  # 1.0.3's names
    outputs = [i for i, name in names.items() if name == "Output"]
    assert len(inputs) == 1 and len(outputs) == 1
    assert _reaches(dest["edges"], inputs[0], outputs[0])
    # every layer above render_depth is a group, as 1.0.3 drew them (head, a Linear, too);
    # the calls of block.2, at depth 2, are single nodes
    assert len(dest["clusters"]) == 1 + 1 + 2 + 1  # nested, stem, block twice, head
    assert list(names.values()).count("2\n(Sequential)") == 2
    assert not renderer.processed  # every edge drawn
    with pytest.raises(NotImplementedError, match=r"call the renderer on a destination"):
        renderer.render()


def test_the_attributes_1_0_3_code_reads(nested_rec):
    seen = {}

    class Probe(GraphvizRenderer):
        def render_recursive_node(self, g, node):
            seen.setdefault("trace", []).append(len(self.recursion_trace))
            seen["subnets"] = [self.rec.nodes[s] for s in node.subnets]
            seen["processed"] = self.processed
            super().render_recursive_node(g, node)

    renderer = Probe(nested_rec, 2)
    assert renderer.render_depth == 2 and isinstance(renderer.styler, GraphvizStyler)
    renderer(graphviz.Digraph())
    assert seen["trace"][0] == 1 and max(seen["trace"]) == 2  # the graphs of the open clusters
    assert all(isinstance(n, BaseNode) for n in seen["subnets"])
    processed = renderer.processed
    assert isinstance(processed, OrderedDict)
    assert not processed  # emptied once drawn
    fresh = GraphvizRenderer(nested_rec, 2).processed
    targets = [(f, t) for f, ts in fresh.items() for t in ts]
    order = list(fresh)
    edges = GraphvizRenderer(nested_rec, 2).drawn_edges()
    assert targets == sorted(edges, key=lambda e: order.index(e[0]))
    assert all(isinstance(k, BaseNode) and isinstance(v, list) for k, v in fresh.items())


@pytest.mark.parametrize("depth", [1, 2, 3, 256])
def test_pink_render_node_override_meets_the_default_edges(nested_rec, depth):
    g = PinkRenderer(nested_rec, depth)(graphviz.Digraph())
    dot = parse_dot(g.source)
    drawn = set(dot.nodes)
    assert dot.edges and all(a in drawn and b in drawn for a, b in dot.edges)  # no phantom node
    assert all(a in drawn and b in drawn for a, b in dot.invisible)
    assert all(attrs["fillcolor"] == "pink" for attrs in _drawn_nodes(dot).values())
    (inp,) = _labelled(dot, "<B>Input</B>")
    (out,) = _labelled(dot, "<B>Output</B>")
    assert _reaches(dot.edges, inp, out)
    assert dot.ranks == {"source": [inp], "sink": [out]}


def test_pink_override_opens_what_1_0_3_opened(sample_rec):
    # 1.0.3 drew every layer above render_depth as a cluster, a Linear too
    dot = parse_dot(PinkRenderer(sample_rec, 2)(graphviz.Digraph()).source)
    assert len(dot.clusters) == 1 + 4  # the network and its four layers
    weights = _labelled(dot, "weight")
    assert len(weights) == 3 and all(any(a == w for a, _ in dot.edges) for w in weights)
    default = parse_dot(torchrecorder.make_dot(sample_rec, 2).source)
    assert len(default.clusters) == 1  # the default rule keeps a one-op Linear closed


@needs_backend
def test_pink_override_draws_with_dot(sample_rec):
    g = PinkRenderer(sample_rec, 1)(graphviz.Digraph())
    svg = render_source(g.source, "svg").decode()
    assert svg.count('fill="pink"') == len(_drawn_nodes(parse_dot(g.source)))


def test_a_render_node_that_keeps_an_expanded_layer_closed(nested_rec):
    class StemBox(GraphvizRenderer):
        def render_node(self, g, node):
            if isinstance(node, LayerNode) and node.key == "stem":
                g.node("stem_box", label="stem, closed")  # drawn as one node, not a cluster
            else:
                super().render_node(g, node)

    source = StemBox(nested_rec, 2)(graphviz.Digraph()).source
    dot = parse_dot(source)
    assert "cluster_stem" not in dot.clusters and "cluster_block" in dot.clusters
    assert "stem_box" in dot.nodes
    # as in 1.0.3: what no render_recursive_node took is drawn at the top, with its edges
    assert {"stem.0", "stem.1"} <= set(dot.nodes)
    assert '\n\t"stem.0" [' in source  # at the top, in no cluster
    assert all(a in dot.nodes and b in dot.nodes for a, b in dot.edges)
    (inp,) = _labelled(dot, "<B>Input</B>")
    assert (inp, "stem.0") in dot.edges


def test_red_render_edge_override_uses_the_drawn_names(nested_rec):
    source = RedRenderer(nested_rec, 2)(graphviz.Digraph()).source
    dot = parse_dot(source)
    default = parse_dot(GraphvizRenderer(nested_rec, 2)(graphviz.Digraph()).source)
    assert dot.nodes == default.nodes and dot.edges == default.edges
    assert all(attrs["color"] == "red" for attrs in dot.edge_attrs)
    assert RedRenderer(nested_rec, 2)(graphviz.Digraph()).source == source  # no id() in output


def test_pink_and_red_together(sample_rec):
    class PinkRed(PinkRenderer, RedRenderer):
        pass

    dot = parse_dot(PinkRed(sample_rec, 1)(graphviz.Digraph()).source)
    assert dot.edges and all(a in dot.nodes and b in dot.nodes for a, b in dot.edges)
    assert all(attrs["color"] == "red" for attrs in dot.edge_attrs)


def test_an_edge_to_a_node_never_drawn_raises(sample_rec):
    class NoOps(GraphvizRenderer):
        def render_node(self, g, node):
            if isinstance(node, OpNode):
                return  # skipped: the default render_edge must not invent it
            super().render_node(g, node)

    with pytest.raises(RenderError) as info:
        NoOps(sample_rec, 1)(graphviz.Digraph())
    message = str(info.value)
    assert "'two branches/cat'" in message and ("'left:out'" in message or "'right:out'" in message)
    assert "never drawn" in message

    class RedNoOps(NoOps, RedRenderer):
        pass

    with pytest.raises(RenderError, match="never drawn"):
        RedNoOps(sample_rec, 1)(graphviz.Digraph())


def test_an_edge_into_an_expanded_layer_of_a_loaded_graph(nested_rec):
    doc = json.loads(nested_rec.to_json())
    (inp,) = [k for k, n in nested_rec.nodes.items() if getattr(n, "role", "") == "input"]
    doc["edges"].append([inp, "block"])  # into the layer itself, drawn as a cluster
    source = torchrecorder.make_dot(torchrecorder.loads_json(json.dumps(doc)), 2).source
    dot = parse_dot(source)
    assert all(a in dot.nodes and b in dot.nodes for a, b in dot.edges)  # no phantom "block"
    assert [a.get("lhead") for a in dot.edge_attrs].count("cluster_block") == 1
    assert "compound=true" in source


def test_a_renderer_without_new_graph_and_render(sample_rec):
    with pytest.raises(NotImplementedError, match="new_graph"):
        DictRenderer(sample_rec, 1).render()


# ------------------------------------------------------------------ styler contract
def test_styler_takes_the_1_0_3_defaults(sample_rec):
    styler = GraphvizStyler(style="filled", align="left", color="black")
    assert styler.styles["layer"]["style"] == "filled" and styler.styles["op"]["color"] == "black"
    assert styler.styles["cluster"]["labeljust"] == "l"
    assert GraphvizStyler(align="right").styles["cluster"]["labeljust"] == "r"
    with pytest.raises(ValueError, match="align"):
        GraphvizStyler(align="diagonal")
    dot = parse_dot(torchrecorder.make_dot(sample_rec, 1, style="filled", align="center",
                                           color="black").source)
    assert all(a["color"] == "black" and a["style"] == "filled" for a in _drawn_nodes(dot).values())
    assert 'labeljust=c' in torchrecorder.make_dot(sample_rec, 1, align="center").source


def test_styles_is_keyed_by_node_class():
    styler = GraphvizStyler()
    assert styler.styles[LayerNode] is styler.styles["layer"]
    assert styler.styles[ParamNode] is styler.styles["param"]
    assert styler.styles[TensorNode] is styler.styles["tensor"]
    styler.styles[OpNode] = {"fillcolor": "orange", "shape": "box"}
    assert styler.styles["op"] == {"fillcolor": "orange", "shape": "box"}
    assert all(isinstance(k, str) for k in styler.styles)
    # 1.0.3's entry for its (never drawn) context node: a dict of its own, no kind
    assert BaseNode not in styler.styles and styler.styles[BaseNode] is styler.styles[BaseNode]
    with pytest.raises(KeyError, match="no style kind"):
        styler.styles[int]


class ConvDetails(GraphvizStyler):
    """A 1.0.3-style styler: reads the live module in ``node.fn``."""

    def style_node(self, node):
        attrs = super().style_node(node)
        conv = node.fn
        if isinstance(conv, nn.Conv2d):
            attrs["label"] = f"{node.name}\nkernel {conv.kernel_size}\nstride {conv.stride}"
            attrs["penwidth"] = "2.4"
        return attrs

    def style_edge(self, fnode, tnode):
        if isinstance(fnode.fn, nn.Conv2d):
            return {"penwidth": "4", "color": "#ee8800"}
        return super().style_edge(fnode, tnode)


@needs_backend
def test_styler_reading_node_fn_shapes_make_dot():
    rec = torchrecorder.record(ConvPair(), name="convs", input_shapes=(1, 1, 10, 10))
    g = torchrecorder.make_dot(rec, render_depth=1, styler_cls=ConvDetails, fontname="Times")
    dot = parse_dot(g.source)
    conv1 = dot.node_attrs["conv1"]
    assert "kernel (5, 5)" in conv1["label"] and conv1["penwidth"] == "2.4"
    colours = {(a, b): attrs.get("color", "").strip('"')
               for (a, b), attrs in zip(dot.edges, dot.edge_attrs, strict=True)}
    # a styler reading node.fn gets the 1.0.3 view: the tensor between the layers is a node
    assert colours[("conv1", "conv1@out")] == "#ee8800"
    assert ("conv1@out", "conv2") in colours
    assert all(c == "#ee8800" for (a, _), c in colours.items() if a in ("conv1", "conv2"))
    assert colours[(next(iter(_labelled(dot, "<B>Input</B>"))), "conv1")] != "#ee8800"
    assert render_source(g.source, "svg").startswith(b"<?xml")  # the plain-text label draws


def test_styler_indexing_styles_by_node_class(sample_rec):
    class ClassKeyed(GraphvizStyler):
        def __init__(self, **styler_args):
            super().__init__(**styler_args)
            self.styles[OpNode]["fillcolor"] = "orange"

        def style_node(self, node):
            z = dict(**self.styles[type(node)])
            z["label"] = node.name
            return z

    dot = parse_dot(torchrecorder.make_dot(sample_rec, 1, styler_cls=ClassKeyed).source)
    assert dot.node_attrs["two_branches/cat"]["fillcolor"] == "orange"
    assert dot.node_attrs["left"]["label"] == "left"


# ------------------------------------------------------------------ recorder contract
def test_nodes_maps_recorded_objects():
    net = Nested()
    rec = torchrecorder.record(net, "nested", (2, 4))
    assert rec.nodes[net.stem[0]] is rec.nodes["stem.0"]
    assert rec.nodes[net.block] is rec.nodes["block"]  # a module called twice: its first call
    assert rec.nodes[net.stem[0].weight].key == "stem.0.weight"
    assert isinstance(rec.nodes[net.head.bias], ParamNode)
    assert rec.nodes[net] is rec.nodes["nested"]
    with pytest.raises(KeyError, match="not part of this recording"):
        rec.nodes[torch.randn(3)]
    with pytest.raises(KeyError):
        rec.nodes["no such key"]
    assert all(k is None or isinstance(k, str) for k in rec.nodes)
    copied = pickle.loads(pickle.dumps(rec.nodes))  # the nodes by key; no live object goes along
    assert list(copied) == list(rec.nodes)


def test_in_and_get_find_recorded_objects_as_subscript_does():
    # 1.0.3's rec.nodes was keyed by the objects: ``if module in rec.nodes`` must not answer False
    net = Nested()
    rec = torchrecorder.record(net, "nested", (2, 4))
    for obj in (net.stem[0], net.block, net.stem[0].weight, net.head.bias, net):
        assert obj in rec.nodes
        assert rec.nodes.get(obj) is rec.nodes[obj]
    assert "stem.0" in rec.nodes and rec.nodes.get("stem.0") is rec.nodes["stem.0"]
    stranger = torch.randn(3)
    assert stranger not in rec.nodes and nn.ReLU() not in rec.nodes
    assert rec.nodes.get(stranger) is None and rec.nodes.get(stranger, "none") == "none"
    assert "no such key" not in rec.nodes and rec.nodes.get("no such key", 1) == 1
    assert net.stem[0] not in rec.nodes.keys()  # keys() holds the keys only
    small = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    with torchrecorder.recording(small, "net") as live:
        x = torch.randn(1, 4)
        y = small(x)
        assert y in live.nodes  # while recording, through the engine's table
    assert x in live.nodes and live.nodes.get(y) is live.nodes[y]


def test_nodes_maps_live_tensors_without_keeping_them():
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    with torchrecorder.recording(net, "net") as rec:
        x = torch.randn(1, 4)
        y = net(x)
    assert rec.nodes[y].role == "output" and rec.nodes[x].role == "input"
    refs = [weakref.ref(x), weakref.ref(y)]
    del x, y
    gc.collect()
    assert all(r() is None for r in refs)  # the recording does not keep them alive


def test_an_object_without_weak_references_is_not_kept_once_the_recording_ends():
    freed = []

    class Dummy:  # takes no weak reference: the recording holds it as it is while it records
        __slots__ = ()

        def __del__(self) -> None:
            freed.append(True)

    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    with torchrecorder.recording(net, "net") as rec:
        y = net(torch.randn(1, 4))
        dummy = Dummy()
        rec.add_dummy(dummy, y)
        assert rec.nodes[dummy] is rec.nodes[y]
    del dummy
    gc.collect()
    assert freed == [True]
    assert rec.nodes[y].role == "output"  # the tensors still find their nodes


def test_a_recording_copies_and_pickles_without_its_engine():
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    recorded = torchrecorder.record(net, "net", input_data=torch.randn(1, 4))
    manual = Recorder()
    manual.register_hooks(net, name="net")
    net(torch.randn(1, 4))
    manual.remove_hooks()
    for rec in (recorded, manual):
        dot = torchrecorder.make_dot(rec).source
        for copied in (copy.deepcopy(rec), pickle.loads(pickle.dumps(rec))):
            assert copied._engine is None and list(copied.nodes) == list(rec.nodes)
            assert torchrecorder.make_dot(copied).source == dot
            assert copied.nodes.find is not None and copied.nodes["0"].key == "0"


def test_a_recording_that_keeps_its_tensors_deep_copies_as_it_pickles():
    # the kept activations carry their grad_fn; torch deep-copies leaf tensors only
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    manual = Recorder(keep_tensors=True)  # the manual workflow, keeping its tensors
    manual.register_hooks(net, name="net")
    net(torch.randn(1, 4, requires_grad=True))
    manual.remove_hooks()
    for rec in (torchrecorder.record(net, "net", (1, 4), keep_tensors=True), manual):
        kept = {k: n.kept for k, n in rec.nodes.items()
                if isinstance(n, TensorNode) and isinstance(n.kept, torch.Tensor)}
        assert any(t.grad_fn is not None for t in kept.values())
        copied, pickled = copy.deepcopy(rec), pickle.loads(pickle.dumps(rec))
        for k, t in kept.items():
            got, stored = copied.nodes[k].kept, pickled.nodes[k].kept
            assert got is not t and torch.equal(got, t) and got.grad_fn is None
            assert got.requires_grad == stored.requires_grad == t.requires_grad
            assert rec.nodes[k].kept is t  # the recording keeps its own tensors, grad_fn and all
            got.data.add_(1)  # the copy's data is its own
            assert not torch.equal(got, t)
        assert torchrecorder.make_dot(copied).source == torchrecorder.make_dot(rec).source


def test_the_manual_workflow():
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    r = Recorder()
    r.register_hooks(net, name="net")
    x = torch.randn(1, 4, requires_grad=True)
    r.add_node(x, name="Input")
    y = net(x)
    r.nodes[y].name = "Output"
    r.remove_hooks()
    for module in net.modules():
        assert not module._forward_pre_hooks and not module._forward_hooks
    r.lint()
    dot = parse_dot(torchrecorder.make_dot(r).source)
    (inp,) = _labelled(dot, "<B>Input</B>")
    (out,) = _labelled(dot, "<B>Output</B>")
    assert _reaches(dot.edges, inp, out)
    assert dot.ranks == {"source": [inp], "sink": [out]}
    assert r.nodes[x].name == "Input" and r.nodes[net[2]].key == "2"


def test_the_manual_workflow_records_every_operation_of_the_forward():
    # between the module calls, 1.0.3 recorded each grad_fn (here the mul): none is left out
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 4)
            self.b = nn.Linear(5, 4)

        def forward(self, x, y):
            return torch.tanh(self.a(x) * self.b(y))

    net = Two()
    r = Recorder()
    r.register_hooks(net, name="two")
    x, y = torch.randn(1, 3, requires_grad=True), torch.randn(1, 5)
    r.add_node(x, name="X")
    out = net(x, y)
    r.remove_hooks()
    assert [k for k in r.nodes if isinstance(k, str) and k.startswith("two/")] == ["two/mul", "two/tanh"]
    assert ("two/mul", "two/tanh") in r.links and r.fn_types["MulBackward0"] == 1
    assert r.nodes[out].key == "two:out" and ("X", "a/linear") in r.links
    count = len(r.nodes)
    net(x, y)  # the mode is off again: a plain call records nothing
    assert len(r.nodes) == count
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in net.modules())


class _OneTuple(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.l(x),)


@pytest.mark.parametrize(("net", "shapes", "data", "expected"), [
    # what the real torchrecorder 1.0.3 named them (its record, then this exporter)
    (nn.Linear(3, 2), [(1, 3)], None, {"Input-1", "Output"}),
    (nn.Linear(3, 2), None, (torch.ones(1, 3),), {"Input-1", "Output"}),
    (nn.Linear(3, 2), (1, 3), None, {"Input", "Output"}),
    (nn.Linear(3, 2), None, torch.ones(1, 3), {"Input", "Output"}),
    (_OneTuple(), (1, 3), None, {"Input", "Output-1"}),
    (_OneTuple(), [(1, 3)], None, {"Input-1", "Output-1"}),
])
def test_one_input_or_output_given_as_a_sequence_is_numbered_as_in_103(net, shapes, data, expected):
    class Names(BaseRenderer):
        def render_node(self, dest, node):
            if isinstance(node, LayerNode) and node.depth < self.render_depth:
                self.render_recursive_node(dest, node)
            else:
                dest.append(node.name)

        def render_recursive_node(self, dest, node):
            for s in node.subnets:
                self.render_node(dest, self.rec.nodes[s])
            for s in node.subnets:
                self.processed.pop(self.rec.nodes[s])

        def render_edge(self, dest, fnode, tnode):
            pass

    rec = torchrecorder.record(net, "s", shapes, input_data=data)
    names = set(Names(rec, 1)([]))
    assert {n for n in names if n.startswith(("Input", "Output"))} == expected
    assert pickle.loads(pickle.dumps(rec)).inputs_listed == rec.inputs_listed  # kept by a copy
