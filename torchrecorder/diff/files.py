"""Write a diff to a file: a picture, its DOT, the HTML page, JSON or the summary text."""

from __future__ import annotations

import os
from typing import Any, Optional, Union

from .._files import write_output
from ..backend import check_format, render_source
from .draw import make_diff_dot
from .html import make_diff_html
from .model import Diff

__all__ = ["render_diff"]


def render_diff(d: Diff, path: Union[str, os.PathLike[str]], fmt: Optional[str] = None,
                view: str = "union", **kwargs: Any) -> str:
    """Write a diff to ``path``: a picture (``svg``, ``png``, ``pdf``, any Graphviz format, or
    ``dot``), ``html`` (the interactive page of :func:`~torchrecorder.diff.html.make_diff_html`), ``json``
    (:meth:`~torchrecorder.diff.Diff.to_json`) or ``txt`` (the summary);
    the format is ``fmt`` or the file's extension.  A regular file is replaced atomically (its
    folder made if needed); a device, a named pipe or a path under ``/dev/`` (``/dev/null``,
    ``/dev/stdout``, a link to one) is opened and written, as the main command does.  Returns
    the path written.

    Raises:
        ValueError: the format is unknown, or no format is given and the path has no extension.
        IsADirectoryError: ``path`` is a directory.
    """
    path = os.fspath(path)
    fmt = (fmt or os.path.splitext(path)[1].lstrip(".")).lower()
    if not fmt:
        raise ValueError(f"cannot tell the format of {path!r}: give fmt= or an extension")
    source: Optional[str] = None
    if fmt == "json":
        data: bytes = d.to_json().encode("utf-8")
    elif fmt in ("txt", "text"):
        data = (d.summary() + "\n").encode("utf-8")
    elif fmt in ("html", "htm"):
        data = make_diff_html(d, **kwargs).encode("utf-8")
    else:
        fmt = check_format(fmt)
        source = make_diff_dot(d, view, **kwargs).source
        data = source.encode("utf-8") if fmt in ("dot", "gv") else render_source(source, fmt)
    write_output(path, data, dot_source=source)
    return path
