r"""The lines of code behind a recording's nodes, for pages that show them: the text of a
line (read when a page is built, never while recording) and a link that opens it in an editor.

>>> format_link("/home/me/model.py", 12)
'vscode://file/home/me/model.py:12'
>>> format_link("/home/me/my model.py", 3, "pycharm://open?file={path}&line={line}")
'pycharm://open?file=/home/me/my%20model.py&line=3'
>>> format_link("C:\\work\\model.py", 3)
'vscode://file/C:/work/model.py:3'
"""

from __future__ import annotations

import linecache
import os
import re
from typing import Any, Optional
from urllib.parse import quote

from ..graph import Graph
from ..nodes import LayerNode, Source

__all__ = ["DEFAULT_EDITOR_URL", "check_editor_url", "code_line", "editor_link", "format_link",
           "script_lines", "source_info"]

#: the link of a line of code: ``{path}`` (the absolute path, ``/`` separated and
#: percent-encoded) and ``{line}`` are filled in; VS Code's scheme by default
DEFAULT_EDITOR_URL = "vscode://file{path}:{line}"

#: schemes a link may not use: they would run code in the page rather than open an editor
_REFUSED = re.compile(r"^\s*(javascript|data|vbscript)\s*:", re.IGNORECASE)

#: a line of code is shown up to this many characters
MAX_CODE_CHARS = 300


def script_lines(rec: Optional[Graph]) -> frozenset[Source]:
    """The lines that called the recorded network itself (the ``source`` of its calls): what
    torch's own modules run from there (the layers of an ``nn.Sequential`` network) has these
    lines too, which are the recording script's, not the model's."""
    if rec is None:
        return frozenset()
    return frozenset(node.source for key in rec.context.subnet_keys
                     if isinstance(node := dict.get(rec.nodes, key), LayerNode) and node.source is not None)


def check_editor_url(editor_url: Any) -> Optional[str]:
    """``editor_url`` if it is a usable link template (``None`` or ``""``: no links).

    Raises:
        TypeError: not a string.
        ValueError: it lacks ``{path}`` or ``{line}``, has another ``{...}`` field, or uses
            a scheme that runs code (``javascript:``, ``data:``).
    """
    if editor_url is None or editor_url == "":
        return None
    if not isinstance(editor_url, str):
        raise TypeError(f"editor_url must be a string such as {DEFAULT_EDITOR_URL!r} (or None), "
                        f"got {type(editor_url).__name__}")
    if _REFUSED.match(editor_url):
        raise ValueError(f"editor_url must open an editor, not run code: {editor_url[:40]!r}")
    try:
        editor_url.format(path="/p", line=1)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"editor_url {editor_url!r} may name only {{path}} and {{line}}: {exc}") from None
    if "{path}" not in editor_url or "{line}" not in editor_url:
        raise ValueError(f"editor_url must name both {{path}} and {{line}}, got {editor_url!r}")
    return editor_url


def editor_link(src: Source, editor_url: Optional[str] = DEFAULT_EDITOR_URL) -> Optional[str]:
    """The link that opens ``src`` in an editor, or ``None`` (no template, or a file that is
    not on disk: code typed in a console, ``<string>``)."""
    if not editor_url or not os.path.isabs(src.filename) or not os.path.isfile(src.filename):
        return None
    return format_link(src.filename, src.lineno, editor_url)


def format_link(path: str, lineno: int, editor_url: str = DEFAULT_EDITOR_URL) -> str:
    """``editor_url`` with ``{path}`` (``/``-separated, starting with ``/``, percent-encoded)
    and ``{line}`` filled in."""
    path = path.replace("\\", "/")
    if not path.startswith("/"):  # C:/work/model.py -> /C:/work/model.py
        path = "/" + path
    return editor_url.format(path=quote(path, safe="/:"), line=lineno)


def code_line(src: Source) -> str:
    """The text of the line ``src`` names, stripped (``""`` when it cannot be read)."""
    try:
        text = linecache.getline(src.filename, src.lineno).strip()
    except (OSError, UnicodeError, ValueError):  # pragma: no cover - linecache mostly swallows these
        return ""
    return text if len(text) <= MAX_CODE_CHARS else text[:MAX_CODE_CHARS - 1] + "…"


def source_info(src: Optional[Source],
                editor_url: Optional[str] = DEFAULT_EDITOR_URL) -> Optional[dict[str, Any]]:
    """What a page shows of ``src``: ``where`` (``file.py:12``), ``file`` (the path as
    recorded), ``line``, ``function``, ``code`` (the line's text, when readable) and ``href``
    (the editor link, when there is one); ``None`` for no source."""
    if src is None:
        return None
    out: dict[str, Any] = {"where": src.where(), "file": src.filename, "line": src.lineno,
                           "function": src.function}
    code = code_line(src)
    if code:
        out["code"] = code
    href = editor_link(src, editor_url)
    if href:
        out["href"] = href
    return out
