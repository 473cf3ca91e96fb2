"""The Graphviz look: a style per node kind, styler overrides, presets, labels, determinism."""

from __future__ import annotations

import html
import json
import re
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import graphviz
import pytest
import torch
from graphviz.quoting import quote
from torch import nn

import torchrecorder
from torchrecorder._text import dot_id, dot_quote, dot_text, html_text, quote_dot_id, quoted_dot_text, visible
from torchrecorder.nodes import BaseNode, LayerNode, OpNode, ParamNode, TensorNode
from torchrecorder.renderer import DEFAULT_STYLES, PRESETS, GraphvizRenderer, GraphvizStyler
from torchrecorder.renderer.graphviz import TITLE_SUFFIX

from .backends import needs_backend


class Scale(nn.Module):
    """A module with its own parameter and two ops, so that it is drawn expanded with a param node."""

    def __init__(self) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.ones(6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x * self.gain)


class Model(nn.Module):
    """Every node kind: layers, tensors, the network's input/output, a parameter, ops."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.scale = Scale()
        self.out = nn.Linear(6, 2, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.scale(self.fc(x)) + 1)


@pytest.fixture(scope="module")
def rec() -> torchrecorder.Recorder:
    return torchrecorder.record(Model(), "model", (1, 4))


#: draw every node: tensors as boxes, the leaf ``scale`` opened, every op
EVERYTHING: dict[str, Any] = {"tensor_nodes": True, "expand_leaves": True, "all_ops": True}


def full_dot(rec: torchrecorder.Recorder, depth: int = 2, **kw: Any) -> str:
    """The DOT source with every node drawn (see :data:`EVERYTHING`)."""
    return str(torchrecorder.make_dot(rec, depth, **EVERYTHING, **kw).source)


def node_line(source: str, node_id: str) -> str:
    for line in source.splitlines():
        if line.strip().startswith((f"{node_id} [", f'"{node_id}" [')):
            return line
    raise AssertionError(f"no node {node_id} in\n{source}")


def attr(line: str, name: str) -> str:
    match = re.search(rf'\b{name}=("(?:[^"\\]|\\.)*"|<.*>(?= \w+=)|[^ \]]+)', line)
    assert match, (name, line)
    return match.group(1).strip('"')


@pytest.mark.parametrize(("key", "kind"), [
    ("fc", "layer"), ("fc:out", "tensor"), ("input:x", "io"), ("out:out", "io"),
    ("scale.gain", "param"), ("scale/mul", "op"), ("model/add", "op"),
])
def test_each_kind_gets_its_default_style(rec: torchrecorder.Recorder, key: str, kind: str) -> None:
    styler = GraphvizStyler()
    styler.rec = rec
    node = rec.nodes[key]
    assert styler.kind_of(node) == kind
    attrs = styler.style_node(node)
    for name, value in DEFAULT_STYLES[kind].items():
        assert attrs[name] == value, (key, name)
    source = full_dot(rec)
    line = node_line(source, key.replace(":", "@"))
    assert attr(line, "fillcolor") == DEFAULT_STYLES[kind]["fillcolor"]


def test_kinds_look_different() -> None:
    fills = {k: DEFAULT_STYLES[k]["fillcolor"] for k in ("layer", "tensor", "io", "param", "op")}
    assert len(set(fills.values())) == len(fills)
    assert DEFAULT_STYLES["graph"]["rankdir"] == "TB"


def test_cluster_is_labelled_with_dotted_path_and_type(rec: torchrecorder.Recorder) -> None:
    source = full_dot(rec)
    assert "subgraph cluster_scale {" in source
    # the title and the type are one text run each, on lines of their own
    assert ('<TD ALIGN="LEFT"><B>scale</B></TD>' in source
            and '<FONT POINT-SIZE="9" COLOR="#555555">Scale · 6 params</FONT></TD></TR>' in source)
    assert "<B>model</B>" in source


def test_labels_show_names_types_shapes_counts_and_ops(rec: torchrecorder.Recorder) -> None:
    source = full_dot(rec)
    fc = node_line(source, "fc")
    assert "<B>fc</B>" in fc and ">Linear · 30 params<" in fc
    assert "weight 6×4, bias 6" in attr(fc, "tooltip") and "weight: 6×4" not in fc
    assert "Linear · 12 params" in node_line(source, "out")
    shapes = full_dot(rec, param_shapes=True)
    assert "weight: 6×4" in node_line(shapes, "fc") and "bias: 6" in node_line(shapes, "fc")
    assert "weight: 2×6" in node_line(shapes, "out")
    assert "label=<1×6>" in node_line(source, "fc@out")
    assert "<TD><B>x</B></TD></TR><TR><TD>1×4</TD>" in node_line(source, "input@x")
    assert "label=<mul>" in node_line(source, "scale/mul")
    assert "<TD>gain</TD>" in node_line(source, "scale.gain") and ">6<" in node_line(source, "scale.gain")
    big = torchrecorder.record(nn.Sequential(nn.Linear(100, 100)), "big", (1, 100))
    assert "10.1k params" in torchrecorder.make_dot(big).source


def test_param_shapes_come_from_metadata_not_modules(rec: torchrecorder.Recorder) -> None:
    loaded = torchrecorder.loads_json(rec.to_json())
    # no live object came along: layers hold none; tensors and ops hold what 1.0.3 code reads
    assert all(n.fn is None for n in loaded.nodes.values() if type(n).__name__ == "LayerNode")
    assert all(n.fn.func is None for n in loaded.nodes.values() if type(n).__name__ == "OpNode")
    assert all(n.fn.device.type == "meta" for n in loaded.nodes.values() if type(n).__name__ == "ParamNode")
    assert "weight: 6×4" in torchrecorder.make_dot(loaded, 1, param_shapes=True).source
    assert "weight 6×4" in torchrecorder.make_dot(loaded, 1).source  # in the tooltip


def test_per_kind_overrides_touch_only_that_kind(rec: torchrecorder.Recorder) -> None:
    source = full_dot(rec, layer_attrs={"fillcolor": "red", "shape": "octagon"},
                      edge_attrs={"color": "blue"}, cluster_attrs={"style": "filled"},
                      graph_attrs={"rankdir": "LR"})
    assert attr(node_line(source, "fc"), "fillcolor") == "red"
    assert attr(node_line(source, "fc"), "shape") == "octagon"
    assert attr(node_line(source, "fc@out"), "fillcolor") == DEFAULT_STYLES["tensor"]["fillcolor"]
    assert "rankdir=LR" in source
    assert re.search(r"-> \S+ \[.*color=blue", source)
    assert "style=filled" in source


def test_fontname_sets_every_text_of_the_drawing() -> None:
    """``fontname=`` is the typeface of the whole figure, as in 1.0.3 (which set it on the
    graph too): cluster titles, edge labels and the graph, not the boxes alone."""
    net = nn.Sequential(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), nn.Flatten(0), nn.Linear(16, 2))
    rec = torchrecorder.record(net, "net", (2, 4))
    source = torchrecorder.make_dot(rec, None, fontname="Times").source
    fonts = re.findall(r'fontname=("[^"]*"|\S+?)[\s\]]', source)
    assert len(fonts) > 5 and set(fonts) == {"Times"}, set(fonts)
    assert "::title" in source and "::label" in source  # titles and edge labels were drawn
    kept = torchrecorder.make_dot(rec, None, fontname="Times", cluster_attrs={"fontname": "Courier"}).source
    assert set(re.findall(r'fontname=("[^"]*"|\S+?)[\s\]]', kept)) == {"Times", "Courier"}


def test_plain_keywords_apply_to_every_node(rec: torchrecorder.Recorder) -> None:
    source = full_dot(rec, fontname="Times")
    for key in ("fc", "fc@out", "input@x", "scale.gain", "scale/mul"):
        assert attr(node_line(source, key), "fontname") == "Times"


def test_bad_styler_arguments_say_what_is_wrong() -> None:
    with pytest.raises(TypeError, match="layer_attrs"):
        GraphvizStyler(lyer_attrs={"color": "red"})
    with pytest.raises(TypeError, match="mapping"):
        GraphvizStyler(layer_attrs="red")
    with pytest.raises(ValueError, match="preset"):
        GraphvizStyler(preset="poster")


@pytest.mark.parametrize("kw, says", [
    ({"layer_attrs": {"fillcolour": "red"}}, "'fillcolour' is not a Graphviz .* nodes.*'fillcolor'"),
    ({"op_attrs": {"arrowhead": "dot"}}, "'arrowhead' is not a Graphviz attribute of nodes.*edges"),
    ({"edge_attrs": {"arrowhed": "dot"}}, "edge_attrs: 'arrowhed' .* of edges.*'arrowhead'"),
    ({"cluster_attrs": {"shape": "box"}}, "cluster_attrs: 'shape' is not a Graphviz attribute of clusters"),
    ({"graph_attrs": {"rankdri": "LR"}}, "graph_attrs: 'rankdri' .*'rankdir'"),
])
def test_a_kind_attribute_graphviz_would_ignore_is_refused(kw: dict[str, Any], says: str,
                                                            tmp_path: Path) -> None:
    """Graphviz ignores an attribute it does not know (or that its element does not use)
    without a word: a misspelt name in KIND_attrs is an error, before the model runs."""
    with pytest.raises(ValueError, match=says):
        GraphvizStyler(**kw)
    net = nn.Sequential(nn.Linear(2, 2))
    calls: list[int] = []
    net.register_forward_hook(lambda *a: calls.append(1))
    with pytest.raises(ValueError, match=says):
        torchrecorder.render_network(net, "n", (1, 2), str(tmp_path), **kw)
    assert calls == [] and list(tmp_path.iterdir()) == []
    # what each kind uses passes: a cluster's pencolor, an edge's arrowhead, the graph's rankdir
    GraphvizStyler(cluster_attrs={"pencolor": "red"}, edge_attrs={"arrowhead": "dot"},
                   graph_attrs={"rankdir": "LR"}, failed_attrs={"fillcolor": "pink"})


def test_styles_are_copies() -> None:
    styler = GraphvizStyler()
    styler.styles["layer"]["fillcolor"] = "red"
    assert GraphvizStyler().styles["layer"]["fillcolor"] == DEFAULT_STYLES["layer"]["fillcolor"]
    with pytest.raises(TypeError):
        DEFAULT_STYLES["layer"]["fillcolor"] = "red"  # type: ignore[index]


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presets_apply_their_overrides(rec: torchrecorder.Recorder, preset: str) -> None:
    styler = GraphvizStyler(preset=preset)
    for kind, overrides in PRESETS[preset].items():
        for name, value in overrides.items():
            assert styler.styles[kind][name] == value
    override = GraphvizStyler(preset=preset, layer_attrs={"color": "green"})
    assert override.styles["layer"]["color"] == "green"


def test_print_preset_has_no_colour(rec: torchrecorder.Recorder) -> None:
    source = torchrecorder.make_dot(rec, 2, preset="print").source
    colours = set(re.findall(r'(?:fill)?color="?(#[0-9a-fA-F]{6}|\w+)', source))
    for colour in colours:
        if colour.startswith("#"):
            r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
            assert r == g == b, colour  # greys only
        else:
            assert colour in ("black", "white"), colour


def test_compact_preset_is_smaller(rec: torchrecorder.Recorder) -> None:
    default = GraphvizStyler().styles
    compact = GraphvizStyler(preset="compact").styles
    assert float(compact["layer"]["fontsize"]) < float(default["layer"]["fontsize"])
    assert float(compact["graph"]["ranksep"]) < float(default["graph"]["ranksep"])


@needs_backend
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_renders(rec: torchrecorder.Recorder, preset: str) -> None:
    svg = torchrecorder.backend.render_source(torchrecorder.make_dot(rec, 2, preset=preset).source, "svg")
    ET.fromstring(svg)


def test_styler_subclass_changes_labels(rec: torchrecorder.Recorder) -> None:
    class Upper(GraphvizStyler):
        def label(self, node: object) -> str:
            return "<" + super().label(node)[1:-1].upper() + ">"  # type: ignore[arg-type]

    assert "<B>FC</B>" in torchrecorder.make_dot(rec, 2, styler_cls=Upper).source


def test_a_styler_returning_garbage_is_named(rec: torchrecorder.Recorder) -> None:
    class Broken(GraphvizStyler):
        def style_node(self, node: object) -> dict[str, str]:
            return None  # type: ignore[return-value]

    with pytest.raises(TypeError, match=r"Broken.style_node\(\)"):
        torchrecorder.make_dot(rec, 2, styler_cls=Broken)


def test_output_is_deterministic() -> None:
    a = torchrecorder.make_dot(torchrecorder.record(Model(), "m", (1, 4)), 2).source
    b = torchrecorder.make_dot(torchrecorder.record(Model(), "m", (1, 4)), 2).source
    assert a == b


def test_failed_module_is_marked() -> None:
    class Boom(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("boom")

    net = nn.Sequential(nn.Linear(2, 2), Boom())
    with pytest.raises(RuntimeError) as info:
        torchrecorder.record(net, "net", (1, 2))
    partial = info.value.recording  # type: ignore[attr-defined]
    line = node_line(torchrecorder.make_dot(partial, 1).source, "1")
    assert attr(line, "fillcolor") == DEFAULT_STYLES["failed"]["fillcolor"]
    assert "raised RuntimeError" in line


def test_node_classes_map_to_kinds() -> None:
    styler = GraphvizStyler()
    assert styler.kind_of(LayerNode("a")) == "layer"
    assert styler.kind_of(TensorNode("t")) == "tensor"
    assert styler.kind_of(TensorNode("t", role="input")) == "io"
    assert styler.kind_of(ParamNode("p")) == "param"
    assert styler.kind_of(OpNode("o")) == "op"

    class MyOp(OpNode):
        pass

    assert styler.kind_of(MyOp("o")) == "op"  # subclasses found through the MRO


def test_renderer_checks_render_depth(rec: torchrecorder.Recorder) -> None:
    with pytest.raises(ValueError, match="render_depth"):
        GraphvizRenderer(rec, -1)


def test_shapes_on_edges_instead_of_tensor_nodes(rec: torchrecorder.Recorder) -> None:
    r = GraphvizRenderer(rec, 2, tensor_nodes=False, expand_leaves=True)
    source = r.render().source
    assert "fc@out" not in source and "input@x" in source and "out@out" in source
    # the shape on the edge, drawn as the edge's label node
    assert re.search(r"\"fc -> scale/mul::label\" \[label=<<TABLE[^\n]*<TD>1×6</TD>", source)
    pairs = [(str(a.key), str(b.key)) for a, b in r.drawn_edges()]
    assert ("fc", "scale/mul") in pairs and ("scale.gain", "scale/mul") in pairs
    carried = r.edge_tensor(rec.nodes["fc"], rec.nodes["scale/mul"])
    assert carried is rec.nodes["fc:out"]
    assert all(not k.endswith((":out", ":in")) or k in ("out:out",) for k, _ in pairs)


def test_shapes_are_on_edges_by_default_in_every_preset(rec: torchrecorder.Recorder) -> None:
    for preset in PRESETS:
        source = torchrecorder.make_dot(rec, 2, preset=preset).source
        assert "fc@out" not in source and "<TD>1×6</TD>" in source
        assert "fc@out" in torchrecorder.make_dot(rec, 2, preset=preset, tensor_nodes=True).source


@needs_backend
def test_shapes_on_edges_render(rec: torchrecorder.Recorder) -> None:
    source = torchrecorder.make_dot(rec, 2, preset="compact").source
    ET.fromstring(torchrecorder.backend.render_source(source, "svg"))


class _Chain(nn.Module):
    """``pos`` read by each of ``n`` adds down a chain: far over the budget's ranks unfolded."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.pos = nn.Linear(4, 4)
        self.fcs = nn.ModuleList(nn.Linear(4, 4) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = self.pos(x)
        for fc in self.fcs:
            x = fc(x) + pos
        return x


class _FanOut(nn.Module):
    """One value (``stem``'s output) read by ``n`` heads and by ``n`` operations."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.heads = nn.ModuleList(nn.Linear(4, 2) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        scaled = [h * (k + 2) for k in range(len(self.heads))]
        return torch.cat([head(s) for head, s in zip(self.heads, scaled, strict=True)], -1)


@needs_backend
@pytest.mark.parametrize("tensor_nodes", [False, True])
def test_a_value_fed_to_many_nodes_within_the_budget_is_drawn_above_them(tensor_nodes: bool) -> None:
    """Within the drawing budget, the edges of a value fed to more than ``MAX_FANOUT`` nodes
    rank their ends as every edge does: laid out, every node it feeds is below it (with
    ``constraint=false`` on them, ``dot`` drew a mixture of experts' routing ``eq``s above the
    ``topk`` they read, their edges pointing up)."""
    rec = torchrecorder.record(_FanOut(12), "fan", (1, 4))
    src = GraphvizRenderer(rec, 1, tensor_nodes=tensor_nodes).render().source
    assert "constraint" not in src
    layout = json.loads(torchrecorder.backend.render_source(src, "json"))
    y = {o["name"]: float(o["pos"].split(",")[1]) for o in layout["objects"] if "pos" in o}
    source = "stem@out" if tensor_nodes else "stem"
    fed = [b for a, b in ((e["tail"], e["head"]) for e in layout["edges"])
           if layout["objects"][a]["name"] == source]
    assert len(fed) == 12
    for b in fed:  # Graphviz's y grows upwards
        assert y[layout["objects"][b]["name"]] < y[source], layout["objects"][b]["name"]


def test_a_value_fed_to_many_nodes_in_a_drawing_over_the_budget_does_not_rank_them() -> None:
    """A drawing kept whole over the budget (``max_nodes=None``) still draws the edges of a
    value fed to more than ``MAX_FANOUT`` nodes with ``constraint=false``: its layout stays
    fast."""
    renderer = GraphvizRenderer(torchrecorder.record(_Chain(80), "chain", (1, 4)), 1, max_nodes=None,
                              fold_repeats=False)
    src = renderer.render().source
    assert renderer.budget is not None and renderer.budget.over
    fan = [line for line in src.splitlines() if line.strip().startswith("pos ->")]
    assert len(fan) == 80 and all("constraint=false" in line for line in fan)
    small = GraphvizRenderer(torchrecorder.record(_Chain(4), "chain", (1, 4)), 1, max_nodes=None,
                              fold_repeats=False)
    assert "constraint" not in small.render().source


def test_a_node_fed_by_nothing_drawn_in_a_titled_cluster_takes_no_edge_from_the_input() -> None:
    """A node that nothing drawn feeds sits below the network's input by an invisible edge from
    it; inside a titled cluster the title's edge places it, and no edge runs from the input
    down to each iteration of a long unfolded loop (``dot`` routed each through every rank
    above it: a 30-step sampler took minutes to lay out)."""
    from .dot_parse import parse_dot

    class Denoise(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inc, self.temb = nn.Linear(4, 4), nn.Linear(1, 4)

        def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            return torch.tanh(self.inc(x)) + self.temb(t)

    class Sample(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = Denoise()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for i in range(12):
                t = torch.full((1, 1), float(i))  # an op that reads nothing: not drawn
                x = x - 0.1 * self.net(x, t)
            return x

    rec = torchrecorder.record(Sample(), "s", (1, 4))
    dot = parse_dot(GraphvizRenderer(rec, fold_repeats=False).render().source)
    temb = [k for k in dot.nodes if k.startswith("net") and "temb" in k]
    from_input = [b for a, b in dot.invisible if a == "input@x"]
    assert len(temb) == 12 and not set(temb) & set(from_input), from_input
    titled = {b for a, b in dot.invisible if a.endswith(TITLE_SUFFIX)}
    assert set(temb) <= titled  # each placed below its call's title instead


# --------------------------------------------------------------- one pass vs the hooks
class ThroughHooks(GraphvizRenderer):
    """Overrides a hook (doing the same), so that render() draws node by node through the hooks."""

    def render_node(self, g: graphviz.Digraph, node: BaseNode) -> None:
        super().render_node(g, node)


class Boom(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError('boom <b> & "q" \\')


class Named(nn.Module):
    """Names that need quoting or clash once made ids (``a b`` and ``a_b``, DOT keywords)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleDict({n: nn.Sequential(nn.Linear(3, 3), nn.ReLU())
                                     for n in ("a b", "a_b", "node", "Graph", "1", "<i>", 'say "hi"')})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks.values():
            x = block(x) * 2
        return x


def _recordings() -> list[torchrecorder.Recorder]:
    deep = nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(9)])
    recs = [torchrecorder.record(Model(), "model", (1, 4)), torchrecorder.record(Named(), "node", (1, 3)),
            torchrecorder.record(deep, "deep <net>", (2, 4))]
    failing = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 2), Boom()))
    with pytest.raises(RuntimeError) as info:
        torchrecorder.record(failing, "f", (1, 2))
    recs.append(info.value.recording)  # type: ignore[attr-defined]
    return recs


@pytest.mark.parametrize("options", [
    {}, {"fold_repeats": False}, {"fold_repeats": True}, {"preset": "compact"}, {"preset": "print"},
    {"tensor_nodes": False, "fontname": "Times", "layer_attrs": {"color": "red", "label": "x"}},
    {"edge_attrs": {"tooltip": "t", "constraint": "true"}, "cluster_attrs": {"pencolor": "red",
                                                                       "bgcolor": "white"}},
])
def test_one_pass_writes_what_the_hooks_write(options: dict[str, Any]) -> None:
    for rec in _recordings():
        for depth in (0, 1, 2, 256):
            fast = GraphvizRenderer(rec, depth, **options).render().source
            slow = ThroughHooks(rec, depth, **options).render().source
            assert fast == slow, (rec.name, depth, options)


def test_overridden_styler_methods_are_still_called(rec: torchrecorder.Recorder) -> None:
    calls: list[str] = []

    class Counting(GraphvizStyler):
        def tooltip(self, node: BaseNode) -> str:
            calls.append("tooltip")
            return "tip"

        def style_edge(self, fnode: BaseNode, tnode: BaseNode) -> dict[str, str]:
            calls.append("edge")
            return {"color": "blue"}

        def param_lines(self, node: LayerNode) -> list[str]:
            calls.append("params")
            return ["many"]

    source = torchrecorder.make_dot(rec, 256, Counting).source
    assert {"tooltip", "edge", "params"} <= set(calls)
    assert "tooltip=tip" in source and "color=blue" in source and "many" in source


def test_a_renderer_overriding_a_hook_is_drawn_through_it(rec: torchrecorder.Recorder) -> None:
    class Upper(GraphvizRenderer):
        def node_id(self, node: BaseNode) -> str:
            return "N_" + super().node_id(node).upper()

    source = Upper(rec, tensor_nodes=True).render().source
    assert '"N_FC@OUT"' in source and "N_FC " in source


@pytest.mark.parametrize("text", [
    "", "fc", "_x1", "1", "-1.5", ".5", "1.", "1e5", "node", "Graph", "STRICT", "a b", "a:b", "x@out",
    'say "hi"', 'a\\"b', "back\\", "\\\\", "<b>x</b>", "<a>\n", "a\nb", "end\n", "ünï", "h.0.attn/matmul",
    "a]b", "x & y", "tab\there", "\x07",
])
def test_quoting_is_the_graphviz_package_quoting(text: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # graphviz warns of a final odd backslash
        assert dot_quote(text) == quote(text)
        assert dot_quote(graphviz.escape(text)) == quote(graphviz.escape(text))
        # a tooltip is never an HTML string: quoted as NoHtml text is
        assert quoted_dot_text(text) == quote(graphviz.nohtml(dot_text(text)))
    assert quote_dot_id(dot_id(text)) == quote(dot_id(text))
    slow = html.escape(visible(text), quote=True).replace("\\", "\\\\").replace("]", "&#93;")
    assert html_text(text) == slow


def test_a_cluster_holding_one_box_shows_the_parameter_count_once() -> None:
    """A wrapper around one block (a ``DoubleConv`` holding its ``Sequential``): the box says
    how many parameters, the cluster's title does not say it again; a cluster of two boxes
    keeps its total."""

    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.block(x)

    net = torch.nn.Sequential(Wrapper(), torch.nn.Linear(8, 2))
    source = torchrecorder.make_dot(torchrecorder.record(net, "net", (1, 4)), 2).source
    title = next(line for line in source.splitlines() if '"0::title"' in line and "label=" in line)
    assert "Wrapper<" in title and "params" not in title, title
    box = next(line for line in source.splitlines() if line.lstrip().startswith('"0.block" ['))
    assert "40 params" in box
    root = next(line for line in source.splitlines() if '"net::title"' in line and "label=" in line)
    assert "58 params" in root  # two boxes inside: the total stays


def test_a_cluster_title_takes_one_line_where_it_fits() -> None:
    """``enc1 DoubleConv`` above a box as wide fits on one line; a title wider than what its
    cluster holds keeps the type on a line of its own."""

    class DoubleConv(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = torch.nn.Sequential(torch.nn.Conv2d(3, 3, 3), torch.nn.ReLU())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.block(x)

    class AVeryLongNameForAModuleThatHoldsOneSmallBox(DoubleConv):
        pass

    net = torch.nn.Sequential()
    net.add_module("enc1", DoubleConv())
    net.add_module("a_rather_long_attribute_name", AVeryLongNameForAModuleThatHoldsOneSmallBox())
    source = torchrecorder.make_dot(torchrecorder.record(net, "net", (1, 3, 12, 12)), 2).source

    def title(key: str) -> str:
        return next(line for line in source.splitlines() if f'"{key}::title" [label=' in line
                    or f"{key}::title [label=" in line)

    short, long = title("enc1"), title("a_rather_long_attribute_name")
    assert short.count("<TR>") == 1 and "<B>enc1</B>" in short and ">DoubleConv</FONT>" in short
    assert long.count("<TR>") == 2


def test_a_cluster_title_wider_than_its_contents_puts_the_count_on_a_line_of_its_own() -> None:
    """``TransformerEncoderLayer · 2.2k params`` is wider than the boxes of its cluster, the
    type and the count each are not: three lines, so that the title does not widen the cluster
    (and the nest of clusters around it); a cluster that the type alone widens keeps two."""
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    net = torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
    source = torchrecorder.make_dot(torchrecorder.record(net, "enc", (1, 3, 16)), 2).source
    title = next(line for line in source.splitlines() if '"layers.0::title" [label=' in line)
    assert title.count("<TR>") == 3, title
    assert ">TransformerEncoderLayer</FONT>" in title and ">2.2k params</FONT>" in title
