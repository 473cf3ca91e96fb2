"""Make any text safe for the places it is written to: HTML-like DOT labels and DOT ids."""

from __future__ import annotations

import hashlib
import html
import re
import unicodedata
import warnings

from graphviz.exceptions import DotSyntaxWarning
from graphviz.quoting import NoHtml

__all__ = ["DOT_STRING_BYTES", "dot_id", "dot_quote", "dot_text", "html_text", "quote_dot_id",
           "quoted_dot_text", "shorten", "string_quote", "utf8_safe", "visible"]

#: Graphviz (2.43 to 12) refuses a quoted or HTML string of 16,384 bytes or more ("syntax error
#: ... longer than 16384?"); what torchrecorder writes stays under this
DOT_STRING_BYTES = 16_000
# node ids longer than this are cut, and told apart by a hash of the whole key
_MAX_ID = 200

_SAFE_ID = re.compile(r"[^A-Za-z0-9_./#@\-]")
# characters that html_text rewrites (printable text without them comes back as it is)
_HTML_SPECIAL = re.compile(r"[&<>\"'\\\]]")
# characters that dot_text rewrites, or that make dot_quote look closer
_DOT_SPECIAL = re.compile(r'[&\\"<]')
# a DOT ID that needs no quotes: a name of ASCII letters, digits and underscores not
# starting with a digit, or a numeral (https://graphviz.org/doc/info/lang.html)
_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)")
_NUMERAL = re.compile(r"-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)")
_KEYWORDS = frozenset(("node", "edge", "graph", "digraph", "subgraph", "strict"))
# what the graphviz package (0.20, 0.21) takes for an HTML string and for an ID that needs no
# quotes: both with ``match`` and a ``$`` that also matches before a final newline
_HTML_STRING = re.compile(r"<.*>$", re.DOTALL)
_ID_LIKE = re.compile(r"(?:[a-zA-Z_][a-zA-Z0-9_]*|-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?))$")


def _odd_backslashes_at_end(text: str) -> bool:
    """Whether ``text`` ends (or ends before a final newline) in an odd number of backslashes."""
    for body in (text, text[:-1] if text.endswith("\n") else None):
        if body is not None and (len(body) - len(body.rstrip("\\"))) % 2:
            return True
    return False


def _quote(text: str, html_ok: bool = True) -> str:
    r"""``text`` as a DOT ID, byte for byte as :func:`graphviz.quoting.quote` writes it, in
    linear time (the package's regular expressions take time quadratic in the length of a
    run of backslashes: hours for a name of 200,000).

    An HTML string (``<...>``) is written as it is unless ``html_ok`` is false (as for
    :func:`graphviz.nohtml` text); a bare ID too; anything else goes in double quotes, a
    ``"`` not yet escaped (after an even number of backslashes) getting a backslash.  Text
    ending in an odd number of backslashes warns as the package does.

    >>> print(_quote('say "hi"'), _quote('\\"'), _quote("<b>x</b>"), _quote("<b>", html_ok=False))
    "say \"hi\"" "\"" <b>x</b> "<b>"
    """
    if html_ok and not isinstance(text, NoHtml) and _HTML_STRING.match(text):
        return text
    if _ID_LIKE.match(text) and text.lower() not in _KEYWORDS:
        return text
    if _odd_backslashes_at_end(text):
        warnings.warn(f"expect syntax error scanning invalid quoted string: {text!r}",
                      category=DotSyntaxWarning, stacklevel=3)
    parts = text.split('"')
    out = []
    for part in parts[:-1]:
        out.append(part)
        # an odd run of backslashes already escapes the quote
        out.append('"' if (len(part) - len(part.rstrip("\\"))) % 2 else '\\"')
    out.append(parts[-1])
    return f'"{"".join(out)}"'


_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_safe(text: str) -> str:
    r"""``text`` with every lone surrogate (which UTF-8 cannot encode) written as ``\uXXXX``.

    Every writer of text that leaves the program (the layer table, the HTML page, JSON,
    files) passes it through here.  Inside a JSON string the escape reads back as the
    very character it replaces; anywhere else it shows what the name holds, as
    :func:`visible` writes it.  Text without surrogates comes back as it is.

    >>> utf8_safe("a\ud800b"), utf8_safe("ü")
    ('a\\ud800b', 'ü')
    """
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


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
    text = str(text)
    if text.isprintable() and not _HTML_SPECIAL.search(text):
        return text
    return html.escape(visible(text), quote=True).replace("\\", "\\\\").replace("]", "&#93;")


def dot_text(text: object) -> str:
    r"""Escape ``text`` for a quoted DOT attribute such as ``tooltip``.

    Graphviz decodes HTML entities in every string and expands backslash
    escapes twice in tooltips, so ``&`` becomes ``&amp;`` and a backslash
    four backslashes (two here, doubled again as :func:`graphviz.escape` does).
    The result is a plain string: write it with :func:`string_quote`, which
    never reads it as an HTML string.

    >>> print(dot_text('a & b\\N'))
    a &amp; b\\\\N
    """
    text = str(text)
    if text.isprintable() and not _DOT_SPECIAL.search(text):
        return text
    return visible(text).replace("&", "&amp;").replace("\\", "\\" * 4)


def dot_quote(text: str) -> str:
    """``text`` as a DOT ID, quoted where needed, exactly as :func:`graphviz.quoting.quote` writes it.

    Text with no quote, backslash, ``<`` or newline is decided at once (bare, or in
    double quotes); anything else by a linear-time copy of the package's rules.

    >>> dot_quote("fc"), dot_quote("0.5"), dot_quote("a b"), dot_quote("node"), dot_quote("x@out")
    ('fc', '0.5', '"a b"', '"node"', '"x@out"')
    """
    if type(text) is str and "\n" not in text and not _DOT_SPECIAL.search(text):
        if _BARE_ID.fullmatch(text) and text.lower() not in _KEYWORDS:
            return text
        return f'"{text}"'
    return _quote(text)


def string_quote(text: str) -> str:
    """``text`` as a DOT ID that is never read as an HTML string: :func:`dot_quote`, but text
    that starts with ``<`` and ends with ``>`` (or ``>`` and a newline), which would be, is
    written in double quotes.

    For attributes that take plain strings, such as ``tooltip``.

    >>> string_quote("fc"), string_quote("<x (Linear) raised: expected <int>")
    ('fc', '"<x (Linear) raised: expected <int>"')
    """
    if text.startswith("<") and _HTML_STRING.match(text):
        return _quote(text, html_ok=False)
    return dot_quote(text)


def quote_dot_id(text: str) -> str:
    """:func:`dot_quote` of an id made by :func:`dot_id` (ASCII letters, digits and ``_./#@-``):
    bare if it is a name or a numeral, else in double quotes.

    >>> quote_dot_id("fc"), quote_dot_id("12"), quote_dot_id("Graph"), quote_dot_id("fc@out")
    ('fc', '12', '"Graph"', '"fc@out"')
    """
    if text.isidentifier():
        return f'"{text}"' if text.lower() in _KEYWORDS else text
    if text[:1] in "-.0123456789" and _NUMERAL.fullmatch(text):
        return text
    return f'"{text}"'


def quoted_dot_text(text: str) -> str:
    """The attribute value written for a tooltip ``text``: ``string_quote(str(dot_text(text)))``.

    (The text is a plain string by then, as the renderer's attribute check makes it.)

    >>> quoted_dot_text("x (Linear)"), quoted_dot_text('say "hi" & bye')
    ('"x (Linear)"', '"say \\\\"hi\\\\" &amp; bye"')
    """
    if text.isprintable() and not _DOT_SPECIAL.search(text):  # no newline either
        if " " not in text and _BARE_ID.fullmatch(text) and text.lower() not in _KEYWORDS:
            return text
        return f'"{text}"'
    return string_quote(str(dot_text(text)))


def dot_id(key: object) -> str:
    """A DOT node id for a node key: readable characters kept, the rest replaced.

    ``:`` becomes ``@`` (the graphviz package reads ``a:b`` as node ``a``, port
    ``b``); other unsafe characters become ``_``.  An id longer than 200
    characters keeps its first 186 and ends in ``__`` and 12 hex digits of a hash
    of the whole key.  Callers keep ids unique (see the Graphviz renderer).

    >>> dot_id('layer1.0/add_1'), dot_id('fc:out'), dot_id('a "b"\\\\')
    ('layer1.0/add_1', 'fc@out', 'a__b__')
    >>> len(dot_id("x" * 20_000))
    200
    """
    text = _SAFE_ID.sub("_", str(key).replace(":", "@")) or "_"
    if len(text) > _MAX_ID:
        digest = hashlib.blake2b(str(key).encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
        text = f"{text[: _MAX_ID - 14]}__{digest}"
    return text


def shorten(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its start and end around ``…``,
    ``limit`` characters in all.

    >>> shorten("encoder.layers.11.attention", 15)
    'encoder…tention'
    """
    if len(text) <= limit:
        return text
    if limit < 2:
        return "…"[:limit]
    head = (limit - 1 + 1) // 2
    tail = limit - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")
