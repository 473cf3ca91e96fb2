"""How long each control of the interactive page takes on a large model, in headless Chromium.

    python benchmarks/html_controls.py                 # Llama with 8B dimensions, 32 layers
    python benchmarks/html_controls.py --layers 80 --width 8192 --heads 64 --intermediate 28672

The model is transformers' ``LlamaForCausalLM`` built on ``meta`` (nothing allocated, nothing
downloaded) and recorded with 8 tokens; its page is ``make_html``'s default.  Each control is
timed inside the page with ``performance.now()``: from just before the action to the end of the
layout it starts (and of any layout that one queues), as the reader waits for it.  The controls,
in order: Depth 3, Expand all, Fold repeats off, Fold repeats on, Collapse all, a search by
type (``LlamaRMSNorm``), a search by name (``layers.31.mlp``), Enter on a box reached by Tab
(the keyboard), the Colour menu (FLOPs), Reset.  Each is run once (one round: a figure, not a
statistic).  After Fold repeats on, the depth shown is printed beside the depth before Fold
repeats off: the page returns to the view the reader had.

The script is not a test: it prints what it measures and exits 0 (1 only when no Chromium is
found).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torchrecorder  # noqa: E402
from tests.browser import CHROMIUM, launch, open_page  # noqa: E402


def _llama(layers: int, width: int, heads: int, kv_heads: int, intermediate: int) -> Any:
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=128256, hidden_size=width, num_hidden_layers=layers,
                                   num_attention_heads=heads, num_key_value_heads=kv_heads,
                                   intermediate_size=intermediate, attn_implementation="eager")
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.zeros(1, 8, dtype=torch.long, device="meta")
    with torch.no_grad():
        return torchrecorder.record(model, f"llama{layers}", input_kwargs={
            "input_ids": ids, "use_cache": False, "attention_mask": torch.ones_like(ids)})


def _timed(page: Any, action: Callable[[], None], timeout: float = 120.0) -> float:
    """Milliseconds (``performance.now()`` in the page) from before ``action`` to the end of
    the layouts it starts."""
    done = int(page.evaluate("() => { window.__t0 = performance.now(); return window.__tr.layouts; }"))
    action()
    deadline = time.monotonic() + timeout
    while True:
        state = page.evaluate("""() => [window.__tr.layouts, !document.getElementById('tr-busy').hidden,
            performance.now() - window.__t0]""")
        if state[0] > done and not state[1]:
            time.sleep(0.3)  # a layout the finished one queued
            again = page.evaluate("() => [window.__tr.layouts, !document.getElementById('tr-busy').hidden]")
            if again[0] == state[0] and not again[1]:
                return float(state[2])
            done = int(again[0]) - 1 if not again[1] else int(again[0])
        if time.monotonic() > deadline:
            raise SystemExit(f"no layout within {timeout} s")
        time.sleep(0.02)


def _controls(browser: Any, path: Path, layers: int) -> list[tuple[str, float, str]]:
    """(control, milliseconds, depth shown after it) of each control, in order."""
    page, _ = open_page(browser, path, width=1400, height=900)

    def depth(d: int) -> Callable[[], None]:
        return lambda: (page.fill("#tr-depth", str(d)), page.dispatch_event("#tr-depth", "change"))

    def search(text: str) -> Callable[[], None]:
        return lambda: (page.fill("#tr-search", text), page.press("#tr-search", "Enter"))

    def click(selector: str) -> Callable[[], None]:
        return lambda: page.click(selector)

    def keyboard() -> None:
        page.focus("#tr-view")
        closed = "() => document.activeElement.getAttribute('aria-expanded') === 'false'"
        for _ in range(40):  # Tab to the first box that opens, then Enter
            page.keyboard.press("Tab")
            if page.evaluate(closed):
                break
        page.keyboard.press("Enter")

    def shown() -> str:
        return str(page.input_value("#tr-depth"))

    rows: list[tuple[str, float, str]] = []
    for name, action in [("depth 3", depth(3)), ("expand all", click("#tr-expand-all"))]:
        rows.append((name, _timed(page, action), shown()))
    had = shown()
    rows.append(("fold repeats off", _timed(page, click("#tr-fold")), shown()))
    rows.append(("fold repeats on", _timed(page, click("#tr-fold")), f"{shown()} (before off: {had})"))
    for name, action in [("collapse all", click("#tr-collapse-all")),
                         ("search LlamaRMSNorm", search("LlamaRMSNorm")),
                         (f"search layers.{layers - 1}.mlp", search(f"layers.{layers - 1}.mlp")),
                         ("keyboard Enter on a box", keyboard),
                         ("colour FLOPs", lambda: page.select_option("#tr-colour", "flops")),
                         ("reset", click("#tr-reset"))]:
        rows.append((name, _timed(page, action), shown()))
    page.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--intermediate", type=int, default=14336)
    args = parser.parse_args()
    if CHROMIUM is None:
        print("no Chromium found", file=sys.stderr)
        return 1
    t = time.perf_counter()
    rec = _llama(args.layers, args.width, args.heads, args.kv_heads, args.intermediate)
    print(f"recorded {rec.name} in {time.perf_counter() - t:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "page.html"
        torchrecorder.make_html(rec).save(path)
        for browser in launch():
            for name, ms, d in _controls(browser, path, args.layers):
                print(f"{name:26s} {ms:8.0f} ms   depth {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
