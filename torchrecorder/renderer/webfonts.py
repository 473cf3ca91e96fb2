"""The fonts the HTML view draws with: Arimo and Tinos, inlined as web fonts.

viz.js lays text out with its own table of character widths, not with the
browser's fonts: for ``Helvetica``, ``Arial`` and ``Arimo`` it uses Arial's
widths, for ``Times`` and ``Tinos`` those of Times.  Arimo and Tinos (SIL Open
Font License 1.1, vendored from ``@fontsource/arimo`` and ``@fontsource/tinos``
by ``tools/update_vendor.py``) have exactly those widths, so a page that names
them and carries them draws every text run as wide as it was laid out, whatever
fonts the reader's machine has (DejaVu only, as on a fresh Debian, included).
"""

from __future__ import annotations

import base64
from functools import cache
from importlib import resources

__all__ = ["WEB_FONTS", "font_face_css", "web_fontname"]

#: web family -> the vendored files of its regular and bold weights
WEB_FONTS = {
    "Arimo": {"400": "arimo-latin-400-normal.woff2", "700": "arimo-latin-700-normal.woff2"},
    "Tinos": {"400": "tinos-latin-400-normal.woff2", "700": "tinos-latin-700-normal.woff2"},
}

# the first family of a Graphviz fontname -> the web font with its widths
_SERIF = ("times", "times-roman", "times new roman", "liberation serif", "tinos", "serif", "georgia",
          "nimbus roman", "dejavu serif")


def web_fontname(fontname: str) -> str:
    """The web font that draws Graphviz ``fontname`` in the page: ``Tinos`` for a serif font
    list (``Times-Roman``), ``Arimo`` for any other (``Helvetica,Arial,sans-serif``).

    >>> web_fontname("Helvetica,Arial,sans-serif"), web_fontname("Times-Roman")
    ('Arimo', 'Tinos')
    """
    first = fontname.split(",")[0].strip().strip("'\"").lower()
    return "Tinos" if first in _SERIF or first.startswith("times") else "Arimo"


@cache
def font_face_css() -> str:
    """``@font-face`` rules for :data:`WEB_FONTS`, each font inlined as a ``data:`` URL."""
    rules = []
    vendor = resources.files(__package__).joinpath("_vendor")
    for family, weights in WEB_FONTS.items():
        for weight, name in weights.items():
            data = base64.b64encode(vendor.joinpath(name).read_bytes()).decode("ascii")
            rules.append(f'@font-face {{ font-family: "{family}"; font-style: normal; '
                         f"font-weight: {weight}; font-display: block; "
                         f'src: url(data:font/woff2;base64,{data}) format("woff2"); }}\n')
    return "".join(rules)
