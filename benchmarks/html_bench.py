"""Size and speed of the interactive HTML view, measured in headless Chromium.

    python benchmarks/html_bench.py                      # the three models of issue 13
    python benchmarks/html_bench.py --repeats 5 --screenshot docs/images/html-gpt2.png

For each model it records one forward pass, writes the page with
``torchrecorder.make_html`` and prints:

* the page's size (the target: under 3 MB for the 70B Llama);
* the time ``make_html`` takes to build the page (median of ``--repeats``
  builds), and how many nodes its first view draws (``drawn``);
* first paint: from the start of navigation to the first drawing inserted into
  the page (``window.__tr.firstPaint``: parsing the page, starting Graphviz's
  WebAssembly, building and laying out the first view), median over fresh tabs
  (target: under 2 s);
* a toggle: opening one module with a click (closing it, if it is open in the
  first view), until the browser has painted the new layout (the page's own
  layout time beside it), and the click back (target: under 1 s for a
  12-layer GPT-2); ``nan`` where the module is not drawn in the first view (a
  loop model's page that opens collapsed).

Models (random weights, nothing downloaded; ``transformers`` builds the GPT-2s
when installed, else the hand-written ones of ``models.py``):

=====================  =============================================================
``llama-70b-meta``     80 layers, hidden 8192, on ``meta`` (``models.py``), render_depth 3,
                       its layers folded ×80; the toggle opens the folded layer
``gpt2-small-unfolded`` GPT-2 small (12 layers, width 768, 128 tokens), no folding,
                       render_depth 3; the toggle opens ``h.5``
``gpt2-12``            GPT-2 with 12 layers (width 64), render_depth 3, folded ×12;
                       the toggle opens the folded block
``series-loop``        the zoo's ``SeriesDecoder`` (``tests/zoo/stress.py``: a loop of 1,000
                       ``mul, add, pow`` at the top level), the default page; no toggle (no
                       module inside opens)
``fps-loop``           the zoo's ``FarthestPointSampling`` (a loop of 1,000 iterations of six
                       operations), the default page; the toggle opens ``mlp``
=====================  =============================================================

``--models series-loop,fps-loop`` measures only those.

The script is not a test: it prints what it measures and exits 0 (1 only when
no Chromium is found).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from models import build, llama  # noqa: E402

import torchrecorder  # noqa: E402
from tests.zoo.stress import CASES as STRESS  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _gpt2(layers: int, width: int, heads: int, tokens: int, vocab: int) -> tuple[torch.nn.Module, Any]:
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return build("gpt2-small")
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, vocab_size=vocab,
                     n_positions=max(128, tokens))
    model = GPT2LMHeadModel(cfg).eval()
    return model, torch.randint(0, vocab, (1, tokens), generator=torch.Generator().manual_seed(0))


def _stress(case: str, toggle: Any) -> tuple[Any, dict[str, Any], Any]:
    spec = next(c for c in STRESS if c.name == case)
    args, kwargs = spec.inputs()
    rec = torchrecorder.record(spec.build(), case, input_data=args, input_kwargs=kwargs)
    return rec, {}, toggle


def _llama() -> tuple[Any, dict[str, Any], str]:
    net, args = llama()
    rec = torchrecorder.record(net, "llama-70b", input_data=args[0] if len(args) == 1 else args)
    lead = next(n for n in rec.layers() if n.path.endswith("layers.0"))
    return rec, {"render_depth": 3}, lead.path


def _gpt2_small() -> tuple[Any, dict[str, Any], str]:
    net, ids = _gpt2(12, 768, 12, 128, 50257)
    with torch.no_grad():
        rec = torchrecorder.record(net, "gpt2-small", input_data=ids)
    block = next(n for n in rec.layers() if n.path.endswith("h.5"))
    return rec, {"render_depth": 3, "fold_repeats": False}, block.path


def _gpt2_12() -> tuple[Any, dict[str, Any], str]:
    net, ids = _gpt2(12, 64, 4, 16, 1000)
    rec = torchrecorder.record(net, "gpt2", input_data=ids)
    lead = next(n for n in rec.layers() if n.path.endswith("h.0"))
    return rec, {"render_depth": 3}, lead.path


#: name -> () -> (recording, make_html options, path of the module the toggle opens)
MODELS = {
    "llama-70b-meta": _llama,
    "gpt2-small-unfolded": _gpt2_small,
    "gpt2-12": _gpt2_12,
    "series-loop": lambda: _stress("SeriesDecoder", None),
    "fps-loop": lambda: _stress("FarthestPointSampling", "mlp"),
}


def models(only: Any = None) -> list[tuple[str, Any, dict[str, Any], Any]]:
    """(name, recording, make_html options, path of the module the toggle opens), of the models
    named in ``only`` (all if ``None``)."""
    names = list(MODELS) if only is None else only
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"unknown model(s) {unknown}; choose from {list(MODELS)}")
    return [(name, *MODELS[name]()) for name in names]


def _wait_drawn(page: Any, timeout: float = 120.0) -> None:
    """Wait for the first layout (polled: the page's CSP forbids wait_for_function's eval)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate("() => !!(window.__tr && (window.__tr.layouts > 0 || window.__tr.error))"):
        if time.monotonic() > deadline:
            raise TimeoutError("the page did not draw")
        time.sleep(0.005)


_INDEX = """p => { const D = JSON.parse(document.getElementById('tr-data').textContent);
  return D.nodes.findIndex(r => { const i = JSON.parse(D.strings[r[6]]);
                                  return i.kind === 'module' && i.path === p; }); }"""

# click the element, then wait for the new layout (made in the page's worker) and the frame
# after it to be painted
_TOGGLE = """async i => {
  const el = document.querySelector('#n' + i) || document.querySelector('#t' + i + ' text')
    || document.querySelector('#c' + i);
  const count = window.__tr.layouts;
  const t0 = performance.now();
  el.dispatchEvent(new MouseEvent('click', {bubbles: true}));
  while (window.__tr.layouts === count && !window.__tr.error) await new Promise(r => setTimeout(r, 2));
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  return [performance.now() - t0, window.__tr.lastLayoutMs]; }"""


_DRAWN = "i => !!(document.querySelector('#n' + i) || document.querySelector('#c' + i))"


def measure(browser: Any, path: str, toggle_path: Any, repeats: int) -> dict[str, float]:
    paints, walls, toggles, layouts, closes, drawn = [], [], [], [], [], []
    for _ in range(repeats):
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        requests: list[str] = []
        page.on("request", lambda r, requests=requests: requests.append(r.url))
        t0 = time.perf_counter()
        page.goto("file://" + path)
        _wait_drawn(page)
        walls.append(time.perf_counter() - t0)
        paints.append(page.evaluate("window.__tr.firstPaint"))
        drawn.append(page.evaluate("document.querySelectorAll('#tr-canvas g.node').length"))
        i = page.evaluate(_INDEX, toggle_path) if toggle_path is not None else -1
        if i >= 0 and page.evaluate(_DRAWN, i):  # (not a module the first view keeps in a closed box)
            took, layout = page.evaluate(_TOGGLE, i)  # open it (or close it, if open at first)
            toggles.append(took)
            layouts.append(layout)
            closes.append(page.evaluate(_TOGGLE, i)[0])  # and back
        others = [u for u in requests if u != "file://" + path and not u.startswith("blob:")]
        if others:
            print(f"  requests besides the page: {others}")
        page.close()
    nan = float("nan")
    return {"paint": statistics.median(paints), "wall": statistics.median(walls),
            "toggle": statistics.median(toggles) if toggles else nan,
            "layout": statistics.median(layouts) if layouts else nan,
            "close": statistics.median(closes) if closes else nan, "nodes": statistics.median(drawn)}


def screenshot(browser: Any, path: str, toggle_path: str, out: str) -> None:
    """The GPT-2 page as it opens (its blocks folded into one, open), with the block's first
    LayerNorm selected and its details shown."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto("file://" + path)
    _wait_drawn(page)
    j = page.evaluate(_INDEX, toggle_path + ".ln_1")
    page.click("#tr-fit")
    if j >= 0:
        page.click(f"#n{j}")  # a module that does not open: selected, its details shown
        page.mouse.move(1390, 890)
    page.screenshot(path=out)
    page.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh tabs per model (median)")
    parser.add_argument("--screenshot", default=None, help="write a PNG of the GPT-2 page here")
    parser.add_argument("--chromium", default=os.environ.get("TORCHRECORDER_CHROMIUM")
                        or shutil.which("chromium") or shutil.which("chromium-browser"))
    parser.add_argument("--models", default=None,
                        help="comma-separated names of the models to measure (default: all)")
    args = parser.parse_args()
    only = None if args.models is None else args.models.split(",")
    if not args.chromium:
        print("no Chromium found (apt-get install chromium, or --chromium PATH)")
        return 1
    from playwright.sync_api import sync_playwright

    rows = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=ARGS)
        for name, rec, options, toggle in models(only):
            builds = []
            for _ in range(args.repeats):  # the median of as many builds as tabs
                t0 = time.perf_counter()
                page = torchrecorder.make_html(rec, **options)
                builds.append(time.perf_counter() - t0)
            made = statistics.median(builds)
            path = page.save(os.path.join(tmp, name + ".html"))
            got = measure(browser, path, toggle, args.repeats)
            rows.append((name, len(page.text.encode("utf-8")), made, got))
            if name == "gpt2-12" and args.screenshot:
                screenshot(browser, path, toggle, args.screenshot)
                print(f"wrote {args.screenshot}")
        browser.close()
    print(f"\n{'model':<22}{'page':>10}{'make_html':>11}{'drawn':>7}{'first paint':>13}{'goto→drawn':>12}"
          f"{'toggle':>9}{'(layout)':>10}{'back':>9}")
    for name, size, made, got in rows:
        print(f"{name:<22}{size / 1e6:>8.2f}MB{made:>10.2f}s{got['nodes']:>7.0f}{got['paint'] / 1000:>12.2f}s"
              f"{got['wall']:>11.2f}s"
              f"{got['toggle'] / 1000:>8.2f}s{got['layout'] / 1000:>9.2f}s{got['close'] / 1000:>8.2f}s")
    print("\ntargets (issue 13): page < 3 MB for llama-70b-meta; first paint < 2 s for llama-70b-meta and "
          "gpt2-small-unfolded; a toggle < 1 s for gpt2-12")
    return 0


if __name__ == "__main__":
    sys.exit(main())
