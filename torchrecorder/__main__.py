"""Command line: ``torchrecorder MODULE:FACTORY -s 1,3,224,224 -o net.svg`` (or ``python -m torchrecorder``).

``MODULE:FACTORY`` names a class or a function that returns an ``nn.Module`` (or a
module instance) in an importable module (the current directory is importable) or
in a ``.py`` file.  ``-o PATH`` is written exactly (``-`` is standard output); without
it, ``NAME.FMT`` in the current directory.  An error is one ``torchrecorder: error:`` line
on standard error (then a line per note), without a traceback; the exit status is 0 on
success, 1 when the model cannot be loaded, run or drawn (an ``exit()`` in the model's
code included: nothing is written), and 2 for a usage error (a bad shape, an unknown option).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, Optional, Union

from ._files import is_stream, write_output
from .api import _check_directory, _check_drawing, _picture, _target_path, record
from .backend import check_format
from .errors import GraphvizNotFoundError
from .factory import ModelSpecError, initialize_lazy, load_model, match_input_dtype, parse_dtype, parse_shape
from .projection.budget import default_depth
from .recording._failure import PARTIAL_RECORDING
from .summary import COLUMNS, DEFAULT_COLUMNS

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


def _columns(text: str) -> list[str]:
    """``label,flops,source`` -> the columns of the layer table (see ``summary_table``), each checked."""
    chosen = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in COLUMNS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"unknown column(s) {unknown or [text]}; choose from "
                                         f"{', '.join(COLUMNS)}")
    return chosen


def _depth(text: str) -> Optional[int]:
    """``all`` -> ``None`` (every depth); an integer as it is (a negative one is refused by
    ``render_network``, before the model runs, naming ``render_depth``)."""
    word = text.strip().lower()
    if word == "all":
        return None
    try:
        return int(word)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a depth (0, 1, 2, ...) or 'all'") from None


# what torch says when an embedding is given float inputs: token models want integer ids
_NEEDS_IDS = ("'indices'", "Long, Int", "expected scalar type Long", "must be Long")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the command line (its ``--help`` is the reference)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Record one forward pass of a PyTorch model and draw its graph.",
        epilog="examples:\n"
               "  torchrecorder mypackage.models:build_net -s 1,3,224,224 -o net.svg -d 2 --summary\n"
               "  torchrecorder models.py:Net -s 2,16 -s 2,16 -o net.pdf --preset paper\n"
               "  torchrecorder lm.py:make_model -s 1,32 --input-dtype int64 -f json -o lm.json\n\n"
               "compare two recordings (saved with -f json):\n"
               "  torchrecorder diff before.json after.json -o diff.svg   (see: torchrecorder diff --help)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", help="'package.module:factory' or 'file.py:factory': a class or function "
                                      "returning an nn.Module (the current directory is importable)")
    parser.add_argument("-s", "--input-shape", "--input-size", dest="input_shape", type=_shape,
                        action="append", required=True,
                        metavar="SHAPE", help="shape of an input, e.g. 1,3,224,224 (repeat for more inputs)")
    parser.add_argument("--input-dtype", "--dtype", dest="input_dtype", default=None, metavar="DTYPE",
                        help="dtype of the inputs, e.g. float16 (default: the model's); a floating dtype "
                             "converts the model to it too, an integer dtype such as int64 makes valid "
                             "token ids, bool makes masks")
    parser.add_argument("-o", "--output", default=None,
                        help="file to write, exactly this path ('-' for standard output; an existing "
                             "directory is an error); default: NAME.FMT in the current directory, "
                             "path separators in NAME replaced by _, leading dots left out")
    parser.add_argument("-f", "--format", default=None,
                        help="output format: svg, png, pdf (any of Graphviz's), html (interactive page), "
                             "json (the recorded graph), mmd (Mermaid), dot (DOT source); "
                             "default: from the extension of -o, else svg (an extension that names "
                             "another format is an error)")
    parser.add_argument("-d", "--depth", type=_depth, default=default_depth(1),
                        help="render depth (default 1, lowered to fit the drawing budget; a depth "
                             "given here is drawn as asked), or 'all' to open every module")
    parser.add_argument("-n", "--name", default=None, help="network name (default: the factory's name)")
    parser.add_argument("--device", default=None, help="device for inputs (default: the model's)")
    parser.add_argument("--summary", action="store_true", help="also print the layer table")
    parser.add_argument("--columns", type=_columns, default=None, metavar="NAMES",
                        help="the layer table's columns, comma-separated (implies --summary): "
                             + ", ".join(COLUMNS) + " (default: " + ",".join(DEFAULT_COLUMNS) + ")")
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
    parser.add_argument("--compile-breaks", action="store_true",
                        help="run torch._dynamo.explain on the model, mark the module calls where "
                             "torch.compile breaks the graph, and list the breaks")
    parser.add_argument("--embed-font", action=argparse.BooleanOptionalAction, default=None,
                        help="an SVG carries the glyphs it uses, so that it looks the same everywhere "
                             "(default: only with --preset paper)")
    return parser


def _one_line(text: str) -> str:
    """``text`` on one line: its lines stripped and joined with `` / ``."""
    return " / ".join(part.strip() for part in str(text).splitlines() if part.strip())


def _report(exc: BaseException) -> None:
    """One ``torchrecorder: error: ...`` line on standard error, then one line per note."""
    plain = (ModelSpecError, ValueError, TypeError, OSError)
    text = str(exc) if isinstance(exc, plain) and str(exc) else f"{type(exc).__name__}: {exc}"
    print(f"{_PREFIX}error: {_one_line(text)}", file=sys.stderr)
    for note in getattr(exc, "__notes__", []):  # (no exception object here to read .recording of)
        note = _one_line(str(note).replace(PARTIAL_RECORDING, ""))
        print(note if note.startswith(_PREFIX) else _PREFIX + note, file=sys.stderr)


# names of one format: an extension and a -f that agree
_SAME_FORMAT = {"gv": "dot", "jpeg": "jpg", "jpe": "jpg", "tif": "tiff", "htm": "html"}
_STDOUT = ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


def _is_format(ext: str) -> bool:
    """Whether the extension ``ext`` names an output format (known, if not installed)."""
    try:
        check_format(ext)
    except GraphvizNotFoundError:
        return True  # a Graphviz format, with no Graphviz here
    except ValueError:
        return False
    return True


def _output(args: argparse.Namespace, name: str) -> tuple[str, str]:
    """The format and the path to write (``-`` for standard output), checked before the model
    is imported.

    Without ``-o``: ``NAME.FMT`` in the current directory, ``NAME`` with path separators
    replaced by ``_`` (as :func:`~torchrecorder.render_network` names files).  With ``-o PATH``:
    exactly ``PATH``; the format is ``-f``, else ``PATH``'s extension, else svg; an extension
    that names another format than ``-f`` is an error, as is an existing directory.
    """
    output = args.output
    if output is None:
        fmt = check_format(args.format or "svg")
        return fmt, _target_path("", name, None, fmt)
    if not output:
        raise ValueError("-o needs a file name ('-' for standard output)")
    base = os.path.basename(output)
    ext = os.path.splitext(base)[1].lstrip(".").lower() if base not in ("", ".", "..") else ""
    if args.format is None:
        if ext and not _is_format(ext):
            raise ValueError(f"cannot tell the format from -o {output!r}: {ext!r} is no output "
                             "format; pass -f (svg, png, pdf, html, json, mmd, dot, ...)")
        fmt = check_format(ext or "svg")
    else:
        fmt = check_format(args.format)
        if ext and _is_format(ext) and _SAME_FORMAT.get(ext, ext) != _SAME_FORMAT.get(fmt, fmt):
            raise ValueError(f"-o {output!r} names a .{ext} file but -f asks for {fmt!r}: make them "
                             "agree, or leave one out")
    if output in _STDOUT:
        return fmt, "-"
    if os.path.isdir(output) or output.endswith(("/", os.sep)):
        raise IsADirectoryError(f"-o {output!r} is a directory: name the file to write (such as "
                                f"{os.path.join(output, _target_path('', name, None, fmt))})")
    if not is_stream(output):
        _check_directory(os.path.dirname(os.path.abspath(output)))
    return fmt, output


def _run(args: argparse.Namespace) -> Optional[str]:
    """Do what ``args`` say; the path written, or ``None`` for standard output."""
    name = args.name or args.model.rpartition(":")[2]
    fmt, path = _output(args, name)  # an unknown format fails before the model is imported
    dtype = parse_dtype(args.input_dtype)
    shapes: Any = args.input_shape[0] if len(args.input_shape) == 1 else args.input_shape
    drawing: dict[str, Any] = {"preset": args.preset, "direction": args.direction,
                               "expand_leaves": args.expand_leaves, "all_ops": args.all_ops,
                               "tensor_nodes": args.tensor_nodes}
    if args.dpi is not None:
        drawing["dpi"] = args.dpi
    _check_drawing(name, args.depth, args.fold, drawing)
    net = load_model(args.model)
    match_input_dtype(net, dtype)  # float16 inputs: the model in float16 too
    initialize_lazy(net, shapes, dtype=dtype, device=args.device)  # the command line owns the model
    rec = record(net, name, shapes, dtype=dtype, device=args.device)
    breaks = None
    if args.compile_breaks:  # dynamo: imported only here
        from .graph_breaks import compile_breaks
        breaks = compile_breaks(net, shapes, dtype=dtype, device=args.device, recording=rec)
        if fmt not in ("json", "mmd"):
            drawing["breaks"] = breaks
    data, source = _picture(rec, fmt, args.depth, args.fold, drawing, args.embed_font)
    if path == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        write_output(path, data, dot_source=source)
    if args.summary or args.columns:  # (to standard error when the picture went to standard output)
        print(rec.summary(columns=args.columns, fold=args.fold),
              file=sys.stderr if path == "-" else sys.stdout)
    if breaks is not None:
        print(breaks.summary(), file=sys.stderr if path == "-" else sys.stdout)
    return None if path == "-" else path


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); returns the exit status.

    The current directory is put first on ``sys.path`` while it runs (as
    ``python -m`` does), so ``torchrecorder models:Net`` finds ``./models.py``
    from the installed ``torchrecorder`` script too.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["diff"]:  # the subcommand of two saved recordings
        from .diff_cli import main as diff_main
        return diff_main(argv[1:])
    args = build_parser().parse_args(argv)  # usage errors: message and exit status 2
    saved_path = list(sys.path)
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        path = _run(args)
    except Exception as exc:  # the command line reports, it does not trace back
        if (args.input_dtype is None and hasattr(exc, "add_note")
                and any(hint in str(exc) for hint in _NEEDS_IDS)):
            exc.add_note(f"{_PREFIX}the model wants integer inputs (token ids): add --input-dtype int64")
        _report(exc)
        return 1
    except SystemExit as exc:  # the model's code called exit(): an error, not a success
        print(f"{_PREFIX}error: the model's code called exit({_one_line(repr(exc.code))}) "
              f"(SystemExit) while {args.model} was loaded or run: nothing was written", file=sys.stderr)
        return 1
    finally:
        sys.path[:] = saved_path
    if path is not None:  # as the file system names it (a name from undecodable bytes too)
        sys.stdout.flush()
        sys.stdout.buffer.write(os.fsencode(path) + b"\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
