"""The module-call half of the recording engine: opening and closing the call scope of each
module call.

:class:`ModuleCalls` is the part of :class:`~torchrecorder.recording.engine.Engine` that its
hooks run for every module call while recording: :meth:`~ModuleCalls._enter` makes the
call's :class:`~torchrecorder.nodes.LayerNode` (with its parameters, on the first call, and
a :class:`~torchrecorder.nodes.TensorNode` for each input that no other tensor node stands
for), and :meth:`~ModuleCalls._exit` closes it on what ``forward`` returned (a tensor node
per output; a tensor that existed before the call handed on as an alias of it).  The
engine keeps the hooks, the op mode's side and the session.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import torch
from torch import Tensor, nn

from .._stack import StackRoom
from ..errors import GraphError
from ..nodes import BaseNode, Key, LayerNode, OpNode, ParamNode, ScopeNode, TensorNode, shape_str
from ._failure import exception_text
from ._walk import iter_tensors, named_tensors
from .aliases import Aliases, make_alias
from .backward import AutogradTrace
from .live import LiveObjects
from .meta import bind_arguments, dtype_names, shape_tuple, tensor_meta
from .modules import ModuleInfo
from .pool import begin_layer
from .source import CALL_CODE, caller

__all__ = ["GROW_AT", "ModuleCalls"]

# nesting depth from which the recursion limit grows with the call stack (see ``_stack``)
GROW_AT = 16


class ModuleCalls(LiveObjects):
    """Module calls opened and closed (a base class of the recording engine)."""

    source: bool
    autograd: Optional[AutogradTrace]
    aliases: Aliases
    output_dtypes: dict[Key, list[str]]
    _stack: list[LayerNode]
    _stack_exc: list[Optional[BaseException]]
    _failure: Optional[tuple[BaseException, LayerNode]]
    _popped_exc: Optional[BaseException]
    _modules: dict[int, ModuleInfo]
    _room: StackRoom
    _grow_at: int

    def module_info(self, module: nn.Module, path: str = "", name: str = "") -> ModuleInfo:
        raise NotImplementedError  # the engine's (it indexes modules met outside the root)

    def _source_of(self, t: Tensor, scope: ScopeNode) -> Key:
        raise NotImplementedError  # the engine's (a torch.func wrapper read as what it wraps)

    def _enter(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        # once per module call: OrderedSet.add and the common case of one
        # tensor argument inlined
        stack = self._stack
        graph = self.graph
        nodes, live = graph.nodes, self.live
        at_root = not stack
        scope = graph.context if at_root else stack[-1]
        info = self._modules.get(id(module)) or self.module_info(module)
        info.calls += 1
        count = info.calls
        base = info.path or info.name
        candidate = base if count == 1 else f"{base}#{count}"
        key = graph.keys(candidate)
        first = count == 1
        line = None
        if self.source:  # the frames above: _pre_hook, then torch's module call (see .source)
            try:
                frame: Any = sys._getframe(4)
            except ValueError:  # (a stack shallower than a module call's)
                frame = None
            line = caller(frame.f_back if frame is not None and frame.f_code is CALL_CODE
                          else sys._getframe(2), module)
        pool = self.pool.layers
        if pool:  # made ahead by LayerNode(), with its lists (see .pool)
            call = pool.pop()
            begin_layer(call, info.name, module, scope.depth + 1, scope.key, key, info.type_name, info.path,
                        count, info.num_params if first else 0, info.total if first else 0,
                        info.buffers if first else 0, line)
        else:
            call = LayerNode(info.name, module, scope.depth + 1, scope.key, key, info.type_name, info.path,
                             count, "", "", info.num_params if first else 0, info.total if first else 0,
                             info.buffers if first else 0, line)
        nodes[key] = call
        scope.subnet_keys._items[key] = None
        for ppath, param, facts in info.params:
            entry = live.get(id(param))
            if entry is None or entry[0]() is not param:
                self.param_node(param, call, ppath, facts)
            elif first:  # recorded before: tied to another module's, or read before this call
                self.held_also(entry[1], ppath)
        if at_root:
            # (a cache object's tensors are inputs too: the keys of earlier decoding steps)
            # (one tensor given as several arguments, net(x, x): one node named after each)
            tensors: Any = named_tensors(bind_arguments(module, args, kwargs), "", objects=True, join=True)
            self.untraced.root_grad = torch.is_grad_enabled()
        elif not kwargs and len(args) == 1 and type(args[0]) is Tensor:  # the common case
            tensors = ((None, args[0]),)
        elif not kwargs and all(type(a) is Tensor for a in args):
            tensors = [(None, t) for t in dict.fromkeys(args)]
        else:
            tensors = [(None, t) for t in iter_tensors((args, kwargs))]
        if self.autograd is not None:  # (a custom Function's backward node, set after its op)
            tensors = list(tensors)
            self.autograd.read([t for _, t in tensors], live, nodes)
        shapes = call.input_shapes
        untraced = self.untraced
        for argname, t in tensors:
            shape = shape_tuple(t)
            shapes.append(shape)
            entry = live.get(id(t))
            src = entry[1] if entry is not None and entry[0]() is t else None
            if src is None:
                if at_root:
                    pass
                elif id(t) not in self._params:
                    # (a torch.func wrapper: what it wraps; else made where the mode cannot see)
                    src = self._source_of(t, scope)
                else:  # a parameter handed to the call (the weight of a module never called)
                    src = self.known_source(t, scope)
            elif untraced.pending and type(t.grad_fn) in untraced.pending:
                src = untraced.function_output(t, src, scope)
            if src is not None and isinstance(nodes[src], TensorNode):
                continue
            meta = (shape, *dtype_names(t))  # (the shape read once)
            if argname is not None:
                label = argname.lstrip(".").replace(", .", ", ")  # (each name of a joined one too)
                node = self.tensor_node(t, scope, f"input:{label}", name=label, role="input", meta=meta)
            else:
                node = self.tensor_node(t, scope, f"{key}:in", meta=meta)
            if src is not None:
                graph.links._items[(src, node.key)] = None
                self._sources.add(src)
        stack.append(call)
        self._stack_exc.append(sys.exc_info()[1])
        info.last = call
        if len(stack) >= self._grow_at:  # deep nesting: one more frame per level than a plain call
            self._grow_at = len(stack) + GROW_AT
            self._room.grow(self._grow_at)

    def _pop(self) -> LayerNode:
        """Close the innermost open call; its entry exception goes to ``_popped_exc``."""
        self._popped_exc = self._stack_exc.pop()
        return self._stack.pop()

    def _exit(self, module: nn.Module, outputs: Any) -> Any:
        """Close the call of ``module``; return its outputs with the tensors that existed
        before the call replaced by aliases, or ``None`` when nothing is replaced."""
        stack = self._stack
        if not stack:
            return None
        if stack[-1]._fn is not module:  # (_fn: the module itself, without fn's property call)
            if all(c._fn is not module for c in stack):
                return None
            while stack[-1]._fn is not module:
                self._pop()  # left open by an exception that was handled inside the model
        exc = sys.exc_info()[1]
        entered = self._popped_exc = self._stack_exc.pop()  # (self._pop(), inlined)
        call = stack.pop()
        if exc is not None and exc is not entered:
            # forward raised (the hook is registered with always_call=True): close the
            # call with no outputs, and remember the innermost call the exception left
            call.error = exception_text(exc)
            if self._failure is None or self._failure[0] is not exc:
                self._failure = (exc, call)
            return None
        self._failure = None  # a normal return: any exception seen so far was handled
        graph = self.graph
        nodes, live, edges, sources = graph.nodes, self.live, graph.links._items, self._sources
        scope = nodes[call.parent_key]
        if not isinstance(scope, ScopeNode):
            raise GraphError(f"the call {call.key!r} sits in {call.parent_key!r}, which is not a layer")
        at_root = call.parent_key is None
        ckey = call.key
        untraced = self.untraced
        if type(outputs) is Tensor and not at_root:
            # the common case on its own path: one tensor, made inside the call by an op
            # (the loop below does the same for it, after more tests)
            entry = live.get(id(outputs))
            if entry is not None and entry[0]() is outputs:
                src = entry[1]
                made = nodes[src]
                if made.parent_key == ckey and not isinstance(made, ParamNode) and not (
                        untraced.pending and type(outputs.grad_fn) in untraced.pending):
                    meta = tensor_meta(outputs)
                    call.output_shapes.append(meta[0])
                    self.output_dtypes[ckey] = [meta[1]]
                    if isinstance(made, TensorNode) and src not in sources:
                        graph.reparent(src, scope.key)  # a child's output, returned as it is
                    else:
                        out_node = self.tensor_node(outputs, scope, f"{ckey}:out", meta=meta)
                        edges[(src, out_node.key)] = None
                        sources.add(src)
                    if self.autograd is not None:
                        self.autograd.call((outputs,), ckey)
                    return None
        if at_root:
            # (a forward that returns an object, such as a torch.distributions.Normal, and no tensor
            # in containers: the tensors the object holds are the network's outputs)
            tensors: Any = (list(named_tensors(outputs, "output", join=True))
                            or list(named_tensors(outputs, "output", objects=True, join=True)))
        elif type(outputs) is Tensor:
            tensors = ((None, outputs),)
        else:
            tensors = ((None, t) for t in iter_tensors(outputs))
        aliased: list[tuple[Tensor, Tensor, TensorNode]] = []  # (original, alias, its node)
        dtypes = self.output_dtypes[ckey] = []
        for outname, t in tensors:
            meta = tensor_meta(t)
            shape = meta[0]
            call.output_shapes.append(shape)
            dtypes.append(meta[1])
            entry = live.get(id(t))
            src = entry[1] if entry is not None and entry[0]() is t else None
            if src is None:
                src = untraced.recover(t, call)  # made by code the function mode cannot see
            elif untraced.pending and type(t.grad_fn) in untraced.pending:
                src = untraced.function_output(t, src, call)
            node = nodes[src] if src is not None else None
            # an object that existed before the call: an argument, a parameter, a buffer
            existed = node is None or isinstance(node, ParamNode) or not (
                node.parent_key == ckey or self._inside(node, call))
            if existed:
                # returned unchanged (or from nowhere): show the pass-through inside the call
                ident = OpNode("identity", None, call.depth + 1, ckey, graph.keys(f"{ckey}/identity"),
                               op="identity", output_shapes=[shape])
                ident._source = call._source  # returned from the call made on that line
                nodes[ident.key] = ident
                call.subnet_keys.add(ident.key)
                if src is not None:
                    edges[(src, ident.key)] = None
                    sources.add(src)
                src, node = ident.key, ident
            if isinstance(node, TensorNode) and not isinstance(node, ParamNode) \
                    and node.parent_key == ckey and src not in sources:
                # a child's output, returned as it is: it is this call's output too
                graph.reparent(src, scope.key)
                out_node = node
            else:
                alias = kept = None
                if existed and at_root:
                    # the network returns what it was given or holds (its input, a parameter):
                    # the caller gets that very object, as from a plain call, and later reads
                    # of it keep their producer
                    kept = live.get(id(t))
                elif existed:
                    alias, why = make_alias(t)
                    if alias is not None and self.autograd is not None:
                        self.autograd.alias(alias)  # (its ViewBackward0 is the recorder's)
                    if alias is None:
                        untraced.note(f"{untraced.where(call)} returned a tensor that existed before "
                                      f"the call, and {why}: later reads of that object are drawn "
                                      "as coming from this call")
                out_node = self.tensor_node(t if alias is None else alias, scope, f"{ckey}:out", meta=meta)
                if existed and at_root:
                    if kept is None:
                        del live[id(t)]
                    else:
                        live[id(t)] = kept
                edges[(src, out_node.key)] = None
                sources.add(src)
                if alias is not None:
                    aliased.append((t, alias, out_node))
            if self.autograd is not None:
                self.autograd.call((t,), ckey)
                if at_root:
                    self.autograd.output(t, out_node.key)
            if at_root:
                out_node.role = "output"
                if outname is not None and out_node.name == shape_str(out_node.shape):
                    out_node.name = outname
        if not aliased:
            return None
        try:  # hand the aliases on in place of the originals
            return self.aliases.hand_on(outputs, [(t, alias) for t, alias, _ in aliased])
        except TypeError as exc:  # the originals stand for the call's outputs, as before aliases
            untraced.note(f"{untraced.where(call)} returned tensors that existed before the call "
                          f"inside a container that cannot be copied ({exc}): later reads of them "
                          "are drawn as coming from this call")
            for t, _, node in aliased:
                self.bind(t, node.key)
            return None

    def _inside(self, node: BaseNode, call: LayerNode) -> bool:
        """Whether ``node`` was recorded inside the scope of ``call``."""
        nodes = self.graph.nodes
        while node.depth > call.depth:
            if node.parent_key == call.key:
                return True
            node = nodes[node.parent_key]
        return False
