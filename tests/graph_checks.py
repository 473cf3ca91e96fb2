"""Checks that any recording must pass (SPEC section 3), usable on any model.

Each ``check_*`` function raises ``AssertionError`` naming what is wrong.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.modules.module import register_module_forward_pre_hook

from torchrecorder import ContextNode, LayerNode, ParamNode, Recorder, TensorNode
from torchrecorder.nodes import Key
from torchrecorder.projection import Projection
from torchrecorder.renderer import GraphvizRenderer

from .dot_parse import parse_dot

__all__ = [
    "check_acyclic",
    "check_calls",
    "check_folding",
    "check_invariants",
    "check_metadata_only",
    "check_outputs_equal",
    "check_params",
    "check_state_unchanged",
    "count_calls",
    "find_cycle",
    "snapshot",
]


# ----------------------------------------------------------------- graph shape
def check_invariants(rec: Recorder) -> None:
    """``rec.lint()``, plus: every parent chain reaches the context; inputs reach outputs."""
    rec.lint()
    nodes = rec.nodes
    for key, node in nodes.items():
        seen = {key}
        k = node.parent_key
        while k is not None:
            assert k not in seen, f"the parent chain of {key!r} loops at {k!r}"
            seen.add(k)
            k = nodes[k].parent_key
    for a, b in rec.links:
        assert a in nodes and b in nodes, f"edge {(a, b)} joins unrecorded nodes"
    inputs = [k for k, n in nodes.items() if isinstance(n, TensorNode) and n.role == "input"]
    outputs = [k for k, n in nodes.items() if isinstance(n, TensorNode) and n.role == "output"]
    assert outputs, "the recording has no output tensor"
    if inputs:
        reached = _reachable(rec, inputs)
        for out in outputs:
            assert out in reached, f"output {out!r} is not reachable from the root inputs {inputs}"


def _reachable(rec: Recorder, start: Iterable[Key]) -> set[Key]:
    succ: dict[Key, list[Key]] = {}
    for a, b in rec.links:
        succ.setdefault(a, []).append(b)
    seen = set(start)
    todo = deque(seen)
    while todo:
        for nxt in succ.get(todo.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def count_calls(net: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[int, int]]:
    """Run ``net`` with a plain counting hook; return its output and calls per module id.

    The hook is a global one: a hook on a module would turn off the fused fast path of
    ``nn.TransformerEncoderLayer``, and the count would be of calls a plain call does not make.
    """
    counts: dict[int, int] = {}
    ours = {id(m) for m in net.modules()}

    def pre(module: nn.Module, _args: Any) -> None:
        if id(module) in ours:
            counts[id(module)] = counts.get(id(module), 0) + 1

    handle = register_module_forward_pre_hook(pre)
    try:
        out = net(*args, **kwargs)
    finally:
        handle.remove()
    return out, counts


def check_calls(rec: Recorder, net: nn.Module, counts: dict[int, int]) -> None:
    """Every module call appears as its own layer node; modules never called do not appear."""
    recorded: dict[int, list[LayerNode]] = {}
    for layer in rec.layers():
        recorded.setdefault(id(layer.fn), []).append(layer)
    for path, module in net.named_modules():
        got = recorded.get(id(module), [])
        want = counts.get(id(module), 0)
        assert len(got) == want, f"module {path!r} ran {want} times but has {len(got)} layer nodes"
        assert [c.call_index for c in got] == list(range(1, want + 1)), f"call indices of {path!r}"
        for call in got:
            if call.depth > 0:
                parent = rec.nodes[call.parent_key]
                assert isinstance(parent, LayerNode) and not isinstance(parent, ContextNode), (
                    f"call {call.key!r} is not inside a module call")


def check_params(rec: Recorder, net: nn.Module, counts: dict[int, int]) -> None:
    """Every parameter of a called module appears exactly once (shared ones too)."""
    by_param: dict[int, list[ParamNode]] = {}
    for node in rec.nodes.values():
        if isinstance(node, ParamNode):
            assert isinstance(node.fn, nn.Parameter), f"{node.key!r} does not hold its parameter"
            by_param.setdefault(id(node.fn), []).append(node)
    for path, module in net.named_modules():
        if not counts.get(id(module)):
            continue
        for pname, param in module.named_parameters(recurse=False):
            got = by_param.get(id(param), [])
            assert len(got) == 1, f"parameter {path}.{pname} appears {len(got)} times"
            assert got[0].shape == tuple(param.shape)


def find_cycle(edges: Iterable[tuple[Any, Any]]) -> list[Any]:
    """A cycle in the directed graph ``edges`` as a list of vertices, or ``[]``."""
    succ: dict[Any, list[Any]] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    colour: dict[Any, int] = dict.fromkeys(succ, 0)
    for root in succ:
        if colour[root]:
            continue
        stack = [(root, iter(succ[root]))]
        path = [root]
        colour[root] = 1
        while stack:
            vertex, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                path.pop()
                colour[vertex] = 2
            elif colour[nxt] == 1:
                return [*path[path.index(nxt):], nxt]
            elif colour[nxt] == 0:
                colour[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(succ[nxt])))
    return []


def check_acyclic(rec: Recorder, depths: Iterable[int] = (1, 2, 256)) -> None:
    """The raw edges and the drawn graph at each render depth have no cycle."""
    cycle = find_cycle(rec.links)
    assert not cycle, f"recorded edges have a cycle: {cycle}"
    for depth in depths:
        drawn = [(a.key, b.key) for a, b in GraphvizRenderer(rec, depth).drawn_edges()]
        cycle = find_cycle(drawn)
        assert not cycle, f"drawn graph at render_depth={depth} has a cycle: {cycle}"


def check_metadata_only(rec: Recorder) -> None:
    """Tensor nodes hold shape/dtype/device, not tensors (unless keep_tensors)."""
    for node in rec.nodes.values():
        if isinstance(node, TensorNode) and not isinstance(node, ParamNode):
            assert isinstance(node.shape, tuple) and node.dtype and node.device, node
            if rec.keep_tensors:
                assert isinstance(node.fn, Tensor), f"{node.key!r} lost its tensor"
            else:
                assert node.kept is None, f"{node.key!r} keeps a tensor"


# ----------------------------------------------------------------- model state
def snapshot(net: nn.Module) -> dict[str, Any]:
    """Everything about ``net`` that recording must leave alone."""
    meta = any(t.device.type == "meta" for t in (*net.parameters(), *net.buffers()))

    def value(t: Tensor) -> Any:
        return (tuple(t.shape), t.dtype, t.device) if meta else t.detach().clone()

    return {
        "params": {n: (p, value(p), p.requires_grad, p.grad) for n, p in net.named_parameters()},
        "buffers": {n: (b, value(b)) for n, b in net.named_buffers()},
        "training": {n: m.training for n, m in net.named_modules()},
        "hooks": {n: _hook_counts(m) for n, m in net.named_modules()},
        "global hooks": global_hook_counts(),
        "meta": meta,
    }


def global_hook_counts() -> tuple[int, ...]:
    """How many process-wide module hooks torch holds (the recorder adds one while recording)."""
    from torch.nn.modules import module as torch_module

    return tuple(len(getattr(torch_module, name, {})) for name in (
        "_global_forward_hooks", "_global_forward_pre_hooks", "_global_forward_hooks_with_kwargs",
        "_global_forward_hooks_always_called"))


def _hook_counts(m: nn.Module) -> tuple[int, ...]:
    return (len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks),
            len(getattr(m, "_forward_hooks_with_kwargs", {})),
            len(getattr(m, "_forward_pre_hooks_with_kwargs", {})),
            len(getattr(m, "_forward_hooks_always_called", {})))


def check_state_unchanged(before: dict[str, Any], net: nn.Module) -> None:
    """Compare ``net`` with a :func:`snapshot` taken before recording."""
    after = snapshot(net)
    assert after["training"] == before["training"], "training flags changed"
    assert after["hooks"] == before["hooks"], "hooks were left on the model"
    assert all(not any(c) for c in after["hooks"].values()), "the model has hooks"
    assert after["params"].keys() == before["params"].keys()
    for name, (p, val, rg, grad) in before["params"].items():
        p2, val2, rg2, grad2 = after["params"][name]
        assert p2 is p, f"parameter {name} was replaced"
        assert rg2 == rg, f"requires_grad of {name} changed"
        assert grad is None and grad2 is None, f"{name}.grad was filled"
        _same(val, val2, name)
    assert after["buffers"].keys() == before["buffers"].keys()
    for name, (_, val) in before["buffers"].items():
        _same(val, after["buffers"][name][1], name)


def _same(a: Any, b: Any, what: str) -> None:
    if isinstance(a, Tensor):
        assert torch.equal(a, b), f"{what} changed"
    else:
        assert a == b, f"{what} changed"


def check_outputs_equal(got: Any, want: Any, path: str = "output") -> None:
    """Same container types all the way down; equal tensors (shapes only on meta)."""
    assert type(got) is type(want), f"{path}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, Tensor):
        assert got.shape == want.shape and got.dtype == want.dtype, path
        if want.device.type != "meta":
            assert torch.equal(got, want), f"{path} differs"
    elif isinstance(want, Mapping):
        assert list(got.keys()) == list(want.keys()), path
        for k in want:
            check_outputs_equal(got[k], want[k], f"{path}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            check_outputs_equal(g, w, f"{path}[{i}]")
    elif dataclasses.is_dataclass(want):
        for f in dataclasses.fields(want):
            check_outputs_equal(getattr(got, f.name), getattr(want, f.name), f"{path}.{f.name}")
    elif hasattr(want, "to_legacy_cache") or hasattr(want, "layers"):  # transformers Cache objects
        check_outputs_equal(_cache_tensors(got), _cache_tensors(want), path)
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def _cache_tensors(cache: Any) -> list[Tensor]:
    from torchrecorder.recording._walk import iter_tensors

    out = list(iter_tensors(getattr(cache, "__dict__", {})))
    for layer in getattr(cache, "layers", []) or []:
        out.extend(iter_tensors(getattr(layer, "__dict__", {})))
    return out


# ------------------------------------------------------------ folding
def _blocks_of(p: Projection) -> dict[Key, list[tuple[Key, int]]]:
    """Each node inside a block of a folded run -> (the run's first block, the block's index),
    for each run it is in, read off the runs' blocks (not off the fold's own bookkeeping)."""
    out: dict[Key, list[tuple[Key, int]]] = {}
    nodes = p.graph.nodes
    for lead, run in p.fold.runs.items():
        for i, block in enumerate(run):
            todo = [block.key]
            while todo:
                key = todo.pop()
                out.setdefault(key, []).append((lead, i))
                node = nodes.get(key)
                todo.extend(getattr(node, "subnet_keys", ()))
    return out


def _carried_in(p: Projection, blocks: dict[Key, list[tuple[Key, int]]], a: Key, b: Key) -> set[str]:
    """The kinds of the folded units (``"run"``, ``"loop"``) that hold ``a`` and ``b`` in
    different copies (blocks, iterations): an edge from ``a`` to ``b`` is carried.  A node of
    a later block or iteration is in the runs its counterpart in the first is in, too."""
    fold = p.fold
    other = dict(fold.copy_of(b))
    kinds = {fold.units[unit] for unit, copy in fold.copy_of(a) if other.get(unit, copy) != copy}

    def runs_of(key: Key) -> dict[Key, int]:
        out: dict[Key, int] = {}
        while key is not None:
            for run, i in blocks.get(key, ()):
                out.setdefault(run, i)
            key = fold.alias.get(key)
        return out

    theirs = runs_of(b)
    if any(theirs.get(run, i) != i for run, i in runs_of(a).items()):
        kinds.add("run")
    return kinds


def check_folding(rec: Recorder, render_depth: int | None = 256, fold_repeats: bool | int | str = True,
                  **options: object) -> None:
    """The folded drawing of ``rec`` (``fold_repeats``) against the unfolded one, with the same
    ``options``.

    * every edge drawn folded stands for a path of the unfolded drawing (through nodes the
      folded drawing does not draw), whose ends the folded drawing draws as the edge's ends;
      a plain edge for one path that is not carried from one block or iteration to another,
      a carried edge for one that is;
    * every path of the unfolded drawing between nodes the folded one draws has its image:
      the folded edge between the nodes standing for its ends, plain or carried as it is, or
      the ``×N`` mark (ends drawn as one node; a block's output passed to the next block);
    * the folded edges but the carried ones are acyclic, and so is the DOT source's graph of
      every edge (invisible ones too) not marked ``constraint=false``; every carried edge is
      drawn dashed, with ``constraint=false``.
    """
    folded = GraphvizRenderer(rec, render_depth, fold_repeats=fold_repeats, max_nodes=None, **options)  # type: ignore[arg-type]
    unfolded = GraphvizRenderer(rec, render_depth, fold_repeats=False, max_nodes=None, **options)  # type: ignore[arg-type]
    p = folded.projection
    image = p.drawn_key
    blocks = _blocks_of(p)
    plain = {(a.key, b.key) for a, b in p.edges}
    carried = {(a.key, b.key) for a, b in p.carried_edges}
    assert not plain & carried
    succ: dict[Key, list[Key]] = {}
    for a, b in unfolded.drawn_edges():
        succ.setdefault(a.key, []).append(b.key)
    paths: dict[tuple[Key, Key], list[tuple[Key, Key]]] = {}  # folded edge -> unfolded paths
    for u in succ:
        if image(u) is None:
            continue
        todo, seen = list(succ[u]), set()
        while todo:
            v = todo.pop()
            if v in seen:
                continue
            seen.add(v)
            if image(v) is None:  # not drawn folded (a tensor passed between two blocks)
                todo.extend(succ.get(v, ()))
            else:
                paths.setdefault((image(u), image(v)), []).append((u, v))
    for edge in plain:
        assert any(not _carried_in(p, blocks, u, v) for u, v in paths.get(edge, ())), f"invented edge {edge}"
    for edge in carried:
        assert any(_carried_in(p, blocks, u, v) for u, v in paths.get(edge, ())), f"invented back edge {edge}"
    for (a, b), ends in paths.items():
        if a == b:
            continue
        for u, v in ends:
            kinds = _carried_in(p, blocks, u, v)
            if not kinds:
                assert (a, b) in plain, f"lost edge {(a, b)} (from {(u, v)})"
            elif "run" not in kinds:
                assert (a, b) in plain | carried, f"lost carried edge {(a, b)} (from {(u, v)})"
    assert not find_cycle(plain), find_cycle(plain)
    parsed = parse_dot(folded.render().source)
    ranked = [e for e, attrs in zip(parsed.edges, parsed.edge_attrs, strict=True)
              if attrs.get("constraint") != "false"]
    assert not find_cycle(ranked + parsed.invisible), find_cycle(ranked + parsed.invisible)
    back = [attrs for attrs in parsed.edge_attrs if attrs.get("tooltip", "").endswith('iteration)"')
            or attrs.get("tooltip") == '"carried to a later iteration"']
    assert len(back) == len(carried)
    assert all(attrs.get("constraint") == "false" and attrs.get("style") == "dashed" for attrs in back)
