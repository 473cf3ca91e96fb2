"""Layout time of the default drawing of the zoo's largest and loop-heavy models.

    python benchmarks/layout_bench.py                 # the stress models of tests/zoo/stress.py
    python benchmarks/layout_bench.py --models SeriesDecoder,FarthestPointSampling --unfolded
    python benchmarks/layout_bench.py --largest 20    # issue 38: every default drawing, 20 largest

For each model it records one forward pass and prints the recorded nodes, the
drawn nodes and edges of ``make_dot(rec)`` (the default: full depth, within the
drawing budget), whether the budget reduced it, the time to write the DOT and
the time ``dot -Tsvg`` takes to lay it out.  ``--unfolded`` also times the
drawing as it was before loops folded (``fold_repeats=False``, every module
open, no budget), stopping ``dot`` after ``--timeout`` seconds.

``--largest N`` takes instead the N models of the whole zoo (``tests/zoo``: the
hand-written, pass-through, transformers and stress models) with the most recorded
nodes, and lays out each default drawing a user meets: ``make_dot(rec)``,
``render_network``'s (``render_depth=RENDER_NETWORK_DEPTH``) and the HTML page's
first view (the DOT the page built in headless Chromium, ``window.__tr.dot``, laid
out by ``dot`` as the others, with the page's own layout time beside it; skipped
without Chromium and Playwright).  It ends with the slowest layout against issue
38's target (every one under 20 s with ``dot``).

This is the drawing half of the benchmarks (``bench.py`` measures recording).
The script is not a test; it prints what it measures and exits 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torchrecorder  # noqa: E402
from tests.zoo.stress import CASES  # noqa: E402
from torchrecorder.errors import LargeDrawingWarning  # noqa: E402
from torchrecorder.renderer import GraphvizRenderer  # noqa: E402


def _dot(source: str, timeout: float) -> float:
    start = time.perf_counter()
    try:
        subprocess.run(["dot", "-Tsvg", "-o", os.devnull], input=source.encode(), check=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return float("inf")
    return time.perf_counter() - start


#: issue 38: every default drawing of the largest zoo models lays out in at most this (s)
TARGET_S = 20.0


def _page_dot(rec: torchrecorder.Recorder, browser: Any, folder: str) -> tuple[str, float]:
    """The DOT the HTML page lays out first, and the page's own layout time (s)."""
    path = os.path.join(folder, "page.html")
    torchrecorder.make_html(rec).save(path)
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    try:
        page.goto("file://" + path)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            got = page.evaluate("() => window.__tr ? [window.__tr.layouts, window.__tr.error] : [0, null]")
            if got[1]:
                raise RuntimeError(f"the page could not lay out: {got[1]}")
            if got[0]:
                break
            time.sleep(0.05)
        dot, ms = page.evaluate("() => [window.__tr.dot, window.__tr.lastLayoutMs]")
    finally:
        page.close()
    return dot, (ms or float("nan")) / 1e3


def _chromium() -> Any:
    """A started Playwright and a headless Chromium (Debian's), or ``None`` without them."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    try:
        from browser import CHROMIUM, CHROMIUM_ARGS
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if CHROMIUM is None:
        return None
    playwright = sync_playwright().start()
    return playwright, playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def largest(count: int, timeout: float) -> None:
    """Lay out every default drawing of the ``count`` zoo models with the most recorded nodes."""
    from tests.zoo import all_cases, stress_cases
    from tests.zoo.session import _record
    from torchrecorder.api import RENDER_NETWORK_DEPTH

    recorded = []
    for case in [*all_cases(), *stress_cases()]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                recorded.append(_record(case).rec)
            except Exception as exc:  # a model this machine cannot build (a missing package)
                print(f"{case.name}: not recorded ({type(exc).__name__}: {exc})", flush=True)
    recorded.sort(key=lambda r: -len(r.nodes))
    started = _chromium()
    print(f"{'model':22} {'recorded':>8} {'make_dot':>9} {'render_network':>15} {'page':>9} "
          f"{'(in page)':>10}")
    worst = (0.0, "")
    try:
        with tempfile.TemporaryDirectory() as folder:
            for rec in recorded[:count]:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", LargeDrawingWarning)
                    sources = {"make_dot": GraphvizRenderer(rec).render().source,
                               "render_network": GraphvizRenderer(rec, RENDER_NETWORK_DEPTH).render().source}
                    in_page = float("nan")
                    if started is not None:
                        sources["page"], in_page = _page_dot(rec, started[1], folder)
                times = {what: _dot(source, timeout) for what, source in sources.items()}
                for what, seconds in times.items():
                    worst = max(worst, (seconds, f"{rec.name} ({what})"))
                cells = [f"{times[w]:8.2f}s" if w in times else "        -" for w in sources]
                cells += ["        -"] * (3 - len(cells))
                print(f"{rec.name:22} {len(rec.nodes):8} {cells[0]:>9} {cells[1]:>15} {cells[2]:>9} "
                      f"{in_page:9.2f}s", flush=True)
    finally:
        if started is not None:
            started[1].close()
            started[0].stop()
    verdict = "PASS" if worst[0] <= TARGET_S else "FAIL"
    print(f"\n{verdict}  every default drawing of the {count} largest zoo models lays out in <= "
          f"{TARGET_S:.0f} s with dot: slowest {worst[0]:.2f} s, {worst[1]}"
          + ("" if started is not None else " (the page not measured: no Chromium or Playwright)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(c.name for c in CASES))
    parser.add_argument("--unfolded", action="store_true", help="also time the unfolded, unbudgeted drawing")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--largest", type=int, default=0,
                        help="lay out every default drawing of the N zoo models with the most recorded nodes")
    args = parser.parse_args()
    if args.largest:
        largest(args.largest, args.timeout)
        return
    cases = {c.name: c for c in CASES}
    print(f"{'model':22} {'recorded':>8} {'drawn':>12} {'reduced':>7} {'DOT':>7} {'dot -Tsvg':>10}")
    for name in args.models.split(","):
        case = cases[name]
        net = case.build()
        inputs, kwargs = case.inputs()
        with torch.no_grad():
            rec = torchrecorder.record(net, name, input_data=inputs, input_kwargs=kwargs)
        variants = [("default", {})]
        if args.unfolded:
            variants.append(("unfolded", {"render_depth": None, "fold_repeats": False, "max_nodes": None}))
        for label, options in variants:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", LargeDrawingWarning)
                start = time.perf_counter()
                renderer = GraphvizRenderer(rec, **options)  # type: ignore[arg-type]
                source = renderer.render().source
                write = time.perf_counter() - start
            budget = renderer.budget
            nodes, edges = budget.size if budget is not None else (0, 0)
            reduced = "yes" if budget is not None and budget.reduced else "no"
            seconds = _dot(source, args.timeout)
            shown = f"{seconds:9.2f}s" if seconds != float("inf") else f">{args.timeout:.0f}s".rjust(10)
            print(f"{name + ('' if label == 'default' else ' ' + label):22} {len(rec.nodes):8} "
                  f"{nodes:5}n {edges:5}e {reduced:>7} {write:6.2f}s {shown}", flush=True)


if __name__ == "__main__":
    main()
