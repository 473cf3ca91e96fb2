"""The ``diff`` command: ``torchrecorder diff a.json b.json [-o diff.svg] [--exit-code]``.

Prints the summary tree on standard output unless ``-o`` names a file (``.svg``, ``.png``,
``.pdf``, any Graphviz format, ``.dot``, ``.html``, ``.json`` or ``.txt``; ``-f`` for a path
without one, else svg).  A device or named pipe (``/dev/null``, a FIFO) is written to, not
replaced, as by the main command.  Exit status: 0, or 1 with
``--exit-code`` when the models differ; 2 for an input that cannot be read (the message on
standard error).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Optional

from ._files import is_stdout
from .diff import diff
from .diff.draw import VIEWS
from .diff.files import render_diff
from .projection.budget import default_depth

__all__ = ["build_diff_parser", "main"]


def build_diff_parser() -> argparse.ArgumentParser:
    """The argument parser of ``torchrecorder diff``."""
    parser = argparse.ArgumentParser(
        prog="torchrecorder diff",
        description="Compare two saved recordings (rec.to_json(path), or torchrecorder ... -f json).",
        epilog="examples:\n  torchrecorder diff before.json after.json\n"
               "  torchrecorder diff before.json after.json -o diff.svg --view a\n"
               "  torchrecorder diff before.json after.json -o diff.html\n"
               "  torchrecorder diff before.json after.json --exit-code   # CI: nothing may change",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="the first (old) recording, a JSON file")
    parser.add_argument("b", help="the second (new) recording, a JSON file")
    parser.add_argument("-o", "--output", default=None,
                        help="file to write: a picture (.svg, .png, .pdf, .dot), the interactive page "
                             "(.html), .json or .txt (default: the summary on standard output)")
    parser.add_argument("-f", "--format", default=None,
                        help="format of -o: svg, png, pdf (any of Graphviz's), dot, html, json, txt "
                             "(default: the extension of -o, else svg)")
    parser.add_argument("--view", default="union", choices=VIEWS, help="what a picture shows")
    parser.add_argument("--no-legend", action="store_true", help="draw no legend")
    parser.add_argument("-d", "--depth", type=int, default=None,
                        help="modules deeper stay closed (default: all that hold changes, within the "
                             "drawing budget)")
    parser.add_argument("--map", action="append", default=[], metavar="OLD=NEW",
                        help="pair module OLD of the first with NEW of the second (repeatable)")
    parser.add_argument("--exit-code", action="store_true", help="exit with status 1 when the models differ")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run ``torchrecorder diff`` with ``argv``; returns the exit status."""
    args = build_diff_parser().parse_args(argv)
    mapping = {}
    for item in args.map:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            print(f"torchrecorder diff: error: --map takes OLD=NEW, got {item!r}", file=sys.stderr)
            return 2
        mapping[old] = new
    try:
        d = diff(args.a, args.b, mapping=mapping or None)
        if args.output:
            fmt = args.format or os.path.splitext(args.output)[1].lstrip(".") or "svg"
            written = render_diff(d, args.output, fmt, view=args.view, legend=not args.no_legend,
                                  render_depth=default_depth(256) if args.depth is None else args.depth)
            if not is_stdout(args.output):  # (after the data on standard output, it would be read as data)
                print(written)
        else:
            print(d.summary())
    except (ValueError, TypeError, OSError) as exc:
        print(f"torchrecorder diff: error: {exc}", file=sys.stderr)
        return 2
    return 1 if args.exit_code and d else 0


if __name__ == "__main__":
    sys.exit(main())
