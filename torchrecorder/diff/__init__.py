"""What changed between two recordings: :func:`diff` pairs their nodes and returns a :class:`Diff`.

>>> import torch, torchrecorder
>>> a = torchrecorder.record(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), "net", (1, 4))
>>> b = torchrecorder.record(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()), "net", (1, 4))
>>> d = torchrecorder.diff(a, b)
>>> [(e.a, e.status) for e in d.entries if e.kind == "layer" and e.status != "same"]
[('net', 'changed'), ('0', 'changed'), ('1', 'changed')]
>>> d.entry_of("a", "0").changes
{'output_shapes': ('1×4', '1×8'), 'params': ('20', '40')}
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Optional, Union

from ..export import load, loads
from ..graph import Graph
from .files import render_diff
from .match import Matching, match
from .model import DIFF_FORMAT, DIFF_VERSION, MARKS, STATUSES, Diff, Entry

__all__ = ["DIFF_FORMAT", "DIFF_VERSION", "MARKS", "STATUSES", "Diff", "Entry", "Matching", "diff",
           "read_side", "render_diff"]

Side = Union[Graph, str, "os.PathLike[str]", bytes]


def read_side(value: Any, which: str = "a") -> Graph:
    """A graph from a recording, a saved JSON file's path, or the JSON text itself.

    Raises:
        TypeError: ``value`` is none of these.
        ValueError: the file or text is not a torchrecorder recording, comes from a newer
            format version or is malformed (the message names which side).
        FileNotFoundError: the path names no file.
    """
    if isinstance(value, Graph):
        return value
    try:
        if isinstance(value, bytes) or (isinstance(value, str) and value.lstrip().startswith("{")
                                        and not os.path.exists(value)):
            return loads(value)
        if isinstance(value, (str, os.PathLike)):
            return load(value)
    except ValueError as exc:
        raise ValueError(f"diff: {which}: {exc}") from None
    raise TypeError(f"diff: {which} must be a recording (torchrecorder.record / load_json), a path "
                    f"to a saved JSON recording or its text, not {type(value).__name__}")


def diff(a: Side, b: Side, *, mapping: Optional[Mapping[str, str]] = None,
         rename: Optional[Mapping[str, str]] = None, strip_prefix: Optional[str] = "auto") -> Diff:
    """Compare two recordings (or saved JSON recordings) of models.

    Every node of both is paired with its counterpart or left alone, and given a status:
    ``same``, ``changed`` (with what changed, old and new: type, shapes, dtype, parameters,
    number of calls), ``added``, ``removed``, ``renamed`` (moved or renumbered), ``wrapped``
    (a wrapper such as a LoRA layer now holds it) or ``wrapper`` (a part of such a wrapper,
    the wrapper included: not a free addition; ``part_of`` names the wrapped pair).  See
    :mod:`torchrecorder.diff.match` for how nodes are paired.

    Args:
        a: the first ("old") model: a :class:`~torchrecorder.recorder.Recorder` (any
            :class:`~torchrecorder.graph.Graph`), the path of a JSON file saved with
            ``rec.to_json(path)``, or that JSON text.
        b: the second ("new") model, likewise.
        mapping: ``{a_module_path: b_module_path}``: modules to pair by hand (a fused
            ``conv`` to the fused module); ``"path#2"`` names a second call.
        rename: ``{regex: replacement}`` applied to ``a``'s module paths before pairing.
        strip_prefix: ``"auto"`` strips a prefix that wraps one model's module paths (peft's
            ``base_model.model.``); ``None`` strips none; a string strips that one.

    Returns:
        a :class:`Diff`: ``print(d)`` for a tree of changes, ``d.to_json()``,
        ``torchrecorder.make_dot(d)`` for a picture, ``render_diff(d, "diff.svg")`` (also
        ``.png``, ``.html``, ``.json``, ...) for a file, ``bool(d)`` whether anything differs.

    Raises:
        TypeError: ``a`` or ``b`` is neither a recording nor JSON.
        ValueError: a JSON input is not a recording, is from a newer version or malformed;
            a ``mapping`` names a module that does not exist or maps two modules onto one; a
            ``rename`` pattern is invalid.
    """
    ga, gb = read_side(a, "a"), read_side(b, "b")
    if mapping is not None and not isinstance(mapping, Mapping):
        raise TypeError(f"diff: mapping must be a mapping of module paths, not {type(mapping).__name__}")
    if rename is not None and not isinstance(rename, Mapping):
        raise TypeError(f"diff: rename must be a mapping {{regex: replacement}}, not {type(rename).__name__}")
    return Diff(match(ga, gb, mapping=mapping, rename=rename, strip_prefix=strip_prefix))
