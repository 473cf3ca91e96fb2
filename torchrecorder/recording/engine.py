"""The recording engine: the only code that touches live modules, tensors and hooks.

Two mechanisms work together while an :class:`Engine` is active:

* a forward pre-hook on every module opens a *call scope*, and a forward hook
  closes it (one process-wide hook where torch supports it): each call becomes a
  :class:`~torchrecorder.nodes.LayerNode`, the tensors it receives and returns
  :class:`~torchrecorder.nodes.TensorNode` s, its parameters ``ParamNode`` s;
* a :class:`~torchrecorder.recording.ops.OpMode` sees every torch operation
  that runs in between (inside a module, or between modules) and records it as
  an :class:`~torchrecorder.nodes.OpNode` in the scope of the module that ran
  it, with edges from whatever produced its inputs.

The engine writes into a :class:`~torchrecorder.graph.Graph` and keeps the
live objects it has seen (``id`` -> weak reference and node key) only while
recording.  Nothing here patches torch: hooks go in as torch's hook API puts them (see
:mod:`.prehooks`) and are removed when recording ends, whatever happens.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from contextlib import nullcontext
from threading import get_ident
from typing import Any, Optional

import torch
from torch import Tensor, nn
from torch.nn.modules import module as _torch_module
from torch.nn.modules.module import register_module_forward_hook as _register_module_forward_hook
from torch.nn.modules.module import register_module_forward_pre_hook

from .._compiled import EagerStance
from .._stack import StackRoom
from ..graph import Graph
from ..nodes import Key, LayerNode, OpNode, ScopeNode, shape_str
from ..opargs import COUNTED_OPS, MEASURED
from ._failure import (
    HIGHER_ORDER_HINT,
    NOTE_PREFIX,
    PARTIAL_RECORDING,
    annotate,
    draw_failed_op,
    exception_text,
    link_unread_inputs,
    raised_in,
)
from .aliases import STORAGE_ALIAS_OPS, Aliases
from .backward import AutogradTrace, storages_of
from .calls import GROW_AT, ModuleCalls
from .fastpath import GLOBAL_POST_HOOK, FastPaths, has_fast_path
from .functorch import IS_BATCHED, TRANSFORM_NOTE, vmap_plan, wrapped_chain
from .memo import ModelMemo
from .meta import ModelWalk, shape_tuple
from .modules import ModuleInfo, index_modules, outside_path
from .opkeep import keep
from .ops import eager
from .pool import NodePool, begin_op, sizes_of
from .prehooks import CompileHooksQuiet, add_pre_hook, add_pre_hooks, hooked_copy, new_hook_id, take_off
from .replays import Replays, other_thread
from .session import Session
from .source import INTERNAL, caller
from .untraced import Untraced

__all__ = ["GLOBAL_POST_HOOK", "Engine", "ModuleInfo"]

#: id -> engine, for every engine whose hooks are on (two threads may record one model at once)
_OPEN: dict[int, Engine] = {}


# Inside the hooks every ``t.shape`` or ``p.numel()`` would otherwise go through OpMode (about
# 10 calls per module call) just to be ignored; without DisableTorchFunction only slower.
_no_torch_function: Callable[[], Any] = getattr(torch._C, "DisableTorchFunction", nullcontext)

# Calls are closed by ONE global forward hook where torch has one that is always called
# (GLOBAL_POST_HOOK; it returns at once for modules not recorded): two hooks per module cost
# much on models of many small modules.  Pre-hooks stay per module (global ones get no
# keyword arguments).  The global hook runs before a module's own hooks.


class Engine(ModuleCalls):
    """Records the forward calls of a module into ``graph``.

    Args:
        graph: the graph to fill (a :class:`~torchrecorder.recorder.Recorder`
            or a plain :class:`~torchrecorder.graph.Graph`).
        keep_tensors: keep the tensors (activations) on the tensor nodes.
        unfuse_fast_paths: run modules with a fused fast path through their Python path
            (recorded op by op) rather than as a plain call does (see
            :mod:`~torchrecorder.recording.fastpath`).
        backward: keep the pass's autograd graph on ``graph.backward`` (``recording.backward``).
        source: give each module call and operation the line of code it comes from
            (``node.source``; see :func:`~torchrecorder.recording.source.caller`).

    Attributes:
        paused: above 0 while the engine's own code runs torch calls that must
            not be recorded.
        thread: the thread being recorded; calls from other threads are ignored.
    """

    def __init__(self, graph: Graph, *, keep_tensors: bool = False,
                 unfuse_fast_paths: bool = False, backward: bool = False, source: bool = True) -> None:
        self.graph = graph
        self.source = source
        self.autograd = AutogradTrace() if backward else None
        self.keep_tensors = keep_tensors
        self._hook_fns: tuple[Any, ...] = ()
        self._scripts: set[int] = set()  # ids of the ScriptModules recorded as closed boxes
        self.paused = 0
        self.thread = get_ident()
        # id(object) -> (weak reference, or the object itself if it takes none; node key)
        self.live: dict[int, tuple[Any, Key]] = {}
        self._strong: list[int] = []  # ids in ``live`` held as they are (see LiveObjects.bind)
        # keys that have an edge leaving them (kept here: read on every call's exit)
        self._sources: set[Key] = set()
        self._unlinked = False  # an edge was taken back: _sources may name a key no edge leaves
        self._stack: list[LayerNode] = []
        # the exception being handled when each open call began (see _exit)
        self._stack_exc: list[Optional[BaseException]] = []
        # (exception, innermost call it escaped from), while an exception unwinds
        self._failure: Optional[tuple[BaseException, LayerNode]] = None
        self._popped_exc: Optional[BaseException] = None
        self._modules: dict[int, ModuleInfo] = {}
        self._wrapped = False  # a torch.func transform's wrapped tensor was met (see wrapped_chain)
        self._other_threads: set[int] = set()  # threads other than ours that ran a module
        self.replays = Replays()  # calls that autograd makes in a backward pass (checkpointing)
        self._params: dict[int, tuple[nn.Parameter, str]] = {}
        self._handles: list[Any] = []
        self._hook_id = new_hook_id()  # the id of the engine's pre-hooks on every module
        self.fast = FastPaths(self, unfuse_fast_paths, GLOBAL_POST_HOOK)
        # nodes made ahead of the pass (see .pool), and the memo whose sizes made them
        self.pool = NodePool()
        self._memo: Optional[ModelMemo] = None
        # set when the hooks are removed: a hook still called after that records nothing
        self.closed = False
        # called before every operation while recording (record() copies what will be written)
        self.write_guard: Optional[Callable[[Any, tuple[Any, ...], dict[str, Any]], None]] = None
        self.aliases = Aliases()
        self.untraced = Untraced(self)
        self._room = StackRoom()  # recursion limit raised by the frames the hooks add per level
        self._grow_at = GROW_AT
        # the model's modules as record() walked them just before (used by the next register_hooks)
        self.walk: Optional[list[tuple[str, nn.Module]]] = None
        # what torchrecorder.cost reads (see Graph.op_args and Graph.output_dtypes)
        if graph.op_args is None:
            graph.op_args, graph.output_dtypes = {}, {}
        self.op_args = graph.op_args
        self.output_dtypes = graph.output_dtypes if graph.output_dtypes is not None else {}

    def __deepcopy__(self, memo: dict[int, Any]) -> Engine:  # a module copied in forward: see
        return self  # prehooks.hooked_copy (its hooks, bound methods of the engine, stay ours)

    # ------------------------------------------------------------ the session
    def active(self, net: nn.Module, name: str, value: Any = None) -> Session[Any]:
        """Record every call of ``net`` made inside the ``with`` block (which gives ``value``,
        or this engine).

        On leaving, every hook is removed and the live objects are forgotten,
        whatever happened (also a second interrupt while the hooks are being
        removed); unused operations are pruned unless the block raised.  The
        exception goes on as the same object, with a note naming the module
        that raised and ``exc.recording``, the partial graph, where the
        exception takes them.
        """
        return Session(self, net, name, self if value is None else value)

    def fill_pool(self) -> None:
        """Make the nodes that the pass about to start will likely need, as many of each kind
        as the model's last recording made (its memo's sizes: see :mod:`.pool`); called by the
        session just before the old objects are set aside, with the collector paused."""
        memo = self.walk.memo if isinstance(self.walk, ModelWalk) else None
        self._memo = memo
        if memo is not None:
            self.pool.fill(memo.sizes)

    def restore_mode(self) -> None:
        """Put the op mode back on the stack if a fused call left it off (see ``FastPaths``)."""
        self.fast.restore()

    def register_hooks(self, net: nn.Module, name: str) -> None:
        """Register the engine's hooks on ``net`` and every module inside it.

        Each module gets a forward pre-hook with keyword arguments; a module
        reachable by two paths is hooked once.  Calls are closed by one global
        forward hook (``torch.nn.modules.module.register_module_forward_hook``)
        that ignores modules not being recorded, or, on a torch whose global
        hooks lack ``always_call``, by a forward hook on each module.  A global
        forward hook runs before a module's own forward hooks, so a call closes
        on what ``forward`` returned; what a user's hook then does to the
        output is recorded in the caller's scope.

        A module output that existed before the call (the module's input, as
        ``nn.Identity`` and ``nn.Dropout`` in eval return it; a parameter; a
        buffer; any tensor already live) is handed on as a new alias of it (a
        view of the whole tensor: values, strides and version counter shared):
        the alias stands for the call's output, and the original object keeps
        its real producer.  Where no alias can be made (a tensor subclass, a
        nested tensor) the object itself stands for the output, as before, and
        the graph gets a note.
        """
        self.closed = False
        _OPEN[id(self)] = self
        try:
            with _no_torch_function():  # reading the model is kept from the caller's function modes
                self._index_modules(net, name, "", hook=True)
        except BaseException:
            self.remove_hooks()
            raise

    def remove_hooks(self) -> None:
        """Remove every hook this engine registered; safe to call twice.  Whatever is raised
        meanwhile (a second Ctrl-C) goes on once every hook is gone; a hook left anyway
        records nothing and removes the rest when it is next called."""
        self.closed = True
        _OPEN.pop(id(self), None)
        handles = self._handles
        pending: Optional[BaseException] = None
        while handles:
            try:
                while handles:
                    handles[-1].remove()  # removing a removed handle does nothing
                    handles.pop()
            except BaseException as exc:  # raised below, once all are removed
                pending = pending or exc
        if pending is not None:
            raise pending

    def _stale_hook(self) -> None:  # a hook ran after its recording ended: take the rest off
        if self._handles and self.thread == get_ident():
            self.remove_hooks()

    def finish(self) -> None:
        """Drop unused ops (unless the pass failed) and forget the live objects seen."""
        if self.graph.error is None:
            edges = len(self.graph.links)
            self.graph.prune(None if self._unlinked else self._sources)
            if len(self.graph.links) != edges:
                self._sources = {a for a, _ in self.graph.links}
        if self.autograd is not None:
            self.autograd.finish(self.graph, self.untraced.root_grad, self._param_owner, lambda: storages_of(
                [*(p for p, _ in self._params.values()), *self.untraced.buffers.values()]))
        memo, self._memo = self._memo, None
        if memo is not None and self.graph.error is None:  # the next recording's pool
            memo.sizes = self.pool.used() or sizes_of(self.graph.nodes.values())
        self.pool.clear()
        self.hand_over()
        self.live.clear()
        self._strong.clear()
        self._stack.clear()
        self._stack_exc.clear()
        self._failure = None
        self._modules.clear()
        self._wrapped = False
        self._other_threads.clear()
        self._params.clear()
        self.aliases.clear()
        self.untraced.clear()
        self._room.release()
        self._grow_at = GROW_AT

    def fail(self, exc: BaseException) -> None:
        """Mark the innermost call that ``exc`` escaped from, and the calls around it."""
        graph = self.graph
        graph.error = exception_text(exc)
        for call in self._stack:  # calls still open (a KeyboardInterrupt skips the hooks)
            call.error = call.error or graph.error
        if self._failure is not None and self._failure[0] is exc:
            failed = self._failure[1]
        elif self._stack:
            failed = self._stack[-1]
        else:
            annotate(exc, graph)
            return  # raised outside the model's forward
        failed, before, in_hook = raised_in(exc, failed, graph.nodes, self._modules)
        failed.error = failed.error or graph.error
        graph.failed_key = failed.key
        try:  # what ran before it raised: the operation that raised, and inputs nothing inside read
            draw_failed_op(self, failed, exc)
            link_unread_inputs(self, failed, exc)
        except Exception:  # (for the drawing only: the note below still reaches the user)
            pass
        shapes = ", ".join(shape_str(s) for s in failed.input_shapes) or "no tensors"
        where = f"'{failed.path or failed.name}' ({failed.type_name}) called with input shapes [{shapes}]"
        if in_hook:  # (the recorder's pre-hook runs first: the call had opened)
            where += (", in a forward pre-hook before its forward ran" if in_hook == "pre"
                      else ", in a forward hook after its forward returned")
        if before is not None:  # no node of that call: its caller is marked
            where = (f"'{before.path or before.name}' ({before.type_name}), in a forward pre-hook before "
                     f"its forward ran (inside {where})")
        annotate(exc, graph, f"{NOTE_PREFIX} {where}{PARTIAL_RECORDING}"
                 + HIGHER_ORDER_HINT * (type(exc).__name__ == "UncapturedHigherOrderOpError"))

    # ------------------------------------------------------------ hooks
    def _index_modules(self, net: nn.Module, root_name: str, prefix: str, hook: bool) -> None:
        """Index ``net`` (see :func:`~torchrecorder.recording.modules.index_modules`) and, if
        ``hook``, put the engine's hooks on each module met for the first time; a TorchScript
        module takes none and runs as one closed box."""
        walk, self.walk = (self.walk if hook else None), None
        new = index_modules(net, root_name, prefix, self._modules, self._params, self.untraced.buffers, walk)
        if not hook:
            return
        if not self._hook_fns:  # what dynamo must not compile: it mis-traces the recorder's hooks
            self._hook_fns = (eager(self._pre_hook), eager(self._post_hook))
        inside_script: set[int] = set()
        compiled = any(type(m).__name__ == "OptimizedModule" for m in new)  # torch.compile(module)
        if "torch._dynamo" in sys.modules:  # a compiled model's pass runs eagerly (see EagerStance)
            self._handles.append(EagerStance([("", m) for m in new]))
        if GLOBAL_POST_HOOK and not any(isinstance(m, torch.jit.ScriptModule) for m in new):
            add_pre_hooks(self._handles, new, self._hook_fns[0], self._hook_id)  # the common case
            new = []
        for module in new:
            if isinstance(module, torch.jit.ScriptModule):
                if not GLOBAL_POST_HOOK:
                    raise TypeError(f"cannot record the TorchScript module '{self._modules[id(module)].path}'"
                                    ": it takes no hooks, and this torch has no always-called "
                                    "global forward hook to close its calls")
                if id(module) not in inside_script:
                    self._scripts.add(id(module))
                inside_script.update(id(m) for m in module.modules())
            else:
                self.hook(module)
        if GLOBAL_POST_HOOK:
            # without with_kwargs: torch's handle would leave the with_kwargs entry behind, and
            # closing a call reads only the outputs
            self._handles.append(_register_module_forward_hook(eager(self._global_post_hook),
                                                               always_call=True))
            if compiled:
                self._handles.append(CompileHooksQuiet())
        # what forward registers on a module of the model (a head made on first use) is indexed then
        self._handles.append(_torch_module.register_module_module_registration_hook(
            eager(self._module_registered)))
        self._handles.append(_torch_module.register_module_parameter_registration_hook(
            eager(self._param_registered)))
        if hook and self._scripts:  # a global pre-hook sees ScriptModule calls (without kwargs)
            self._handles.append(register_module_forward_pre_hook(eager(self._script_pre_hook)))

    def _module_registered(self, parent: nn.Module, name: str, sub: Optional[nn.Module]) -> None:
        """Global module-registration hook: ``forward`` gave a module of the model a new submodule
        (a head made on first use, ``self.heads[task] = nn.Linear(...)``, or a replacement): it is
        indexed under its path and hooked, so that its calls and parameters are recorded as those
        of the modules that were there from the start."""
        if sub is None or self.closed or self.thread != get_ident() or id(sub) in self._modules:
            return
        info = self._modules.get(id(parent))
        if info is None:  # a module outside the model
            return
        path = f"{info.path}.{name}" if info.path else name
        new = index_modules(sub, name, path, self._modules, self._params, self.untraced.buffers)
        for module in new:
            if not isinstance(module, torch.jit.ScriptModule):  # (one takes no hooks: no calls)
                self.hook(module)

    def _param_registered(self, module: nn.Module, name: str, param: Optional[nn.Parameter]) -> None:
        """Global parameter-registration hook: a parameter that ``forward`` registers on a module
        of the model (made on first use) is a parameter of the recording, named by its path."""
        if param is None or self.closed or self.thread != get_ident() or id(param) in self._params:
            return
        info = self._modules.get(id(module))
        if info is not None:
            self._params[id(param)] = (param, f"{info.path}.{name}" if info.path else name)

    def hook(self, module: nn.Module) -> None:
        """Register the engine's hooks on ``module``."""
        pre, post = self._hook_fns
        add_pre_hook(self._handles, module, pre, self._hook_id)
        if not GLOBAL_POST_HOOK:
            self._handles.append(module.register_forward_hook(post, with_kwargs=True, always_call=True))

    def module_info(self, module: nn.Module, path: str = "", name: str = "") -> ModuleInfo:
        """What the engine knows of ``module``; a module met outside the recorded root (hooked
        through :func:`~torchrecorder.recording.hooks.prehook`) is indexed on first sight."""
        info = self._modules.get(id(module))
        if info is None:
            path = path or outside_path(module, self._modules.values())  # (not the root's "")
            self._index_modules(module, name or type(module).__name__, path, hook=False)
            info = self._modules[id(module)]
            hooked_copy(self._handles, module, self._hook_id)
        return info

    def _pre_hook(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                  script: bool = False) -> None:
        if self.paused or self.closed or self.thread != get_ident():
            if self.closed:
                self._stale_hook()
                take_off(module, self._hook_id)  # (a copy of a module made during the pass)
            elif self.thread != get_ident():
                other_thread(self, module, list(_OPEN.values()))
            return
        if not self._stack and self.replays.started(self, module):  # autograd's recomputation
            return
        if type(args) is not tuple:
            args = args if isinstance(args, tuple) else (args,)
        if kwargs is None:
            kwargs = {}
        fast = not script and has_fast_path(module)
        if fast:  # outside _no_torch_function: torch's test reads the mode stack
            self.fast.decide(module, args, kwargs)
        self.paused += 1
        try:
            with _no_torch_function():  # hooks read shapes and dtypes: keep that out of OpMode
                self._enter(module, args, kwargs)
                if fast or script:
                    self.fast.opened(self._stack[-1], script, args, kwargs)
        except BaseException:
            self.fast.restore(len(self.fast.closed))
            raise
        finally:
            self.paused -= 1

    def _script_pre_hook(self, module: nn.Module, args: Any) -> None:
        if id(module) in self._scripts:
            self._pre_hook(module, args, {}, script=True)

    def _global_post_hook(self, module: nn.Module, args: Any, outputs: Any) -> Any:
        # called for every module call in the process while recording (torch passes no
        # outputs when forward raised): modules not being recorded are not on the stack.
        # Returns the outputs with pass-through tensors aliased, or None to keep them.
        if self.paused or self.closed or self.thread != get_ident() or not self._stack:
            if self.closed:
                self._stale_hook()
            elif self.replays.modules:
                self.replays.ended(self, module)
            return None
        self.paused += 1
        try:
            with _no_torch_function():
                if self.fast.closed:
                    self.fast.closing(module, outputs)
                return self._exit(module, outputs)
        finally:
            self.paused -= 1

    def _post_hook(self, module: nn.Module, args: Any, kwargs: Any, outputs: Any) -> Any:
        return self._global_post_hook(module, args, outputs)

    def unlink(self, value: Tensor, out: Tensor) -> None:
        """Take back the edge from ``value`` to the operation that made ``out``: an argument
        the operation was given but does not read (see :func:`~.ops.unread_attention_mask`)."""
        src, key = self.lookup(value), self.lookup(out)
        if src is not None and key is not None:
            self.graph.links.discard((src, key))
            self._unlinked = True

    # --------------------------------------------------------------- recording
    def _source_of(self, t: Tensor, scope: ScopeNode) -> Key:
        """Key of the node that produced ``t``, read in ``scope``: a live object, a parameter
        (its node made on first use), or what autograd says made a tensor that the function
        mode did not see (see :class:`~torchrecorder.recording.untraced.Untraced`)."""
        key = self.known_source(t, scope)
        if key is None:
            chain = wrapped_chain(t)  # inside a torch.func transform: what the wrapper wraps
            if chain and not self._wrapped:
                self._wrapped = True
                self.untraced.note(TRANSFORM_NOTE.format(where=self.untraced.where(scope)))
            for inner in chain:
                key = self.known_source(inner, scope)
                if key is not None:
                    return key
            # (made where the mode did not see it: autograd knows the plain tensor's maker)
            return self.untraced.recover(chain[-1] if chain else t, scope)
        if self.untraced.pending and type(t.grad_fn) in self.untraced.pending:
            return self.untraced.function_output(t, key, scope)
        return key

    def to_python(self, opname: str) -> None:
        """Tensor values became Python objects (``.item()``); see
        :meth:`~torchrecorder.recording.untraced.Untraced.to_python`."""
        self.untraced.to_python(opname, self._stack[-1] if self._stack else self.graph.context)

    def counted_op(self, out: Any, flops: int) -> None:
        """Give the operation just recorded that made ``out`` the FLOPs counted while it ran (a
        backward pass inside ``forward``), for :func:`torchrecorder.cost`: a
        :data:`~torchrecorder.opargs.MEASURED` entry of ``op_args``."""
        key = self.lookup(out)
        node = dict.get(self.graph.nodes, key) if key is not None else None
        if isinstance(node, OpNode):
            self.op_args[key] = (node.parent_key, MEASURED, None, flops)

    def record_op(self, func: Any, opname: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                  outs: list[Tensor], inplace: bool) -> None:
        """Record one torch operation that made ``outs`` (or changed ``outs[-1]`` in place)."""
        # runs inside OpMode.__torch_function__, where torch calls do not come back to the mode
        # (the hottest code of a recording: OrderedSet.add inlined)
        stack = self._stack
        graph = self.graph
        nodes = graph.nodes
        scope = stack[-1] if stack else graph.context
        skey = scope.key
        candidate = f"{skey}/{opname}" if skey else opname
        key = graph.keys(candidate)
        line = None
        if self.source:  # the frames above: record_op, the op mode's __torch_function__
            frame = sys._getframe(2)
            code = frame.f_code
            # (called from the user's code, as most operations are: caller's answer, inlined)
            line = (code, frame.f_lasti) if INTERNAL.get(code.co_filename) is False else caller(frame)
        gf = outs[0].grad_fn
        pool = self.pool.ops
        if pool:  # made ahead by OpNode(), with its list (see .pool)
            node = pool.pop()
            begin_op(node, opname, func, scope.depth + 1, skey, key, opname,
                     type(gf).__name__ if gf is not None else "", line)
            if len(outs) == 1:
                node.output_shapes.append(shape_tuple(outs[0]))
            else:
                node.output_shapes.extend([shape_tuple(o) for o in outs])
        else:
            node = OpNode(opname, func, scope.depth + 1, skey, key, opname,
                          [shape_tuple(outs[0])] if len(outs) == 1 else [shape_tuple(o) for o in outs],
                          type(gf).__name__ if gf is not None else "", line)
        nodes[key] = node
        scope.subnet_keys._items[key] = None
        if opname in COUNTED_OPS:  # what cost() needs to count its FLOPs (uncounted if unreadable)
            try:
                self.op_args[key] = keep(skey, func, args, kwargs, self.autograd is not None)
            except Exception:
                pass
        live = self.live
        edges = graph.links._items
        sources = self._sources
        pending = self.untraced.pending
        for value in (args if not kwargs else (*args, *kwargs.values())):
            if isinstance(value, Tensor):
                entry = live.get(id(value))
                if entry is not None and entry[0]() is value:
                    src = entry[1]
                    if pending and type(value.grad_fn) in pending:
                        src = self.untraced.function_output(value, src, scope)
                else:
                    src = self._source_of(value, scope)
                    if src is None:
                        continue
                edges[(src, key)] = None
                sources.add(src)
            elif isinstance(value, (list, tuple)):
                for item in value:
                    if isinstance(item, Tensor):
                        src = self._source_of(item, scope)
                        if src is not None:
                            edges[(src, key)] = None
                            sources.add(src)
        if self.autograd is not None:  # (a custom Function's backward node, set after its op)
            self.autograd.read((*args, *kwargs.values()), live, nodes)
        # each output stands for the op now, and its grad_fn (which may outlive it: see
        # recording/untraced.py) too: Untraced.track inlined, gf read once for one output
        grad_fns = self.untraced.grad_fns
        if len(outs) == 1:
            out = outs[0]
            live[id(out)] = (weakref.ref(out), key)
            if self.autograd is not None:
                self.autograd.op(outs, skey, key)
            if gf is not None:
                grad_fns[id(gf)] = (gf, key)
        else:
            ref = weakref.ref
            for o in outs:
                live[id(o)] = (ref(o), key)
            if self.autograd is not None:
                self.autograd.op(outs, skey, key)
            for o in outs:
                ogf = o.grad_fn
                if ogf is not None:
                    grad_fns[id(ogf)] = (ogf, key)
        if self._wrapped:  # (a torch.func transform was met) what a wrapper wraps stands for it too
            for o in outs:
                for inner in wrapped_chain(o):
                    self.bind(inner, key)  # (its grad_fn too: what the transform returns reads it)
            if key in self.op_args and IS_BATCHED is not None and (any(map(IS_BATCHED, outs)) or any(
                    IS_BATCHED(t) for o in outs for t in wrapped_chain(o))):  # (vmap under grad's wrapper)
                # kept with one sample's shapes: cost() runs it again under the same vmaps
                plan = vmap_plan(args, kwargs)
                if plan is None:
                    self.op_args.pop(key, None)  # (listed as uncounted)
                else:
                    graph.op_vmap[key] = plan
        if inplace:
            target = outs[-1]
            base = target._base
            if base is not None:
                self.bind(base, key)
            if self.aliases:  # the same storage under another name (t.data, a module output's alias)
                for obj in (target, base):
                    for peer in self.aliases.peers(obj):
                        self.bind(peer, key)
        elif opname in STORAGE_ALIAS_OPS and args and isinstance(args[0], Tensor):
            self.aliases.link(args[0], outs[0])
