"""The autograd graph of a recorded pass, grouped by the module calls that created it.

With ``backward=True`` the engine tells an :class:`AutogradTrace` which operation (and so
which module call) made each tensor's ``grad_fn``, and which ``grad_fn`` s the model
returned.  When the pass ends, :meth:`AutogradTrace.build` walks ``next_functions`` from
those outputs with an explicit stack, as ``loss.backward()`` would, and keeps the result
as plain data (:class:`~torchrecorder.graph.AutogradGraph`): names, scopes, parameter
paths, shapes, and the dtype and storage (an index, its size, whether the model owns it) of
each saved tensor, never the autograd nodes or the tensors themselves.

A ``grad_fn`` put on a recorded operation's output after it returned (a custom
``autograd.Function``'s, when ``apply`` returns) belongs to that operation, found when the
output is read.  An autograd node that no recorded operation returned (the transpose inside
``linear``, the nodes of a fused kernel) belongs to the call of the node that first reaches it
from the outputs; an ``AccumulateGrad`` node belongs to the module that owns its parameter, or to
the top level for an input.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Optional

import torch
from torch import Tensor

from ..graph import AutogradGraph, AutogradNode, Graph
from ..nodes import Key, OpNode
from .untraced import release_newest_first

__all__ = ["AutogradTrace", "storage_id", "storages_of"]

#: where a parameter leaf belongs: tensor -> (dotted path, key of the owning call), or None
ParamLookup = Callable[[Tensor], Optional[tuple[str, Key]]]


class AutogradTrace:
    """What the engine learns about ``grad_fn`` s during one pass (see the module docstring)."""

    __slots__ = ("made", "plumbing", "roots")

    def __init__(self) -> None:
        # id(grad_fn) -> (grad_fn, scope key, forward op key); the grad_fn is held so that
        # its id stays its own until the pass ends (the outputs hold the graph anyway)
        self.made: dict[int, tuple[Any, Key, Key]] = {}
        self.roots: list[tuple[Any, int, Key]] = []  # (grad_fn, output number, tensor node)
        # id(grad_fn) -> grad_fn of the recorder's own views (see alias), passed like hooks'
        self.plumbing: dict[int, Any] = {}

    def alias(self, t: Tensor) -> None:
        """``t`` is a view the recorder made of a module's output that existed before the call
        (``recording.aliases.make_alias``): its ``ViewBackward0`` is the recorder's, not the
        model's, and the walk passes it as it passes torch's backward-hook plumbing."""
        gf = t.grad_fn
        if gf is not None:
            self.plumbing[id(gf)] = gf

    def op(self, outs: Iterable[Tensor], scope: Key, key: Key) -> None:
        """The operation ``key`` in ``scope`` made ``outs``."""
        made = self.made
        for o in outs:
            gf = o.grad_fn
            if gf is not None and id(gf) not in made:
                made[id(gf)] = (gf, scope, key)

    def read(self, values: Iterable[Any], live: dict[int, tuple[Any, Key]], nodes: Any) -> None:
        """Tensors among ``values`` were read as inputs: a ``grad_fn`` that the operation making
        one did not return, since it was set after that operation (a custom
        ``autograd.Function``'s backward node, put on its output when ``apply`` returned), is
        that operation's, in its call, rather than the reader's."""
        made = self.made
        for value in values:
            if isinstance(value, (list, tuple)):
                self.read(value, live, nodes)
                continue
            if not isinstance(value, Tensor):
                continue
            gf = value.grad_fn
            if gf is None or id(gf) in made:
                continue
            entry = live.get(id(value))
            if entry is not None and entry[0]() is value:
                node = nodes.get(entry[1])
                if isinstance(node, OpNode):
                    made[id(gf)] = (gf, node.parent_key, node.key)

    def call(self, outs: Iterable[Tensor], scope: Key) -> None:
        """The call ``scope`` returned ``outs`` (claims what no recorded op made: fused kernels)."""
        made = self.made
        for o in outs:
            gf = o.grad_fn
            if gf is not None and id(gf) not in made:
                made[id(gf)] = (gf, scope, None)

    def output(self, t: Tensor, key: Key) -> None:
        """The model returned ``t``, drawn as the tensor node ``key``."""
        if t.grad_fn is not None:
            self.roots.append((t.grad_fn, t.output_nr, key))

    def finish(self, graph: Graph, grad_enabled: bool, param_of: ParamLookup,
               model_storages: Callable[[], set[int]] = set) -> None:
        """Put the pass's autograd graph on ``graph.backward`` (unless the pass failed) and
        forget every autograd node (``model_storages`` gives the storage ids of the model's
        parameters and buffers: see :meth:`build`)."""
        try:
            if graph.error is None:
                graph.backward = self.build(grad_enabled, param_of, model_storages())
        finally:  # autograd nodes: the newest first (see release_newest_first)
            release_newest_first(self.made)
            self.roots.clear()
            release_newest_first(self.plumbing)

    def build(self, grad_enabled: bool, param_of: ParamLookup,
              model_storages: Optional[set[int]] = None) -> AutogradGraph:
        """Walk the autograd graph from the outputs; the nodes in forward order.

        ``model_storages``: the :func:`storage_id` of the model's parameters and buffers
        (their storages are marked as the model's in ``storages``)."""
        out = AutogradGraph(grad_enabled)
        storages = _Storages(model_storages or set())
        found: list[AutogradNode] = []
        keep: list[Any] = []  # the autograd nodes met, alive until the walk ends
        index: dict[int, int] = {}
        edges: list[tuple[int, int]] = []
        stack: list[Any] = []

        def meet(gf: Any, inherited: Key) -> int:
            entry = self.made.get(id(gf))
            name = gf.name().rpartition("::")[2]  # torch::autograd::AccumulateGrad
            if entry is not None and entry[0] is gf:
                node = AutogradNode(name, entry[1], entry[2])
            else:
                node = AutogradNode(name, inherited)
            variable = getattr(gf, "variable", None)
            if isinstance(variable, Tensor):
                node.shape = tuple(variable.shape)
                owner = param_of(variable)
                if owner is not None:
                    node.param, node.scope = owner
                else:
                    node.scope = None
            node.saved, node.stored, node.unread = _saved_tensors(gf, storages)
            index[id(gf)] = len(found)
            found.append(node)
            keep.append(gf)
            stack.append(gf)
            return index[id(gf)]

        roots: list[tuple[int, Key]] = []
        for gf, nr, key in self.roots:
            gf, _ = _past_hooks(gf, nr, self.plumbing)
            if gf is None:
                continue
            i = index.get(id(gf))
            if i is None:
                i = meet(gf, None)
            roots.append((i, key))
        while stack:
            gf = stack.pop()
            i = index[id(gf)]
            for nxt, nr in gf.next_functions:
                nxt, nr = _past_hooks(nxt, nr, self.plumbing)
                if nxt is None:
                    continue
                j = index.get(id(nxt))
                if j is None:
                    j = meet(nxt, found[i].scope)
                edges.append((j, i))
        order = _forward_order(len(found), edges)
        position = {old: new for new, old in enumerate(order)}
        out.nodes = [found[i] for i in order]
        out.edges = [(position[a], position[b]) for a, b in edges]
        out.outputs = [(position[i], key) for i, key in roots]
        out.storages = storages.found
        return out


#: the backward node of the ``autograd.Function`` that torch runs around each call of a module
#: with a full backward hook (``torch.utils.hooks.BackwardHookFunction``): plumbing that hands
#: each gradient on unchanged, not a node of the model
_HOOK_PLUMBING = "BackwardHookFunctionBackward"


def _past_hooks(gf: Any, nr: int, plumbing: Optional[dict[int, Any]] = None) -> tuple[Any, int]:
    """The autograd node (and its output number) that ``gf``'s output ``nr`` comes from once
    torch's backward-hook plumbing is passed (each of its outputs is its input of that number),
    and the recorder's own views (``plumbing``, by id: one input, one output)."""
    while gf is not None and (gf.name() == _HOOK_PLUMBING
                              or (plumbing and plumbing.get(id(gf)) is gf)):
        nexts = gf.next_functions
        if nr >= len(nexts):
            break
        gf, nr = nexts[nr]
    return gf, nr


def storage_id(t: Tensor) -> Optional[int]:
    """What tells ``t``'s storage from every other storage alive (two views of one tensor,
    or a tensor and the output it was saved as, share it); ``None`` for a tensor without
    one storage (a nested or wrapper tensor)."""
    try:
        return int(t.untyped_storage()._cdata)
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        return None


def storages_of(tensors: Iterable[Tensor]) -> set[int]:
    """The :func:`storage_id` of each of ``tensors`` (the model's parameters and buffers)."""
    found = (storage_id(t) for t in tensors)
    return {s for s in found if s is not None}


#: the dtypes torch gives a Python number it wraps as a tensor (``0.5`` in ``0.5 * x``)
_NUMBER_DTYPES = (torch.float64, torch.int64, torch.complex128, torch.bool)


def _number(t: Tensor) -> bool:
    """Whether ``t`` looks like a Python number torch wrapped as a tensor to save it: 0-dim,
    on the CPU, of a number's dtype, without gradients (torch does not show those to
    saved-tensor hooks; Python does not tell them from such a tensor made by hand)."""
    return t.dim() == 0 and t.dtype in _NUMBER_DTYPES and t.device.type == "cpu" and not t.requires_grad


class _Storages:
    """The distinct storages of the saved tensors met in one walk, indexed in meeting order,
    each with its size and kind (see :attr:`~torchrecorder.graph.AutogradGraph.storages`)."""

    __slots__ = ("found", "index", "model")

    def __init__(self, model: set[int]) -> None:
        self.model = model
        self.index: dict[int, int] = {}
        self.found: list[tuple[int, str]] = []  # (nbytes, kind)

    def of(self, t: Tensor) -> int:
        """The index of ``t``'s storage (a new one for a tensor without one storage: its
        elements' bytes)."""
        sid = storage_id(t)
        if sid is not None:
            i = self.index.get(sid)
            if i is not None:
                return i
            self.index[sid] = len(self.found)
            kind = "model" if sid in self.model else "number" if _number(t) else ""
            self.found.append((int(t.untyped_storage().nbytes()), kind))
            return len(self.found) - 1
        try:
            size = t.numel() * t.element_size()
        except RuntimeError:  # no one shape: its size is not known
            size = 0
        self.found.append((int(size), ""))
        return len(self.found) - 1


def _saved_tensors(gf: Any, storages: _Storages
                   ) -> tuple[list[tuple[str, tuple[int, ...]]], list[tuple[str, int]], list[str]]:
    """``(name, shape)`` of the tensors ``gf`` saved for backward (``_saved_self`` -> ``self``,
    the items of a saved list ``indices.0``, ``indices.1``), their ``(dtype, storage index)``
    in the same order, and the names of those a saved-tensor hook holds.

    Read through ``_raw_saved_<name>`` (the saved variable itself: its ``data`` is the saved
    tensor, ``None`` once a backward pass freed it), never ``_saved_<name>``, which unpacks:
    that would call the unpack hooks of ``torch.autograd.graph.saved_tensors_hooks``
    (an offload that hands each tensor back once, ``torch.utils.checkpoint``'s recomputation
    of the forward).  A tensor packed by a hook is not read at all: what the hook kept need
    not have the saved tensor's shape.  Only metadata is kept: shapes, dtypes, storage sizes.
    """
    saved: list[tuple[str, tuple[int, ...]]] = []
    stored: list[tuple[str, int]] = []
    unread: list[str] = []
    for attr in dir(gf):
        if not attr.startswith("_raw_saved_"):
            continue
        name = attr[len("_raw_saved_"):]
        try:
            raw = getattr(gf, attr)
        except (RuntimeError, AttributeError):
            continue
        items = ([(f"{name}.{i}", r) for i, r in enumerate(raw)] if isinstance(raw, (tuple, list))
                 else [(name, raw)])
        for item, r in items:
            try:
                if getattr(r, "unpack_hook", None) is not None:
                    unread.append(item)
                    continue
                value = r.data
            except (RuntimeError, AttributeError):  # freed by a backward pass already
                continue
            if isinstance(value, Tensor):
                saved.append((item, tuple(value.shape)))
                stored.append((str(value.dtype).rpartition(".")[2], storages.of(value)))
    return saved, stored, unread


def _forward_order(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Node indices so that every edge ``a -> b`` has ``a`` first; ties in discovery order,
    reversed (so that the inputs of the model come first)."""
    indeg = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1
    ready = deque(i for i in reversed(range(n)) if indeg[i] == 0)
    order: list[int] = []
    while ready:
        i = ready.popleft()
        order.append(i)
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    if len(order) != n:  # autograd graphs are acyclic; keep every node whatever happens
        seen = set(order)
        order.extend(i for i in range(n) if i not in seen)
    return order
