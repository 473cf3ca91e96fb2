"""Calls the recording sees only from the outside: PyTorch's fused fast paths and TorchScript.

A few torch modules decide at the start of ``forward`` whether to run one fused
kernel instead of their Python code: :class:`torch.nn.MultiheadAttention`
(``torch._native_multi_head_attention``), :class:`torch.nn.TransformerEncoderLayer`
(``torch._transformer_encoder_layer_fwd``) and :class:`torch.nn.TransformerEncoder`
(nested tensors built from the padding mask).  Among their conditions (inference:
``eval()`` and no gradient, batch-first inputs, ...) is that
``torch.overrides.has_torch_function`` is false, which it never is while a
``TorchFunctionMode`` such as the recorder's is active, and, for the encoder layer,
that no forward hook is registered on it or its submodules.  A recorder that simply
stays active therefore runs another computation than a plain call: the outputs
differ (by rounding, and in padded positions), and the picture shows a path that
does not run.

:class:`FastPaths` evaluates torch's conditions at each call of such a module the way
its ``forward`` does (:func:`~torchrecorder._fused.fused_kernel`), leaving out the
recorder's own mode and hooks.  Where a plain
call runs fused, the call runs exactly as a plain call does: the recorder's mode is
taken off the mode stack and its hooks off the module's subtree until the call
returns.  The call is drawn as a closed box around one op named after the kernel
(:attr:`~torchrecorder.nodes.LayerNode.opaque`).  With ``unfuse_fast_paths=True``
the call runs its Python path instead, recorded op by op, and is marked
:attr:`~torchrecorder.nodes.LayerNode.unfused`.

The stepping aside (:class:`~torchrecorder._fused.StepAside`) is shared with op capture
(:class:`~torchrecorder.hooks.opcapture.OpWatch`): torch's test as a plain call sees it,
and the observer's mode and hooks off while a fused call runs.

A scripted or traced module (``torch.jit.ScriptModule``) runs its code in the
TorchScript interpreter, where no hook or mode sees it: it is drawn the same way,
as a box around one ``torchscript`` op.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol

from torch import nn

from .._fused import FAST_PATHS, GLOBAL_POST_HOOK, StepAside, checks_hooks, fused_kernel, has_fast_path
from ..nodes import Key, LayerNode, OpNode, ScopeNode
from ._walk import iter_tensors
from .meta import shape_of
from .ops import OpMode

__all__ = ["FAST_PATHS", "GLOBAL_POST_HOOK", "FastPaths", "StepAside", "checks_hooks", "fused_kernel",
           "has_fast_path"]

class HookOwner(Protocol):
    """What :class:`FastPaths` needs of the engine."""

    graph: Any
    live: dict[int, tuple[Any, Key]]
    _sources: set[Key]
    _handles: list[Any]
    _hook_fns: tuple[Any, ...]

    def bind(self, obj: Any, key: Key) -> None: ...
    def hook(self, module: nn.Module) -> None: ...
    def param_node(self, param: nn.Parameter, scope: ScopeNode, path: str) -> Any: ...
    def param_path(self, param: nn.Parameter) -> str: ...


class _Closed:
    """One call running without the recorder inside."""

    __slots__ = ("call", "mode", "module", "op", "unhooked")

    def __init__(self, module: nn.Module, call: LayerNode, op: Key, mode: Any,
                 unhooked: list[nn.Module]) -> None:
        self.module, self.call, self.op, self.mode, self.unhooked = module, call, op, mode, unhooked


class FastPaths:
    """Decides, at each call of a module with a fused fast path, whether it runs as in a plain
    call (closed: no mode, no hooks inside) or through its Python path, and draws closed calls.

    Args:
        engine: the recording engine.
        unfuse: run fast-path modules through their Python path (``unfuse_fast_paths=True``).
        global_close: the engine closes calls with one global forward hook; without it, the
            calls of a module whose hooks must leave (an encoder layer) could not be closed,
            and such modules run their Python path.
    """

    def __init__(self, engine: HookOwner, unfuse: bool = False, global_close: bool = True) -> None:
        self.engine = engine
        self.unfuse = unfuse
        self.global_close = global_close
        self.closed: list[_Closed] = []  # innermost last
        # (kernel, stepped aside) decided in the pre-hook, for the call it opens
        self._pending: Optional[tuple[str, Any, list[nn.Module]]] = None
        self.aside = StepAside(lambda: engine._hook_fns, engine._handles)

    def _mine(self, mode: Any) -> bool:
        return isinstance(mode, OpMode) and mode.engine is self.engine

    def decide(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Before a call of a fast-path module opens: evaluate torch's test with the recorder's
        mode off the stack; if the call runs fused, keep the mode off and take the recorder's
        hooks off the subtree (where torch checks hooks or calls submodules)."""
        unhook = FAST_PATHS[type(module).forward][1]
        kernel, mode = self.aside.test(module, args, kwargs, self._mine)
        if kernel is None or mode is None:
            return  # a plain call runs the Python path, or the recorder's mode is not on top
        if self.unfuse or (unhook and not self.global_close):
            self.aside.give_back(mode, [], None)
            self._pending = (kernel, None, [])
            return
        self._pending = (kernel, mode, self.aside.unhook(module) if unhook else [])

    def opened(self, call: LayerNode, script: bool, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> None:
        """After ``call`` opened: mark it, and for a closed call put one op inside it with edges
        from its inputs and from the parameters of the module's subtree."""
        pending, self._pending = self._pending, None
        if pending is None and not script:
            return
        if pending is not None and pending[1] is None:
            call.unfused = pending[0]
            return
        kernel = "torchscript" if pending is None else pending[0]
        call.opaque = "TorchScript" if pending is None else f"fused: {kernel}"
        engine = self.engine
        graph = engine.graph
        key = graph.keys(f"{call.key}/{kernel.replace(' ', '_')}")
        graph.nodes[key] = OpNode(kernel, None, call.depth + 1, call.key, key, op=kernel)
        call.subnet_keys.add(key)
        sources: list[Key] = []
        for t in iter_tensors((args, kwargs)):
            entry = engine.live.get(id(t))
            if entry is not None and entry[0]() is t:
                sources.append(entry[1])
        module = call.fn
        for param in module.parameters():
            entry = engine.live.get(id(param))
            if entry is not None and entry[0]() is param:
                sources.append(entry[1])
            else:
                path = engine.param_path(param)
                sources.append(engine.param_node(param, call, path or f"{call.key}.param").key)
        for src in dict.fromkeys(sources):
            graph.links.add((src, key))
            engine._sources.add(src)
        self.closed.append(_Closed(module, call, key,
                                   None if pending is None else pending[1],
                                   [] if pending is None else pending[2]))

    def closing(self, module: nn.Module, outputs: Any) -> None:
        """Before the call of ``module`` closes: the closed call's outputs come from its op; the
        recorder's mode and hooks go back (also for calls an exception left open inside it)."""
        closed = self.closed
        for i in range(len(closed) - 1, -1, -1):
            if closed[i].module is module:
                break
        else:
            return
        entry = closed[i]
        if outputs is not None:
            engine, graph = self.engine, self.engine.graph
            op = graph.nodes[entry.op]
            for t in iter_tensors(outputs):
                found = engine.live.get(id(t))
                if found is not None and found[0]() is t:
                    continue  # returned as it came in: the engine draws the pass-through
                engine.bind(t, entry.op)  # (also keeps its grad_fn: see recording/untraced.py)
                if isinstance(op, OpNode):
                    op.output_shapes.append(shape_of(t))
        self.restore(i)

    def restore(self, down_to: int = 0) -> None:
        """Put the recorder's mode and hooks back for a decided call that did not open and for
        the closed calls from the innermost one to ``closed[down_to]`` (all by default)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._give_back(pending[1], pending[2])
        while len(self.closed) > down_to:
            entry = self.closed.pop()
            self._give_back(entry.mode, entry.unhooked)

    def _give_back(self, mode: Any, unhooked: list[nn.Module]) -> None:
        self.aside.give_back(mode, unhooked, self.engine.hook)
