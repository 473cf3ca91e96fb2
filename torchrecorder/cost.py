"""What each module call costs: FLOPs as torch counts them, parameter and activation bytes.

:func:`cost` reads a recording; it runs no model.  The FLOPs of an operation are what
:class:`torch.utils.flop_counter.FlopCounterMode` counts for it: each recorded operation
torch has a FLOP formula for (a matrix product, a linear or convolution layer, attention;
see :mod:`torchrecorder.opargs`) is run again, alone, on ``meta`` tensors of the
recorded shapes under ``FlopCounterMode``, so that torch's own decomposition (``linear``
into ``addmm``, a batched ``matmul`` into ``bmm``, ``scaled_dot_product_attention`` into
its kernel) and torch's own formulas give the number.  Operations with the same
arguments are counted once, so the 80 identical layers of a large model cost what one does.

>>> import torch, torchrecorder
>>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
>>> rec = torchrecorder.record(net, "net", (2, 8))
>>> c = torchrecorder.cost(rec)
>>> c["0"].flops, c["2"].flops, c.total.flops      # 2 * 2 * 8 * 16, 2 * 2 * 16 * 4
(512, 256, 768)
>>> c["0"].param_bytes, c["0"].activation_bytes    # (8 * 16 + 16) * 4, 2 * 16 * 4
(576, 128)
>>> c.uncounted
{'relu': 1}
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, Optional

import torch

from .graph import AutogradGraph, Graph
from .nodes import Key, LayerNode, OpNode, ParamNode, itemsize
from .opargs import MEASURED, TensorSpec, unpack

__all__ = ["COST_STATS", "CallCost", "Cost", "cost", "format_bytes", "format_flops", "format_stat",
           "op_backward_flops", "op_flops"]

#: the statistics a cost has for each call, as ``make_dot(rec, stat=...)`` and the table name them
COST_STATS = ("flops", "activation_bytes", "param_bytes", "saved_bytes")


@dataclass
class CallCost:
    """What one module call (or the whole pass) costs.

    Attributes:
        flops: forward floating-point operations, as ``FlopCounterMode`` counts them, of the
            operations the call ran, its children's included.
        param_bytes: bytes of the parameters recorded in this call and its children (a
            parameter is recorded once, in the first call that uses it).
        activation_bytes: bytes of the tensors the call returned.
        saved_bytes: where the recording kept the backward graph (``record(...,
            backward=True)``), the bytes of the storages autograd saved for the backward
            pass by the call's operations, its children's included, each storage once (a
            tensor two operations saved, or an output the next operation saved); the
            model's parameters and buffers are not counted (the model holds them anyway),
            nor Python numbers torch saved as 0-dim tensors, nor tensors a saved-tensor
            hook packed (what it keeps is its own), as torch's own saved-tensor hooks
            count; else ``None``.
        backward_flops: where the recording kept the backward graph
            (``record(..., backward=True)``), the FLOPs ``FlopCounterMode`` counts in the
            backward pass of the call's operations (the gradients of what required them);
            else ``None``.
        time: with ``record(..., timing=True)``, the call's wall time in seconds (the
            recorder's own work subtracted); else ``None``.
    """

    flops: int = 0
    param_bytes: int = 0
    activation_bytes: int = 0
    saved_bytes: Optional[int] = None
    backward_flops: Optional[int] = None
    time: Optional[float] = None

    def __getitem__(self, name: str) -> Any:
        if name not in _FIELDS:
            raise KeyError(f"a cost entry has no {name!r}; it has {list(_FIELDS)}")
        return getattr(self, name)


_FIELDS = tuple(f.name for f in fields(CallCost))


class Cost(Mapping[str, CallCost]):
    """The cost of every module call of a recording, by the call's key (``"encoder.layer.0"``,
    ``"lin#2"`` for a second call), as :func:`cost` computes it.

    Attributes:
        total: the whole pass: every operation's FLOPs (those outside the root module's
            forward too), every parameter once, and the bytes of the root call's outputs;
            also ``cost["total"]``.
        ops: FLOPs of each counted operation, by its key (operations pruned from the graph
            because nothing used their result included).
        uncounted: operation name -> how many ran that torch has no FLOP formula for (they
            count 0, as in ``FlopCounterMode``), or that could not be counted again (a fused
            kernel drawn as one closed box).
    """

    def __init__(self, calls: dict[str, CallCost], total: CallCost, ops: dict[str, int],
                 uncounted: dict[str, int], paths: dict[str, str]) -> None:
        self._calls = calls
        self.total = total
        self.ops = ops
        self.uncounted = uncounted
        self._paths = paths

    def __getitem__(self, key: str) -> CallCost:
        got = self._calls.get(key)
        if got is not None:
            return got
        if key == "total":  # (a call keyed "total" comes first; .total is always the pass)
            return self.total
        raise KeyError(f"no module call {key!r} in this recording")

    def __iter__(self) -> Iterator[str]:
        return iter(self._calls)

    def __len__(self) -> int:
        return len(self._calls)

    def stat(self, name: str, ops: bool = True) -> dict[str, float]:
        """One statistic of every call, by the name :func:`torchrecorder.capture` gives calls
        (the dotted path, ``""`` for the network, ``"path#2"`` for a second call), as
        :class:`~torchrecorder.renderer.activations.ActivationStyler` reads it; with ``ops``,
        the FLOPs of each counted operation by its key too.

        Raises:
            ValueError: ``name`` is not one of :data:`COST_STATS` nor ``"time"`` (seconds, for
                a recording made with ``timing=True``).
        """
        if name not in (*COST_STATS, "time"):
            raise ValueError(f"unknown cost statistic {name!r}; choose from {[*COST_STATS, 'time']}")
        values: dict[str, float] = {self._paths[k]: float(getattr(c, name)) for k, c in self._calls.items()
                                    if getattr(c, name) is not None}
        if ops and name == "flops":
            values.update((str(k), float(v)) for k, v in self.ops.items() if v)
        return values

    def __repr__(self) -> str:
        return (f"Cost({len(self)} calls, total {format_flops(self.total.flops)}, "
                f"{format_bytes(self.total.param_bytes)} of parameters)")


# the suffix that makes an operation's key unique (``h.0/matmul_2``)
_OP_SUFFIX = re.compile(r"_\d+$")


# ------------------------------------------------------------------ units
_PREFIXES = ("", "K", "M", "G", "T", "P", "E")


def _scaled(value: float, unit: str) -> str:
    i = 0
    while abs(value) >= 999.95 and i < len(_PREFIXES) - 1:
        value /= 1000
        i += 1
    text = f"{value:.0f}" if i == 0 else f"{value:.1f}"
    return f"{text} {_PREFIXES[i]}{unit}"


def format_flops(flops: float) -> str:
    """``flops`` in words of 1000: ``7.4 MFLOPs``.

    >>> format_flops(7_400_000), format_flops(512)
    ('7.4 MFLOPs', '512 FLOPs')
    """
    return _scaled(flops, "FLOPs")


def format_bytes(n: float) -> str:
    """``n`` bytes in words of 1000 (as torchinfo's MB): ``1.2 MB``.

    >>> format_bytes(1_234_567), format_bytes(96)
    ('1.2 MB', '96 B')
    """
    return _scaled(n, "B")


def format_stat(value: float, stat: str) -> str:
    """``value`` of the cost statistic ``stat`` in its unit."""
    return format_flops(value) if stat == "flops" else format_bytes(value)


# ------------------------------------------------------------------ FLOPs of one operation
def _meta(value: Any, values: bool = True, leaves: Optional[list[torch.Tensor]] = None,
          unify: bool = False) -> Any:
    """``value`` with every :class:`TensorSpec` made an empty ``meta`` tensor, or, with
    ``values``, a CPU tensor of the values it kept (a packed sequence's lengths); with
    ``leaves``, those that required gradients require them again, and are added to it.
    With ``unify``, every real floating-point tensor is made ``float32``: an operation that
    ran under ``torch.autocast`` got inputs of two dtypes (a bf16 activation, a float32
    weight) and cast them inside, which its call again outside autocast would refuse;
    the FLOPs depend on the shapes only."""
    if isinstance(value, TensorSpec):
        if value.shape is None:
            raise ValueError("a nested tensor has no one shape")
        if values and value.values is not None:
            return torch.tensor(value.values, dtype=value.dtype).reshape(value.shape)
        dtype = torch.float32 if unify and value.dtype.is_floating_point else value.dtype
        t = torch.empty(value.shape, dtype=dtype, device="meta")
        if leaves is not None and value.requires_grad:
            t.requires_grad_(True)
            leaves.append(t)
        return t
    if isinstance(value, tuple):
        return tuple(_meta(v, values, leaves, unify) for v in value)
    if isinstance(value, list):
        return [_meta(v, values, leaves, unify) for v in value]
    if isinstance(value, dict):
        return {k: _meta(v, values, leaves, unify) for k, v in value.items()}
    return value


def _frozen(value: Any) -> Any:
    """A hashable stand-in for ``value`` (lists and dicts marked as such); ``TypeError`` if none."""
    if isinstance(value, list):
        return ("[]", *(_frozen(v) for v in value))
    if isinstance(value, tuple):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return ("{}", *((k, _frozen(v)) for k, v in value.items()))
    hash(value)
    return value


class _Counter:
    """Counts operations again on ``meta`` tensors under one ``FlopCounterMode``, once per
    distinct call: their forward pass, or the backward pass of their outputs."""

    def __init__(self) -> None:
        from torch.utils.flop_counter import FlopCounterMode  # (imported when a cost is asked for)

        self.mode = FlopCounterMode(display=False)
        self.memo: dict[Any, Optional[int]] = {}

    def flops(self, func: Any, args: tuple[Any, ...], kwargs: Optional[dict[str, Any]],
              vmap: Optional[tuple[tuple[Optional[int], ...], ...]] = None,
              backward: bool = False) -> Optional[int]:
        """The FLOPs ``FlopCounterMode`` counts for ``func(*args, **kwargs)`` (with
        ``backward``, for the gradients of the arguments that required them, the outputs'
        gradients given), or ``None`` when the call cannot be made again on ``meta`` tensors.
        With ``vmap`` (the ``in_dims`` of each level, outermost first) ``func`` runs inside
        those ``torch.vmap`` s, as it ran in the model."""
        try:
            key: Any = (func, _frozen(args), _frozen(kwargs), vmap, backward)
        except TypeError:  # an argument that cannot be a dict key: counted, not remembered
            key = None
        if key is not None and key in self.memo:
            return self.memo[key]
        got: Optional[int] = None
        # kept values on the CPU, else every tensor on meta; then the same with one floating
        # dtype, for an operation that autocast gave mixed dtypes
        call = func
        for dims in reversed(vmap or ()):  # the innermost level first: the outermost wraps all
            call = torch.vmap(call, in_dims=dims)
        for values, unify in ((True, False), (False, False), (True, True), (False, True)):
            try:
                got = self._count(call, args, kwargs or {}, values, backward, unify)
            except Exception:  # no meta kernel, a nested tensor: the operation is not counted
                continue
            break
        if key is not None:
            self.memo[key] = got
        return got

    def _count(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], values: bool,
               backward: bool, unify: bool = False) -> int:
        counts = self.mode.flop_counts
        counts.clear()
        if not backward:
            func(*_meta(args, values, None, unify), **_meta(kwargs, values, None, unify))
            return sum(counts["Global"].values()) if "Global" in counts else 0
        if getattr(func, "__name__", "") == "scaled_dot_product_attention":
            return _attention_backward(args, kwargs)
        leaves: list[torch.Tensor] = []
        with torch.enable_grad():
            out = func(*_meta(args, values, leaves, unify), **_meta(kwargs, values, leaves, unify))
            outs = [t for t in _tensors(out) if t.requires_grad]
            if not leaves or not outs:
                return 0
            counts.clear()  # the forward pass is not the backward's
            torch.autograd.grad(outs, leaves, [torch.ones_like(t) for t in outs], allow_unused=True)
        return sum(counts["Global"].values()) if "Global" in counts else 0


def _attention_backward(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """The backward FLOPs of ``scaled_dot_product_attention`` by torch's formula for its
    kernels, which recompute the attention scores (``FlopCounterMode`` on CUDA; the math
    path that runs on ``meta`` does not recompute them, and the CPU kernel has no formula)."""
    from torch.utils.flop_counter import sdpa_backward_flop_count

    names = ("query", "key", "value")
    q, k, v = (args[i] if i < len(args) else kwargs[n] for i, n in enumerate(names))
    if not all(isinstance(s, TensorSpec) and s.shape is not None for s in (q, k, v)):
        raise ValueError("attention without the shapes of its query, key and value")
    if not (q.requires_grad or k.requires_grad or v.requires_grad):
        return 0
    out = (*q.shape[:-1], v.shape[-1])
    return int(sdpa_backward_flop_count(out, q.shape, k.shape, v.shape))


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in an operation's output (a tensor, or tuples and lists of them)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


# ------------------------------------------------------------------ the cost of a recording
def cost(rec: Graph) -> Cost:
    """The cost of every module call of a recording, and of the whole pass.

    Each call's entry (a :class:`CallCost`) has ``flops``, the forward FLOPs of the
    operations its forward ran (those between its submodules included) and of its
    children, counted exactly as :class:`torch.utils.flop_counter.FlopCounterMode`
    counts them, ``param_bytes`` and ``activation_bytes``, and for a recording made with
    ``backward=True`` ``backward_flops``.  Nothing of the model runs: a recording made on
    the ``meta`` device gets its exact FLOPs too.

    >>> import torch, torchrecorder
    >>> from torch.utils.flop_counter import FlopCounterMode
    >>> net = torch.nn.Conv2d(4, 8, 3, stride=2, groups=2)
    >>> with FlopCounterMode(display=False) as counter:
    ...     _ = net(torch.randn(1, 4, 32, 32))
    >>> torchrecorder.cost(torchrecorder.record(net, "conv", (1, 4, 32, 32))).total.flops
    64800
    >>> counter.get_total_flops()
    64800

    Two differences from ``FlopCounterMode`` run on the CPU: ``FlopCounterMode`` gives
    ``scaled_dot_product_attention`` 0 FLOPs there (torch registers no formula for its CPU
    kernel), where this counts it as torch does on ``meta`` and CUDA tensors; and a module
    run as one fused kernel (``nn.TransformerEncoderLayer`` in ``eval()`` under
    ``torch.no_grad()``, drawn as a closed box) is listed in ``uncounted`` (record it with
    ``unfuse_fast_paths=True`` to count its operations).

    Args:
        rec: a recording (:func:`torchrecorder.record`).

    Returns:
        a :class:`Cost`: a mapping of call key to :class:`CallCost`, with ``.total``,
        ``.ops`` and ``.uncounted``.

    Raises:
        ValueError: ``rec`` was neither recorded here nor saved with its cost (a graph
            built by hand, or saved by a torchrecorder without :func:`cost`).
    """
    if not isinstance(rec, Graph):
        raise TypeError(f"cost() takes a recording, got {type(rec).__name__}")
    counted = op_flops(rec)
    dtypes = rec.output_dtypes or {}
    nodes = rec.nodes
    calls: dict[str, CallCost] = {}
    paths: dict[str, str] = {}
    layers = [n for n in nodes.values() if isinstance(n, LayerNode)]
    times = rec.call_times
    for layer in layers:
        key = str(layer.key)
        paths[key] = layer.path if layer.call_index == 1 else f"{layer.path}#{layer.call_index}"
        calls[key] = CallCost(activation_bytes=_output_bytes(layer, dtypes.get(layer.key)),
                              time=times.get(layer.key) if times is not None else None)
    total = CallCost()
    ops: dict[str, int] = {}
    uncounted: dict[str, int] = {}
    seen: set[Key] = set()
    for op_key, scope, flops in counted:
        seen.add(op_key)
        if not flops:
            node = nodes.get(op_key)
            name = node.op if isinstance(node, OpNode) else _OP_SUFFIX.sub("", str(op_key).rpartition("/")[2])
            uncounted[name] = uncounted.get(name, 0) + 1
            continue
        ops[str(op_key)] = flops
        total.flops += flops
        if scope is not None and scope in calls:
            calls[str(scope)].flops += flops
    backward = op_backward_flops(rec)
    if backward is not None:
        _add_backward(backward, calls, total)
    if rec.backward is not None and rec.backward.storages is not None:
        _add_saved(rec.backward, layers, calls, total)
    for node in nodes.values():
        if isinstance(node, ParamNode):
            size = node.numel * itemsize(node.dtype)
            total.param_bytes += size
            if node.parent_key is not None and node.parent_key in calls:
                calls[str(node.parent_key)].param_bytes += size
        elif isinstance(node, OpNode) and node.key not in seen and not (
                node.fn is None and node.op == "identity"):  # (the recorder's pass-through marks)
            uncounted[node.op] = uncounted.get(node.op, 0) + 1
    for layer in reversed(layers):  # a call's children come after it: sums reach the root
        parent = layer.parent_key
        if parent is not None and parent in calls:
            own, up = calls[str(layer.key)], calls[str(parent)]
            up.flops += own.flops
            up.param_bytes += own.param_bytes
            if own.backward_flops is not None and up.backward_flops is not None:
                up.backward_flops += own.backward_flops
    roots = [calls[str(k)] for k in rec.context.subnet_keys if str(k) in calls]
    total.activation_bytes = sum(c.activation_bytes for c in roots)
    if times is not None:
        total.time = sum(c.time or 0.0 for c in roots)
    return Cost(calls, total, ops, dict(sorted(uncounted.items(), key=lambda kv: (-kv[1], kv[0]))), paths)


def _add_backward(counted: list[tuple[Key, Key, int]], calls: dict[str, CallCost], total: CallCost) -> None:
    """Add the backward FLOPs of each operation into its call (and set every call's and the
    total's ``backward_flops``, 0 where nothing is counted)."""
    for entry in calls.values():
        entry.backward_flops = 0
    total.backward_flops = 0
    for _, scope, flops in counted:
        total.backward_flops += flops
        if scope is not None and str(scope) in calls:
            entry = calls[str(scope)]
            entry.backward_flops = (entry.backward_flops or 0) + flops


def op_backward_flops(rec: Graph) -> Optional[list[tuple[Key, Key, int]]]:
    """``(op key, key of the call that ran it, FLOPs of its backward pass)`` of every operation
    of :func:`op_flops`, for a recording that kept its backward graph with gradients on,
    counted once per recording and kept in ``rec.op_backward_flops`` (which JSON saves);
    ``None`` for a recording without one (or a document saved without them)."""
    if rec.backward is None or not rec.backward.grad_enabled:
        return None
    args = rec.op_args
    kept = rec.op_backward_flops
    if kept is not None and (args is None or len(kept) == len(args)):
        return kept
    if args is None:
        return None
    counter = _Counter()
    known = _param_specs(rec)
    with counter.mode:
        vmaps = getattr(rec, "op_vmap", None) or {}
        rec.op_backward_flops = [(key, op[0], 0 if op[1] is MEASURED else  # (a grad's own backward:
                                  counter.flops(*_batched(unpack(op, known), vmaps.get(key)),  # not
                                                backward=True) or 0)  # counted)
                                 for key, op in args.items()]
    return rec.op_backward_flops


def _add_saved(bw: AutogradGraph, layers: list[LayerNode], calls: dict[str, CallCost],
               total: CallCost) -> None:
    """Set every call's and the total's ``saved_bytes``: the storages the autograd nodes of
    the call and its children saved, each once, the model's own and wrapped numbers left out."""
    storages = bw.storages or []
    held: dict[str, set[int]] = {key: set() for key in calls}
    everything: set[int] = set()
    for node in bw.nodes:
        mine = held.get(str(node.scope)) if node.scope is not None else None
        for _, index in node.stored:
            if 0 <= index < len(storages) and not storages[index][1]:  # activations only
                everything.add(index)
                if mine is not None:
                    mine.add(index)
    for layer in reversed(layers):  # children first: each call's set reaches its parents
        if layer.parent_key is not None and str(layer.parent_key) in held:
            held[str(layer.parent_key)] |= held[str(layer.key)]
    for key, found in held.items():
        calls[key].saved_bytes = sum(storages[i][0] for i in found)
    total.saved_bytes = sum(storages[i][0] for i in everything)


def _param_specs(rec: Graph) -> dict[int, TensorSpec]:
    """What the recording saw of each parameter it kept (by the parameter's ``id``): the
    shape, dtype and gradient flag of its node, as they were during the pass."""
    found: dict[int, TensorSpec] = {}
    for node in rec.nodes.values():
        if isinstance(node, ParamNode) and isinstance(node.kept, torch.Tensor) and node.shape is not None:
            dtype = getattr(torch, node.dtype, None)
            if isinstance(dtype, torch.dtype):
                found[id(node.kept)] = TensorSpec(node.shape, dtype, None, node.requires_grad)
    return found


def op_flops(rec: Graph) -> list[tuple[Key, Key, int]]:
    """``(op key, key of the call that ran it, FLOPs)`` of every operation torch has a FLOP
    formula for (0 where it counts none), counted once per recording and kept in
    ``rec.op_flops`` (which JSON saves).

    Raises:
        ValueError: ``rec`` holds neither the operations' arguments nor their counts.
    """
    args = rec.op_args
    if rec.op_flops is not None and (args is None or len(rec.op_flops) == len(args)):
        return rec.op_flops
    if args is None:
        raise ValueError(f"the graph {rec.name!r} was not recorded in this process and was saved without "
                         "its cost (built by hand, or saved by an older torchrecorder): it keeps no "
                         "operation arguments to count FLOPs from; record the model with "
                         "torchrecorder.record")
    counter = _Counter()
    with torch.no_grad(), counter.mode:
        known = _param_specs(rec)
        vmaps = getattr(rec, "op_vmap", None) or {}  # (operations run inside torch.vmap)
        rec.op_flops = [(key, kept[0], kept[3] if kept[1] is MEASURED else
                         counter.flops(*_batched(unpack(kept, known), vmaps.get(key))) or 0)
                        for key, kept in args.items()]
    return rec.op_flops


def _batched(op: tuple[Any, Any, tuple[Any, ...], Optional[dict[str, Any]]], plan: Any
             ) -> tuple[Any, tuple[Any, ...], Optional[dict[str, Any]], Any]:
    """``(callable, args, kwargs, vmap levels)`` of an unpacked operation: for one run inside
    ``torch.vmap`` (``plan``, see ``Graph.op_vmap``) its tensors with their batch dimensions
    and the ``in_dims`` of each level, so that it is counted as vmap ran it."""
    _, func, args, kwargs = op
    if plan is None:
        return func, args, kwargs, None
    in_dims, shapes = plan
    args = tuple(TensorSpec(tuple(shape), a.dtype, None, a.requires_grad)
                 if shape is not None and isinstance(a, TensorSpec) else a
                 for a, shape in zip(args, shapes, strict=False))
    return func, args, kwargs, tuple(tuple(level) for level in in_dims)


def _output_bytes(layer: LayerNode, dtypes: Optional[list[str]]) -> int:
    """Bytes of the tensors ``layer`` returned (4 per element where the dtype is unknown)."""
    size = 0
    for i, shape in enumerate(layer.output_shapes):
        if shape is None or any(d < 0 for d in shape):
            continue  # a nested tensor: no one shape
        dtype = dtypes[i] if dtypes is not None and i < len(dtypes) else "float32"
        size += math.prod(shape) * itemsize(dtype)
    return size
