"""Check the numbers of the Graphviz attributes a drawing sets, before any work.

Graphviz reads ``dpi="inf"`` (or ``"1e400"``) as infinity and writes a 0-byte PNG without an
error; a negative ``dpi`` makes it draw for minutes; ``nan`` passes through everything.  So
the numeric attributes that torchrecorder's stylers set (from their defaults, a preset, or
the user's keywords and ``KIND_attrs``) are checked when a renderer is made, which
:func:`torchrecorder.render_network` does before the model runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

__all__ = ["NUMERIC_ATTRIBUTES", "check_attribute_values"]

#: attribute -> (the least value, whether it is allowed, how many numbers: 1, or 2 for a
#: point "x,y" that may also be one number).  ``size`` and ``page`` may end in ``!``, ``ranksep``
#: in `` equally``.
NUMERIC_ATTRIBUTES: Mapping[str, tuple[float, bool, int]] = {
    "dpi": (0.0, False, 1), "resolution": (0.0, False, 1),
    "size": (0.0, False, 2), "page": (0.0, False, 2),
    "ranksep": (0.0, True, 1), "nodesep": (0.0, True, 1),
    "fontsize": (0.0, False, 1), "labelfontsize": (0.0, False, 1),
    "margin": (0.0, True, 2), "pad": (0.0, True, 2),
    "width": (0.0, True, 1), "height": (0.0, True, 1),
    "penwidth": (0.0, True, 1), "arrowsize": (0.0, True, 1),
    "peripheries": (0.0, True, 1), "minlen": (0.0, True, 1), "weight": (0.0, True, 1),
}

# a plain decimal number, as Graphviz's parser reads one (no inf, nan, hex or underscores)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _numbers(name: str, text: str) -> list[str]:
    """The numbers written in the value ``text`` of attribute ``name``."""
    text = text.strip()
    if name in ("size", "page") and text.endswith("!"):
        text = text[:-1]
    if name == "ranksep" and text.endswith("equally"):
        text = text[: -len("equally")].strip() or "0.5"
    return [part.strip() for part in text.split(",")]


def check_attribute_values(styles: Mapping[str, Mapping[str, object]]) -> None:
    """Raise ``ValueError`` for a numeric attribute (:data:`NUMERIC_ATTRIBUTES`) in ``styles``
    (kind -> attributes, as :attr:`~torchrecorder.renderer.GraphvizStyler.styles` holds
    them) whose value is not a finite number in range, and for any value that ends in a
    lone backslash (``color="red\\"``): it would escape the closing quote, and ``dot``
    would fail on the whole file with a syntax error.

    >>> check_attribute_values({"graph": {"dpi": "300", "size": "3.5,8!"}})
    >>> check_attribute_values({"graph": {"dpi": "inf"}})
    Traceback (most recent call last):
    ...
    ValueError: Graphviz attribute 'dpi' of the graph is 'inf': expected a finite number > 0
    """
    for kind, attrs in styles.items():
        for name, value in attrs.items():
            text = str(value)
            if text.endswith("\\") and (len(text) - len(text.rstrip("\\"))) % 2:
                where = "the graph" if kind == "graph" else f"{kind} elements"
                raise ValueError(f"Graphviz attribute {name!r} of {where} is {text!r}: it ends in a lone "
                                 "backslash, which escapes DOT's closing quote; double it for a backslash")
            rule = NUMERIC_ATTRIBUTES.get(name)
            if rule is None:
                continue
            least, inclusive, most_numbers = rule
            parts = _numbers(name, str(value))
            ok = 1 <= len(parts) <= most_numbers
            for part in parts if ok else ():
                number = float(part) if _NUMBER.fullmatch(part) else math.nan
                if not (math.isfinite(number) and (number >= least if inclusive else number > least)):
                    ok = False
                    break
            if not ok:
                where = "the graph" if kind == "graph" else f"{kind} elements"
                what = "a finite number" if most_numbers == 1 else "a finite number or two ('x,y')"
                raise ValueError(f"Graphviz attribute {name!r} of {where} is {str(value)!r}: expected "
                                 f"{what} {'>=' if inclusive else '>'} {least:g}")
