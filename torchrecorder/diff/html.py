"""A diff as one self-contained HTML page: the union drawing and the two views of it.

The page holds the SVGs that Graphviz makes of :func:`~torchrecorder.diff.draw.make_diff_dot`'s
three views (so it draws what ``make_dot(d, view=...)`` draws: the union, and each side with
its own labels, counts and shapes on the union's layout), the entries' old and new values as
JSON, and a small script: *union* / *a* / *b* / *a | b* (two panes side by side) show those
drawings; the drawing opens fitted to its pane and zooms (wheel,
*fit* / *−* / *+*, keys ``0`` ``-`` ``+``) and pans (drag) as the model page does, the panes
together; *only changes* fades what did not change; a list of the changes (long paths cut at
their start, so the part that tells them apart shows) with *previous* / *next*; a side panel
with the old and new values of the selected node; hovering a node highlights its counterpart
in the other pane.  It needs no network and no server.
"""

from __future__ import annotations

import json
import os
import re
from html import escape
from typing import Any

from .._text import utf8_safe, visible
from ..backend import render_source
from .draw import make_diff_dot
from .model import Diff
from .status import MARKS
from .text import describe, title_of

__all__ = ["make_diff_html"]


def _shipped(name: str) -> str:
    """The text of a file shipped beside this module (``_page/...``)."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "_page", name), encoding="utf-8") as fh:
        return fh.read()


def _svg(source: str) -> str:
    svg = render_source(source, "svg").decode("utf-8")
    start = svg.find("<svg")
    if start < 0:
        raise RuntimeError("Graphviz wrote no <svg> element")
    return re.sub(r"<!--.*?-->", "", svg[start:], flags=re.S)


def make_diff_html(d: Diff, **kwargs: Any) -> str:
    """The HTML page of a diff (see the module's docstring); ``kwargs`` as for
    :func:`~torchrecorder.diff.draw.make_diff_dot` (but ``view``: the page has every view).

    Raises:
        GraphvizNotFoundError: no Graphviz to lay the drawing out.
    """
    kwargs.pop("view", None)
    # one drawing per view: the panes a and b each read their own side's labels and shapes
    svgs = "".join(f"<div class=\"diff-svg\" data-view=\"{view}\" hidden>"
                   f"{_svg(make_diff_dot(d, view, **kwargs).source)}</div>" for view in ("union", "a", "b"))
    entries: dict[str, Any] = {}
    order = []
    for e in d.entries:
        if e.kind not in ("layer", "op", "tensor", "param"):
            continue
        entries[str(e.index)] = {"a": e.a, "b": e.b, "status": e.status, "title": title_of(d, e),
                                 "mark": (MARKS["wrapped"] if e.note.startswith("wrapper of") else
                                          MARKS[e.status]).strip() or "=", "text": describe(d, e),
                                 "changes": {k: list(v) for k, v in e.changes.items()}}
        if e.status != "same":
            order.append(e.index)
    data = utf8_safe(json.dumps({"a": d.a.name, "b": d.b.name, "entries": entries, "order": order},
                                ensure_ascii=False, sort_keys=True))
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    csp = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
           "img-src data:")
    title = escape(utf8_safe(visible(f"diff {d.a.name} → {d.b.name}")))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">"
        f"<title>{title}</title><style>{_shipped('diff.css')}</style></head><body>"
        "<div id=\"bar\"><button data-view=\"union\">union</button><button data-view=\"a\">a</button>"
        "<button data-view=\"b\">b</button><button data-view=\"ab\">a | b</button>"
        "<button id=\"fit\" title=\"fit the window (0)\">fit</button>"
        "<button id=\"zout\" title=\"zoom out (-)\">−</button>"
        "<button id=\"zin\" title=\"zoom in (+)\">+</button>"
        "<label><input type=\"checkbox\" id=\"only\"> only changes</label>"
        "<button id=\"prev\">◀ previous</button><span id=\"pos\"></span><button id=\"next\">next ▶</button>"
        f"<span>{escape(d.summary().splitlines()[0])}</span></div>"
        "<div id=\"main\"><ul id=\"changes\"></ul><div id=\"panes\"></div><div id=\"panel\"></div></div>"
        f"{svgs}"
        f"<script type=\"application/json\" id=\"diff-data\">{data}</script>"
        f"<script>{_shipped('diff.js')}</script></body></html>\n")
