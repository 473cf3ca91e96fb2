"""The text of the HTML view: the standalone page, and the two forms it takes in a notebook.

The standalone page (:func:`page_html`) inlines everything: the web fonts, Graphviz compiled to
WebAssembly (``viz-global.js``), the page's script and the data.  In a notebook the first view
of a kernel session is that page plus a small script that hands the viewer (fonts, viz.js, the
page's script, as text) to later views on request (:func:`provider_html`); a later view carries
only its data and a loader (:func:`client_html`).  The loader asks the frames of the notebook
for the viewer with ``postMessage``, inserts what it gets and then hands it on in turn; its
Content-Security-Policy lists the SHA-256 of each script it may run (no ``'unsafe-inline'``),
so nothing but the exact viewer of this version of torchrecorder can run there, and, as in
every form, no request can leave the page.  Without an answer the loader says in the page
what is missing.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from functools import cache
from importlib import resources
from typing import Any

from .._text import utf8_safe
from ..errors import GraphError
from .webfonts import font_face_css

__all__ = ["client_html", "page_html", "provider_html", "script_json", "viewer_version"]

#: what a browser must not see inside a ``<script>`` element, and its JSON escape
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_ESCAPE_TABLE = str.maketrans(_SCRIPT_ESCAPES)

# the page's Content-Security-Policy: scripts and styles only from the page itself, WebAssembly
# compiled from the inlined bytes, the layout worker made from the inlined viz.js (a blob URL),
# images only from the page's own data/blob URLs, no connection, frame, font, form or base URL
# anywhere
_CSP_REST = ("'wasm-unsafe-eval'; worker-src blob:; style-src 'unsafe-inline'; img-src data: blob:; "
             "font-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'")
_CSP = "default-src 'none'; script-src 'unsafe-inline' " + _CSP_REST

#: how many times (every 250 ms) a later view asks for the viewer before it says it is missing
ASK_TRIES = 40

MISSING = ("This view uses the viewer carried by the first torchrecorder view shown in its kernel "
           "session, and no view on this page hands it over: that output was cleared or has not "
           "loaded (JupyterLab unloads outputs out of sight unless Settings > Notebook > Windowing "
           "mode is 'defer' or 'none'), or this notebook shows each output apart. Scroll to a "
           "view that draws, run the cell of the first view again, or set "
           "torchrecorder.HtmlPage.share_viewer = False and run this cell again.")


@cache
def _asset(name: str) -> str:
    """The text of a file shipped beside this module (``_html/...``, ``_vendor/...``)."""
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    if name.endswith(".js") and ("</script" in text.lower() or "<!--" in text):
        raise GraphError(f"{name} holds '</script' or '<!--' and cannot be inlined")
    return text


def script_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element: no ``<``, ``>``, ``&`` or
    line separators (escaped as ``\\u003c``, ...), so no name can end the element.

    >>> script_json({"name": "</script><b>"})
    '{"name":"\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e"}'
    """
    # (a lone surrogate from a name becomes a JSON escape: the page reads back the same text)
    return utf8_safe(json.dumps(data, ensure_ascii=False, separators=(",", ":"))
                     .translate(_SCRIPT_ESCAPE_TABLE))


def _inline(name: str) -> str:
    """The text of a ``<script>`` element holding asset ``name`` (hashed exactly as written)."""
    return "\n" + _asset(name) + "\n"


#: the page's script: these files of ``_html/``, each an ordinary script, run in this order
#: (they share what they define through ``window.__tr.page``; see ``page_state.js``)
PAGE_SCRIPTS = ("page_state.js", "page_dot.js", "page_view.js", "page_layout.js", "page_panel.js")


@cache
def _page_script() -> str:
    """The text of the ``<script>`` element holding the page's script: :data:`PAGE_SCRIPTS` in
    order (one element, hashed and handed to later notebook views as one text)."""
    return "\n" + "".join(_asset("_html/" + name) for name in PAGE_SCRIPTS) + "\n"


def _sha256(text: str) -> str:
    """The CSP hash source of an inline script's text."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


@cache
def viewer_version() -> str:
    """A digest of the viewer (fonts, viz.js, the page's script): views share only equal viewers."""
    digest = hashlib.sha256()
    for part in (font_face_css(), _inline("_vendor/viz-global.js"), _page_script()):
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def _head(name: str, csp: str) -> str:
    return "".join((
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n",
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        f"<title>{html.escape(utf8_safe(name))} · torchrecorder</title>\n",
    ))


def page_html(data: dict[str, Any], name: str, *, share: bool = False) -> str:
    """The page holding ``data`` (see :meth:`~torchrecorder.renderer.html.HtmlRenderer.page_data`):
    styles, the vendored Graphviz, the page's script and the data, all inline.  With ``share``
    it also hands its viewer to the later notebook views that ask (see the module docstring)."""
    shared = ""
    if share:
        shared = (f'<script id="tr-share" data-version="{viewer_version()}">{_inline("_html/share.js")}'
                  "</script>\n")
    return "".join((
        _head(name, _CSP),
        '<style id="tr-fonts">', font_face_css(), "</style>\n",
        "<style>\n", _asset("_html/page.css"), "</style>\n</head>\n<body>\n",
        _asset("_html/body.html"),
        '<script type="application/json" id="tr-data">', script_json(data), "</script>\n",
        '<script id="tr-viz">', _inline("_vendor/viz-global.js"), "</script>\n",
        '<script id="tr-page">', _page_script(), "</script>\n",
        shared, "</body></html>\n",
    ))


def provider_html(data: dict[str, Any], name: str) -> str:
    """The first notebook view of a session: the whole page, sharing its viewer."""
    return page_html(data, name, share=True)


def client_html(data: dict[str, Any], name: str) -> str:
    """A later notebook view: the data and a loader of the viewer a provider hands over."""
    client = _inline("_html/client.js")
    hashes = " ".join(_sha256(t) for t in (client, _inline("_vendor/viz-global.js"),
                                            _page_script()))
    need = {"version": viewer_version(), "tries": ASK_TRIES, "missing": MISSING}
    return "".join((
        _head(name, f"default-src 'none'; script-src {hashes} {_CSP_REST}"),
        "<style>\n", _asset("_html/page.css"), "</style>\n</head>\n<body>\n",
        '<p id="tr-wait" role="status">Loading the viewer from the first torchrecorder view of this '
        "notebook…</p>\n",
        _asset("_html/body.html"),
        '<script type="application/json" id="tr-data">', script_json(data), "</script>\n",
        '<script type="application/json" id="tr-need">', script_json(need), "</script>\n",
        "<script>", client, "</script>\n</body></html>\n",
    ))
