"""Command line: ``torchrecorder MODULE:FACTORY -s 1,3,224,224 -o net.svg`` (or ``python -m torchrecorder``).

``MODULE:FACTORY`` names a class or a function that returns an ``nn.Module`` (or a
module instance) in an importable module (the current directory is importable) or
in a ``.py`` file.  Errors are one line each on standard error, without a traceback;
the exit status is 0 on success, 1 when the model cannot be loaded, run or drawn,
and 2 for a usage error (a bad shape, an unknown option).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, Optional, Union

from .api import record, render_network
from .backend import check_format
from .factory import ModelSpecError, load_model, parse_dtype, parse_shape
from .projection.budget import default_depth

__all__ = ["build_parser", "load_model", "main"]

PROG = "torchrecorder"
_PREFIX = f"{PROG}: "


def _shape(text: str) -> tuple[int, ...]:
    try:
        return parse_shape(text)
    except ModelSpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _fold(text: str) -> Union[str, bool, int]:
    """``auto`` | ``yes`` | ``no`` | N -> the ``fold_repeats`` value."""
    word = text.strip().lower()
    if word == "auto":
        return "auto"
    if word in ("yes", "true", "on", "all"):
        return True
    if word in ("no", "false", "off", "never"):
        return False
    if word.isdigit() and int(word) >= 2:
        return int(word)
    raise argparse.ArgumentTypeError(f"{text!r} is not auto, yes, no or a run length of 2 or more")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the command line (its ``--help`` is the reference)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Record one forward pass of a PyTorch model and draw its graph.",
        epilog="examples:\n"
               "  torchrecorder mypackage.models:build_net -s 1,3,224,224 -o net.svg -d 2 --summary\n"
               "  torchrecorder models.py:Net -s 2,16 -s 2,16 -o net.pdf --preset paper\n"
               "  torchrecorder lm.py:make_model -s 1,32 --input-dtype int64 -f json -o lm.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", help="'package.module:factory' or 'file.py:factory': a class or function "
                                      "returning an nn.Module (the current directory is importable)")
    parser.add_argument("-s", "--input-shape", type=_shape, action="append", required=True,
                        metavar="SHAPE", help="shape of an input, e.g. 1,3,224,224 (repeat for more inputs)")
    parser.add_argument("--input-dtype", "--dtype", dest="input_dtype", default=None, metavar="DTYPE",
                        help="dtype of the inputs, e.g. float16 (default: the model's); an integer dtype "
                             "such as int64 makes valid token ids, bool makes masks")
    parser.add_argument("-o", "--output", default=None,
                        help="file to write (default: NAME.FMT in the current directory)")
    parser.add_argument("-f", "--format", default=None,
                        help="output format: svg, png, pdf (any of Graphviz's), html (interactive page), "
                             "json (the recorded graph), mmd (Mermaid), dot (DOT source); "
                             "default: from the extension of -o, else svg")
    parser.add_argument("-d", "--depth", type=int, default=default_depth(1),
                        help="render depth (default 1, lowered to fit the drawing budget; "
                             "a depth given here is drawn as asked)")
    parser.add_argument("-n", "--name", default=None, help="network name (default: the factory's name)")
    parser.add_argument("--device", default=None, help="device for inputs (default: the model's)")
    parser.add_argument("--summary", action="store_true", help="also print the layer table")
    parser.add_argument("--preset", default="default", help="style preset: default, compact, print, paper")
    parser.add_argument("--direction", default=None, choices=["TB", "LR", "BT", "RL"],
                        help="layout direction (default TB: top to bottom)")
    parser.add_argument("--fold", type=_fold, default="auto", metavar="WHEN",
                        help="draw runs of identical blocks once, marked xN: auto (runs of 8 or more, "
                             "the default), yes (2 or more), no, or a run length N")
    parser.add_argument("--expand-leaves", action="store_true",
                        help="open leaf modules above --depth into the operations they ran")
    parser.add_argument("--all-ops", action="store_true",
                        help="draw every operation (also view/transpose/getitem and constants)")
    parser.add_argument("--tensor-nodes", action="store_true",
                        help="draw tensors between layers as boxes instead of shapes on the edges")
    parser.add_argument("--dpi", type=float, default=None, help="resolution of raster formats (default 192)")
    return parser


def _report(exc: BaseException) -> None:
    """One line per message on standard error: ``torchrecorder: error: ...``, then the notes."""
    plain = (ModelSpecError, ValueError, TypeError, OSError)
    text = str(exc) if isinstance(exc, plain) and str(exc) else f"{type(exc).__name__}: {exc}"
    print(f"{_PREFIX}error: {text}", file=sys.stderr)
    for note in getattr(exc, "__notes__", []):
        note = str(note)
        print(note if note.startswith(_PREFIX) else _PREFIX + note, file=sys.stderr)


def _run(args: argparse.Namespace) -> str:
    output = args.output or ""
    fmt = args.format or (os.path.splitext(output)[1].lstrip(".") if output else "") or "svg"
    fmt = check_format(fmt)  # an unknown format fails before the model is imported
    dtype = parse_dtype(args.input_dtype)
    net = load_model(args.model)
    name = args.name or args.model.rpartition(":")[2]
    output = output or f"{name}.{fmt}"
    directory, filename = os.path.split(output)
    stem = filename[: -len(fmt) - 1] if filename.lower().endswith("." + fmt) else filename
    shapes: Any = args.input_shape[0] if len(args.input_shape) == 1 else args.input_shape
    drawing: dict[str, Any] = {"preset": args.preset, "direction": args.direction,
                               "expand_leaves": args.expand_leaves, "all_ops": args.all_ops,
                               "tensor_nodes": args.tensor_nodes, "fold_repeats": args.fold}
    if args.dpi is not None:
        drawing["dpi"] = args.dpi
    path = render_network(net, name, shapes, directory or ".", filename=stem, fmt=fmt,
                          render_depth=args.depth, dtype=dtype, device=args.device, **drawing)
    if args.summary:
        print(record(net, name, shapes, dtype=dtype, device=args.device).summary(fold=args.fold))
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); returns the exit status.

    The current directory is put first on ``sys.path`` while it runs (as
    ``python -m`` does), so ``torchrecorder models:Net`` finds ``./models.py``
    from the installed ``torchrecorder`` script too.
    """
    args = build_parser().parse_args(argv)  # usage errors: message and exit status 2
    saved_path = list(sys.path)
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        path = _run(args)
    except Exception as exc:  # the command line reports, it does not trace back
        _report(exc)
        return 1
    finally:
        sys.path[:] = saved_path
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
