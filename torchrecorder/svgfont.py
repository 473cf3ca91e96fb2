"""SVG figures that carry their font: the glyphs a drawing uses, embedded as ``@font-face``
rules, so that it looks the same on every machine (:func:`embed_fonts`).

Graphviz measures each text run with a font of the machine it runs on (the
``dot -v`` log names it; :func:`torchrecorder.backend.name_measured_fonts` writes
it first in each ``font-family``) and writes only the family names into the SVG: a
reader without that font sees another one, wider or narrower, and text spills out of
its box.  :func:`embed_fonts` finds the file of each font a drawing names (with
fontconfig's ``fc-match``, as Graphviz found it), keeps the glyphs of the characters
drawn in it (with fontTools, as WOFF; without fontTools the whole file, much larger),
and adds them to the SVG under a family name of the drawing's own, named first in each
``font-family``.  A font whose licence forbids embedding (the ``fsType`` of its
``OS/2`` table) is left out, with a warning.  PDF output embeds its fonts already.
"""

from __future__ import annotations

import base64
import html
import io
import logging
import re
import shutil
import subprocess
import warnings
from functools import cache
from typing import Optional

__all__ = ["EmbedFontWarning", "embed_fonts", "font_file"]


class EmbedFontWarning(UserWarning):
    """A font of a drawing could not be embedded (not found, or its licence forbids it): the
    SVG names it as before."""


_TEXT = re.compile(rb"<text\b([^>]*)>(.*?)</text>", re.S)
_ATTR = re.compile(rb'([\w:-]+)="([^"]*)"')
_TAG = re.compile(rb"<[^>]*>")
_SVG_OPEN = re.compile(rb"<svg\b[^>]*>")
_FAMILY_ATTR = re.compile(rb'font-family="([^"]*)"')


@cache
def font_file(families: str, bold: bool = False, italic: bool = False) -> Optional[str]:
    """The file of the font fontconfig gives for the CSS font list ``families`` (``"DejaVu
    Sans,Helvetica,sans-serif"``) in the weight and slant asked, or ``None`` (no ``fc-match``)."""
    fc_match = shutil.which("fc-match")
    if fc_match is None:
        return None
    pattern = ",".join(f.strip().strip("'\"").replace("-", r"\-") for f in families.split(",") if f.strip())
    if bold:
        pattern += ":weight=bold"
    if italic:
        pattern += ":slant=italic"
    try:
        proc = subprocess.run([fc_match, "-f", "%{file}", pattern], capture_output=True, text=True,
                              check=False, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    path = proc.stdout.strip()
    return path if proc.returncode == 0 and path else None


def _embeddable(data: bytes) -> tuple[bool, bool]:
    """Whether the font file ``data`` may be embedded, and whether it may be subset (its
    ``OS/2`` ``fsType``: bit 1 restricted, bit 9 bitmap only, bit 8 no subsetting)."""
    try:
        from fontTools.ttLib import TTFont
    except ImportError:
        return True, False
    try:
        font = TTFont(io.BytesIO(data), lazy=True)
        fs_type = int(font["OS/2"].fsType) if "OS/2" in font else 0
    except Exception:
        return True, False
    if fs_type & 0x0002 or fs_type & 0x0200:
        return False, False
    return True, not fs_type & 0x0100


def _subset(data: bytes, text: str, family: str) -> Optional[bytes]:
    """WOFF of the glyphs of ``text`` in the font ``data``, named ``family`` (a font's own
    name may be reserved by its licence for the unmodified font); ``None`` without fontTools."""
    try:
        from fontTools import subset
        from fontTools.ttLib import TTFont
    except ImportError:
        return None
    font = TTFont(io.BytesIO(data), recalcTimestamp=False)  # the same figure, the same bytes
    options = subset.Options()
    options.flavor = "woff"
    options.layout_features = ["*"]
    options.drop_tables = [*options.drop_tables, "FFTM"]  # FontForge's timestamps
    options.name_IDs = [0, 7, 13, 14]  # copyright, trademark, licence and its address
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=text)
    quiet = logging.getLogger("fontTools")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its notes on tables it cannot subset (dropped) are not ours
    try:
        subsetter.subset(font)
    finally:
        quiet.setLevel(level)
    names = font["name"]
    for name_id in (1, 4, 6, 16):
        value = family if name_id != 6 else re.sub(r"[^A-Za-z0-9-]", "-", family)
        names.setName(value, name_id, 3, 1, 0x409)
    out = io.BytesIO()
    font.flavor = "woff"
    font.save(out)
    return out.getvalue()


def embed_fonts(svg: bytes) -> bytes:
    """``svg`` (as Graphviz writes it) with the fonts of its text embedded: for each font
    list and style in use, an ``@font-face`` rule holding the glyphs drawn with it, under a
    family name written first in that ``font-family``.

    Fonts that cannot be found or may not be embedded are left as they were, with an
    :class:`EmbedFontWarning`; an SVG without text comes back unchanged.
    """
    used: dict[tuple[str, bool, bool], set[str]] = {}
    for match in _TEXT.finditer(svg):
        attrs = dict(_ATTR.findall(match.group(1)))
        family = attrs.get(b"font-family")
        if family is None:
            continue
        key = (family.decode("utf-8", "replace"), attrs.get(b"font-weight", b"") in (b"bold", b"700"),
               attrs.get(b"font-style", b"") == b"italic")
        text = html.unescape(_TAG.sub(b"", match.group(2)).decode("utf-8", "replace"))
        used.setdefault(key, set()).update(text)
    if not used:
        return svg
    names: dict[str, str] = {}
    rules: list[str] = []
    for (families, bold, italic), chars in sorted(used.items()):
        path = font_file(families, bold, italic)
        if path is None:
            warnings.warn(f"no font file found for {families!r} (fontconfig's fc-match is needed): "
                          "the SVG names the font without embedding it", EmbedFontWarning, stacklevel=3)
            continue
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            warnings.warn(f"cannot read the font {path}: {exc}", EmbedFontWarning, stacklevel=3)
            continue
        allowed, subsettable = _embeddable(data)
        if not allowed:
            warnings.warn(f"the licence of {path} forbids embedding it (OS/2 fsType): the SVG names "
                          "the font without embedding it", EmbedFontWarning, stacklevel=3)
            continue
        name = names.setdefault(families, f"torchrecorder-font-{len(names)}")
        woff = _subset(data, "".join(sorted(chars)) + " ", name) if subsettable else None
        if woff is not None:
            src = f'url(data:font/woff;base64,{base64.b64encode(woff).decode("ascii")}) format("woff")'
        else:
            kind = "opentype" if data[:4] == b"OTTO" else "truetype"
            src = f'url(data:font/{"otf" if kind == "opentype" else "ttf"};base64,' \
                  f'{base64.b64encode(data).decode("ascii")}) format("{kind}")'
        rules.append(f'@font-face {{ font-family: "{name}"; font-weight: {"bold" if bold else "normal"}; '
                     f'font-style: {"italic" if italic else "normal"}; src: {src}; }}')
    if not rules:
        return svg

    def name_first(match: re.Match[bytes]) -> bytes:
        value = match.group(1).decode("utf-8", "replace")
        name = names.get(value)
        return match.group(0) if name is None else f'font-family="{name},{value}"'.encode()

    svg = _FAMILY_ATTR.sub(name_first, svg)
    opening = _SVG_OPEN.search(svg)
    if opening is None:
        return svg
    style = ("\n<defs><style type=\"text/css\"><![CDATA[\n" + "\n".join(rules)
             + "\n]]></style></defs>").encode("ascii")
    return svg[:opening.end()] + style + svg[opening.end():]
