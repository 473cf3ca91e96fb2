"""List every edge that leaves its cluster or skims a cluster's border
(``tests.label_geometry.edges_outside_their_cluster``) over the zoo models (``tests/zoo``),
at the default depth, at depth 2 and with every module open, laid out with the fonts the
machine has and with DejaVu alone (``tests.figure_checks.font_env``: a fontconfig file that
holds only DejaVu's folder, the fonts of a fresh Debian).

    python tools/edge_skims.py                       # every zoo model, both font sets
    python tools/edge_skims.py hf-bert TinyUNet      # some models
    python tools/edge_skims.py --fonts system --depths all --save /tmp/skims

``--save DIR`` writes the DOT source of each drawing with a problem (``NAME-DEPTH.gv``), to
render and look at (``dot -Tpng``).  Exits 1 when any problem is found.

What it found (issue 35), by cause:

- the point an edge passes on a titled cluster's title rank, ranked only by the edge's chain,
  sat anywhere below the edge's tail: for a value made early and used late (an attention
  mask, rotary tables, a residual) far above the title, and the cluster grew up to hold it,
  the edge riding its border (GPT-2, Llama, Mistral, Qwen2, Whisper, BERT with DejaVu).
  Fixed: each point is held on its title's rank (``rank=same``).
- an edge in the outermost column of a cluster, with nothing beside it: ``dot`` routes it in
  a box that reaches past the cluster's border (a cluster's margin is 4 pt) and a long edge
  there bulges 1-12 pt over it (a skip around a column of boxes; an edge from the point
  beside a title down to a box far below).  Open; a larger cluster margin trades it for
  other layouts and more area.
- a point on a title's rank that ``dot`` orders on the far side of the title from where its
  edge comes: the edge runs above the title along the cluster's top border (T5).  Open:
  ``dot`` does not keep the order of flat edges inside a cluster.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torchrecorder  # noqa: E402
from tests.figure_checks import font_env  # noqa: E402
from tests.label_geometry import edges_outside_their_cluster  # noqa: E402
from tests.zoo import all_cases  # noqa: E402
from tests.zoo.session import Zoo  # noqa: E402
from torchrecorder.renderer.base import DEFAULT_RENDER_DEPTH  # noqa: E402

#: the depths drawn: the default (every module open within the drawing budget), 2, all open
DEPTHS: dict[str, Any] = {"default": DEFAULT_RENDER_DEPTH, "2": 2, "all": None}


def _laid_out(source: str, env: dict[str, str]) -> list[str]:
    """The problems of ``source`` laid out under the fontconfig environment ``env``
    (:func:`~tests.figure_checks.font_env`; empty: the machine's own fonts)."""
    saved = os.environ.get("FONTCONFIG_FILE")
    if "FONTCONFIG_FILE" in env:
        os.environ["FONTCONFIG_FILE"] = env["FONTCONFIG_FILE"]
    else:
        os.environ.pop("FONTCONFIG_FILE", None)
    try:
        return edges_outside_their_cluster(source)
    finally:
        if saved is None:
            os.environ.pop("FONTCONFIG_FILE", None)
        else:
            os.environ["FONTCONFIG_FILE"] = saved


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="zoo model names (default: every one)")
    parser.add_argument("--fonts", default="system,dejavu", help="font sets, of: system, dejavu")
    parser.add_argument("--depths", default=",".join(DEPTHS), help="of: " + ", ".join(DEPTHS))
    parser.add_argument("--save", help="a folder for the DOT source of each drawing with a problem")
    args = parser.parse_args(argv)
    zoo = Zoo()
    names = args.models or [c.name for c in all_cases()]
    scratch = Path(tempfile.mkdtemp(prefix="edge-skims-"))
    font_sets = {name: font_env(name, scratch / name) for name in args.fonts.split(",")}
    save = Path(args.save) if args.save else None
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
    total = 0
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rec = zoo.recorded(name).rec
        for depth_name in args.depths.split(","):
            source = torchrecorder.make_dot(rec, DEPTHS[depth_name]).source
            for fonts_name, env in font_sets.items():
                found = _laid_out(source, env)
                total += len(found)
                for problem in found:
                    print(f"{name}\tdepth={depth_name}\tfonts={fonts_name}\t{problem}", flush=True)
                if found and save is not None:
                    (save / f"{name}-{depth_name}.gv").write_text(source)
    print(f"{total} problem(s) over {len(names)} model(s)", flush=True)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
