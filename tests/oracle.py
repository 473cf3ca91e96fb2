"""An independent oracle for the recorded dataflow, built on ``torch.fx``.

The relation compared is *direct reach between leaf-module calls*: ``(A, B)``
when the output of leaf-module call ``A`` reaches an input of leaf-module call
``B`` through no other leaf-module call; the root's inputs count as one call
``INPUT`` and its outputs as one call ``OUTPUT``.  A leaf module is one with no child
modules; a call is named ``"path#n"`` for the n-th call of the module at
``path``.

:func:`fx_relation` derives it from a ``torch.fx`` trace, following only values
that are tensors (or containers of tensors) when the traced graph runs on the
real inputs: shape arithmetic (``x.size(0)``) is not dataflow.
:func:`recorded_relation` derives it from a recording, ignoring edges out of
parameter nodes.  Only the walk over the finished graphs (:func:`_reach`) is
shared; the graphs come from independent mechanisms.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import torch.fx as fx
from torch import Tensor, nn

from torchrecorder import LayerNode, OpNode, ParamNode, Recorder, TensorNode
from torchrecorder.nodes import Key

__all__ = ["INPUT", "OUTPUT", "compare", "export_relation", "fx_relation", "recorded_relation"]

Relation = set[tuple[str, str]]


class _LeafTracer(fx.Tracer):
    """Keeps every module without children as one ``call_module`` node; inlines the rest."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return _is_leaf(m)


def _has_tensor(value: Any) -> bool:
    if isinstance(value, Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(_has_tensor(v) for v in value.values())
    return False


class _TensorFlags(fx.Interpreter):
    """Runs a traced graph and notes which nodes produced tensors."""

    def __init__(self, gm: fx.GraphModule, bound: dict[str, Any]) -> None:
        super().__init__(gm)
        self.bound = bound
        self.tensorish: dict[fx.Node, bool] = {}

    def placeholder(self, target: Any, args: Any, kwargs: Any) -> Any:
        name = str(target).lstrip("*")
        for candidate in (name, name.rsplit("_", 1)[0]):
            if candidate in self.bound:
                return self.bound[candidate]
        return args[0] if args else None

    def run_node(self, n: fx.Node) -> Any:
        result = super().run_node(n)
        self.tensorish[n] = _has_tensor(result)
        return result


INPUT = "INPUT"
OUTPUT = "OUTPUT"


def _reach(starts: list[tuple[Any, str]], succ: Callable[[Any], Iterable[Any]],
           owner: Callable[[Any], str | None], passable: Callable[[Any], bool],
           outputs: set[Any]) -> Relation:
    """Pairs ``(name, B)``: from a start, the first leaf calls (or OUTPUT) reached.

    A walk from a start node ends at a node owned by another leaf call; it goes
    on through nodes owned by no leaf call while ``passable`` says so; reaching a
    node in ``outputs`` adds ``(name, OUTPUT)``.
    """
    rel: Relation = set()
    for start, name in starts:
        if start in outputs:
            rel.add((name, OUTPUT))
        todo = deque(n for n in succ(start) if owner(n) != name)
        visited = set(todo)
        while todo:
            n = todo.popleft()
            b = owner(n)
            if b is not None:
                if b != name:
                    rel.add((name, b))
                continue
            if n in outputs:
                rel.add((name, OUTPUT))
            if not passable(n):
                continue
            for nxt in succ(n):
                if nxt not in visited:
                    visited.add(nxt)
                    todo.append(nxt)
    return rel


def _output_nodes(graph: fx.Graph, keep: Callable[[int], bool] = lambda i: True) -> set[fx.Node]:
    out = next(n for n in graph.nodes if n.op == "output")
    found: list[fx.Node] = []
    fx.node.map_arg(out.args, found.append)
    if len(out.args) == 1 and isinstance(out.args[0], (tuple, list)):
        found = []
        for i, item in enumerate(out.args[0]):
            if keep(i):
                fx.node.map_arg(item, found.append)
    return set(found)


def fx_relation(net: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                concrete_args: dict[str, Any] | None = None) -> Relation:
    """The leaf-call relation of ``net`` according to ``torch.fx`` (raises if fx cannot trace)."""
    tracer = _LeafTracer()
    graph = tracer.trace(net, concrete_args=concrete_args or None)
    gm = fx.GraphModule(tracer.root, graph)
    bound = inspect.signature(net.forward).bind(*args, **kwargs)
    bound.apply_defaults()
    flags = _TensorFlags(gm, dict(bound.arguments))
    flags.run()

    calls: dict[fx.Node, str] = {}
    seen: dict[str, int] = {}
    for n in graph.nodes:
        if n.op == "call_module":
            seen[n.target] = seen.get(n.target, 0) + 1
            calls[n] = f"{n.target}#{seen[n.target]}"
    starts = [(n, INPUT) for n in graph.nodes if n.op == "placeholder" and flags.tensorish.get(n)]
    starts += list(calls.items())
    return _reach(starts, lambda n: [u for u in n.users if not _shape_only_use(n, u)], calls.get,
                  lambda n: n.op != "output" and flags.tensorish.get(n, False), _output_nodes(graph))


def _shape_only_use(n: fx.Node, user: fx.Node) -> bool:
    """Whether ``user`` reads only the shape of ``n``: ``x.reshape_as(n)``, ``view_as``,
    ``expand_as`` (as an exported program, which keeps the sizes and not the tensor)."""
    return (user.op == "call_method" and user.target in ("reshape_as", "view_as", "expand_as")
            and len(user.args) > 1 and user.args[1] is n and user.args[0] is not n)


def _dtype_only_use(n: fx.Node, user: fx.Node) -> bool:
    """Whether the exported ``user`` reads only the dtype of ``n``: ``x.type_as(n)`` (kept as
    ``aten.type_as`` with ``n`` as an argument, where the cast is no dataflow from ``n``)."""
    return (user.op == "call_function" and getattr(user.target, "__name__", "") == "type_as.default"
            and len(user.args) > 1 and user.args[1] is n and user.args[0] is not n)


def _is_leaf(m: nn.Module) -> bool:
    return next(iter(m.children()), None) is None


def export_relation(net: nn.Module, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> tuple[Relation, set[str]]:
    """The leaf-call relation according to ``torch.export``, and the leaf calls it saw.

    The exported program is functionalised (in-place ops become pure ones), and
    each ATen node's ``nn_module_stack`` says which module call ran it.  A leaf
    call that ran no ATen op (``Identity``, ``Dropout`` in eval) is invisible
    to export; compare with ``recorded_relation(rec, visible=...)``.
    """
    import torch.export
    from torch.export.graph_signature import InputKind, OutputKind

    ep = torch.export.export(net, args, kwargs, strict=False).run_decompositions({})
    graph = ep.graph_module.graph
    modules: dict[str, nn.Module] = dict(net.named_modules(remove_duplicate=False))
    canonical: dict[int, str] = {}
    for path, m in net.named_modules():
        canonical.setdefault(id(m), path)
    call_names: dict[str, str] = {}  # nn_module_stack key -> "path#n"
    counts: dict[int, int] = {}
    owner: dict[fx.Node, str] = {}
    for n in graph.nodes:
        stack = n.meta.get("nn_module_stack")
        if not stack or n.op != "call_function":
            continue
        key, (path, _) = list(stack.items())[-1]
        module = modules.get(path)
        if module is None or not _is_leaf(module):
            continue
        if key not in call_names:
            counts[id(module)] = counts.get(id(module), 0) + 1
            call_names[key] = f"{canonical[id(module)]}#{counts[id(module)]}"
        owner[n] = call_names[key]

    user_inputs = {spec.arg.name for spec in ep.graph_signature.input_specs
                   if spec.kind == InputKind.USER_INPUT and hasattr(spec.arg, "name")}
    user_outputs = [spec.kind == OutputKind.USER_OUTPUT for spec in ep.graph_signature.output_specs]
    starts = [(n, INPUT) for n in graph.nodes if n.op == "placeholder" and n.name in user_inputs
              and _has_tensor(n.meta.get("val"))]
    starts += list(owner.items())
    outputs = _output_nodes(graph, lambda i: i < len(user_outputs) and user_outputs[i])
    rel = _reach(starts, lambda n: [u for u in n.users if not _dtype_only_use(n, u)], owner.get,
                 lambda n: n.op != "output" and _has_tensor(n.meta.get("val")), outputs)
    return rel, set(call_names.values())


def recorded_relation(rec: Recorder, visible: set[str] | None = None) -> Relation:
    """The leaf-call relation according to the recording.

    Args:
        rec: the recording.
        visible: if given, leaf calls not named here are looked through as if
            they were not leaves (for comparing with :func:`export_relation`).
            So is a tensor that a call which ran other operations returned
            unchanged (its ``identity`` op): in an exported program a value
            belongs to the call whose ATen op made it, and ``return x, x * 2``
            makes only the second.  A call whose only work is handing its
            input on keeps it: export runs one op for it (eval ``Dropout``
            runs ``dropout``) or none, and then the call is not in ``visible``.
    """
    nodes = rec.nodes
    passed: set[Key] = set()
    if visible is not None:
        for k, n in nodes.items():
            if isinstance(n, OpNode) and n.op == "identity" and n.kept is None:
                parent = nodes[n.parent_key]
                if isinstance(parent, LayerNode) and any(
                        isinstance(c, OpNode) and c.op != "identity"
                        for c in (nodes[s] for s in parent.subnet_keys)):
                    passed.add(k)
    leaf_call: dict[Key, str] = {}
    for key, node in nodes.items():
        if isinstance(node, LayerNode) and node.fn is not None and node.depth >= 0 \
                and _is_leaf(node.fn):
            name = f"{node.path}#{node.call_index}"
            if visible is None or name in visible:
                leaf_call[key] = name

    owner: dict[Key, str | None] = {}

    def owner_of(key: Key) -> str | None:
        """The leaf call whose scope holds ``key`` (the call itself for a leaf call)."""
        if key in owner:
            return owner[key]
        if key in passed:
            return None
        chain = []
        k = key
        while k is not None and k not in owner and k not in leaf_call:
            chain.append(k)
            k = nodes[k].parent_key
        result = leaf_call[k] if k in leaf_call else (owner[k] if k is not None else None)
        for c in chain:
            owner[c] = result
        owner[key] = result
        return result

    succ: dict[Key, list[Key]] = {}
    for a, b in rec.links:
        if isinstance(nodes[a], ParamNode):
            continue
        succ.setdefault(a, []).append(b)
    roles = {k: n.role for k, n in nodes.items() if isinstance(n, TensorNode) and n.role}
    starts: list[tuple[Any, str]] = [(k, INPUT) for k, role in roles.items() if role == "input"]
    for k in nodes:
        call = owner_of(k) if k is not None else None
        if call is not None:
            starts.append((k, call))
    outputs = {k for k, role in roles.items() if role == "output"}
    return _reach(starts, lambda k: succ.get(k, ()), owner_of, lambda k: True, outputs)


def compare(expected: Relation, got: Relation) -> tuple[float, float, Relation, Relation]:
    """Precision and recall of ``got`` against ``expected``, with the missing and extra pairs."""
    hits = len(expected & got)
    precision = hits / len(got) if got else 1.0
    recall = hits / len(expected) if expected else 1.0
    return precision, recall, expected - got, got - expected
