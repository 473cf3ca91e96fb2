"""What a styler written for torchrecorder 1.0.3 needs: labels that stay valid when text is
added to them, and how such a styler is told from one written for today's API."""

from __future__ import annotations

import html
import re
import types
from collections.abc import Callable
from typing import Any

from .._text import html_text

__all__ = ["HtmlLabel", "is_seed_styler", "label_markup", "seed_cluster_attrs"]


class HtmlLabel(str):
    """A Graphviz HTML-like label that stays one when text is added to it.

    Code written for 1.0.3 extends the default label, ``z["label"] += " (depth 1)"``;
    the text added is escaped and continues the last line (a ``\\n`` in it starts a new
    line), and text added in front (``"Note: " + z["label"]``) starts the first.

    Code written for 1.0.3 also edits the label as the text it was there (``"fc\\n4×8"``):
    ``replace``, ``split``, slicing, ``upper``, ``strip``, ... read :attr:`text`, the label's
    lines without markup, and give plain text, drawn as a plain label.  Tests of the markup
    itself (``startswith``, ``in``, ``len``) and ``str(label)`` still see the markup.

    >>> HtmlLabel("<<B>fc</B>>") + " & co"
    '<<B>fc</B> &amp; co>'
    >>> HtmlLabel("<<B>fc</B><BR/>4×8 &amp; co>").replace("\\n", " ")
    'fc 4×8 & co'
    """

    __slots__ = ()

    @property
    def text(self) -> str:
        """The label as text: its lines (table rows, ``<BR/>`` breaks) joined by ``\\n``,
        without markup, entities and escapes decoded."""
        body = _LINE_BREAK.sub("\n", str(self)[1:-1])
        return html.unescape(_TAG.sub("", body)).replace("\\\\", "\\").strip("\n")

    def __add__(self, other: object) -> HtmlLabel:
        if not isinstance(other, str):
            return NotImplemented
        text = str(self)
        first, *rest = (html_text(part) for part in other.split("\n"))
        if text.endswith(_ROW_END):
            head = text[: -len(_ROW_END)] + first + "</TD></TR>"
            return HtmlLabel(head + "".join(f"<TR><TD>{r}</TD></TR>" for r in rest) + "</TABLE>>")
        return HtmlLabel(text[:-1] + first + "".join(f"<BR/>{r}" for r in rest) + ">")

    def __radd__(self, other: object) -> HtmlLabel:
        if not isinstance(other, str):
            return NotImplemented
        text = str(self)
        *rest, last = (html_text(part) for part in other.split("\n"))
        if text.startswith(_TABLE_START) and "<TR><TD>" in text:
            at = text.index("<TR><TD>") + len("<TR><TD>")
            rows = "".join(f"<TR><TD>{r}</TD></TR>" for r in rest)
            return HtmlLabel(text[: at - len("<TR><TD>")] + rows + "<TR><TD>" + last + text[at:])
        return HtmlLabel("<" + "".join(f"{r}<BR/>" for r in rest) + last + text[1:])


def _on_text(name: str) -> Callable[..., Any]:
    method = getattr(str, name)

    def on_text(self: HtmlLabel, *args: Any, **kwargs: Any) -> Any:
        return method(self.text, *args, **kwargs)

    on_text.__name__ = name
    on_text.__doc__ = f"``str.{name}`` of the label's :attr:`~HtmlLabel.text`."
    return on_text


# what 1.0.3 code does to a label to make another one of it
for _name in ("__getitem__", "replace", "split", "rsplit", "splitlines", "partition", "rpartition",
              "upper", "lower", "title", "capitalize", "swapcase", "casefold", "strip", "lstrip",
              "rstrip", "center", "ljust", "rjust", "expandtabs", "zfill"):
    setattr(HtmlLabel, _name, _on_text(_name))

_LINE_BREAK = re.compile(r"<BR\s*/?>|</TR>\s*<TR>", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")
_ROW_END = "</TD></TR></TABLE>>"
_TABLE_START = "<<TABLE"

def label_markup(label: str, made: object = None) -> str:
    """The DOT text of a label a styler returned, ``made`` being the default label its
    ``super().style_node(node)`` gave.

    A styler that formats the default label into text (``f"{z['label']} (frozen)"``,
    ``"{} *".format(z["label"])``, ``str(z["label"]) + "!"``) makes a plain string holding
    the label's markup; the text around the markup is added to it as
    :class:`HtmlLabel`'s ``+`` adds it (escaped), so no markup shows in the picture.
    Other labels are returned as they are.

    >>> label_markup("<<B>fc</B>> & co", HtmlLabel("<<B>fc</B>>"))
    '<<B>fc</B> &amp; co>'
    """
    if not isinstance(made, HtmlLabel) or label == made:
        return label
    before, found, after = label.partition(made)
    return str(before + made + after) if found else label

#: what a ``style_node`` / ``style_edge`` written for 1.0.3 reads: the recorded object, and the
#: parameter nodes that today's default drawing never shows
_SEED_NAMES = frozenset({"fn", "ParamNode"})
#: what marks a 1.0.3 styler in any method of its own: the parameter nodes (``__init__``
#: setting ``self.styles[ParamNode]``), which only the 1.0.3 view draws
_SEED_ANYWHERE = frozenset({"ParamNode"})


def _code_names(code: types.CodeType) -> set[str]:
    """The global and attribute names ``code`` and the functions inside it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


#: this package's name (a copy imported under another name, as benchmarks/ab_*.py do, must
#: know its own stylers)
_PACKAGE = __name__.split(".")[0]


def is_seed_styler(cls: type) -> bool:
    """Whether the styler class ``cls`` was written for torchrecorder 1.0.3, so that its
    renderer draws the 1.0.3 view (see :attr:`~torchrecorder.renderer.base.BaseRenderer.seed_view`).

    Its class attribute ``seed_view`` decides when set; else it is one when a
    ``style_node`` or ``style_edge`` of its own (not torchrecorder's) reads
    ``node.fn``, or a method of its own (``__init__`` editing
    ``self.styles[ParamNode]`` too) names ``ParamNode``: what 1.0.3 put in a
    drawing and today's default drawing leaves out (operations as autograd
    nodes, parameters, tensors).
    """
    forced = getattr(cls, "seed_view", None)
    if forced is not None:
        return bool(forced)
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] == _PACKAGE:
            continue
        for name, value in vars(klass).items():
            code = getattr(getattr(value, "__func__", value), "__code__", None)
            if not isinstance(code, types.CodeType):
                continue
            # style_node / style_edge reading node.fn; any method of its own (``__init__``
            # setting ``self.styles[ParamNode]``) naming the parameter nodes
            seen = _SEED_NAMES if name in ("style_node", "style_edge") else _SEED_ANYWHERE
            if seen & _code_names(code):
                return True
    return False


def seed_cluster_attrs(own: dict[str, str], default: dict[str, str], tooltip: bool = True) -> dict[str, str]:
    """What a 1.0.3 styler's ``style_node`` gave a layer (``own``) that the default style of
    the layer (``default``) does not: 1.0.3 styled a layer's cluster with ``style_node``, so
    a colour, a label or a tooltip it sets reaches the cluster too.  With ``tooltip=False``
    (a styler whose own ``style_cluster`` writes its clusters' tooltips, such as
    :class:`~torchrecorder.renderer.activations.ActivationStyler`, whose box tooltip
    describes the layer drawn as one box) the tooltip is left to ``style_cluster``.

    >>> seed_cluster_attrs({"color": "red", "tooltip": "mine", "shape": "box"},
    ...                    {"color": "black", "tooltip": "default", "shape": "box"})
    {'color': 'red', 'tooltip': 'mine'}
    """
    return {k: v for k, v in own.items() if default.get(k) != v and (tooltip or k != "tooltip")}
