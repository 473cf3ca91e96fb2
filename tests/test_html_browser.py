"""The HTML view driven in headless Chromium: it draws, opens and closes modules, searches,
shows details, unfolds repeats, downloads, never runs a name and never touches the network."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder

from .browser import launch, needs_chromium, open_page, wait_layouts, watch
from .dot_parse import parse_dot
from .test_html import EVIL, Evil

pytestmark = needs_chromium


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, 2 * width)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(self.act(self.fc1(x)))


class Stack(nn.Module):
    """An embedding, nine identical chained blocks (folded by default), a head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(6, 8)
        self.blocks = nn.Sequential(*[Block(8) for _ in range(9)])
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embed(x)).relu())


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


@pytest.fixture(scope="module")
def stack_rec() -> torchrecorder.Recorder:
    torch.manual_seed(0)
    return torchrecorder.record(Stack(), "stack", (2, 6))


@pytest.fixture(scope="module")
def stack_file(stack_rec: torchrecorder.Recorder, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("html") / "stack.html"
    torchrecorder.make_html(stack_rec).save(path)
    return path


def _open(browser: Any, path: Path) -> tuple[Any, Any]:
    return open_page(browser, path, accept_downloads=True)


def _drawn(page: Any) -> tuple[set[str], set[str]]:
    """Ids of the drawn nodes and clusters (``n3``, ``c0``)."""
    nodes = set(page.eval_on_selector_all("#tr-canvas g.node", "els => els.map(e => e.id)"))
    # not t3 (the title of cluster c3), l5 (the label of an edge), v5_1 (a point an edge passes)
    nodes = {i for i in nodes if not i.startswith(("t", "l", "v"))}
    clusters = set(page.eval_on_selector_all("#tr-canvas g.cluster", "els => els.map(e => e.id)"))
    return nodes, clusters


def _index(page: Any, path: str) -> int:
    """The page's node number of the module at dotted ``path``."""
    return int(page.evaluate(
        """p => { const D = JSON.parse(document.getElementById('tr-data').textContent);
                  return D.nodes.findIndex(r => { const i = JSON.parse(D.strings[r[6]]);
                                                  return i.kind === 'module' && i.path === p; }); }""", path))


def _click(page: Any, selector: str) -> None:
    count = page.evaluate("__tr.layouts")
    page.click(selector)
    wait_layouts(page, count)


def test_loads_without_errors_or_requests(tr_browser: Any, stack_file: Path) -> None:
    page, w = _open(tr_browser, stack_file)
    assert page.evaluate("__tr.firstPaint") > 0
    nodes, clusters = _drawn(page)
    assert clusters == {"c0"} and len(nodes) == 6  # input, embed, blocks, relu, head, output
    assert w.console_errors == [] and w.page_errors == [] and w.dialogs == []
    assert w.outside_requests(stack_file.as_uri()) == []
    # the page itself, and the layout worker made from its inlined viz.js (a blob URL)
    assert [u for u in w.requests if not u.startswith("blob:")] == [stack_file.as_uri()]
    assert len(w.requests) <= 2
    page.close()


def test_expand_and_collapse(tr_browser: Any, stack_file: Path) -> None:
    page, w = _open(tr_browser, stack_file)
    blocks = _index(page, "blocks")
    nodes, clusters = _drawn(page)
    assert f"n{blocks}" in nodes and f"c{blocks}" not in clusters
    _click(page, f"#n{blocks}")  # open: the box becomes a cluster of its (folded) blocks
    nodes, clusters = _drawn(page)
    assert f"c{blocks}" in clusters and f"n{blocks}" not in nodes
    inside = page.evaluate(
        "() => document.getElementById('tr-canvas').querySelectorAll('g.node[id^=n]').length")
    assert inside == 6  # embed, relu, head, input, output, and the first block drawn ×9
    assert page.locator(f"#t{blocks} text").first.text_content() == "blocks"
    _click(page, f"#t{blocks} text")  # close it again by its title (a node above the cluster)
    assert _drawn(page) == ({f"n{blocks}", *(_drawn(page)[0] - {f'n{blocks}'})}, {"c0"})
    assert f"c{blocks}" not in _drawn(page)[1]
    assert w.page_errors == [] and w.console_errors == []
    page.close()


def test_expand_all_then_collapse_all_is_the_first_view(tr_browser: Any, stack_file: Path) -> None:
    page, w = _open(tr_browser, stack_file)
    first = page.evaluate("__tr.dot")
    _click(page, "#tr-expand-all")
    expanded = page.evaluate("__tr.dot")
    assert len(parse_dot(expanded).clusters) > len(parse_dot(first).clusters)
    _click(page, "#tr-collapse-all")
    assert page.evaluate("__tr.dot") == first
    assert w.page_errors == []
    page.close()


def test_search_opens_the_path_and_highlights(tr_browser: Any, stack_file: Path) -> None:
    page, _ = _open(tr_browser, stack_file)
    count = page.evaluate("__tr.layouts")
    page.fill("#tr-search", "blocks.4.fc2")
    page.press("#tr-search", "Enter")
    wait_layouts(page, count)
    target = _index(page, "blocks.4.fc2")
    page.wait_for_selector(f"#n{target}.tr-hit")
    assert page.text_content("#tr-found") == "1 of 1"
    assert "blocks.4.fc2" in page.text_content("#tr-details")
    # its block and the module holding the blocks are open; the run is unfolded to show block 4
    _, clusters = _drawn(page)
    assert {f"c{_index(page, 'blocks')}", f"c{_index(page, 'blocks.4')}"} <= clusters
    page.close()


def test_details_show_shapes(tr_browser: Any, stack_file: Path) -> None:
    page, _ = _open(tr_browser, stack_file)
    head = _index(page, "head")
    page.hover(f"#n{head}")
    text = page.text_content("#tr-details")
    assert "head" in text and "Linear" in text
    assert "2×8 float32" in text and "2×3 float32" in text  # its input and output
    assert "weight" in text and "3×8" in text and "27" in text  # parameters: 3×8 + 3
    # its cost: 2 * 2 * 8 * 3 FLOPs, 27 float32 parameters, a 2×3 float32 output
    assert "cost: 96 FLOPs · params 108 B · out 24 B" in text
    page.close()


def test_the_colour_menu_colours_calls_by_their_cost(tr_browser: Any, stack_file: Path) -> None:
    page, w = _open(tr_browser, stack_file)
    head = _index(page, "head")
    fill = f"#n{head} path, #n{head} polygon"

    def head_fill() -> str:
        return str(page.eval_on_selector(fill, "e => e.getAttribute('fill')"))

    plain = head_fill()
    options = page.eval_on_selector_all("#tr-colour option", "els => els.map(e => e.value)")
    assert options == ["", "flops", "activation_bytes", "param_bytes"]
    count = page.evaluate("__tr.layouts")
    page.select_option("#tr-colour", "flops")
    wait_layouts(page, count)
    assert head_fill() != plain and "FLOPs per call (log scale)" in page.text_content("#tr-canvas")
    count = page.evaluate("__tr.layouts")
    page.select_option("#tr-colour", "")
    wait_layouts(page, count)
    assert head_fill() == plain and "FLOPs per call" not in page.text_content("#tr-canvas")
    assert w.console_errors == [] and w.page_errors == []
    page.close()


def test_details_show_the_line_of_code_and_an_editor_link(tr_browser: Any, stack_file: Path) -> None:
    page, _ = _open(tr_browser, stack_file)
    page.hover(f"#n{_index(page, 'head')}")
    code = "return self.head(self.blocks(self.embed(x)).relu())"
    line = next(i for i, t in enumerate(Path(__file__).read_text().splitlines(), 1) if t.strip() == code)
    assert page.text_content("#tr-details .tr-source pre") == code
    link = page.query_selector("#tr-details .tr-source a")
    assert link is not None and link.text_content() == f"{Path(__file__).name}:{line}"
    assert link.get_attribute("href") == f"vscode://file{Path(__file__).absolute().as_posix()}:{line}"
    page.close()


def test_folded_block_expands_into_its_repeats(tr_browser: Any, stack_file: Path) -> None:
    page, _ = _open(tr_browser, stack_file)
    blocks = _index(page, "blocks")
    _click(page, f"#n{blocks}")
    lead = _index(page, "blocks.0")
    assert "×9" in page.text_content(f"#n{lead}")
    _click(page, f"#n{lead}")  # a block opens too; select it and unfold the run from the panel
    page.mouse.move(1, 1)  # off the drawing: the panel shows the selected block again
    count = page.evaluate("__tr.layouts")
    page.click("#tr-details button[data-action=fold]")
    wait_layouts(page, count)
    drawn = [_index(page, f"blocks.{k}") for k in range(9)]
    nodes, clusters = _drawn(page)
    assert all(f"n{i}" in nodes or f"c{i}" in clusters for i in drawn)
    assert "×9" not in page.text_content("#tr-canvas")
    page.close()


def test_downloads_are_the_current_view(tr_browser: Any, stack_file: Path, tmp_path: Path) -> None:
    page, w = _open(tr_browser, stack_file)
    _click(page, f"#n{_index(page, 'blocks')}")
    with page.expect_download() as got:
        page.click("#tr-svg")
    svg_path = tmp_path / "view.svg"
    got.value.save_as(svg_path)
    assert got.value.suggested_filename == "stack.svg"
    root = ET.parse(svg_path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = {t.text for t in root.iter("{http://www.w3.org/2000/svg}text")}
    assert {"0 … 8", "×9", "embed", "head"} <= texts  # a folded box: its blocks as their boxes read
    # it carries the web font it is drawn in (few machines have Arimo: without it a browser drew
    # the file in its default serif), and names fonts of the same widths after it
    families = {t.get("font-family") for t in root.iter("{http://www.w3.org/2000/svg}text")}
    assert families == {"Arimo, Liberation Sans, Arial, Helvetica, sans-serif"}
    style = "".join(e.text or "" for e in root.iter("{http://www.w3.org/2000/svg}style"))
    assert style.count("@font-face") == 2 and 'font-family: "Arimo"' in style
    assert "data:font/woff2;base64," in style and "Tinos" not in style  # the families it uses
    with page.expect_download() as got:
        page.click("#tr-png")
    png_path = tmp_path / "view.png"
    got.value.save_as(png_path)
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert w.outside_requests(stack_file.as_uri()) == [] and w.page_errors == []
    page.close()


def test_injected_names_stay_text(tr_browser: Any, tmp_path: Path) -> None:
    rec = torchrecorder.record(Evil(), "</script><script>alert(3)</script>", (1, 3))
    path = tmp_path / "evil.html"
    torchrecorder.make_html(rec, render_depth=2).save(path)
    page, w = _open(tr_browser, path)
    _click(page, "#tr-expand-all")
    assert EVIL in page.text_content("#tr-canvas")
    assert "</script><script>alert(2)</script>" in page.text_content("#tr-canvas")
    page.hover(f"#n{_index(page, EVIL)}")
    assert EVIL in page.text_content("#tr-details")
    assert page.text_content("#tr-title") == "</script><script>alert(3)</script>"
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert w.dialogs == [] and w.page_errors == []
    assert w.outside_requests(path.as_uri()) == []
    page.close()


def test_notebook_iframe_draws(tr_browser: Any, stack_rec: torchrecorder.Recorder, tmp_path: Path) -> None:
    outer = tmp_path / "notebook.html"
    outer.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
                     + stack_rec.show()._repr_html_() + "</body></html>", encoding="utf-8")
    page = tr_browser.new_page()
    w = watch(page)
    page.goto(outer.as_uri())
    frame = page.frames[1]
    wait_layouts(frame, 0)
    assert frame.evaluate("document.querySelectorAll('#tr-canvas g.node[id^=n]').length") == 6
    assert w.outside_requests(outer.as_uri()) == [] and w.page_errors == []
    page.close()


def _without_titles(dot: Any) -> Any:
    """``dot`` (parsed) without the nodes that draw cluster titles (tested apart)."""
    from torchrecorder.renderer.graphviz import TITLE_SUFFIX

    dot.nodes = [n for n in dot.nodes if not n.endswith(TITLE_SUFFIX)]
    dot.node_attrs = {k: v for k, v in dot.node_attrs.items() if not k.endswith(TITLE_SUFFIX)}
    kept = [(e, a) for e, a in zip(dot.edges, dot.edge_attrs, strict=True) if a.get("style") != "invis"]
    dot.edges, dot.edge_attrs = [e for e, _ in kept], [a for _, a in kept]
    return dot


def _dot_at_depth(page: Any, depth: int) -> Any:
    """The DOT the page lays out once its depth control is set to ``depth``."""
    count = page.evaluate("__tr.layouts")
    page.fill("#tr-depth", str(depth))
    page.dispatch_event("#tr-depth", "change")
    wait_layouts(page, count)
    return parse_dot(page.evaluate("__tr.dot"))


@pytest.mark.parametrize("fold", [True, False])
def test_every_depth_draws_what_make_dot_draws(tr_browser: Any, stack_rec: torchrecorder.Recorder,
                                               tmp_path: Path, fold: bool) -> None:
    """At each depth the page's DOT has make_dot's nodes, edges and labels (folded or not)."""
    path = tmp_path / "stack.html"
    torchrecorder.make_html(stack_rec, fold_repeats="auto" if fold else False).save(path)
    page, _ = _open(tr_browser, path)
    for depth in range(4):
        ours = _without_titles(_dot_at_depth(page, depth))
        dot = torchrecorder.make_dot(stack_rec, depth, fold_repeats="auto" if fold else False)
        want = _without_titles(parse_dot(dot.source))
        assert set(ours.nodes) == set(want.nodes), depth
        assert sorted(ours.edges) == sorted(want.edges), depth
        assert len(ours.clusters) == len(want.clusters), depth
        for key, attrs in want.node_attrs.items():
            assert ours.node_attrs[key]["label"] == attrs["label"], (depth, key)
        labels = {e: a.get("label") for e, a in zip(want.edges, want.edge_attrs, strict=True)}
        assert {e: a.get("label") for e, a in zip(ours.edges, ours.edge_attrs, strict=True)} == labels, depth
    page.close()


@pytest.mark.parametrize(("case", "tensor_nodes"), [
    ("DataclassOutput", False),       # the network collapsed: its output's tensor is inside the box
    ("PositionalNonTensors", True),   # tensors drawn between folded blocks are hidden with them
    ("TorchTransformer", True),
    ("AttentionBlock", False),
    ("TinyUNet", False),
])
def test_zoo_depths_draw_what_make_dot_draws(tr_browser: Any, tmp_path: Path, case: str,
                                             tensor_nodes: bool) -> None:
    from .zoo.handwritten import CASES

    spec = next(c for c in CASES if c.name == case)
    args, kwargs = spec.inputs()
    rec = torchrecorder.record(spec.build(), case, input_data=args, input_kwargs=kwargs)
    path = tmp_path / f"{case}.html"
    torchrecorder.make_html(rec, 0, fold_repeats=True, tensor_nodes=tensor_nodes).save(path)
    page, w = _open(tr_browser, path)
    for depth in range(4):
        ours = _without_titles(_dot_at_depth(page, depth))
        dot = torchrecorder.make_dot(rec, depth, fold_repeats=True, tensor_nodes=tensor_nodes)
        want = _without_titles(parse_dot(dot.source))
        assert set(ours.nodes) == set(want.nodes), depth
        assert sorted((e, a.get("label")) for e, a in zip(ours.edges, ours.edge_attrs, strict=True)) == \
            sorted((e, a.get("label")) for e, a in zip(want.edges, want.edge_attrs, strict=True)), depth
    assert w.page_errors == [] and w.console_errors == []
    page.close()


def _contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two ``#rrggbb`` colours."""
    from torchrecorder.renderer.activations import _contrast as contrast

    return contrast(a, b)


_NAMED = {"white": "#ffffff", "black": "#000000"}


def test_coloured_boxes_keep_their_text_readable(tr_browser: Any, stack_file: Path) -> None:
    """Under every colouring of the Colour menu, each text of a coloured box (its name, and
    its grey type line too) keeps a contrast of 4.5 with the box's fill."""
    page, w = _open(tr_browser, stack_file)
    count = page.evaluate("__tr.layouts")
    page.click("#tr-expand-all")
    count = wait_layouts(page, count, settled=True)
    options = page.eval_on_selector_all("#tr-colour option", "els => els.map(e => e.value)")
    checked = 0
    for stat in options[1:]:
        page.select_option("#tr-colour", stat)
        count = wait_layouts(page, count, settled=True)
        boxes = page.evaluate("""() => [...document.querySelectorAll('#tr-canvas g.node')].map(g => {
            const shape = g.querySelector('path, polygon');
            return [shape ? shape.getAttribute('fill') : null,
                    [...g.querySelectorAll('text')].map(t => t.getAttribute('fill') || '#000000')];
        })""")
        for fill, texts in boxes:
            if not fill or fill in ("none", "white", "#ffffff", "transparent") or not texts:
                continue
            fill = _NAMED.get(fill, fill)
            if fill.startswith("#") and len(fill) == 7:
                for text in texts:
                    assert _contrast(fill, _NAMED.get(text, text)) >= 4.5, (stat, fill, text)
                    checked += 1
    assert checked > 10
    assert w.console_errors == [] and w.page_errors == []
    page.close()


@pytest.mark.parametrize("typed, shown", [("99", "3"), ("-3", "0"), ("1.5", "1"), ("", "0")])
def test_the_depth_field_shows_the_depth_drawn(tr_browser: Any, stack_file: Path, typed: str,
                                               shown: str) -> None:
    """A depth out of range or not a whole number is drawn clamped, and the field says so."""
    page, _ = _open(tr_browser, stack_file)
    count = page.evaluate("__tr.layouts")
    page.fill("#tr-depth", typed)
    page.focus("#tr-depth")
    page.dispatch_event("#tr-depth", "change")
    wait_layouts(page, count, settled=True)
    assert page.input_value("#tr-depth") == shown
    page.close()


def test_an_operation_is_headed_by_its_own_name(tr_browser: Any, stack_file: Path) -> None:
    """The panel of an operation names the operation, and the module call it ran in below."""
    page, w = _open(tr_browser, stack_file)
    count = page.evaluate("__tr.layouts")
    page.click("#tr-expand-all")
    wait_layouts(page, count, settled=True)
    ops = page.evaluate("""() => [...document.querySelectorAll('#tr-canvas g.node')]
        .filter(g => /^n\\d+$/.test(g.id) && g.querySelector('text')
                     && ['add', 'relu'].includes(g.querySelector('text').textContent))
        .map(g => [g.id, g.querySelector('text').textContent])""")
    assert {name for _, name in ops} == {"add", "relu"}
    for gid, name in ops:
        page.click(f"#tr-canvas g#{gid}")
        assert page.text_content("#tr-details h2") == name
        sub = page.text_content("#tr-details .tr-sub")  # "operation in blocks.0", "... in stack"
        assert sub.startswith("operation in ") and name not in sub
    assert w.console_errors == [] and w.page_errors == []
    page.close()


def test_the_panel_of_a_module_collapse_all_hid_still_opens_it(tr_browser: Any, stack_file: Path) -> None:
    """After a search and Collapse all, the module found stays in the panel: its Expand button
    opens the modules around it and the module itself (no dead button), the search counter is
    cleared, and Reset clears the panel."""
    page, w = _open(tr_browser, stack_file)
    count = page.evaluate("__tr.layouts")
    page.fill("#tr-search", "blocks.4")
    page.press("#tr-search", "Enter")
    count = wait_layouts(page, count, settled=True)
    assert page.text_content("#tr-found") == "1 of 4"
    page.click("#tr-collapse-all")
    count = wait_layouts(page, count, settled=True)
    block = _index(page, "blocks.4")
    assert page.query_selector(f"#n{block}, #c{block}") is None
    assert page.text_content("#tr-details h2") == "blocks.4" and page.text_content("#tr-found") == ""
    page.click("#tr-details button[data-action=toggle]")
    count = wait_layouts(page, count, settled=True)
    assert page.query_selector(f"#c{block}") is not None  # drawn, and open
    assert page.text_content("#tr-details button[data-action=toggle]") == "Collapse"
    page.fill("#tr-search", "blocks.4")
    page.press("#tr-search", "Enter")
    count = wait_layouts(page, count, settled=True)
    page.click("#tr-reset")
    wait_layouts(page, count, settled=True)
    assert page.query_selector("#tr-details h2") is None and page.text_content("#tr-found") == ""
    assert w.console_errors == [] and w.page_errors == []
    page.close()


def test_a_page_made_with_a_cost_stat_opens_on_that_menu_choice(
        tr_browser: Any, stack_rec: torchrecorder.Recorder, tmp_path: Path) -> None:
    """``make_html(rec, stat="flops")`` opens coloured by the Colour menu's "FLOPs", which the
    menu shows: "as drawn" takes it off and another choice replaces it (the colouring was drawn
    into every view, so another choice kept the FLOPs notes under its own legend)."""
    path = tmp_path / "flops.html"
    torchrecorder.make_html(stack_rec, stat="flops").save(path)
    page, w = _open(tr_browser, path)
    count = page.evaluate("__tr.layouts")
    assert page.input_value("#tr-colour") == "flops" and "FLOPs per call" in page.text_content("#tr-canvas")
    page.select_option("#tr-colour", "param_bytes")
    count = wait_layouts(page, count, settled=True)
    text = page.text_content("#tr-canvas")
    assert "parameter size" in text and "FLOPs" not in text
    page.select_option("#tr-colour", "")
    count = wait_layouts(page, count, settled=True)
    assert "log scale" not in page.text_content("#tr-canvas")
    page.click("#tr-reset")
    wait_layouts(page, count, settled=True)
    assert page.input_value("#tr-colour") == "flops" and "FLOPs per call" in page.text_content("#tr-canvas")
    assert w.console_errors == [] and w.page_errors == []
    page.close()
