"""Read DOT text back into statements, so that tests count edges and nodes from the DOT itself.

Counting ``"->"`` in DOT text counts tooltips too (an op's tooltip reads
``linear -> 2×8``); these helpers tokenise the statements instead, honouring
quoted strings and HTML-like ``<...>`` labels.  An edge drawn through a node holding its
label (``a -> "a -> b::label" -> b``, the renderer's ``label_nodes``) or through invisible
points on cluster title ranks (``"a -> b::via1"``) is read back as the one edge ``a -> b``
carrying that label, unless ``join_labels=False``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

__all__ = ["DotStatements", "parse_dot"]

_TOKEN = re.compile(
    r'\s*(?:("(?:[^"\\]|\\.)*")'      # a quoted string
    r"|(->|--|[{}\[\];=,])"            # punctuation
    r"|([A-Za-z0-9_.\-@#/\x80-\U0010ffff]+))",  # a bare word
    re.S,
)


def _html(text: str, i: int) -> tuple[str, int]:
    """The HTML-like string starting at ``text[i] == "<"``, and the index after it."""
    depth = 0
    j = i
    while j < len(text):
        if text[j] == "<":
            depth += 1
        elif text[j] == ">":
            depth -= 1
            if depth == 0:
                return text[i:j + 1], j + 1
        j += 1
    raise ValueError(f"unterminated HTML string at {i}")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        if text.startswith("//", i) or (text[i] == "#" and (i == 0 or text[i - 1] == "\n")):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end + 1
            continue
        if text[i] == "<":
            tok, i = _html(text, i)
            out.append(tok)
            continue
        m = _TOKEN.match(text, i)
        if m is None:
            raise ValueError(f"cannot read DOT at {text[i:i + 40]!r}")
        out.append(next(g for g in m.groups() if g is not None))
        i = m.end()
    return out


def _unquote(tok: str) -> str:
    if tok.startswith('"') and tok.endswith('"'):
        return re.sub(r'\\(.)', lambda m: m.group(1) if m.group(1) == '"' else m.group(0), tok[1:-1])
    return tok


@dataclass
class DotStatements:
    """The node ids, edges (id pairs) and cluster names of a DOT graph, in source order."""

    nodes: list[str]
    edges: list[tuple[str, str]]
    clusters: list[str]
    node_attrs: dict[str, dict[str, str]]
    edge_attrs: list[dict[str, str]]
    #: ``{rank=same; a; b}`` groups: rank -> the node ids it names, in order
    ranks: dict[str, list[str]]
    #: edges with ``style=invis``: layout hints, not drawn (not in ``edges``)
    invisible: list[tuple[str, str]]
    #: the nodes that hold an edge's label and the points an edge passes (joined into their
    #: edge): id -> attributes
    label_nodes: dict[str, dict[str, str]]


def _attrs(toks: list[str], i: int) -> tuple[dict[str, str], int]:
    attrs: dict[str, str] = {}
    if i < len(toks) and toks[i] == "[":
        i += 1
        while toks[i] != "]":
            key = _unquote(toks[i])
            if toks[i + 1] == "=":
                attrs[key] = toks[i + 2]
                i += 3
            else:
                i += 1
            if toks[i] in (",", ";"):
                i += 1
        i += 1
    return attrs, i


LABEL_SUFFIX = "::label"
VIA_SUFFIX = "::via"


def parse_dot(text: str, join_labels: bool = True) -> DotStatements:
    """Parse the DOT that torchrecorder writes (one digraph; nodes, edges, subgraphs, attributes).

    ``join_labels``: read an edge drawn through a label node as one edge with that label."""
    toks = _tokens(text)
    out = DotStatements([], [], [], {}, [], {}, [], {})
    tails: dict[str, str] = {}  # label node or point on an edge -> the tail of its edge
    labels: dict[str, Optional[str]] = {}  # the same -> the edge's label
    i = 0
    # header: [strict] digraph [name] {
    while toks[i] != "{":
        i += 1
    i += 1
    while i < len(toks):
        tok = toks[i]
        if tok == "{" and toks[i + 1:i + 3] == ["rank", "="]:  # a rank group names nodes, declares none
            kind = _unquote(toks[i + 3])
            i += 4
            group = []
            while toks[i] != "}":
                if toks[i] != ";":
                    group.append(_unquote(toks[i]))
                i += 1
            i += 1
            # a point on an edge ranked with a cluster's title is part of that edge's drawing
            if not any(VIA_SUFFIX in name for name in group):
                out.ranks.setdefault(kind, []).extend(group)
            continue
        if tok in ("}", ";", "{"):
            i += 1
            continue
        if tok == "subgraph":
            if _unquote(toks[i + 1]) not in out.clusters:  # not a cluster reopened for a label node
                out.clusters.append(_unquote(toks[i + 1]))
            i += 2
            continue
        if tok in ("graph", "node", "edge") and i + 1 < len(toks) and toks[i + 1] == "[":
            _, i = _attrs(toks, i + 1)
            continue
        if i + 1 < len(toks) and toks[i + 1] == "=":  # a graph attribute statement a=b
            i += 3
            continue
        if i + 1 < len(toks) and toks[i + 1] == "->":
            attrs, j = _attrs(toks, i + 3)
            tail, head = _unquote(tok), _unquote(toks[i + 2])
            if join_labels and head in out.label_nodes:
                # a first part: the last one carries the edge (and the label node's label)
                tails[head] = tails.pop(tail) if tail in tails else tail
                labels[head] = labels.pop(tail, None) or (
                    out.label_nodes[head].get("label") if head.endswith(LABEL_SUFFIX) else None)
                i = j
                continue
            if join_labels and tail in tails:
                label = labels.pop(tail, None)
                if label is not None:
                    attrs = {**attrs, "label": label}
                tail = tails.pop(tail)
            if attrs.get("style") == "invis":
                out.invisible.append((tail, head))
                i = j
                continue
            out.edges.append((tail, head))
            out.edge_attrs.append(attrs)
            i = j
            continue
        attrs, j = _attrs(toks, i + 1)
        if join_labels and ((_unquote(tok).endswith(LABEL_SUFFIX) and attrs.get("shape") == "plain")
                            or (VIA_SUFFIX in _unquote(tok) and attrs.get("label") == '""')):
            out.label_nodes[_unquote(tok)] = attrs
        else:
            out.nodes.append(_unquote(tok))
            out.node_attrs[_unquote(tok)] = attrs
        i = j
    return out
