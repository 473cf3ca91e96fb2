"""Programs written for torchrecorder 1.0.3 see what 1.0.3 showed them: the 1.0.3 view.

Each test is a fresh program in the style of 1.0.3's documentation and source
(flat and nested exporters into a dict, a copy of 1.0.3's own
``render_recursive_node``, stylers reading ``node.fn``), run on the models of
``tests/seed_models.py`` and compared with what torchrecorder 1.0.3 itself
produced for them (``tests/data/seed103.json``, recorded by
``tests/data/record_seed103.py`` with the original package).

The deliberate differences, listed in docs/guide/migrating.md: one node per
module call (1.0.3 merged the calls of a module called twice), one node per
torch operation (1.0.3 drew autograd's pieces of it: the ``TBackward0`` of a
linear layer's weight, the expand/reshape/bmm of a batched matmul), and the
names of tensors.
"""

from __future__ import annotations

import copy
import json
import pickle
from collections import Counter
from pathlib import Path

import graphviz
import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.backend import render_source
from torchrecorder.errors import RenderError
from torchrecorder.nodes import LayerNode, OpNode, ParamNode, TensorNode
from torchrecorder.renderer import GraphvizRenderer, GraphvizStyler
from torchrecorder.renderer.base import BaseRenderer

from .backends import needs_backend
from .data.record_seed103 import Flat
from .dot_parse import parse_dot
from .seed_models import MODELS

SEED = json.loads((Path(__file__).parent / "data" / "seed103.json").read_text())

#: autograd's pieces of one torch operation, which 1.0.3 drew as nodes of their own: the
#: transpose of a linear layer's weight, the reshapes and the bmm of a batched matmul or linear
AUTOGRAD_PIECES = frozenset({"TBackward0", "ExpandBackward0", "ReshapeAliasBackward0", "ViewBackward0",
                             "UnsafeViewBackward0", "BmmBackward0", "AddmmBackward0"})


@pytest.fixture(scope="module")
def recs() -> dict[str, torchrecorder.Recorder]:
    out = {}
    for name, (factory, shape) in MODELS.items():
        torch.manual_seed(0)
        out[name] = torchrecorder.record(factory(), name, shape)
    return out


def _first_line(name: str) -> str:
    return name.split("\n")[0]


# ------------------------------------------------------------------ item 1: a flat exporter
@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_flat_exporter_gets_what_1_0_3_gave(recs, model, depth):
    got = Flat(recs[model], depth)({"nodes": {}, "edges": []})
    ours = list(got["nodes"].values())
    theirs = [dict(zip(("kind", "name", "fn", "depth"), n, strict=True))
              for n in SEED[model]["depths"][str(depth)]["nodes"]]

    def of(nodes, kind):
        return [n for n in nodes if n["kind"] == kind]

    # the same layers (a module called twice is one node in 1.0.3, one per call here)
    assert ({(_first_line(n["name"]), n["depth"]) for n in of(ours, "LayerNode")}
            == {(_first_line(n["name"]), n["depth"]) for n in of(theirs, "LayerNode")})
    # the same parameters, the same number of tensors
    assert (Counter((n["name"], n["depth"]) for n in of(ours, "ParamNode"))
            == Counter((n["name"], n["depth"]) for n in of(theirs, "ParamNode")))
    assert len(of(ours, "TensorNode")) == len(of(theirs, "TensorNode"))
    # every operation 1.0.3 drew, by its autograd name, but autograd's pieces of one operation
    mine = Counter(n["fn"] for n in of(ours, "OpNode"))
    old = Counter(n["fn"] for n in of(theirs, "OpNode"))
    assert not mine - old
    assert set(old - mine) <= AUTOGRAD_PIECES
    if depth == 1:  # no operation inside a layer is drawn: the same edges (1.0.3 drew some twice)
        assert len(set(map(tuple, got["edges"]))) == len({tuple(e) for e in
                                                          SEED[model]["depths"]["1"]["edges"]})
    assert all(a in got["nodes"] and b in got["nodes"] for a, b in got["edges"])


def test_flat_mlp_at_depth_2_is_1_0_3s_less_the_weight_transposes(recs):
    got = Flat(recs["mlp"], 2)({"nodes": {}, "edges": []})
    theirs = SEED["mlp"]["depths"]["2"]["nodes"]
    transposes = sum(1 for n in theirs if n[2] == "TBackward0")
    assert len(got["nodes"]) == len(theirs) - transposes == 23  # 1.0.3: 26; main before: 3
    assert len(got["edges"]) == len(SEED["mlp"]["depths"]["2"]["edges"]) - transposes


# ------------------------------------------------------------------ item 2: processed
class SubnetWalker(BaseRenderer):
    """Written like 1.0.3's own render_recursive_node: walks ``node.subnets``, reads every
    child's edges from ``processed``, and takes the child out."""

    def render_node(self, dest, node):
        if isinstance(node, LayerNode) and node.depth < self.render_depth:
            self.render_recursive_node(dest, node)
        else:
            dest["nodes"].append(node.key)

    def render_recursive_node(self, dest, node):
        dest["groups"].append(node.key)
        for s in node.subnets:
            self.render_node(dest, self.rec.nodes[s])
        for s in node.subnets:
            child = self.rec.nodes[s]
            for target in self.processed[child]:  # a KeyError for a flatten op before
                self.render_edge(dest, child, target)
            self.processed.pop(child)
            self.processed.pop(child, None)  # harmless once taken

    def render_edge(self, dest, fnode, tnode):
        dest["edges"].append((fnode.key, tnode.key))


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_processed_holds_every_child_with_its_edges(recs, model, depth):
    rec = recs[model]
    renderer = SubnetWalker(rec, depth)
    dest = renderer({"nodes": [], "groups": [], "edges": []})
    drawn = set(dest["nodes"]) | set(dest["groups"])
    assert len(dest["nodes"]) == len(set(dest["nodes"]))  # each drawn once: taken nodes stay out
    everything = {k for k, n in rec.nodes.items() if k is not None and n.depth <= depth}
    assert drawn == everything
    assert dest["edges"] and all(a in drawn and b in drawn for a, b in dest["edges"])
    assert len(dest["edges"]) == len(set(dest["edges"])) == len(renderer.drawn_edges())
    assert not renderer.processed


def test_flatten_at_depth_1_is_in_processed(recs):
    seen = {}

    class Probe(SubnetWalker):
        def render_recursive_node(self, dest, node):
            seen.update((self.rec.nodes[s].key, list(self.processed[self.rec.nodes[s]]))
                        for s in node.subnets)
            super().render_recursive_node(dest, node)

    Probe(recs["cnn"], 1)({"nodes": [], "groups": [], "edges": []})
    assert [t.key for t in seen["cnn/flatten"]] == ["cnn/flatten:out"] or seen["cnn/flatten"]


class Verbatim(GraphvizRenderer):
    """1.0.3's GraphvizRenderer.render_recursive_node, as its users copied it."""

    def render_recursive_node(self, g, node):
        subg_style = self.styler.style_node(node)
        subg_style["fillcolor"] = "white"
        subg = graphviz.Digraph(name="cluster_" + str(id(node)), graph_attr=subg_style,
                                node_attr={"group": str(node.depth)})
        for s in node.subnets:
            fnode = self.rec.nodes[s]
            self.render_node(subg, fnode)
        for s in node.subnets:
            fnode = self.rec.nodes[s]
            for tnode in self.processed[fnode]:
                if fnode.depth == tnode.depth:
                    self.render_edge(subg, fnode, tnode)
                else:
                    depth_diff = abs(fnode.depth - tnode.depth)
                    self.render_edge(self.recursion_trace[-depth_diff], fnode, tnode)
            self.processed.pop(fnode)
        g.subgraph(subg)


# at depth 3 of the CNN and the transformer, 1.0.3's own code indexes ``recursion_trace`` past its
# start (an edge from a tensor at depth 1 to a convolution at depth 3), in 1.0.3 as here
@pytest.mark.parametrize(("model", "depth"), [(m, d) for m in sorted(MODELS) for d in (1, 2)] + [("mlp", 3)])
def test_a_verbatim_copy_of_1_0_3s_render_recursive_node(recs, model, depth):
    rec = recs[model]
    source = Verbatim(rec, depth)(graphviz.Digraph()).source  # a RenderError before
    dot = parse_dot(source)
    assert "\x01" not in source
    assert all(a in dot.nodes and b in dot.nodes for a, b in dot.edges)
    default = parse_dot(GraphvizRenderer(rec, depth)(graphviz.Digraph()).source)
    own = [n for n in default.nodes if not n.endswith("::title")]
    assert set(own) <= set(dot.nodes) and set(default.edges) == set(dot.edges)
    layers = sum(1 for n in rec.nodes.values() if isinstance(n, LayerNode) and 0 <= n.depth < depth)
    assert len(dot.clusters) == layers


@needs_backend
def test_the_verbatim_copy_draws(recs):
    g = Verbatim(recs["cnn"], 2)(graphviz.Digraph())
    assert render_source(g.source, "svg").startswith(b"<?xml")


def test_an_edge_to_a_node_never_drawn_is_still_an_error(recs):
    class NoParams(Verbatim):
        def render_node(self, g, node):
            if not isinstance(node, ParamNode):
                super().render_node(g, node)

    with pytest.raises(RenderError, match="never drawn"):
        NoParams(recs["mlp"], 2)(graphviz.Digraph())


# ------------------------------------------------------------------ item 3: custom stylers
class Frozen(GraphvizStyler):
    """Greys frozen parameters, sizes parameters by count, dashes parameter edges."""

    def style_node(self, node):
        z = super().style_node(node)
        if isinstance(node, ParamNode):
            z["fillcolor"] = "grey" if not node.fn.requires_grad else "darkolivegreen"
            z["width"] = str(1 + node.fn.numel() // 100)
        return z

    def style_edge(self, fnode, tnode):
        z = super().style_edge(fnode, tnode)
        if isinstance(fnode, ParamNode):
            z["style"] = "dashed"
            z["color"] = "navy"
        return z


def test_parameters_and_operations_reach_a_custom_styler():
    torch.manual_seed(0)
    net = MODELS["cnn"][0]()
    net.stem.requires_grad_(False)
    rec = torchrecorder.record(net, "cnn", MODELS["cnn"][1])
    dot = parse_dot(torchrecorder.make_dot(rec, 2, styler_cls=Frozen).source)
    fills = {k: a["fillcolor"] for k, a in dot.node_attrs.items() if k.endswith((".weight", ".bias"))}
    assert fills["stem.weight"] == fills["stem.bias"] == "grey"
    assert fills["head.weight"] == "darkolivegreen" and dot.node_attrs["head.weight"]["width"] == "4"
    dashed = [(a, b) for (a, b), attrs in zip(dot.edges, dot.edge_attrs, strict=True)
              if attrs.get("color") == "navy"]
    assert ("stem.weight", "stem/conv2d") in dashed and len(dashed) == 4  # the parameters at depth 2
    ops = {k for k in dot.node_attrs if "/" in k}
    assert {"stem/conv2d", "cnn/flatten", "head/linear"} <= ops
    # today's styler, reading metadata only, keeps today's picture
    plain = parse_dot(torchrecorder.make_dot(rec, 2).source)
    assert not any(k.endswith(".weight") for k in plain.nodes)


def test_which_stylers_are_1_0_3s():
    from torchrecorder.renderer.styler import is_seed_styler

    class Today(GraphvizStyler):
        def style_node(self, node):
            attrs = super().style_node(node)
            if isinstance(node, LayerNode) and "Conv" in node.type_name:
                attrs["fillcolor"] = "#cfe2f3"
            return attrs

    class Forced(Today):
        seed_view = True

    class Declined(Frozen):
        seed_view = False

    assert is_seed_styler(Frozen) and is_seed_styler(Forced)
    assert not is_seed_styler(Today) and not is_seed_styler(Declined) and not is_seed_styler(GraphvizStyler)


# ------------------------------------------------------------------ items 4-6: node.fn, labels, styles
class Styler103(GraphvizStyler):
    """1.0.3's own style_node, then a label extended as its users extended it."""

    def style_node(self, node):
        z = dict(**self.styles[type(node)])
        if isinstance(node, TensorNode):
            z["label"] = node.name + "\n" + str(list(node.fn.shape))
        elif isinstance(node, OpNode):
            z["label"] = type(node.fn).__name__
        else:
            z["label"] = node.name
        return z


@pytest.mark.parametrize("model", sorted(MODELS))
def test_node_fn_has_1_0_3s_shape(recs, model):
    rec = recs[model]
    dot = parse_dot(torchrecorder.make_dot(rec, 3, styler_cls=Styler103).source)
    ops = {a["label"] for k, a in dot.node_attrs.items() if isinstance(rec.nodes.get(k), OpNode)}
    theirs = {n[2] for n in SEED[model]["depths"]["3"]["nodes"] if n[0] == "OpNode"}
    assert ops and ops <= theirs and "method_descriptor" not in ops
    for node in rec.nodes.values():
        if isinstance(node, TensorNode) and not isinstance(node, ParamNode) and node.shape is not None:
            assert tuple(node.fn.shape) == tuple(node.shape) and node.fn.device.type == "meta"
            assert str(node.fn.dtype) == f"torch.{node.dtype}"
        if isinstance(node, ParamNode):
            assert isinstance(node.fn, nn.Parameter)
        if isinstance(node, OpNode):
            assert node.fn.func is node.kept and node.fn.op == node.op


def test_an_operations_fn_calls_the_torch_function(recs):
    (add,) = [n for n in recs["cnn"].nodes.values() if isinstance(n, OpNode) and n.op == "add"]
    assert type(add.fn).__name__ == "AddBackward0" and add.fn.name() == "AddBackward0"
    assert add.fn is add.fn
    assert torch.equal(add.fn(torch.ones(2), torch.ones(2)), torch.full((2,), 2.0))


class Appending(GraphvizStyler):
    def style_node(self, node):
        z = super().style_node(node)
        z["label"] += f" (depth {node.depth})"
        z["label"] = "<" + z["label"] if isinstance(node, OpNode) else z["label"]
        return z


@needs_backend
def test_text_added_to_a_default_label_shows_as_text(recs):
    source = torchrecorder.make_dot(recs["cnn"], 2, styler_cls=Appending).source
    svg = render_source(source, "svg").decode()
    assert "(depth 1)" in svg and "(depth 2)" in svg
    assert "TABLE" not in svg and "&lt;B&gt;" not in svg
    assert "&lt;add" in svg  # text put in front, escaped


class Formatting(GraphvizStyler):
    """Formats the default label into text, as 1.0.3 users did with its plain labels."""

    def style_node(self, node):
        z = super().style_node(node)
        how = node.depth % 3
        z["label"] = (f"{z['label']} <d{node.depth}>" if how == 0 else
                      "[{}] & co".format(z["label"]) if how == 1 else str(z["label"]) + " !")
        return z


@needs_backend
def test_a_default_label_formatted_into_text_shows_as_text(recs):
    svg = render_source(torchrecorder.make_dot(recs["cnn"], 2, styler_cls=Formatting).source,
                        "svg").decode()
    assert "&lt;d0&gt;" in svg and "&amp; co" in svg and " !" in svg and "[" in svg
    assert "TABLE" not in svg and "&lt;B&gt;" not in svg and "&lt;BR" not in svg


def test_styles_of_tensor_nodes_reach_the_inputs_and_outputs(recs):
    class Blue(GraphvizStyler):
        def __init__(self, **styler_args):
            super().__init__(**styler_args)
            self.styles[TensorNode]["fillcolor"] = "lightblue"

    dot = parse_dot(torchrecorder.make_dot(recs["mlp"], 1, styler_cls=Blue).source)
    io = [a for a in dot.node_attrs.values() if "bold" in a.get("style", "")]
    assert len(io) == 2 and all(a["fillcolor"] == "lightblue" for a in io)

    class ByKind(GraphvizStyler):  # today's way: the kinds stay apart
        def __init__(self, **styler_args):
            super().__init__(**styler_args)
            self.styles["tensor"]["fillcolor"] = "lightblue"

    dot = parse_dot(torchrecorder.make_dot(recs["mlp"], 1, styler_cls=ByKind).source)
    io = [a for a in dot.node_attrs.values() if "bold" in a.get("style", "")]
    assert len(io) == 2 and all(a["fillcolor"] != "lightblue" for a in io)


# ------------------------------------------------------------------ item 9: fn_types
@pytest.mark.parametrize("model", sorted(MODELS))
def test_fn_types_count_by_class_name_as_1_0_3_did(recs, model):
    ours, theirs = recs[model].fn_types, SEED[model]["fn_types"]
    # modules, parameters and tensors as 1.0.3 counted them
    for name in ("Parameter", "Tensor", "Linear", "Conv2d", "ReLU", "LayerNorm", "Sequential"):
        assert ours.get(name) == theirs.get(name), name
    assert ours[type(MODELS[model][0]()).__name__] == 1
    # operations by autograd name: all 1.0.3 had, but autograd's pieces of one operation
    ops = {k: v for k, v in ours.items() if k.endswith(("Backward0", "Backward1"))}
    old = {k: v for k, v in theirs.items() if k.endswith(("Backward0", "Backward1"))}
    assert not Counter(ops) - Counter(old)
    assert set(Counter(old) - Counter(ops)) <= AUTOGRAD_PIECES


# ------------------------------------------------------------------ item 11: file names
@needs_backend
def test_a_documentation_script_at_three_depths_gets_three_files(tmp_path):
    torch.manual_seed(0)
    net = MODELS["cnn"][0]()
    for depth in (1, 2, 3):  # as 1.0.3's documentation scripts drew them, into one folder
        torchrecorder.render_network(net, "cnn", input_shapes=(1, 1, 8, 8), directory=str(tmp_path),
                                     fmt="svg", render_depth=depth)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cnn-1.svg", "cnn-2.svg", "cnn-3.svg"]
    assert all(p.read_bytes().startswith(b"<?xml") for p in tmp_path.iterdir())
    named = torchrecorder.render_network(net, "cnn", (1, 1, 8, 8), str(tmp_path), filename="cnn", fmt="dot")
    assert named == str(tmp_path / "cnn.dot")


# ------------------------------------------------------------------ item 13: 1.0.3's modules
def test_the_1_0_3_import_paths_and_attributes():
    from torchrecorder.helpers import make_dot, record, render_network
    from torchrecorder.renderer.gv import GraphvizRenderer as GvRenderer
    from torchrecorder.renderer.gv import GraphvizStyler as GvStyler

    assert GvRenderer is GraphvizRenderer and GvStyler is GraphvizStyler
    assert (make_dot, record, render_network) == (torchrecorder.make_dot, torchrecorder.record,
                                                  torchrecorder.render_network)
    net = MODELS["mlp"][0]()
    rec = record(net, "mlp", (2, 6))
    assert net[0] in rec.fn_set and net[0].weight in rec.fn_set and "0" in rec.fn_set
    assert nn.Linear(2, 2) not in rec.fn_set and torch.zeros(1) not in rec.fn_set
    layer = rec.nodes[net[0]]
    layer.pre.remove()  # 1.0.3's remove_hooks did this for every layer: harmless here
    layer.post.remove()
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in net.modules())


# ------------------------------------------------------------------ item 12: 1.0.3's names
@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_1_0_3_code_reads_1_0_3s_names(recs, model, depth):
    rec = recs[model]
    before = {k: n.name for k, n in rec.nodes.items()}
    got = Flat(rec, depth)({"nodes": {}, "edges": []})
    ours = {n["name"] for n in got["nodes"].values()}
    theirs = {n[1] for n in SEED[model]["depths"][str(depth)]["nodes"]}
    assert {"Input", "Output"} <= ours
    layers = {n[1] for n in SEED[model]["depths"][str(depth)]["nodes"] if n[0] == "LayerNode"}
    assert layers <= ours  # "stem\n(Conv2d)"
    if model != "transformer":  # there autograd's pieces of a matmul shift 1.0.3's numbering
        assert ours == {name for name in theirs if not name.startswith("TBackward0")}
    assert {k: n.name for k, n in rec.nodes.items()} == before  # today's names after drawing


class RedContainers(GraphvizStyler):
    """1.0.3 styled a cluster with style_node: a container's colour and label reach it."""

    def style_node(self, node):
        z = super().style_node(node)
        if isinstance(node, LayerNode) and isinstance(node.fn, nn.Sequential):
            z["color"], z["label"] = "#ff0001", "CONTAINER"
        return z


@pytest.mark.parametrize("depth", [1, 2])
def test_a_seed_stylers_layer_style_reaches_the_clusters(depth):
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2)))
    source = torchrecorder.make_dot(torchrecorder.record(net, "net", (1, 3)), depth,
                                    styler_cls=RedContainers).source
    # 1.0.3: the root cluster and the inner Sequential (a node at depth 1, a cluster at 2)
    assert source.count("#ff0001") == 2 and source.count("CONTAINER") == 2


def test_a_layer_drawn_under_its_1_0_3_name_shows_its_type_once():
    # renderer(dest) draws "0\n(Conv2d)"; the type line below it says Conv2d already
    class Labelled(GraphvizRenderer):
        def render_edge(self, g, fnode, tnode):
            g.edge(str(id(fnode)), str(id(tnode)), label="")

    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    rec = torchrecorder.record(net, "cnn", (1, 3, 8, 8))
    g = graphviz.Digraph()
    Labelled(rec, render_depth=1)(g)
    line = next(s for s in g.body if s.lstrip().startswith("0 [label="))
    label = line.split("tooltip=")[0]
    assert label.count("Conv2d") == 1 and "<B>0</B>" in label


def test_an_operations_node_fn_says_what_it_is_when_read_as_a_grad_fn():
    # 1.0.3's OpNode.fn was the grad_fn itself; code walking next_functions learns what it holds
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    rec = torchrecorder.record(net, "seq", (1, 3))
    fn = next(n.fn for n in rec.nodes.values() if isinstance(n, OpNode))
    assert fn.name() == "AddmmBackward0"
    with pytest.raises(AttributeError, match=r"stand-in for the autograd node.*'next_functions'.*rec\.edges"):
        _ = fn.next_functions
    assert not hasattr(fn, "__array_interface__")  # dunders stay plain misses
    assert type(copy.deepcopy(fn)).__name__ == "AddmmBackward0"
    assert pickle.loads(pickle.dumps(fn)).op == "linear"


class TippedContainers(GraphvizStyler):
    """A 1.0.3 styler setting a tooltip in style_node: 1.0.3 gave a cluster style_node's
    attributes, the tooltip among them."""

    def style_node(self, node):
        z = super().style_node(node)
        if isinstance(node, LayerNode) and isinstance(node.fn, nn.Sequential):
            z["tooltip"] = f"container {node.depth}"
        return z


def _cluster_attrs(source: str) -> dict[str, str]:
    """Each cluster's name -> the line of its attributes."""
    lines = source.splitlines()
    return {line.split()[1].strip('"'): lines[i + 1] for i, line in enumerate(lines)
            if line.lstrip().startswith(("subgraph cluster_", 'subgraph "cluster_')) and line.endswith("{")}


@pytest.mark.parametrize("depth", [1, 2])
def test_a_seed_stylers_tooltip_reaches_the_clusters(depth):
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2)))
    source = torchrecorder.make_dot(torchrecorder.record(net, "net", (1, 3)), depth,
                                    styler_cls=TippedContainers).source
    clusters = _cluster_attrs(source)
    assert 'tooltip="container 0"' in clusters["cluster_net"]
    if depth == 2:  # the inner Sequential a cluster
        assert 'tooltip="container 1"' in clusters["cluster_2"]
        assert "container" not in clusters["cluster_0"]  # a Linear keeps its own tooltip
    else:  # a node, with the styler's tooltip
        assert "cluster_2" not in clusters and source.count('"container 1"') == 1


def test_a_styler_with_its_own_style_cluster_keeps_its_cluster_tooltip_in_the_seed_view():
    class Both(TippedContainers):
        def style_cluster(self, node):
            return super().style_cluster(node) | {"tooltip": "from style_cluster"}

    net = nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.Linear(4, 2)))
    renderer = GraphvizRenderer(torchrecorder.record(net, "net", (1, 3)), 2, styler_cls=Both)
    renderer.seed_view = True
    clusters = _cluster_attrs(renderer.render().source)
    assert clusters and all('tooltip="from style_cluster"' in c for c in clusters.values())
