"""The default figure: what it shows, where it puts things, and that its text never collides
in a browser.  Each keyword that changes the figure has a test here."""

from __future__ import annotations

import re
import struct
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.backend import render_source
from torchrecorder.nodes import OpNode
from torchrecorder.renderer import GraphvizRenderer

from .backends import needs_backend, needs_dot
from .browser import launch, needs_chromium
from .dot_parse import parse_dot
from .zoo import all_cases
from .zoo.session import Zoo

SVG = "{http://www.w3.org/2000/svg}"
ZOO = [case.name for case in all_cases()]
DEPTHS = (1, 2, 256)

# JavaScript run on an SVG in Chromium: every pair of text runs that share a line (their
# boxes overlap vertically by half the smaller one) and lie closer than an eighth of the
# smaller font size (about half a space), with the browser's own font metrics.
_CLOSE_RUNS = """() => {
  const runs = Array.from(document.querySelectorAll('text')).map(t => {
    const b = t.getBBox();
    return {x0: b.x, x1: b.x + b.width, y0: b.y, y1: b.y + b.height, text: t.textContent,
            size: parseFloat(t.getAttribute('font-size') || '14')};
  }).filter(r => r.text.trim() && r.x1 > r.x0);
  const close = [];
  for (let i = 0; i < runs.length; i++) {
    for (let j = i + 1; j < runs.length; j++) {
      const a = runs[i], b = runs[j];
      const overlap = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
      if (overlap < 0.5 * Math.min(a.y1 - a.y0, b.y1 - b.y0)) continue;
      const gap = Math.max(b.x0 - a.x1, a.x0 - b.x1);
      if (gap < Math.min(a.size, b.size) / 8) close.push([a.text, b.text, Math.round(gap * 10) / 10]);
    }
  }
  return close;
}"""


def _node_centres(svg: bytes) -> dict[str, float]:
    """Node id -> the vertical centre of its shape, in SVG coordinates (down is larger)."""
    centres: dict[str, float] = {}
    for g in ET.fromstring(svg).iter(f"{SVG}g"):
        if g.get("class") != "node":
            continue
        title = g.find(f"{SVG}title")
        ys = [float(y) for shape in g.iter() if shape.tag in (f"{SVG}polygon", f"{SVG}path")
              for y in re.findall(r"[-\d.]+,([-\d.]+)", shape.get("points") or shape.get("d") or "")]
        if title is not None and title.text and ys:
            centres[title.text] = (min(ys) + max(ys)) / 2
    return centres


@pytest.fixture(scope="module")
def browser_page() -> Iterator[Any]:
    for browser in launch():
        tab = browser.new_page()
        yield tab
        tab.close()


@needs_dot
@needs_chromium
@pytest.mark.parametrize("name", ZOO)
def test_inputs_on_top_outputs_at_the_bottom_and_no_text_runs_touch(zoo: Zoo, name: str,
                                                                   browser_page: Any) -> None:
    rec = zoo.recorded(name).rec
    for depth in DEPTHS:
        source = torchrecorder.make_dot(rec, depth).source
        dot = parse_dot(source)
        inputs, outputs = dot.ranks.get("source", []), dot.ranks.get("sink", [])
        svg = render_source(source, "svg")
        centres = _node_centres(svg)
        others = [y for node, y in centres.items() if node not in inputs and node not in outputs]
        for node in inputs:
            assert centres[node] <= min(others, default=centres[node]) + 0.5, (name, depth, node)
        for node in outputs:
            assert centres[node] >= max(others, default=centres[node]) - 0.5, (name, depth, node)
        browser_page.set_content(svg.decode())
        assert browser_page.evaluate(_CLOSE_RUNS) == [], (name, depth)


def test_every_root_input_and_output_is_ranked(zoo: Zoo) -> None:
    rec = zoo.recorded("MLP").rec
    dot = parse_dot(torchrecorder.make_dot(rec, 1).source)
    assert dot.ranks == {"source": ["input@x"], "sink": ["net.4@out"]}


@pytest.mark.parametrize("name", ZOO)
def test_no_drawn_op_floats_without_an_input(zoo: Zoo, name: str) -> None:
    rec = zoo.recorded(name).rec
    for depth in DEPTHS:
        r = GraphvizRenderer(rec, depth)
        r.render()
        fed = {b.key for _, b in r.drawn_edges()}
        drawn_ops = [n.key for n in _drawn(r) if isinstance(n, OpNode)]
        assert all(k in fed for k in drawn_ops), (name, depth, [k for k in drawn_ops if k not in fed])


def _drawn(r: GraphvizRenderer) -> list[Any]:
    out, todo = [], list(r.children(r.rec.context))
    while todo:
        node = todo.pop()
        out.append(node)
        if r.projection.is_expanded(node):
            todo.extend(r.children(node))
    return out


class Norm(nn.Module):
    """A leaf written as several operations (an RMSNorm)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = Norm()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(self.norm(x))


class Net(nn.Module):
    """A block with a leaf inside, and the same leaf kind directly at the top."""

    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.norm = Norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.block(x))


def test_a_leaf_module_is_one_box_at_every_depth() -> None:
    rec = torchrecorder.record(Net(), "net", (1, 8))
    for depth in (2, 3, 256):
        dot = parse_dot(torchrecorder.make_dot(rec, depth).source)
        assert "cluster_norm" not in dot.clusters and "norm" in dot.nodes, depth
        assert "block.norm" in dot.nodes and not any(n.startswith("norm/") for n in dot.nodes)
    opened = parse_dot(torchrecorder.make_dot(rec, 256, expand_leaves=True).source)
    assert {"cluster_norm", "cluster_block.norm"} <= set(opened.clusters)
    assert any(n.startswith("norm/") for n in opened.nodes)


class Heads(nn.Module):
    """Attention's head split: view and transpose between two layers, then a matmul."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 16)
        self.out = nn.Linear(16, 16)
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.qkv(x).view(1, 4, 4, 4).transpose(1, 2)
        att = (q @ q.transpose(-1, -2)) * self.scale.expand(1)
        return self.out(att.transpose(1, 2).reshape(1, 4, 16))


def test_data_movement_ops_are_named_on_their_edge() -> None:
    rec = torchrecorder.record(Heads(), "heads", (1, 4, 16))
    r = GraphvizRenderer(rec, 1)
    source = r.render().source
    ops = {n.op for n in _drawn(r) if isinstance(n, OpNode)}
    assert ops == {"matmul", "mul"}, ops
    qkv_to_matmul = r.edge_ops(rec.nodes["qkv"], rec.nodes["heads/matmul"])
    assert [op.op for op in qkv_to_matmul] == ["view", "transpose"]
    assert "view · transpose" in source
    # the buffer's expand reads no drawn input: left out, with its edge
    assert "heads/expand" not in source
    every = GraphvizRenderer(rec, 1, all_ops=True)
    every_source = every.render().source
    every_ops = {n.op for n in _drawn(every) if isinstance(n, OpNode)}
    assert {"view", "transpose", "reshape", "expand", "matmul"} <= every_ops
    assert "view · transpose" not in every_source


def test_ops_show_their_output_shape_where_it_changes() -> None:
    rec = torchrecorder.record(Heads(), "heads", (1, 4, 16))
    source = torchrecorder.make_dot(rec, 1, all_ops=True).source
    lines = {m.group(1): m.group(0) for m in re.finditer(r'^\t+"(heads/[^"]+)" \[.*$', source, re.M)}
    assert "1×4×4×4" in lines["heads/transpose"]  # the head split
    assert "1×4×4×4" in lines["heads/matmul"]
    assert "<TABLE" not in lines["heads/mul"].split("label=")[1].split(">")[0]  # same shape as its input


def test_edge_shapes_where_they_change_or_as_asked() -> None:
    rec = torchrecorder.record(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), "mlp", (1, 4))
    changed = parse_dot(torchrecorder.make_dot(rec, 1).source)
    labels = [re.sub(r"<[^<>]*>", "", a.get("label", "")).strip("<>") for a in changed.edge_attrs]
    assert labels.count("1×8") == 1 and "1×2" not in labels  # ReLU keeps 1×8; the output node says 1×2
    every = parse_dot(torchrecorder.make_dot(rec, 1, edge_shapes="all").source)
    every_labels = [re.sub(r"<[^<>]*>", "", a.get("label", "")).strip("<>") for a in every.edge_attrs]
    assert every_labels.count("1×8") == 2
    none = parse_dot(torchrecorder.make_dot(rec, 1, edge_shapes="none").source)
    assert not any("label" in a for a in none.edge_attrs)
    assert all("tooltip" in a for a in none.edge_attrs[1:-1])
    with pytest.raises(ValueError, match="edge_shapes"):
        torchrecorder.make_dot(rec, 1, edge_shapes="some")


def test_param_shapes_on_request() -> None:
    rec = torchrecorder.record(nn.Sequential(nn.Linear(4, 8)), "mlp", (1, 4))
    assert "weight: 8×4" not in torchrecorder.make_dot(rec, 1).source
    assert "weight: 8×4" in torchrecorder.make_dot(rec, 1, param_shapes=True).source


def test_direction_and_graph_keywords_set_the_graph() -> None:
    rec = torchrecorder.record(nn.Sequential(nn.Linear(4, 2)), "mlp", (1, 4))
    for kw in ({"direction": "LR"}, {"direction": "lr"}, {"rankdir": "LR"},
               {"graph_attrs": {"rankdir": "LR"}}):
        source = torchrecorder.make_dot(rec, 1, **kw).source
        assert re.search(r"graph \[[^]]*rankdir=LR", source), kw
        assert not any("rankdir" in attrs for attrs in parse_dot(source).node_attrs.values()), kw
    source = torchrecorder.make_dot(rec, 1, dpi=300, size="3.5,8").source
    assert re.search(r"graph \[[^]]*dpi=300", source) and 'size="3.5,8"' in source
    with pytest.raises(ValueError, match="direction"):
        torchrecorder.make_dot(rec, 1, direction="up")


def _png_size(path: str) -> tuple[int, int]:
    with open(path, "rb") as fh:
        head = fh.read(24)
    width, height = struct.unpack(">II", head[16:24])
    return width, height


@needs_backend
def test_png_is_drawn_at_192_dpi_unless_told(tmp_path: Path) -> None:
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    sharp = torchrecorder.render_network(net, "sharp", (1, 4), tmp_path, fmt="png")
    plain = torchrecorder.render_network(net, "plain", (1, 4), tmp_path, fmt="png", dpi=96)
    (w2, h2), (w1, h1) = _png_size(sharp), _png_size(plain)
    assert abs(w2 / w1 - 2) < 0.05 and abs(h2 / h1 - 2) < 0.05, (w2, w1, h2, h1)


def test_paper_preset_is_grey_and_serif() -> None:
    rec = torchrecorder.record(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), "mlp", (1, 4))
    dot = parse_dot(torchrecorder.make_dot(rec, 1, preset="paper").source)
    for attrs in dot.node_attrs.values():
        assert attrs["fontname"].strip('"') == "Times-Roman"
        fill = attrs.get("fillcolor", '"#ffffff"').strip('"').lower()
        if fill != "white":
            r, g, b = (int(fill[i:i + 2], 16) for i in (1, 3, 5))
            assert r == g == b, fill


def test_command_line_drawing_options(tmp_path: Path) -> None:
    from torchrecorder.__main__ import main

    model = tmp_path / "tiny.py"
    model.write_text("import torch\n"
                     "def make():\n    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())\n")
    out = tmp_path / "tiny.dot"
    assert main([f"{model}:make", "-s", "1,4", "-o", str(out), "--direction", "LR", "--preset", "paper",
                 "--tensor-nodes"]) == 0
    text = out.read_text()
    assert "rankdir=LR" in text and "Times-Roman" in text and '"0@out"' in text


def _svg_area(svg: bytes) -> float:
    root = ET.fromstring(svg)
    return float(root.get("width", "0pt")[:-2]) * float(root.get("height", "0pt")[:-2])


@needs_dot
@pytest.mark.parametrize("name", ["cnn", "transformer_encoder"])
def test_default_figure_is_at_most_as_large_as_torchviews_at_depth_two(name: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Both figures measured with the same fonts, DejaVu alone (what every machine has; where
    Liberation is installed too, ours would be laid out with its narrower Helvetica metrics
    and torchview's with DejaVu)."""
    torchview = pytest.importorskip("torchview")
    import sys

    from .figure_checks import font_env

    for key, value in font_env("dejavu", tmp_path).items():
        monkeypatch.setenv(key, value)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    try:
        from figure_models import MODELS
    finally:
        sys.path.pop(0)
    net, args = MODELS[name]()
    ours = render_source(torchrecorder.make_dot(torchrecorder.record(net, name, input_data=args), 2).source,
                         "svg")
    theirs = torchview.draw_graph(net, input_data=list(args), depth=2, expand_nested=True)
    theirs_svg = render_source(theirs.visual_graph.source, "svg")
    # cluster titles drawn as nodes on a rank of their own (no edge crosses them) cost height:
    # the TransformerEncoder was 1.40x torchview's area while edges entering a cluster passed
    # its title's rank outside it, 1.27x with a title as wide as its type and count; a title
    # no wider than the cluster's contents and tighter spacing bring it to at most torchview's
    assert _svg_area(ours) <= _svg_area(theirs_svg)
