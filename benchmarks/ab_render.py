"""A/B timing of ``make_dot(...).source``: this checkout against a git revision, in one process.

The revision's package is extracted with ``git archive`` into a temporary
directory and imported under another name; both versions record the same
models, then their ``make_dot`` calls alternate, round after round, so that a
busy machine slows both alike.  Time is the CPU time of the drawing thread
(``time.thread_time``), which waiting for a core does not count.  Prints, per
model and drawing, the best time of each and their ratio (this checkout / the
revision).

    python benchmarks/ab_render.py --base main --rounds 15
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]

import torch  # noqa: E402
from models import build  # noqa: E402

import torchrecorder  # noqa: E402

#: the drawings timed: a name and the keyword arguments of make_dot
DRAWINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "depth 1": {"render_depth": 1},
    "unfolded": {"fold_repeats": False},
}


def load_base(rev: str, tmp: str) -> Any:
    """The package of git revision ``rev``, imported as ``_torchrecorder_base``."""
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "torchrecorder"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
    shutil.move(os.path.join(tmp, "torchrecorder"), os.path.join(tmp, "_torchrecorder_base"))
    # a revision whose is_seed_styler knew its own stylers by the name "torchrecorder" would
    # take them for 1.0.3 ones under this name, and draw the 1.0.3 view (every node): renamed
    seedstyle = os.path.join(tmp, "_torchrecorder_base", "renderer", "_seedstyle.py")
    if os.path.exists(seedstyle):
        with open(seedstyle, encoding="utf-8") as f:
            text = f.read()
        with open(seedstyle, "w", encoding="utf-8") as f:
            f.write(text.replace('== "torchrecorder":', '== "_torchrecorder_base":'))
    sys.path.insert(0, tmp)
    return importlib.import_module("_torchrecorder_base")


def ab_parser(doc: str, models: str, rounds: int, base: bool = False) -> argparse.ArgumentParser:
    """The options every A/B script here takes: ``--rounds``, ``--models`` (with these defaults),
    ``--threads`` and, with ``base``, the git revision ``--base``; described by ``doc``'s first
    line.  After ``parse_args`` the script calls ``torch.set_num_threads(args.threads)``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    if base:
        parser.add_argument("--base", default="main", help="git revision to compare with (default main)")
    parser.add_argument("--rounds", type=int, default=rounds,
                        help=f"alternating timed rounds (default {rounds})")
    parser.add_argument("--models", default=models, help="comma-separated names from benchmarks/models.py")
    parser.add_argument("--threads", type=int, default=1, help="torch's intra-op threads (default 1)")
    return parser


def main() -> None:
    args = ab_parser(__doc__ or "", "gpt2-w32-L8,gpt2-w32-L32,mlp-1000,resnet50", 15, base=True).parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        base = load_base(args.base, tmp)
        print(f"make_dot(...).source, thread CPU time, best of {args.rounds} alternating rounds; "
              f"ratio = this checkout / {args.base}")
        print(f"{'model':14} {'drawing':9} {'nodes':>6} {args.base + ' ms':>10} {'this ms':>9} {'ratio':>6}")
        for name in args.models.split(","):
            model, inputs = build(name)
            recs = [pkg.record(model, name, None, input_data=inputs) for pkg in (base, torchrecorder)]
            for label, kwargs in DRAWINGS.items():
                best = [float("inf"), float("inf")]
                for _ in range(args.rounds):
                    for i, (pkg, rec) in enumerate(zip((base, torchrecorder), recs, strict=True)):
                        start = time.thread_time()
                        pkg.make_dot(rec, **kwargs).source  # noqa: B018
                        best[i] = min(best[i], time.thread_time() - start)
                print(f"{name:14} {label:9} {len(recs[1].nodes):6d} {best[0] * 1e3:10.2f} "
                      f"{best[1] * 1e3:9.2f} {best[1] / best[0]:6.3f}")


if __name__ == "__main__":
    main()
