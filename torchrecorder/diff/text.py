"""A diff as text: an indented tree with ``+ − ~ ↦`` marks, repeated changes folded into one line."""

from __future__ import annotations

import re
from typing import Any, Optional

from .._text import utf8_safe, visible
from ..nodes import LayerNode
from .status import MARKS

# the Diff and its entries (model.py imports this module: no import back)
Diff = Any
Entry = Any

__all__ = ["describe", "flag_lines", "patterns", "side_title", "summary_text", "title_of"]

_DIGITS = re.compile(r"\d+")
_WORDS = {"layer": "modules", "op": "operations", "param": "parameters", "tensor": "tensors"}


def title_of(d: Diff, e: Entry) -> str:
    """The dotted name a reader knows the entry by (the second graph's, else the first's)."""
    side, key = ("b", e.b) if e.b is not None else ("a", e.a)
    return side_title(d, side, key)


def side_title(d: Diff, side: str, key: Any) -> str:
    """The dotted name of node ``key`` of side ``"a"`` or ``"b"`` (the stripped prefix left out)."""
    node = (d.b if side == "b" else d.a).nodes[key]
    prefix = (d.matching.b if side == "b" else d.matching.a).prefix
    if isinstance(node, LayerNode):
        title = node.call_title(dotted=True)
        if not title:
            return (d.b if side == "b" else d.a).name
    else:
        title = str(key)
    # the prefix the matcher stripped (peft's base_model.model.) is left out, as the note says;
    # the module it names stands for the model itself
    if prefix and title + "." == prefix:
        return (d.a if side == "a" else d.b).name
    return title[len(prefix):] if prefix and title.startswith(prefix) and len(title) > len(prefix) else title


def _called_at(d: Diff, e: Entry) -> str:
    """`` (called at model.py:12)`` for a module call whose line of code is known (the second
    graph's, else the first's), else ``""``."""
    node = d.b.nodes[e.b] if e.b is not None else d.a.nodes[e.a]
    src = getattr(node, "source", None)
    if not isinstance(node, LayerNode) or src is None:
        return ""
    return f" (called at {src.where()})"


def describe(d: Diff, e: Entry, wrapper_params: int = 0) -> str:
    """What happened to the entry, in words (the same text for the same change)."""
    parts: list[str] = []
    if e.status == "wrapped":
        parts.append(e.note)
    elif e.note.startswith("wrapper of"):
        node = d.b.nodes[e.b] if e.b is not None else d.a.nodes[e.a]
        type_name = type_text(node, d.matching)
        verb = "wrapped by" if e.b is not None else "unwrapped from"
        parts.append(f"{verb} {type_name}")
        if wrapper_params:
            sign = "+" if e.b is not None else "−"
            parts.append(f"{sign}{wrapper_params} parameter{'s' if wrapper_params > 1 else ''}")
    elif e.status == "wrapper":  # a part of a wrapper (the wrapper itself says "wrapped by")
        node = d.b.nodes[e.b] if e.b is not None else d.a.nodes[e.a]
        # the wrapped module by its name on the side without the wrapper (q_proj, not base_layer)
        held = None if e.part_of is None else (e.part_of[0] if e.a is None else e.part_of[1])
        whose = "the model" if e.part_of is not None and e.part_of == d.root_pair else \
            (side_title(d, "a" if e.a is None else "b", held) if held is not None else "a module")
        parts.append(f"part of the wrapper of {whose}"
                     + (f" ({node.type_name})" if isinstance(node, LayerNode) else ""))
    elif e.status in ("added", "removed"):
        side, key = ("b", e.b) if e.b is not None else ("a", e.a)
        node = (d.b if side == "b" else d.a).nodes[key]
        parts.append(e.status + (f" ({node.type_name})" if isinstance(node, LayerNode) else ""))
        if e.ambiguous:
            parts.append("ambiguous: an identical sibling could stand for it")
    for attr, (old, new) in e.changes.items():
        if attr == "path":
            continue
        parts.append(f"{attr.replace('_', ' ')} {old} → {new}")
    if e.status == "renamed":
        parts.append(e.note if e.note.startswith("renumbered") else f"renamed from {e.changes['path'][0]}")
    elif e.status != "renamed" and "path" in e.changes:
        parts.append(f"was {e.changes['path'][0]}")
    return ", ".join(parts)


def type_text(node: Any, m: Any) -> str:
    """The class name of a module, with the package it comes from when a module it wraps has
    a class of the same name (peft's ``Linear`` around ``torch.nn.Linear``: ``peft Linear``)."""
    if not isinstance(node, LayerNode):
        return type(node).__name__
    name = node.type_name
    side = m.b if node.key in m.b.graph.nodes and m.b.graph.nodes[node.key] is node else m.a
    if not any(kid.type_name == name for kid in side.children.get(node.key, [])):
        return name
    cls = type(node.fn) if node.fn is not None else None
    package = cls.__module__.split(".")[0] if cls is not None else ""
    return f"{package} {name}" if package and package != "torch" else f"{name} (another class)"


def rollup_text(rollup: dict[str, int]) -> str:
    """``+2 −1 ~3 ↦1``: what changed below a module."""
    out = []
    for status in ("added", "removed", "changed", "renamed", "wrapped", "wrapper"):
        n = rollup.get(status, 0)
        if n:
            out.append(f"{MARKS[status]}{n}")
    return " ".join(out)


def _lines(d: Diff) -> list[dict[str, Any]]:
    """One line per module that changed or holds changes, and per changed op or parameter
    of a module kept; wrappers and added/removed modules as one line each."""
    entries = d.entries
    children: dict[Optional[int], list[int]] = {}
    for i, e in enumerate(entries):
        children.setdefault(e.parent, []).append(i)
    out: list[dict[str, Any]] = []

    def count_params(i: int, status: str) -> int:
        n, todo = 0, list(children.get(i, []))
        while todo:
            j = todo.pop()
            if entries[j].kind == "param" and entries[j].status == status:
                n += 1
            todo.extend(children.get(j, []))
        return n

    chain = set(d.matching.chain)
    todo: list[tuple[int, int, Optional[int]]] = [(i, 0, None) for i in reversed(children.get(None, []))]
    while todo:
        i, depth, parent_line = todo.pop()
        e = entries[i]
        if e.kind == "tensor" or (e.status == "same" and not e.rollup):
            continue
        if e.kind in ("op", "param") and e.status == "same":
            continue
        whole = e.parent is None and e.kind == "layer" and e.note.startswith("wrapper of")
        if (e.status == "wrapped" and not e.changes) or (("a", e.a) in chain or ("b", e.b) in chain) \
                or whole:
            # its wrapper's line says it (a module between a wrapping root and the model it holds
            # is a part of that wrapper; a wrapper of the whole model, PeftModel, is said by a
            # note in the header): what changed inside is listed at the same depth
            todo.extend((j, depth, parent_line) for j in reversed(children.get(i, [])))
            continue
        mark = MARKS[e.status]
        descend = e.kind == "layer"
        if e.note.startswith("wrapper of"):
            mark = MARKS["wrapped"]
            text = describe(d, e, count_params(i, e.status))
            # a wrapper's own parts are said by its line; a root wrapping the whole model holds more
            descend = e.rollup.get("wrapped", 0) > 1 or any(s not in ("wrapper", "wrapped") for s in e.rollup)
        elif e.status in ("added", "removed"):
            text = describe(d, e)
            if e.kind == "layer" and e.rollup:
                text += f" [{rollup_text(e.rollup)}]"
            descend = any(s != e.status for s in e.rollup)  # a wrapper around kept modules
        else:
            text = describe(d, e) if e.status != "same" else ""
            if e.rollup and e.kind == "layer":
                text = (text + " " if text else "") + f"[{rollup_text(e.rollup)}]"
        title = title_of(d, e)
        line = {"depth": depth, "path": title, "mark": mark, "text": text, "status": e.status,
                "parent": parent_line, "entry": i}
        out.append(line)
        if descend:
            me = len(out) - 1
            todo.extend((j, depth + 1, me) for j in reversed(children.get(i, [])))
    return out


def _fold(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Lines equal but for the numbers in their paths folded into the first (``count``); then
    siblings differing only in their last name joined as ``{q,v}_proj``."""
    keys: list[Any] = []
    first: dict[Any, dict[str, Any]] = {}
    folded: list[dict[str, Any]] = []
    for line in lines:
        parent_key = keys[line["parent"]] if line["parent"] is not None else None
        key = (parent_key, line["depth"], _DIGITS.sub("*", line["path"]), line["mark"], line["text"])
        keys.append(key)
        got = first.get(key)
        if got is None:
            got = first[key] = dict(line, pattern=key[2], count=1, key=key, parent_key=parent_key)
            folded.append(got)
        else:
            got["count"] += 1
    # join siblings: same parent, mark, text and count, patterns differing in the last name
    groups: dict[Any, list[dict[str, Any]]] = {}
    for line in folded:
        head = line["pattern"].rpartition(".")[0]
        g = (line["parent_key"], line["mark"], line["text"], line["count"], head, line["depth"])
        groups.setdefault(g, []).append(line)
    out = []
    for line in folded:
        head, dot, _ = line["pattern"].rpartition(".")
        g = (line["parent_key"], line["mark"], line["text"], line["count"], head, line["depth"])
        group = groups[g]
        if len(group) == 1 or line["count"] == 1 or not head:
            out.append(line)
            continue
        if group[0] is not line:
            continue
        names = [x["pattern"].rpartition(".")[2] for x in group]
        line = dict(line, pattern=head + dot + _braces(names), count=line["count"] * len(group))
        out.append(line)
    return out


def _braces(names: list[str]) -> str:
    """``["q_proj", "v_proj"]`` -> ``{q,v}_proj``."""
    pre = _common_start(names)
    suf = _common_start([n[len(pre):][::-1] for n in names])[::-1]
    mids = [n[len(pre): len(n) - len(suf)] for n in names]
    return f"{pre}{{{','.join(mids)}}}{suf}"


def _common_start(names: list[str]) -> str:
    """The longest text every one of ``names`` starts with."""
    first = min(names)
    last = max(names)
    n = 0
    while n < len(first) and first[n] == last[n]:
        n += 1
    return first[:n]


def patterns(d: Diff) -> list[dict[str, Any]]:
    """The folded lines of the summary as data: ``pattern``, ``status``, ``count``, ``text``."""
    return [{"pattern": line["pattern"] if line["count"] > 1 else line["path"], "status": line["status"],
             "count": line["count"], "text": line["text"]} for line in _fold(_lines(d))]


def _count_parts(d: Diff, kind: str, c: dict[str, int]) -> list[str]:
    """The summary's counts of one kind of entry: ``2 wrapped (8 wrapper parts)``,
    ``1 wrapping the model``, ``28 frozen``, ``4 in wrappers``."""
    whole = sum(1 for e in d.entries if e.kind == kind and e.status == "wrapper"
                and d.root_pair is not None and e.part_of == d.root_pair)
    parts_of_layers = c["wrapper"] - whole
    changed = c["changed"]
    frozen: dict[str, int] = {}
    if kind == "param":  # peft freezes the base model: say so plainly
        for e in d.entries:
            if e.kind == "param" and e.status == "changed" and list(e.changes) == ["requires_grad"]:
                word = "frozen" if e.changes["requires_grad"] == ("True", "False") else "unfrozen"
                frozen[word] = frozen.get(word, 0) + 1
        changed -= sum(frozen.values())
    out = [f"{changed} changed"] if changed else []
    out += [f"{n} {word}" for word, n in frozen.items()]
    out += [f"{c[s]} {s}" for s in ("added", "removed", "renamed") if c[s]]
    if kind == "layer":
        if c["wrapped"]:
            own = f" ({parts_of_layers} wrapper parts)" if parts_of_layers else ""
            out.append(f"{c['wrapped']} wrapped{own}")
        elif parts_of_layers:
            out.append(f"{parts_of_layers} wrapper parts")
        if whole:
            out.append(f"{whole} wrapping the model")
    else:
        if c["wrapped"]:
            out.append(f"{c['wrapped']} wrapped")
        if c["wrapper"]:
            out.append(f"{c['wrapper']} in wrappers")
    return out


def flag_lines(d: Diff, most: int = 8) -> list[str]:
    """``frozen: 0.{weight,bias}``: the parameters whose only change is ``requires_grad``, which
    the tree leaves out (a module whose parameters were only frozen changed nothing else), by
    their names folded as the tree's lines are; ``all 21 parameters the models share`` when
    every shared one flipped (peft freezing the base model), ``all 20 of the 21 parameters the
    models share but lm_head.weight`` when fewer did not."""
    names: dict[str, list[str]] = {}
    shared: list[Entry] = []
    for e in d.entries:
        if e.kind != "param" or e.a is None or e.b is None or e.status == "wrapper":
            continue
        shared.append(e)
        if e.status == "changed" and list(e.changes) == ["requires_grad"]:
            word = "frozen" if e.changes["requires_grad"] == ("True", "False") else "unfrozen"
            names.setdefault(word, []).append(title_of(d, e))
    out = []
    for word, titles in names.items():
        if len(titles) == len(shared) and len(titles) > 1:
            out.append(f"  {word}: all {len(shared)} parameters the models share")
            continue
        if len(titles) > 2 * (len(shared) - len(titles)):  # say the fewer names
            chosen = set(titles)
            rest = [title_of(d, e) for e in shared if title_of(d, e) not in chosen]
            out.append(f"  {word}: all {len(titles)} of the {len(shared)} parameters the models share "
                       f"but {_folded(rest, most)}")
        else:
            out.append(f"  {word}: {_folded(titles, most)}")
    return out


def _folded(titles: list[str], most: int) -> str:
    """Names equal but for their numbers as one (``2 × blocks.*.weight``), the first ``most``."""
    groups: dict[str, list[str]] = {}
    for t in titles:  # the numbers all of a group share are kept
        groups.setdefault(_DIGITS.sub("*", t), []).append(t)
    folded = [group[0] if len(group) == 1 else f"{len(group)} × {_star_differing(group)}"
              for group in groups.values()]
    more = f", … ({len(folded) - most} more)" if len(folded) > most else ""
    return ", ".join(folded[:most]) + more


def _star_differing(names: list[str]) -> str:
    """``["2.0.weight", "2.1.weight"]`` -> ``2.*.weight``: names of one shape but for their
    numbers, with ``*`` for each number that differs among them."""
    runs = [_DIGITS.findall(n) for n in names]
    pieces = _DIGITS.split(names[0])
    out = pieces[0]
    for i, piece in enumerate(pieces[1:]):
        values = {r[i] for r in runs}
        out += (values.pop() if len(values) == 1 else "*") + piece
    return out


def summary_text(d: Diff) -> str:
    """The text of :meth:`~torchrecorder.diff.Diff.summary`."""
    head = [f"diff {d.a.name!r} → {d.b.name!r}: "
            + ("no difference" if not d else "the models differ")]
    for kind, word in _WORDS.items():
        c = d.counts(kind)
        total = sum(c.values())
        if total:
            parts = _count_parts(d, kind, c)
            head.append(f"  {word}: {total - c['same'] if parts else 0} of {total} differ"
                        + (f" ({', '.join(parts)})" if parts else ""))
    edges = {"added": 0, "removed": 0, "wrapped": 0}
    for i, (*_, s) in enumerate(d.edges):
        if s in edges and i not in d.wrapper_edges:
            edges[s] += 1
    if any(edges.values()) or d.wrapper_edges:
        # a wrapper's own edges (to and from lora_A, ...) are its parts, not free additions
        parts = [f"+{edges['added']} −{edges['removed']}"]
        if edges["wrapped"]:
            parts.append(f"{edges['wrapped']} now through a wrapper")
        if d.wrapper_edges:
            parts.append(f"{len(d.wrapper_edges)} inside wrappers")
        head.append("  edges: " + ", ".join(parts))
    head.extend(flag_lines(d))
    head.extend(f"  note: {n}" for n in d.notes)
    body = []
    for line in _fold(_lines(d)):
        count = f"{line['count']} × " if line["count"] > 1 else ""
        text = f": {line['text']}" if line["text"] else ""
        name = line["pattern"] if line["count"] > 1 else line["path"]
        single = line["count"] == 1 and line["status"] != "same"
        where = _called_at(d, d.entries[line["entry"]]) if single else ""
        body.append(f"{'  ' * line['depth']}{line['mark']} {count}{name}{text}{where}")
    # names may hold control characters and lone surrogates: each line shows them as escapes
    # (as the layer table does), so no name can write a line of its own or move the cursor
    return "\n".join(utf8_safe(visible(line)) for line in head + (["", *body] if body and d else []))
