"""Draw the six networks of ``figure_models`` with torchrecorder's defaults and with torchview at
the same depth, and write the side-by-side page ``docs/figures.md`` with each figure's area.

Run from the repository root (needs torchview, transformers and the ``dot`` program)::

    python examples/compare_figures.py            # redraw the figures, rewrite the page
    python examples/compare_figures.py --check    # exit 1 if the page or README's ratios are stale

Both draw with the DejaVu fonts alone, embedded in each SVG, (a fontconfig configuration listing only DejaVu's
folder), the fonts every machine the README's commands run on has, so the figures and the
numbers come out the same wherever they are made with the same Graphviz version (named on the
page; ``--check`` says it cannot judge under another one).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import torchrecorder
from torchrecorder.renderer import PRESETS
from torchrecorder.svgfont import embed_fonts

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from figure_models import MODELS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tests.figure_checks import font_env  # noqa: E402

IMAGES = os.path.join(ROOT, "docs", "images", "figures")
PAGE = os.path.join(ROOT, "docs", "figures.md")
README = os.path.join(ROOT, "README.md")
DEPTHS = (1, 2)
TITLES = {"cnn": "A CNN with BatchNorm", "gpt2": "GPT-2 (2 layers, transformers)",
          "bert": "BERT (2 layers, transformers)",
          "transformer_encoder": "nn.TransformerEncoder (2 layers)", "lstm": "An LSTM tagger",
          "unet": "A U-Net (2 levels)"}


def svg_size(path: str) -> tuple[float, float]:
    """Width and height of an SVG written by Graphviz, in points."""
    with open(path, encoding="utf-8") as fh:
        head = fh.read(2000)
    match = re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', head)
    if match is None:
        raise ValueError(f"{path}: no size in points")
    return float(match.group(1)), float(match.group(2))


def draw_torchview(net, args, name: str, depth: int, images: str) -> str | None:
    """torchview's figure at ``depth`` in ``images``, or ``None`` with the reason printed."""
    try:
        import torchview

        graph = torchview.draw_graph(net, input_data=list(args), depth=depth, expand_nested=True,
                                     graph_name=name)
        path = str(graph.visual_graph.render(os.path.join(images, f"{name}_d{depth}_torchview"),
                                             format="svg", cleanup=True))
        with open(path, "rb") as fh:  # its fonts embedded too, as ours are
            svg = embed_fonts(fh.read())
        with open(path, "wb") as fh:
            fh.write(svg)
        return path
    except Exception as exc:  # a peer's failure is a result to report, not ours to fix
        print(f"torchview failed on {name} at depth {depth}: {type(exc).__name__}: {exc}")
        return None


def presets(images: str) -> str:
    """The CNN in every preset, at depth 2: the page's last section."""
    net, args = MODELS["cnn"]()
    header = "| " + " | ".join(f"`preset=\"{p}\"`" for p in PRESETS) + " |\n"
    cells = []
    for preset in PRESETS:
        path = torchrecorder.render_network(net, "cnn", None, images, filename=f"preset_{preset}",
                                            input_data=args, render_depth=2, preset=preset, embed_font=True)
        w, h = svg_size(path)
        cells.append(f'<img src="images/figures/preset_{preset}.svg" width="100%"><br>{w:.0f}×{h:.0f} pt')
    return ("\n## The presets\n\n"
            "The CNN above at `render_depth=2` in each preset: `default` for screens and slides,\n"
            "`compact` for large models, `print` for greyscale printing, `paper` for a column of a\n"
            "two-column paper (grey, serif, small type, thin lines).\n\n"
            + header + "|" + "---|" * len(cells) + "\n| " + " | ".join(cells) + " |\n")


def graphviz_version() -> str:
    """The version of the ``dot`` program, as ``dot -V`` prints it (``"2.43.0"``)."""
    out = subprocess.run(["dot", "-V"], capture_output=True, text=True, check=True).stderr
    match = re.search(r"version (\S+)", out)
    return match.group(1) if match else out.strip()


def page(images: str) -> tuple[str, dict[int, list[float]]]:
    """Draw every figure into ``images``; the text of ``docs/figures.md`` and the ratios
    (ours over torchview's area) by depth."""
    rows, sections = [], []
    ratios: dict[int, list[float]] = {d: [] for d in DEPTHS}
    for name, build in MODELS.items():
        net, args = build()
        cells = []
        for depth in DEPTHS:
            ours = torchrecorder.render_network(net, name, None, images, filename=f"{name}_d{depth}",
                                                input_data=args, render_depth=depth, embed_font=True)
            theirs = draw_torchview(net, args, name, depth, images)
            w, h = svg_size(ours)
            a = f"{w:.0f}×{h:.0f} pt = {w * h / 1000:.0f}k"
            if theirs:
                tw, th = svg_size(theirs)
                b = f"{tw:.0f}×{th:.0f} pt = {tw * th / 1000:.0f}k"
                ratio = f"{w * h / (tw * th):.2f}"
                ratios[depth].append(float(ratio))
            else:
                b, ratio = "failed", "–"
            cells.append((depth, a, b, ratio, theirs is not None))
            rows.append(f"| {TITLES[name]} | {depth} | {a} | {b} | {ratio} |")
        d2 = next(c for c in cells if c[0] == 2)
        theirs_img = (f'<img src="images/figures/{name}_d2_torchview.svg" width="100%">' if d2[4]
                      else "torchview failed (see the table)")
        sections.append(
            f"## {TITLES[name]}\n\n"
            f"| torchrecorder, defaults, `render_depth=2` | torchview, `depth=2` |\n|---|---|\n"
            f'| <img src="images/figures/{name}_d2.svg" width="100%"> | {theirs_img} |\n')
    text = (
        "# Figures side by side: torchrecorder and torchview\n\n"
        "Six networks of different kinds, drawn by `torchrecorder.render_network` with its\n"
        "defaults and by `torchview.draw_graph(..., depth=d, expand_nested=True)` at the same\n"
        "depth. Made by `python examples/compare_figures.py` (models in\n"
        "`examples/figure_models.py`; random weights, nothing downloaded) with Graphviz\n"
        f"{graphviz_version()} and the DejaVu fonts alone; `--check` tells whether this page is\n"
        "stale. Areas are the SVG sizes Graphviz writes, in points; the ratio is ours over\n"
        "torchview's.\n\n"
        "| network | depth | torchrecorder | torchview | ratio |\n|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n\n" + "\n".join(sections))
    return text + presets(images), ratios


def readme_sentence(ratios: dict[int, list[float]]) -> str:
    """The README's summary of the ratios (its words may wrap anywhere)."""
    d1, d2 = ratios[1], ratios[2]
    return (f"ours is {min(d1):.2f}x to {max(d1):.2f}x torchview's area at depth 1 "
            f"and {min(d2):.2f}x to {max(d2):.2f}x at depth 2")


def _words(text: str) -> str:
    return " ".join(text.split())


def check() -> int:
    """Draw everything again in a scratch folder and compare: 0 if ``docs/figures.md``, its
    figures' sizes and the README's ratios are what the code draws now, 1 if not, 2 if this
    machine's Graphviz is not the one the page was made with (no verdict)."""
    with open(PAGE, encoding="utf-8") as fh:
        old = fh.read()
    made_with = re.search(r"with Graphviz\s+(\S+)\s", old)
    if made_with is None or made_with.group(1) != graphviz_version():
        print(f"docs/figures.md was made with Graphviz {made_with.group(1) if made_with else '?'}, "
              f"this machine has {graphviz_version()}: cannot judge")
        return 2
    with tempfile.TemporaryDirectory() as images:
        new, ratios = page(images)
        stale = [name for name in sorted(os.listdir(images)) if name.endswith(".svg")
                 and svg_size(os.path.join(images, name)) != svg_size(os.path.join(IMAGES, name))]
    problems = []
    if new != old:
        problems.append("docs/figures.md differs from what the code draws now:\n" + "".join(
            difflib.unified_diff(old.splitlines(True), new.splitlines(True), "docs/figures.md", "now")))
    if stale:
        problems.append("figures of another size in docs/images/figures: " + ", ".join(stale))
    with open(README, encoding="utf-8") as fh:
        if _words(readme_sentence(ratios)) not in _words(fh.read()):
            problems.append(f"README.md should say: {readme_sentence(ratios)!r}")
    print("\n".join(problems) or "docs/figures.md, its figures and the README's ratios are up to date")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="only check that the page, its figures and the README's ratios are current")
    args = parser.parse_args(argv)
    scratch = tempfile.mkdtemp(prefix="compare-figures-fonts-")
    os.environ.update(font_env("dejavu", Path(scratch)))
    if args.check:
        return check()
    os.makedirs(IMAGES, exist_ok=True)
    text, ratios = page(IMAGES)
    with open(PAGE, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(text.split("\n\n")[2])
    print(f"README.md should say: {readme_sentence(ratios)!r}")
    return 0


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    sys.exit(main())
