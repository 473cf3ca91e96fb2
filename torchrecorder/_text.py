"""Make any text safe for the places it is written to: HTML-like DOT labels and DOT ids."""

from __future__ import annotations

import html
import re
import unicodedata

__all__ = ["dot_id", "html_text", "visible"]

_SAFE_ID = re.compile(r"[^A-Za-z0-9_./#@\-]")


def visible(text: str) -> str:
    """Replace characters that cannot appear in XML (controls, surrogates) by escapes.

    >>> visible("a\\tb\\x00")
    'a\\\\tb\\\\x00'
    """
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cs") or ch in "\ufffe\uffff":
            esc = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch)
            out.append(esc if esc else f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def html_text(text: object) -> str:
    """Escape ``text`` for a Graphviz HTML-like label (``<``, ``>``, ``&``, quotes, controls).

    >>> html_text('<b>"x" & y</b>')
    '&lt;b&gt;&quot;x&quot; &amp; y&lt;/b&gt;'
    """
    return html.escape(visible(str(text)), quote=True)


def dot_id(key: object) -> str:
    """A DOT node id for a node key: readable characters kept, the rest replaced.

    ``:`` becomes ``@`` (the graphviz package reads ``a:b`` as node ``a``, port
    ``b``); other unsafe characters become ``_``.  Callers keep ids unique (see
    the Graphviz renderer).

    >>> dot_id('layer1.0/add_1'), dot_id('fc:out'), dot_id('a "b"\\\\')
    ('layer1.0/add_1', 'fc@out', 'a__b__')
    """
    return _SAFE_ID.sub("_", str(key).replace(":", "@")) or "_"
