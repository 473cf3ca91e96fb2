"""The layers in use: a graph built by hand draws, invariants raise (also under ``python -O``),
a loaded graph builds no engine, and every documented renderer and styler hook shapes the output."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder import BaseNode, Graph, GraphError, LayerNode, OpNode, TensorNode
from torchrecorder.renderer import GraphvizRenderer, GraphvizStyler, MermaidRenderer

from .dot_parse import parse_dot


def _hand_built() -> Graph:
    """input -> net[fc -> relu] -> output, built without torch."""
    g = Graph("hand")
    g.insert(LayerNode("hand", depth=0, type_name="Net"), "hand")
    x = g.insert(TensorNode("x", depth=0, shape=(1, 4), dtype="float32", role="input"), "input:x")
    fc = g.insert(LayerNode("fc", depth=1, parent="hand", type_name="Linear", path="fc"), "fc")
    relu = g.insert(OpNode("relu", depth=1, parent="hand", output_shapes=[(1, 2)]), "hand/relu")
    out = g.insert(TensorNode("y", depth=0, shape=(1, 2), dtype="float32", role="output"), "out")
    for a, b in ((x, fc), (fc, relu), (relu, out)):
        g.connect(a.key, b.key)
    return g


def test_a_graph_built_by_hand_draws() -> None:
    g = _hand_built()
    g.lint()
    parsed = parse_dot(GraphvizRenderer(g, 2).render().source)
    assert parsed.edges == [("input@x", "fc"), ("fc", "hand/relu"), ("hand/relu", "out")]
    assert parsed.clusters == ["cluster_hand"]
    assert "n_input_x --> n_fc" in MermaidRenderer(g, 2).render()
    collapsed = parse_dot(GraphvizRenderer(g, 0).render().source)
    assert collapsed.edges == [("input@x", "hand"), ("hand", "out")]


@pytest.mark.parametrize("breakage", ["self_loop", "dangling_parent", "missing_subnet", "bad_edge"])
def test_lint_raises_graph_error(breakage: str) -> None:
    g = _hand_built()
    if breakage == "self_loop":
        g.links.add(("fc", "fc"))
    elif breakage == "dangling_parent":
        g.nodes["hand/relu"].parent_key = "nowhere"
    elif breakage == "missing_subnet":
        g.nodes["hand"].subnet_keys.discard("fc")  # type: ignore[attr-defined]
    else:
        g.links.add(("fc", "ghost"))
    with pytest.raises(GraphError) as info:
        g.lint()
    assert isinstance(info.value, ValueError)


def _broken_documents() -> dict[str, str]:
    rec = torchrecorder.record(nn.Sequential(nn.Linear(3, 2), nn.ReLU()), "net", (1, 3))
    doc = json.loads(rec.to_json())
    loop = json.loads(rec.to_json())
    loop["edges"].append(["0", "0"])
    dangling = json.loads(rec.to_json())
    node = next(n for n in dangling["nodes"] if n["key"] == "1")
    node["parent"] = "nowhere"
    return {"self_loop": json.dumps(loop), "dangling_parent": json.dumps(dangling),
            "valid": json.dumps(doc)}


def test_load_json_rejects_broken_graphs_even_under_python_O() -> None:
    """``lint`` raises, never asserts: ``python -O`` strips asserts, and must reject the same."""
    docs = _broken_documents()
    for name in ("self_loop", "dangling_parent"):
        with pytest.raises(GraphError):
            torchrecorder.loads_json(docs[name])
    script = textwrap.dedent("""
        import json, sys
        import torchrecorder
        docs = json.load(sys.stdin)
        assert not __debug__  # this really runs with -O (this assert is stripped, __debug__ is False)
        results = {}
        for name, text in docs.items():
            try:
                torchrecorder.loads_json(text)
                results[name] = "accepted"
            except torchrecorder.GraphError as exc:
                results[name] = "GraphError: " + str(exc)
        print(json.dumps(results))
    """)
    proc = subprocess.run([sys.executable, "-O", "-c", script], input=json.dumps(docs), text=True,
                          capture_output=True, check=True)
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert results["valid"] == "accepted"
    assert results["self_loop"].startswith("GraphError") and "self-loop" in results["self_loop"]
    assert results["dangling_parent"].startswith("GraphError") and "'1'" in results["dangling_parent"]


def test_a_loaded_graph_builds_no_engine() -> None:
    rec = torchrecorder.record(nn.Sequential(nn.Linear(3, 2), nn.ReLU()), "net", (1, 3))
    loaded = torchrecorder.loads_json(rec.to_json())
    assert isinstance(loaded, torchrecorder.Recorder)
    assert loaded._engine is None
    assert torchrecorder.make_dot(loaded, 1).source == torchrecorder.make_dot(rec, 1).source
    str(loaded), repr(loaded), loaded.to_json()
    assert loaded._engine is None


# ------------------------------------------------------------------ every hook counts
class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(x) + x)


@pytest.fixture(scope="module")
def rec() -> torchrecorder.Recorder:
    return torchrecorder.record(_Net(), "net", (1, 4))


def _source(rec: torchrecorder.Recorder, renderer_cls: type[GraphvizRenderer] = GraphvizRenderer,
            styler_cls: type[GraphvizStyler] = GraphvizStyler, **kw: Any) -> str:
    kw.setdefault("tensor_nodes", True)
    return str(renderer_cls(rec, 2, styler_cls, **kw).render().source)


class _NodeMark(GraphvizRenderer):
    def render_node(self, g: Any, node: BaseNode) -> None:
        g.body.append(f"\t// node {node.key}\n")
        super().render_node(g, node)


class _ClusterMark(GraphvizRenderer):
    def render_recursive_node(self, g: Any, node: LayerNode) -> None:
        g.body.append(f"\t// cluster {node.key}\n")
        super().render_recursive_node(g, node)


class _EdgeMark(GraphvizRenderer):
    def render_edge(self, g: Any, fnode: BaseNode, tnode: BaseNode) -> None:
        g.body.append(f"\t// edge {fnode.key} {tnode.key}\n")
        super().render_edge(g, fnode, tnode)


class _NoClusters(GraphvizRenderer):
    def is_expanded(self, node: BaseNode) -> bool:
        return isinstance(node, LayerNode) and node.depth == 0


class _Ids(GraphvizRenderer):
    def node_id(self, node: BaseNode) -> str:
        return "N_" + super().node_id(node).upper()


class _NodeStyle(GraphvizStyler):
    def style_node(self, node: BaseNode) -> dict[str, str]:
        return {**super().style_node(node), "color": "hookred"}


class _ClusterStyle(GraphvizStyler):
    def style_cluster(self, node: LayerNode) -> dict[str, str]:
        return {**super().style_cluster(node), "bgcolor": "hookblue"}


class _EdgeStyle(GraphvizStyler):
    def style_edge(self, fnode: BaseNode, tnode: BaseNode) -> dict[str, str]:
        return {**super().style_edge(fnode, tnode), "color": "hookgreen"}


class _Label(GraphvizStyler):
    def label(self, node: BaseNode) -> str:
        return f"L:{node.key}"


class _Tooltip(GraphvizStyler):
    def tooltip(self, node: BaseNode) -> str:
        return "hooktip"


class _Kind(GraphvizStyler):
    def kind_of(self, node: BaseNode) -> str:
        return "op"


class _Params(GraphvizStyler):
    def param_lines(self, node: LayerNode) -> list[str]:
        return ["hookparams"]


@pytest.mark.parametrize(("renderer_cls", "styler_cls", "kw", "check"), [
    (_NodeMark, GraphvizStyler, {}, lambda s: "// node block.0" in s),
    (_ClusterMark, GraphvizStyler, {}, lambda s: "// cluster block" in s),
    (_EdgeMark, GraphvizStyler, {}, lambda s: "// edge block.0 block.0:out" in s),
    (_NoClusters, GraphvizStyler, {}, lambda s: "cluster_block" not in s and "cluster_net" in s),
    (_Ids, GraphvizStyler, {}, lambda s: '"N_BLOCK.0"' in s),
    (GraphvizRenderer, _NodeStyle, {}, lambda s: "color=hookred" in s),
    (GraphvizRenderer, _ClusterStyle, {}, lambda s: "bgcolor=hookblue" in s),
    (GraphvizRenderer, _EdgeStyle, {}, lambda s: "color=hookgreen" in s),
    (GraphvizRenderer, _EdgeStyle, {"tensor_nodes": False}, lambda s: "color=hookgreen" in s),
    (GraphvizRenderer, _Label, {}, lambda s: 'label="L:block.0"' in s),
    (GraphvizRenderer, _Tooltip, {}, lambda s: "tooltip=hooktip" in s),
    (GraphvizRenderer, _Kind, {}, lambda s: s.count('fillcolor="#ede4f3"') > 5),
    (GraphvizRenderer, _Params, {}, lambda s: "hookparams" in s),
], ids=["render_node", "render_recursive_node", "render_edge", "is_expanded", "node_id", "style_node",
        "style_cluster", "style_edge", "style_tensor_edge", "label", "tooltip", "kind_of", "param_lines"])
def test_each_documented_hook_changes_the_output(renderer_cls: type[GraphvizRenderer],
                                                 styler_cls: type[GraphvizStyler], kw: dict[str, Any],
                                                 check: Any, rec: torchrecorder.Recorder) -> None:
    plain = _source(rec, **kw)
    hooked = _source(rec, renderer_cls, styler_cls, **kw)
    assert hooked != plain
    assert check(hooked), hooked
    parse_dot(hooked)  # still DOT


def test_style_repeated_is_a_hook_too() -> None:
    class Marked(GraphvizStyler):
        def style_repeated(self, node: LayerNode, run: Any, expanded: bool) -> dict[str, str]:
            return {**super().style_repeated(node, run, expanded), "color": "hookrepeat"}

    net = nn.Sequential(*[nn.Linear(4, 4) for _ in range(3)])
    rec = torchrecorder.record(net, "net", (1, 4))
    source = torchrecorder.make_dot(rec, 1, Marked, fold_repeats=True).source
    assert "color=hookrepeat" in source and "×3" in source
