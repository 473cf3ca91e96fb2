"""Command line: ``python -m torchrecorder MODULE:FACTORY -s 1,3,224,224 -o net.svg``."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import Any, Optional

import torch
from torch import nn

from .api import record, render_network

__all__ = ["load_model", "main"]


def _shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.replace("x", ",").split(",") if d.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape such as 1,3,224,224") from None
    if not dims or any(d < 0 for d in dims):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape such as 1,3,224,224")
    return dims


def load_model(spec: str) -> nn.Module:
    """Build the model named by ``module.path:attr`` or ``path/to/file.py:attr``.

    ``attr`` may be a module instance, or a callable (class or factory) that
    takes no arguments and returns one.
    """
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise ValueError(f"model {spec!r} must look like 'package.module:factory' or 'file.py:factory'")
    if target.endswith(".py") or os.sep in target:
        if not os.path.exists(target):
            raise FileNotFoundError(f"no such file: {target}")
        mod_spec = importlib.util.spec_from_file_location("_torchrecorder_model", target)
        if mod_spec is None or mod_spec.loader is None:
            raise ImportError(f"cannot import {target} as a Python file")
        module = importlib.util.module_from_spec(mod_spec)
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        try:
            mod_spec.loader.exec_module(module)
        finally:
            sys.path.pop(0)
    else:
        module = importlib.import_module(target)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AttributeError(f"{target} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if callable(obj) and not isinstance(obj, nn.Module):
        obj = obj()
    if not isinstance(obj, nn.Module):
        raise TypeError(f"{spec} gave a {type(obj).__name__}, not a torch.nn.Module")
    return obj


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="torchrecorder",
        description="Record one forward pass of a PyTorch model and draw its graph.",
    )
    parser.add_argument("model", help="'package.module:factory' or 'file.py:factory'")
    parser.add_argument("-s", "--input-shape", type=_shape, action="append", required=True,
                        metavar="SHAPE", help="shape of an input, e.g. 1,3,224,224 (repeat for more)")
    parser.add_argument("-o", "--output", default=None,
                        help="file to write (default: NAME.FMT in the current directory)")
    parser.add_argument("-f", "--format", default=None, help="output format (default: from -o, else svg)")
    parser.add_argument("-d", "--depth", type=int, default=1, help="render depth (default 1)")
    parser.add_argument("-n", "--name", default=None, help="network name (default: the factory's name)")
    parser.add_argument("--dtype", default=None, help="input dtype, e.g. float16 (default: the model's)")
    parser.add_argument("--device", default=None, help="device for inputs (default: the model's)")
    parser.add_argument("--summary", action="store_true", help="print the layer table")
    parser.add_argument("--preset", default="default", help="style preset: default, compact, print, paper")
    parser.add_argument("--direction", default=None, choices=["TB", "LR", "BT", "RL"],
                        help="layout direction (default TB: top to bottom)")
    parser.add_argument("--expand-leaves", action="store_true",
                        help="open leaf modules above --depth into the operations they ran")
    parser.add_argument("--all-ops", action="store_true",
                        help="draw every operation (also view/transpose/getitem and constants)")
    parser.add_argument("--tensor-nodes", action="store_true",
                        help="draw tensors between layers as boxes instead of shapes on the edges")
    parser.add_argument("--dpi", type=float, default=None, help="resolution of raster formats (default 192)")
    args = parser.parse_args(argv)

    try:
        net = load_model(args.model)
        name = args.name or args.model.rpartition(":")[2]
        dtype = getattr(torch, args.dtype) if args.dtype else None
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise ValueError(f"{args.dtype!r} is not a torch dtype")
        output = args.output or f"{name}.{args.format or 'svg'}"
        fmt = args.format or (os.path.splitext(output)[1].lstrip(".") or "svg")
        directory, filename = os.path.split(output)
        stem = filename[: -len(fmt) - 1] if filename.endswith("." + fmt) else filename
        shapes: Any = args.input_shape[0] if len(args.input_shape) == 1 else args.input_shape
        drawing: dict[str, Any] = {"preset": args.preset, "direction": args.direction,
                                   "expand_leaves": args.expand_leaves, "all_ops": args.all_ops,
                                   "tensor_nodes": args.tensor_nodes}
        if args.dpi is not None:
            drawing["dpi"] = args.dpi
        path = render_network(net, name, shapes, directory or ".", filename=stem, fmt=fmt,
                              render_depth=args.depth, dtype=dtype, device=args.device, **drawing)
        if args.summary:
            print(record(net, name, shapes, dtype=dtype, device=args.device))
    except Exception as exc:  # the command line reports, it does not trace back
        print(f"torchrecorder: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        for note in getattr(exc, "__notes__", []):
            print(f"torchrecorder: {note}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
