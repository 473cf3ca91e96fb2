"""Where Graphviz put the edge labels of a drawing, from ``dot -Tjson``: :func:`label_problems`
lists every label that a cluster's border crosses and every edge that runs through a label
not its own, each as a short sentence naming the label and the cluster or edge;
:func:`node_problems` every visible node box outside its cluster or on another's border."""

from __future__ import annotations

import itertools
import json
from typing import Any

from torchrecorder.backend import render_source

__all__ = ["edges_outside_their_cluster", "label_problems", "layout", "node_problems"]

Box = tuple[float, float, float, float]  # x0, y0, x1, y1


def layout(source: str) -> dict[str, Any]:
    """``dot -Tjson`` of ``source``, parsed."""
    return dict(json.loads(render_source(source, "json")))


def _text_box(ops: list[dict[str, Any]]) -> Box | None:
    """The box of the text drawn by the ``T`` operations of an ``_ldraw_`` list."""
    boxes: list[Box] = []
    size = 14.0
    for op in ops:
        if op.get("op") == "F":
            size = float(op["size"])
        elif op.get("op") == "T" and str(op.get("text", "")).strip():
            x, y = (float(v) for v in op["pt"])
            w = float(op["width"])
            x0 = {"l": x, "r": x - w}.get(op.get("align", "c"), x - w / 2)
            boxes.append((x0, y - 0.25 * size, x0 + w, y + 0.8 * size))
    if not boxes:
        return None
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes),
            max(b[3] for b in boxes))


def _bezier_points(ops: list[dict[str, Any]], steps: int = 12) -> list[tuple[float, float]]:
    points: list[tuple[float, float]] = []
    for op in ops:
        if op.get("op") not in ("b", "B"):
            continue
        ctrl = [(float(p[0]), float(p[1])) for p in op["points"]]
        for k in range(0, len(ctrl) - 3, 3):
            p0, p1, p2, p3 = ctrl[k:k + 4]
            for i in range(steps + 1):
                t = i / steps
                a, b, c, d = (1 - t) ** 3, 3 * t * (1 - t) ** 2, 3 * t * t * (1 - t), t ** 3
                points.append((a * p0[0] + b * p1[0] + c * p2[0] + d * p3[0],
                               a * p0[1] + b * p1[1] + c * p2[1] + d * p3[1]))
    return points


def _inside(p: tuple[float, float], box: Box, shrink: float = 1.0) -> bool:
    return box[0] + shrink < p[0] < box[2] - shrink and box[1] + shrink < p[1] < box[3] - shrink


def _crossed(box: Box, border: Box) -> bool:
    """Whether the rectangle ``border`` (a cluster's) crosses ``box``: neither holds the other
    nor are they apart."""
    apart = box[2] <= border[0] or box[0] >= border[2] or box[3] <= border[1] or box[1] >= border[3]
    within = border[0] <= box[0] and box[2] <= border[2] and border[1] <= box[1] and box[3] <= border[3]
    return not apart and not within


def label_problems(source: str, label_nodes: str = "::label") -> list[str]:
    """Problems of the edge labels of DOT ``source`` as ``dot`` lays it out: a label (an edge's
    ``label``, or a node whose name ends in ``label_nodes``) that a cluster's border crosses,
    and an edge that runs through a label that is not its own."""
    data = layout(source)
    objects = data.get("objects", [])
    names = {o["_gvid"]: o.get("name", "") for o in objects}
    clusters = [(o.get("label") or o["name"], tuple(float(v) for v in o["bb"].split(",")))
                for o in objects if str(o.get("name", "")).startswith("cluster") and "bb" in o]
    labels: list[tuple[str, Box, set[int]]] = []  # text, box, the edges it belongs to
    edges = data.get("edges", [])
    for e in edges:
        box = _text_box(e.get("_ldraw_", []))
        if box is not None:
            labels.append((f"{names[e['tail']]} -> {names[e['head']]}", box, {e["_gvid"]}))
    for o in objects:
        if str(o.get("name", "")).endswith(label_nodes) and "_ldraw_" in o:
            box = _text_box(o["_ldraw_"])
            own = {e["_gvid"] for e in edges if o["_gvid"] in (e["tail"], e["head"])}
            if box is not None:
                labels.append((o["name"], box, own))
    problems = []
    for what, box, own in labels:
        for cluster, border in clusters:
            if _crossed(box, border):  # type: ignore[arg-type]
                problems.append(f"the border of {cluster} crosses the label of {what}")
        for e in edges:
            if e["_gvid"] in own or e.get("style") == "invis":
                continue
            if any(_inside(p, box) for p in _bezier_points(e.get("_draw_", []))):
                edge = f"{names[e['tail']]} -> {names[e['head']]}"
                problems.append(f"the edge {edge} runs through the label of {what}")
    return problems


def _node_box(o: dict[str, Any]) -> Box:
    x, y = (float(v) for v in o["pos"].split(","))
    w, h = float(o["width"]) * 72, float(o["height"]) * 72
    return (x - w / 2, y - h / 2, x + w / 2, y + h / 2)


def node_problems(data: dict[str, Any]) -> list[str]:
    """Problems of the node boxes of a ``dot -Tjson`` layout (:func:`layout`): a visible node
    not wholly inside the box of a visible cluster that holds it, or touching the box of a
    visible cluster that does not hold it (sitting on its border or inside it)."""
    objects = data.get("objects", [])
    nodes = [o for o in objects if "pos" in o and not str(o.get("name", "")).startswith("cluster")
             and "invis" not in str(o.get("style", ""))]
    problems = []
    for c in objects:
        if not str(c.get("name", "")).startswith("cluster") or "bb" not in c \
                or "invis" in str(c.get("style", "")):
            continue
        bb = tuple(float(v) for v in c["bb"].split(","))
        members = set(c.get("nodes", []))
        for n in nodes:
            box = _node_box(n)
            within = bb[0] <= box[0] and box[2] <= bb[2] and bb[1] <= box[1] and box[3] <= bb[3]
            apart = box[2] <= bb[0] or box[0] >= bb[2] or box[3] <= bb[1] or box[1] >= bb[3]
            if n["_gvid"] in members and not within:
                problems.append(f"{n['name']} is not inside its cluster {c['name']}")
            elif n["_gvid"] not in members and not apart:
                problems.append(f"{n['name']} sits on {c['name']}, a cluster it is not in")
    return problems


def _monotone(flags: list[bool]) -> bool:
    """Whether ``flags`` changes value at most once."""
    return sum(1 for x, y in itertools.pairwise(flags) if x != y) <= 1


def edges_outside_their_cluster(source: str, slack: float = 1.0) -> list[str]:
    """Edges of DOT ``source`` (as ``dot`` lays it out) that bulge out of a cluster: one that
    leaves the innermost cluster holding both its ends, or crosses the border of a cluster
    holding one end more than once (out and back in, around a title); each a sentence naming
    the edge and the cluster."""
    data = layout(source)
    objects = data.get("objects", [])
    names = {o["_gvid"]: o.get("name", "") for o in objects}
    clusters = []
    for o in objects:
        if str(o.get("name", "")).startswith("cluster") and "bb" in o:
            x0, y0, x1, y1 = (float(v) for v in o["bb"].split(","))
            grown = (x0 - slack, y0 - slack, x1 + slack, y1 + slack)
            clusters.append((o["name"], grown, set(o.get("nodes", []))))
    problems = []
    for e in data.get("edges", []):
        if e.get("style") == "invis" or "_draw_" not in e:
            continue
        points = _bezier_points(e["_draw_"])
        edge = f"{names[e['tail']]} -> {names[e['head']]}"
        holding = [(box, name) for name, box, members in clusters
                   if e["tail"] in members and e["head"] in members]
        if holding:
            box, cluster = min(holding, key=lambda h: (h[0][2] - h[0][0]) * (h[0][3] - h[0][1]))
            if not all(_inside(p, box, 0.0) for p in points):
                problems.append(f"the edge {edge} leaves {cluster}")
        for name, box, members in clusters:
            if (e["tail"] in members) != (e["head"] in members):
                if not _monotone([_inside(p, box, 0.0) for p in points]):
                    problems.append(f"the edge {edge} crosses the border of {name} more than once")
    return problems
