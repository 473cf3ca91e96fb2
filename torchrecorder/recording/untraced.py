"""Edges through code that torch's function mode does not see, recovered from autograd.

The function mode (:mod:`~torchrecorder.recording.ops`) sees every torch call
made from Python.  Two kinds of code make tensors without it:

* a ``@torch.jit.script`` function called from an eager ``forward`` (its ops run
  in TorchScript's interpreter): its result reaches the recording as a tensor
  that no recorded operation made;
* a custom ``torch.autograd.Function`` (``Function.apply`` is not a torch
  function): the ops of its ``forward`` are recorded, but where its values pass
  through Python numbers (``.item()``, ``.tolist()``) the output is made from
  numbers and has no edge from the inputs.

With gradients on, autograd knows the truth: such a tensor's ``grad_fn`` leads
back, through ``next_functions``, to the ``grad_fn`` of recorded tensors (or to
the ``AccumulateGrad`` of a parameter).  :class:`Untraced` walks it and draws
one operation, named after the function, joined to what it came from.  With
gradients off nothing can be recovered: the graph gets a note instead.

The walk goes through autograd nodes of every kind (a TorchScript function that
the profiling executor has optimised leaves one fused ``DifferentiableGraph``
node, or others, in place of its ops' nodes) until it meets the ``grad_fn`` of a
tensor the recording drew.  That tensor need not be alive any more: a temporary
handed straight to the untraced call (``f(self.a(x))``) is freed once nothing saves
it, while its ``grad_fn`` lives on in the graph.  So the map from ``grad_fn`` to
node is kept as the tensors are bound, not read from the live tensors when first
needed; it holds each ``grad_fn`` until the recording ends, so that an ``id`` is
never another node's.
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import Any, Optional

import torch
from torch import Tensor

from ..nodes import Key, LayerNode, OpNode, ScopeNode
from .meta import grad_fn_op_name
from .source import caller

__all__ = ["TO_PYTHON_OPS", "Untraced", "release_newest_first"]

#: operations that turn tensor values into Python objects (the function mode sees them)
TO_PYTHON_OPS = frozenset({"item", "tolist", "numpy", "int", "float", "index", "complex"})

_WALK_BUDGET = 20_000  # autograd nodes visited at most per recovered tensor
_FUNCTION_FILE = os.path.join("autograd", "function.py")


def release_newest_first(held: dict[Any, Any]) -> None:
    """Empty ``held``, a dict of autograd nodes (``grad_fn`` s, or what holds them) in the
    order they were made, the newest first.  A node whose ``grad_fn`` was read from Python
    keeps that Python object while it lives, and torch frees a chain of such nodes by one
    nested call per node: released oldest first, every node stays held by the next until the
    newest lets the whole chain go at once, which overflows the stack on a long chain (a
    Python loop of some 50,000 operations: a segfault).  Newest first, each node released is
    freed alone."""
    while held:
        held.popitem()


class Untraced:
    """Recovers the producers of tensors made by code the function mode cannot see.

    Attributes:
        pending: backward class of a custom ``autograd.Function`` whose forward
            passed values through Python numbers -> the Function's name; tensors
            whose ``grad_fn`` is of such a class are joined to the Function's
            inputs when first read.
        buffers: every buffer of the recorded model, by ``id`` (read, never drawn:
            a buffer is not an unknown tensor; its storage is the model's, not saved
            activation memory).
        root_grad: whether gradients were on when the root module was called.
    """

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.pending: dict[type, str] = {}
        self.buffers: dict[int, Tensor] = {}
        self.root_grad = True
        # id(grad_fn) -> (grad_fn, key of the node that last stood for a tensor it made); kept
        # as tensors are bound (see the module docstring), the grad_fn held so its id stays its own
        self.grad_fns: dict[int, tuple[Any, Key]] = {}
        # id(grad_fn) -> (grad_fn, key of the op drawn for it) for each custom Function call joined
        self._joined: dict[int, tuple[Any, Key]] = {}
        # id(ctx) -> (ctx, keys of its inputs), for custom Function calls not joined yet
        self._inputs: dict[int, tuple[Any, list[Key]]] = {}
        self._done: dict[int, Any] = {}  # id -> weak reference of each output joined
        self._constants: Optional[set[int]] = None
        self._noted: set[str] = set()

    def clear(self) -> None:
        """Forget the live objects of the recording that ended."""
        self.pending.clear()
        self.buffers.clear()
        release_newest_first(self.grad_fns)
        release_newest_first(self._joined)
        release_newest_first(self._inputs)
        self._done.clear()
        self._constants = None
        self._noted.clear()

    # --------------------------------------------------------------- notes
    def note(self, text: str) -> None:
        """Add ``text`` to the graph's notes (once)."""
        if text not in self._noted:
            self._noted.add(text)
            self.engine.graph.notes.append(text)

    @staticmethod
    def where(scope: ScopeNode) -> str:
        """How a note names the scope ``scope``."""
        if not isinstance(scope, LayerNode):
            return "the code around the model"
        return f"'{scope.call_title(dotted=True)}'"

    # ------------------------------------------------------- autograd's map
    def track(self, t: Tensor, key: Key) -> None:
        """``t`` now stands for ``key``: remember its ``grad_fn``, which may outlive ``t``.

        The engine calls it wherever a tensor is bound to a node (where it makes nodes per
        operation and per module call, it writes :attr:`grad_fns` itself, the same way).
        """
        gf = t.grad_fn
        if gf is not None:
            self.grad_fns[id(gf)] = (gf, key)

    def _walk_back(self, starts: list[Any], scope: ScopeNode) -> list[Key]:
        """The recorded nodes that the autograd nodes ``starts`` came from (the walk stops at each)."""
        grad_fns = self.grad_fns
        engine = self.engine
        found: list[Key] = []
        seen: set[int] = set()
        stack = list(reversed(starts))
        budget = _WALK_BUDGET
        while stack and budget > 0:
            fn = stack.pop()
            if fn is None or id(fn) in seen:
                continue
            seen.add(id(fn))
            budget -= 1
            hit = grad_fns.get(id(fn))
            if hit is not None and hit[0] is fn:
                found.append(hit[1])
                continue
            variable = getattr(fn, "variable", None)  # AccumulateGrad: a leaf tensor
            if variable is not None:
                key = engine.known_source(variable, scope)
                if key is not None:
                    found.append(key)
                continue
            stack.extend(reversed([n for n, _ in fn.next_functions]))
        return list(dict.fromkeys(found))

    def _op(self, name: str, t: Tensor, scope: ScopeNode, sources: list[Key]) -> Key:
        """A new op ``name`` in ``scope`` that made ``t``, fed by ``sources``."""
        engine = self.engine
        graph = engine.graph
        skey = scope.key
        key = graph.keys(f"{skey}/{name}" if skey else name)
        node = graph.nodes[key] = OpNode(name, None, scope.depth + 1, skey, key, op=name,
                                         output_shapes=[tuple(t.shape)])
        if engine.source:  # where the tensor was read: the code that ran the untraced call
            node._source = caller(sys._getframe(1))
        scope.subnet_keys.add(key)
        for src in sources:
            if src != key:
                graph.links.add((src, key))
                engine._sources.add(src)
        engine.bind(t, key)
        return key

    def _attributes(self) -> set[int]:
        """``id`` of the tensors that the called modules hold as plain attributes (directly,
        or in a list, tuple or dict attribute), found once per recording on first need."""
        found = self._constants
        if found is None:
            found = self._constants = set()
            for node in self.engine.graph.layers():
                for value in vars(node.fn).values() if node.fn is not None else ():
                    items = value.values() if isinstance(value, dict) else (
                        value if isinstance(value, (list, tuple)) else (value,))
                    found.update(id(v) for v in items if isinstance(v, Tensor))
        return found

    # ------------------------------------------------------------ recovery
    def recover(self, t: Tensor, scope: ScopeNode) -> Key:
        """The node for ``t``, a tensor that no recorded operation made, or ``None``.

        Buffers are left alone.  A tensor with a ``grad_fn`` is joined, through
        one new op, to the recorded tensors autograd says it came from; one
        without (gradients off, or made outside the recording) gets a note.
        """
        if id(t) in self.buffers:
            return None
        gf = t.grad_fn
        if gf is not None:
            hit = self.grad_fns.get(id(gf))
            if hit is not None and hit[0] is gf:  # another output of a recovered call
                self.engine.bind(t, hit[1])
                return hit[1]
            sources = self._walk_back([gf], scope)
            if sources:
                name = self.pending.get(type(gf)) or grad_fn_op_name(gf.name().rpartition("::")[2])
                return self._op(name, t, scope, sources)
        if id(t) in self._attributes():
            return None  # a constant the model holds outside its buffers: made before the pass
        shape = "×".join(map(str, t.shape)) or "scalar"
        why = ("autograd links it to no recorded tensor" if gf is not None else
               "with gradients off (or on a tensor that needs none) autograd cannot tell where it came from")
        self.note(f"{self.where(scope)} read a {shape} tensor that no recorded operation made "
                  "(a torch.jit.script function, other code outside torch's function mode, or a "
                  f"tensor made before recording); {why}, so the edge from its producer is missing")
        return None

    def function_output(self, t: Tensor, src: Key, scope: ScopeNode) -> Key:
        """The node for ``t`` when its ``grad_fn`` is a pending custom Function's backward:
        one op named after the Function, fed by its inputs and by ``src`` (the op of its
        forward that made ``t``).  Each output is joined once."""
        done = self._done.get(id(t))
        if done is not None and done() is t:
            return src
        self._done[id(t)] = weakref.ref(t)
        gf: Any = t.grad_fn
        engine = self.engine
        hit = self._joined.get(id(gf))
        if hit is not None and hit[0] is gf:  # another output of a call joined before
            key = hit[1]
            if src is not None and src != key:
                engine.graph.links.add((src, key))
                engine._sources.add(src)
            engine.bind(t, key)
            return key
        name = self.pending[type(gf)]
        nodes = engine.graph.nodes
        if src is not None and isinstance(nodes[src], OpNode):  # the Function ran where its op did
            parent = nodes[nodes[src].parent_key]
            if isinstance(parent, ScopeNode):
                scope = parent
        inputs = self._inputs.pop(id(gf), None)
        if inputs is not None and inputs[0] is gf:  # the nodes of its inputs, read in forward
            sources = inputs[1]
        else:  # a Function without ctx in forward: ask autograd
            sources = self._walk_back([n for n, _ in gf.next_functions], scope)
        if not sources:
            self.note(f"custom autograd Function '{name}' in {self.where(scope)}: autograd links its "
                      "output to no recorded tensor, so the edge from its inputs is missing")
        key = self._op(name, t, scope, [*sources, *([src] if src is not None else [])])
        self._joined[id(gf)] = (gf, key)
        return key

    def to_python(self, opname: str, scope: ScopeNode) -> None:
        """A tensor's values became Python objects (``.item()``): inside a custom
        ``autograd.Function``, remember the Function and where its inputs came from (with
        gradients on: its outputs are joined to them when read), or note the loss."""
        frame: Any = sys._getframe(2)
        inner: Any = None  # the frame called by Function.apply: the Function's forward
        cls = args = None
        for _ in range(32):
            if frame is None:
                return
            code = frame.f_code
            if code.co_name == "apply" and code.co_filename.endswith(_FUNCTION_FILE):
                cls, args = frame.f_locals.get("cls"), frame.f_locals.get("args", ())
                break
            inner, frame = frame, frame.f_back
        if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
            return
        backward = getattr(cls, "_backward_cls", None)
        tensors = [a for a in args or () if isinstance(a, Tensor)]
        if self.root_grad and backward is not None and any(a.requires_grad for a in tensors):
            self.pending[backward] = cls.__name__
            # the inputs are alive now, not necessarily when the output is read: remember their
            # nodes under the call's ctx (its grad_fn), the forward's first argument
            code = inner.f_code if inner is not None else None
            ctx = inner.f_locals.get(code.co_varnames[0]) if code and code.co_argcount else None
            if isinstance(ctx, backward):
                engine = self.engine
                keys = [k for a in tensors if (k := engine.known_source(a, scope)) is not None]
                self._inputs[id(ctx)] = (ctx, keys)
            return
        self.note(f"custom autograd Function '{cls.__name__}' in {self.where(scope)} passes tensor "
                  f"values through Python objects (.{opname}()); with gradients off (or inputs "
                  "that need none) autograd keeps no record of its inputs, so its output has no "
                  "edge from them (record with gradients on to recover it)")
