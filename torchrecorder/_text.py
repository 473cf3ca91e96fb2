"""Make any text safe for the places it is written to: HTML-like DOT labels and DOT ids."""

from __future__ import annotations

import html
import re
import unicodedata

import graphviz

__all__ = ["dot_id", "dot_text", "html_text", "visible"]

_SAFE_ID = re.compile(r"[^A-Za-z0-9_./#@\-]")


def visible(text: str) -> str:
    """Replace characters that cannot appear in XML (controls, surrogates) by escapes.

    >>> visible("a\\tb\\x00")
    'a\\\\tb\\\\x00'
    """
    if text.isprintable():  # no control, surrogate or non-character: nothing to do
        return text
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
    r"""Escape ``text`` for a Graphviz HTML-like label (``<``, ``>``, ``&``, quotes, backslashes, controls).

    Graphviz expands escapes such as ``\N`` (the node's name) even in
    HTML-like labels, after decoding entities; a doubled backslash is a literal one.
    Its HTML parser also rejects a text that is only ``]``, so ``]`` is
    always written as ``&#93;``.

    >>> print(html_text('<b>"x" & y\\N</b>'))
    &lt;b&gt;&quot;x&quot; &amp; y\\N&lt;/b&gt;
    """
    return html.escape(visible(str(text)), quote=True).replace("\\", "\\\\").replace("]", "&#93;")


def dot_text(text: object) -> str:
    r"""Escape ``text`` for a quoted DOT attribute such as ``tooltip``.

    Graphviz decodes HTML entities in every string and expands backslash
    escapes twice in tooltips, so ``&`` becomes ``&amp;`` and a backslash
    four backslashes (two here, doubled by :func:`graphviz.escape`).

    >>> print(dot_text('a & b\\N'))
    a &amp; b\\\\N
    """
    return graphviz.escape(visible(str(text)).replace("&", "&amp;").replace("\\", "\\\\"))


def dot_id(key: object) -> str:
    """A DOT node id for a node key: readable characters kept, the rest replaced.

    ``:`` becomes ``@`` (the graphviz package reads ``a:b`` as node ``a``, port
    ``b``); other unsafe characters become ``_``.  Callers keep ids unique (see
    the Graphviz renderer).

    >>> dot_id('layer1.0/add_1'), dot_id('fc:out'), dot_id('a "b"\\\\')
    ('layer1.0/add_1', 'fc@out', 'a__b__')
    """
    return _SAFE_ID.sub("_", str(key).replace(":", "@")) or "_"
