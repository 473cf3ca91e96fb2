"""Draw the six networks of ``figure_models`` with torchrecorder's defaults and with torchview at
the same depth, and write the side-by-side page ``docs/figures.md`` with each figure's area.

Run from the repository root (needs torchview, transformers and the ``dot`` program)::

    python examples/compare_figures.py
"""

from __future__ import annotations

import os
import re
import sys
import warnings

import torchrecorder
from torchrecorder.renderer import PRESETS

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from figure_models import MODELS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGES = os.path.join(ROOT, "docs", "images", "figures")
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


def draw_torchview(net, args, name: str, depth: int) -> str | None:
    """torchview's figure at ``depth``, or ``None`` with the reason printed."""
    try:
        import torchview

        graph = torchview.draw_graph(net, input_data=list(args), depth=depth, expand_nested=True,
                                     graph_name=name)
        return str(graph.visual_graph.render(os.path.join(IMAGES, f"{name}_d{depth}_torchview"),
                                             format="svg", cleanup=True))
    except Exception as exc:  # a peer's failure is a result to report, not ours to fix
        print(f"torchview failed on {name} at depth {depth}: {type(exc).__name__}: {exc}")
        return None


def presets() -> str:
    """The CNN in every preset, at depth 2: the page's last section."""
    net, args = MODELS["cnn"]()
    header = "| " + " | ".join(f"`preset=\"{p}\"`" for p in PRESETS) + " |\n"
    cells = []
    for preset in PRESETS:
        path = torchrecorder.render_network(net, "cnn", None, IMAGES, filename=f"preset_{preset}",
                                            input_data=args, render_depth=2, preset=preset)
        w, h = svg_size(path)
        cells.append(f'<img src="images/figures/preset_{preset}.svg" width="100%"><br>{w:.0f}×{h:.0f} pt')
    return ("\n## The presets\n\n"
            "The CNN above at `render_depth=2` in each preset: `default` for screens and slides,\n"
            "`compact` for large models, `print` for greyscale printing, `paper` for a column of a\n"
            "two-column paper (grey, serif, small type, thin lines).\n\n"
            + header + "|" + "---|" * len(cells) + "\n| " + " | ".join(cells) + " |\n")


def main() -> None:
    os.makedirs(IMAGES, exist_ok=True)
    rows, sections = [], []
    for name, build in MODELS.items():
        net, args = build()
        cells = []
        for depth in DEPTHS:
            ours = torchrecorder.render_network(net, name, None, IMAGES, filename=f"{name}_d{depth}",
                                                input_data=args, render_depth=depth)
            theirs = draw_torchview(net, args, name, depth)
            w, h = svg_size(ours)
            a = f"{w:.0f}×{h:.0f} pt = {w * h / 1000:.0f}k"
            if theirs:
                tw, th = svg_size(theirs)
                b = f"{tw:.0f}×{th:.0f} pt = {tw * th / 1000:.0f}k"
                ratio = f"{w * h / (tw * th):.2f}"
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
        "`examples/figure_models.py`; random weights, nothing downloaded). Areas are the SVG\n"
        "sizes Graphviz writes, in points; the ratio is ours over torchview's.\n\n"
        "| network | depth | torchrecorder | torchview | ratio |\n|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n\n" + "\n".join(sections))
    text += presets()
    with open(os.path.join(ROOT, "docs", "figures.md"), "w", encoding="utf-8") as fh:
        fh.write(text)
    print("\n".join(rows))


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    main()
