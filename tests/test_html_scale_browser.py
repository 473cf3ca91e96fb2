"""The HTML view at LLM size, driven in headless Chromium: it keeps Python's drawing budget,
lays out in a Web Worker (the page answers meanwhile, a layout can be cancelled), and recovers
from a layout that fails, keeping the view drawn before."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import torchrecorder
from torchrecorder.errors import LargeDrawingWarning
from torchrecorder.projection.budget import budget_limits, drawn_size, edge_spans, layout_spans
from torchrecorder.renderer import GraphvizRenderer
from torchrecorder.renderer.html_page import script_json

from .browser import launch, needs_chromium, open_page
from .test_html_loops_browser import _rec as _loop_rec

transformers = pytest.importorskip("transformers")

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


def _llama(layers: int, width: int = 4096, heads: int = 32, kv_heads: int = 8, intermediate: int = 14336,
           vocab: int = 128256) -> torchrecorder.Recorder:
    """A Llama (8B dimensions by default) built on ``meta`` and recorded with 8 tokens."""
    cfg = transformers.LlamaConfig(vocab_size=vocab, hidden_size=width, num_hidden_layers=layers,
                                   num_attention_heads=heads, num_key_value_heads=kv_heads,
                                   intermediate_size=intermediate, attn_implementation="eager")
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.zeros(1, 8, dtype=torch.long, device="meta")
    with torch.no_grad():  # (an attention mask: without one the mask code calls .item())
        return torchrecorder.record(model, f"llama{layers}", input_kwargs={
            "input_ids": ids, "use_cache": False, "attention_mask": torch.ones_like(ids)})


def _state(page: Any) -> dict[str, Any]:
    return page.evaluate("""() => ({layouts: __tr.layouts, error: __tr.error, failures: __tr.failures || 0,
        measured: __tr.measured, worker: __tr.worker, svg: !!document.querySelector('#tr-canvas svg'),
        nodes: document.querySelectorAll('#tr-canvas g.node').length,
        status: document.getElementById('tr-status').textContent,
        note: document.getElementById('tr-note').hidden ? '' : document.getElementById('tr-note').textContent,
        cancel: !document.getElementById('tr-busy').hidden,
        anyway: !document.getElementById('tr-anyway').hidden})""")


def _answers(page: Any, action: Any, more_than: int, timeout: float = 60.0) -> dict[str, Any]:
    """Run ``action`` (its clicks bounded to 5 s: a page frozen by a layout fails them) and wait
    for the layout it starts; the page's state then.  While it lays out, the page answers and
    keeps a drawing in view."""
    page.set_default_timeout(5000)
    failures = _state(page)["failures"]
    action()
    state = _state(page)  # (answered at once: the layout runs in a worker)
    assert state["svg"], "no drawing in view while laying out"
    deadline = time.monotonic() + timeout  # liveness bound, not a speed assertion
    while True:
        while state["layouts"] <= more_than and state["failures"] == failures:
            assert time.monotonic() < deadline, f"no new drawing in {timeout} s: {state['status']}"
            time.sleep(0.05)
            state = _state(page)
            assert state["svg"]
        # a layout the finished one queued (a control's follow-up) may still come: the answer is
        # the page's state once no layout has started or ended for a moment
        time.sleep(0.3)
        again = _state(page)
        settled = again["layouts"] == state["layouts"] and again["failures"] == state["failures"]
        if settled and not again["cancel"]:
            return again
        assert time.monotonic() < deadline, f"the page kept laying out for {timeout} s"
        more_than, state = again["layouts"] if again["cancel"] else again["layouts"] - 1, again


@pytest.mark.slow
def test_llama_8b_every_control_answers_within_the_budget(tr_browser: Any, tmp_path: Path) -> None:
    """On a meta Llama with 8B dimensions, Expand all, Fold repeats off, Depth max, a search that
    unfolds the run of layers, Collapse all and Reset each answer with a drawing in view; what
    the budget does not allow is folded or collapsed, and the page says so."""
    rec = _llama(32)
    path = tmp_path / "llama8b.html"
    torchrecorder.make_html(rec).save(path)
    page, w = open_page(tr_browser, path)
    limits = budget_limits("auto")
    assert limits is not None
    first = _state(page)
    assert first["worker"] is True and first["note"] == ""
    actions = [
        ("expand all", lambda: page.click("#tr-expand-all"), False),
        ("fold repeats off", lambda: page.click("#tr-fold"), True),
        ("depth max", lambda: (page.fill("#tr-depth", "99"), page.press("#tr-depth", "Enter")), True),
        ("search", lambda: (page.fill("#tr-search", "layers.21.mlp"), page.press("#tr-search", "Enter")),
         True),
        ("collapse all", lambda: page.click("#tr-collapse-all"), False),
        ("reset", lambda: page.click("#tr-reset"), False),
    ]
    for name, action, reduced in actions:
        state = _answers(page, action, _state(page)["layouts"])
        assert state["error"] is None, (name, state)
        m = state["measured"]
        assert all(m[k] <= limits[k] for k in ("nodes", "edges", "spans")), (name, m)
        assert state["nodes"] > 3, name
        if name == "fold repeats off":
            # the rotary tables and the mask fed to all 32 layers: one edge each to a mark
            # "→ 32 × self_attn", so the layers fit open
            marks = page.eval_on_selector_all("#tr-canvas g.node[id^=f]",
                                              "els => els.map(e => e.textContent)")
            assert len(marks) == 2 and all("→ 32 × self_attn" in t for t in marks), marks
            assert "model.rotary_emb" in state["note"] and "drawn as one" in state["note"]
            assert m["nodes"] > 200  # the layers open, each its 8 or so boxes
        if reduced:  # asked for everything: 1,003 nodes passing some 170,000 ranks
            assert "to keep the drawing to" in state["note"], name
            assert "asked for: 1,003 nodes" in state["note"], name
            assert state["anyway"], name  # the button that draws it all
        else:
            assert state["note"] == "", name
    page.fill("#tr-search", "layers.21.mlp")
    state = _answers(page, lambda: page.press("#tr-search", "Enter"), _state(page)["layouts"])
    assert "layers.21.mlp" in page.text_content("#tr-details")
    page.wait_for_selector("#tr-canvas g.tr-hit")  # the hit is drawn (its run unfolded)
    # "Draw it all" asks for the view as asked, over the budget: it lays out in the worker, and
    # Cancel ends it with the view drawn before kept
    state = _answers(page, lambda: page.click("#tr-expand-all"), state["layouts"])
    if page.is_checked("#tr-fold"):
        state = _answers(page, lambda: page.click("#tr-fold"), state["layouts"])
    assert state["anyway"]
    before = page.inner_html("#tr-canvas")
    page.click("#tr-anyway")
    assert "laying out 1,003 nodes" in page.text_content("#tr-busy")
    page.click("#tr-cancel")
    after = _state(page)
    assert not after["cancel"] and after["layouts"] == state["layouts"] and "cancelled" in after["note"]
    assert page.inner_html("#tr-canvas") == before
    assert w.page_errors == [] and w.console_errors == []
    page.close()


def test_cancel_keeps_the_view_and_the_page_works_on(tr_browser: Any, tmp_path: Path) -> None:
    """Without a budget (max_nodes=None) every operation of a 12-layer Llama is laid out as
    asked, which takes long: Cancel ends it, the view drawn before stays, and the controls work."""
    rec = _llama(12, width=64, heads=4, kv_heads=2, intermediate=128, vocab=256)
    path = tmp_path / "llama12.html"
    torchrecorder.make_html(rec, max_nodes=None).save(path)
    page, w = open_page(tr_browser, path)
    state = _answers(page, lambda: page.click("#tr-expand-all"), _state(page)["layouts"])
    before = page.inner_html("#tr-canvas")
    page.click("#tr-fold")
    busy = _state(page)
    assert busy["cancel"] and "laying out" in page.text_content("#tr-busy")
    page.click("#tr-cancel")
    after = _state(page)
    assert not after["cancel"] and after["layouts"] == state["layouts"] and "cancelled" in after["note"]
    assert page.inner_html("#tr-canvas") == before
    assert page.is_checked("#tr-fold")  # the controls show the view on screen
    state = _answers(page, lambda: page.click("#tr-collapse-all"), after["layouts"])
    assert state["error"] is None and state["nodes"] > 3
    assert w.page_errors == [] and w.console_errors == []
    page.close()


def _break_a_deep_node(path: Path) -> None:
    """Give the deepest operation of the saved page a DOT id Graphviz cannot parse: any layout
    that draws it fails inside viz.js, as a crash of Graphviz does."""
    text = path.read_text(encoding="utf-8")
    tag = '<script type="application/json" id="tr-data">'
    start = text.index(tag) + len(tag)
    end = text.index("</script>", start)
    data = json.loads(text[start:end])
    depths = []
    for row in data["nodes"]:
        depths.append(depths[row[0]] + 1 if row[0] >= 0 else 0)
    deepest = max(range(len(depths)), key=lambda i: (data["nodes"][i][1] == 1, depths[i]))
    data["strings"].append('"broken -> {')
    data["nodes"][deepest][2] = len(data["strings"]) - 1
    path.write_text(text[:start] + script_json(data) + text[end:], encoding="utf-8")


def test_a_failed_layout_is_recovered(tr_browser: Any, tmp_path: Path) -> None:
    """A layout that fails inside viz.js leaves the view drawn before on screen, with the error
    said; a fresh layout engine draws what comes next (Collapse all, Reset, another try)."""
    rec = _llama(2, width=64, heads=4, kv_heads=2, intermediate=128, vocab=256)
    path = tmp_path / "llama2.html"
    torchrecorder.make_html(rec).save(path)
    _break_a_deep_node(path)
    page, w = open_page(tr_browser, path)
    first = _state(page)
    before = page.inner_html("#tr-canvas")
    for attempt in range(2):
        page.click("#tr-expand-all")  # draws the broken node
        deadline = time.monotonic() + 60
        while _state(page)["failures"] <= attempt:
            assert time.monotonic() < deadline, "the failed layout was not reported"
            time.sleep(0.05)
        failed = _state(page)
        assert failed["error"] and "could not lay out" in failed["note"], failed
        assert "the view before it is kept" in failed["note"]
        assert page.inner_html("#tr-canvas") == before  # the view drawn before, as it was
        state = _answers(page, lambda: page.click("#tr-collapse-all"), failed["layouts"])
        assert state["error"] is None and state["note"] == "" and state["nodes"] == first["nodes"]
        state = _answers(page, lambda: page.click("#tr-reset"), state["layouts"])
        assert state["error"] is None and state["nodes"] == first["nodes"]
        before = page.inner_html("#tr-canvas")
    assert w.page_errors == []
    page.close()


@pytest.mark.parametrize("name", ["llama", "series", "runloop", "fps"])
def test_the_page_measures_a_view_as_the_python_budget_does(tr_browser: Any, tmp_path: Path,
                                                            name: str) -> None:
    """At every depth, folded and not, the page counts what it draws as projection/budget.py
    counts make_dot's drawing: nodes, edges and the ranks the edges pass."""
    if name == "llama":
        rec = _llama(3, width=64, heads=4, kv_heads=2, intermediate=128, vocab=256)
    else:
        rec = _loop_rec(name)
    path = tmp_path / f"{name}.html"
    torchrecorder.make_html(rec, 0, fold_repeats=True).save(path)
    page, _ = open_page(tr_browser, path)
    for fold in (True, False):
        if not fold:
            _answers(page, lambda: page.click("#tr-fold"), _state(page)["layouts"])
        for depth in range(4):
            count = _state(page)["layouts"]
            page.fill("#tr-depth", str(depth))
            got = _answers(page, lambda: page.dispatch_event("#tr-depth", "change"), count)["measured"]
            r = GraphvizRenderer(rec, depth, fold_repeats=fold, tensor_nodes=False)
            p = r.projection
            nodes, edges = drawn_size(p)
            want = {"nodes": nodes, "edges": edges, "spans": max(edge_spans(p), layout_spans(p))}
            assert {k: got[k] for k in want} == want and got["shared"] == [], (name, fold, depth)
    page.close()


def test_without_a_worker_graphviz_runs_in_the_page(tr_browser: Any, tmp_path: Path) -> None:
    """Where the page cannot start its worker (here a policy without ``worker-src blob:``),
    it lays out with Graphviz in the page itself, as before."""
    rec = _llama(2, width=64, heads=4, kv_heads=2, intermediate=128, vocab=256)
    path = tmp_path / "llama2.html"
    torchrecorder.make_html(rec).save(path)
    text = path.read_text(encoding="utf-8")
    assert "worker-src blob:; " in text
    path.write_text(text.replace("worker-src blob:; ", ""), encoding="utf-8")
    page, w = open_page(tr_browser, path)
    first = _state(page)
    assert first["worker"] is False and first["nodes"] > 3
    state = _answers(page, lambda: page.click("#tr-expand-all"), first["layouts"])
    assert state["error"] is None and state["nodes"] > first["nodes"]
    assert w.page_errors == []
    page.close()


def test_the_page_shares_a_wide_values_edges_as_make_dot_does(tr_browser: Any, tmp_path: Path) -> None:
    """A view over the budget whose one value feeds 30 boxes: the page draws its edges as one
    edge to a mark, as make_dot does, and counts the drawing as projection/budget.py does."""
    from .test_fanout_share import _fan

    rec = _fan(30)
    path = tmp_path / "fan.html"
    with pytest.warns(LargeDrawingWarning):
        torchrecorder.make_html(rec, 1, fold_repeats=False, max_nodes=60).save(path)
    page, w = open_page(tr_browser, path)
    state = _state(page)
    r = GraphvizRenderer(rec, 1, fold_repeats=False, max_nodes=60)
    with pytest.warns(LargeDrawingWarning):
        source = r.render().source
    assert r.budget is not None and r.budget.shared == ("pos",)
    got = state["measured"]
    want = {"nodes": r.budget.size[0], "edges": r.budget.size[1], "spans": r.budget.spans}
    assert {k: got[k] for k in want} == want and len(got["shared"]) == 1
    assert "→ 30 boxes" in page.inner_text("#tr-canvas") and '"→ 30 boxes"' in source
    assert "the edges of pos" in state["note"] and w.page_errors == []
    page.close()


def test_a_depth_over_the_budget_that_sharing_brings_within_it_is_not_folded(tr_browser: Any,
                                                                             tmp_path: Path) -> None:
    """As make_dot's budget does: a view that the shared edges of a wide value bring within the
    budget is drawn so, its runs unfolded as the reader left them; the page folded every run
    as soon as the view was over, whatever sharing did (a depth asked after "Fold repeats" off
    on an 8B Llama drew the 32 layers folded, while "Fold repeats" off drew them open)."""
    from .test_fanout_share import _fan

    rec = _fan(30)
    path = tmp_path / "fan.html"
    torchrecorder.make_html(rec, 1, max_nodes=60).save(path)  # opens with the 30 blocks folded
    page, w = open_page(tr_browser, path)
    assert page.is_checked("#tr-fold")
    state = _answers(page, lambda: page.click("#tr-fold"), _state(page)["layouts"])
    assert "→ 30 boxes" in page.inner_text("#tr-canvas")  # unfolded: shared, within the budget
    for depth in ("0", "1"):  # the model closed, then open again: its 30 blocks over the budget
        state = _answers(page, lambda d=depth: (page.fill("#tr-depth", d), page.press("#tr-depth", "Enter")),
                         _state(page)["layouts"])
    r = GraphvizRenderer(rec, 1, fold_repeats=False, max_nodes=60)
    with pytest.warns(LargeDrawingWarning):
        r.render()
    assert r.budget is not None and r.budget.shared == ("pos",)
    assert state["measured"]["nodes"] == r.budget.size[0]  # the 30 blocks, not one folded run
    assert "→ 30 boxes" in page.inner_text("#tr-canvas")
    assert "folded" not in state["note"] and "the edges of pos" in state["note"]
    assert not page.is_checked("#tr-fold")
    assert w.page_errors == [] and w.console_errors == []
    page.close()
