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

:class:`FastPaths` evaluates torch's conditions at each call of such a module the
way its ``forward`` does (mirroring ``torch/nn/modules/activation.py`` and
``transformer.py``), leaving out the recorder's own mode and hooks.  Where a plain
call runs fused, the call runs exactly as a plain call does: the recorder's mode is
taken off the mode stack and its hooks off the module's subtree until the call
returns.  The call is drawn as a closed box around one op named after the kernel
(:attr:`~torchrecorder.nodes.LayerNode.opaque`).  With ``unfuse_fast_paths=True``
the call runs its Python path instead, recorded op by op, and is marked
:attr:`~torchrecorder.nodes.LayerNode.unfused`.

:class:`StepAside` is the part shared with op capture
(:class:`~torchrecorder.hooks.opcapture.OpWatch`): torch's test as a plain call sees it,
and the observer's mode and hooks off while a fused call runs.

A scripted or traced module (``torch.jit.ScriptModule``) runs its code in the
TorchScript interpreter, where no hook or mode sees it: it is drawn the same way,
as a box around one ``torchscript`` op.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any, Optional, Protocol

import torch
from torch import Tensor, nn
from torch.nn.modules.module import register_module_forward_hook
from torch.overrides import has_torch_function

from ..nodes import Key, LayerNode, OpNode
from ._walk import iter_tensors
from .meta import shape_of
from .ops import OpMode

__all__ = ["FAST_PATHS", "GLOBAL_POST_HOOK", "FastPaths", "StepAside", "checks_hooks", "fused_kernel",
           "has_fast_path"]

# The mode stack has no public accessors: without these the recorder cannot step aside,
# and fused modules are recorded through their Python path (marked ``unfused``).
_current_mode: Optional[Callable[[], Any]] = getattr(torch.overrides, "_get_current_function_mode", None)
_pop_mode: Optional[Callable[[], Any]] = getattr(torch.overrides, "_pop_mode", None)
_push_mode: Optional[Callable[[Any], None]] = getattr(torch.overrides, "_push_mode", None)
_CAN_STEP_ASIDE = _current_mode is not None and _pop_mode is not None and _push_mode is not None


def _global_post_hook_support() -> bool:
    """Whether torch's global forward hooks can be called when forward raises (``always_call``)."""
    try:
        params = inspect.signature(register_module_forward_hook).parameters
    except (TypeError, ValueError):
        return False
    return "always_call" in params


#: whether one global forward hook can close every call, also one that raised; without it, a
#: call whose observer's hooks had to leave its module could not be closed
GLOBAL_POST_HOOK = _global_post_hook_support()


def _fastpath_enabled() -> bool:
    get = getattr(getattr(torch.backends, "mha", None), "get_fastpath_enabled", None)
    return True if get is None else bool(get())


def _devices(*extra: str) -> tuple[str, ...]:
    private = getattr(getattr(torch.utils, "backend_registration", None), "_privateuse1_backend_name",
                      "privateuseone")
    return ("cpu", "cuda", *extra, private)


def _blocked_by_grad(tensors: tuple[Any, ...]) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _bind(names: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    bound = dict(zip(names, args, strict=False))
    bound.update(kwargs)
    return bound


def _mha(m: Any, args: tuple[Any, ...], kwargs: dict[str, Any], hooked: Callable[[nn.Module], bool]
         ) -> Optional[str]:
    """``nn.MultiheadAttention.forward``'s test for ``torch._native_multi_head_attention``."""
    a = _bind(("query", "key", "value", "key_padding_mask", "need_weights", "attn_mask"), args, kwargs)
    query, key, value = a.get("query"), a.get("key"), a.get("value")
    attn_mask, padding = a.get("attn_mask"), a.get("key_padding_mask")
    if not isinstance(query, Tensor):
        return None
    if (attn_mask is not None and torch.is_floating_point(attn_mask)) or (
            padding is not None and torch.is_floating_point(padding)):
        return None
    weight, bias = m.in_proj_weight, m.in_proj_bias
    self_attention = query is key and key is value
    if (not _fastpath_enabled() or query.dim() != 3 or not self_attention
            or (bias is not None and query.dtype != bias.dtype) or weight is None
            or query.dtype != weight.dtype or m.training or m.num_heads % 2 != 0
            or not m.batch_first or m.bias_k is not None or m.bias_v is not None
            or m.add_zero_attn or not m._qkv_same_embed_dim
            or (query.is_nested and (padding is not None or attn_mask is not None))
            or torch.is_autocast_enabled()):
        return None
    tensors = (query, key, value, weight, bias, m.out_proj.weight, m.out_proj.bias)
    if (has_torch_function(tensors) or _blocked_by_grad(tensors)
            or not all(t is None or t.device.type in _devices() for t in tensors)):
        return None
    return "_native_multi_head_attention" if bias is not None else None


def _layer_tensors(layer: Any) -> tuple[Any, ...]:
    attn = layer.self_attn
    return (attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight, attn.out_proj.bias,
            layer.norm1.weight, layer.norm1.bias, layer.norm2.weight, layer.norm2.bias,
            layer.linear1.weight, layer.linear1.bias, layer.linear2.weight, layer.linear2.bias)


def _encoder_layer(m: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                   hooked: Callable[[nn.Module], bool]) -> Optional[str]:
    """``nn.TransformerEncoderLayer.forward``'s test for ``torch._transformer_encoder_layer_fwd``."""
    a = _bind(("src", "src_mask", "src_key_padding_mask"), args, kwargs)
    src, mask, padding = a.get("src"), a.get("src_mask"), a.get("src_key_padding_mask")
    if not isinstance(src, Tensor):
        return None
    attn = m.self_attn
    if (not _fastpath_enabled() or src.dim() != 3 or m.training or not attn.batch_first
            or attn.in_proj_bias is None or not attn._qkv_same_embed_dim
            or not getattr(m, "activation_relu_or_gelu", 0) or m.norm1.eps != m.norm2.eps
            or (src.is_nested and (padding is not None or mask is not None))
            or attn.num_heads % 2 == 1 or torch.is_autocast_enabled() or hooked(m)):
        return None
    tensors = (src, *_layer_tensors(m))
    if (has_torch_function(tensors) or _blocked_by_grad(tensors)
            or not all(t.device.type in _devices("xpu") for t in tensors)):
        return None
    return "_transformer_encoder_layer_fwd"


def _encoder(m: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
             hooked: Callable[[nn.Module], bool]) -> Optional[str]:
    """``nn.TransformerEncoder.forward``'s test for its nested-tensor fast path."""
    a = _bind(("src", "mask", "src_key_padding_mask"), args, kwargs)
    src, mask, padding = a.get("src"), a.get("mask"), a.get("src_key_padding_mask")
    if not isinstance(src, Tensor) or not isinstance(padding, Tensor) or not len(m.layers):
        return None
    first = m.layers[0]
    check_mask = getattr(m, "mask_check", True)
    if (not _fastpath_enabled() or not getattr(m, "use_nested_tensor", False) or first.training
            or src.dim() != 3 or (check_mask and torch.compiler.is_compiling())):
        return None
    # torch tests the mask after canonicalising it to float (0 where kept); logical_not of the
    # bool or float mask the caller gave is the same "kept" mask
    if check_mask and not torch._nested_tensor_from_mask_left_aligned(src, padding.logical_not()):
        return None
    if src.is_nested or mask is not None or torch.is_autocast_enabled():
        return None
    tensors = (src, *_layer_tensors(first))
    if (has_torch_function(tensors) or src.device.type not in _devices("xpu")
            or _blocked_by_grad(tensors)):
        return None
    return "nested tensor fast path"


#: ``forward`` function -> (its fast-path test, whether the fast path checks hooks or calls
#: submodules, so that the recorder's hooks must leave the subtree while it runs)
FAST_PATHS: dict[Any, tuple[Callable[..., Optional[str]], bool]] = {
    nn.MultiheadAttention.forward: (_mha, False),
    nn.TransformerEncoderLayer.forward: (_encoder_layer, True),
    nn.TransformerEncoder.forward: (_encoder, True),
}


_HAS_FAST_PATH: dict[type, bool] = {}


def has_fast_path(module: nn.Module) -> bool:
    """Whether ``module`` runs the ``forward`` of a torch module with a fused fast path."""
    cls = type(module)
    got = _HAS_FAST_PATH.get(cls)
    if got is None:
        try:
            got = _HAS_FAST_PATH[cls] = getattr(cls, "forward", None) in FAST_PATHS
        except TypeError:  # an unhashable forward
            got = _HAS_FAST_PATH[cls] = False
    return got


def checks_hooks(module: nn.Module) -> bool:
    """Whether a hook on ``module`` keeps its fused fast path from running (or one of its
    submodules' paths: ``nn.TransformerEncoderLayer``, ``nn.TransformerEncoder``)."""
    return has_fast_path(module) and FAST_PATHS[type(module).forward][1]


def fused_kernel(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                 hooked: Callable[[nn.Module], bool] = lambda m: False) -> Optional[str]:
    """The fused kernel that ``module(*args, **kwargs)`` runs in a plain call as things stand
    (grad mode, training flags, ``torch.backends.mha``, the modes on the stack), or ``None``.

    ``hooked(m)`` says whether forward hooks other than the recorder's are registered on
    ``m`` or its submodules.

    >>> mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    >>> x = torch.zeros(1, 3, 8)
    >>> with torch.no_grad():
    ...     fused_kernel(mha, (x, x, x), {})
    '_native_multi_head_attention'
    >>> fused_kernel(mha, (x, x, x), {}) is None  # gradients enabled: the Python path
    True
    """
    if not has_fast_path(module):
        return None
    entry = FAST_PATHS[type(module).forward]
    try:
        return entry[0](module, args, kwargs, hooked)
    except Exception:  # malformed arguments: forward itself reports them
        return None


class StepAside:
    """How an observer of a model (a function mode and forward hooks) lets a call of a module
    with a fused fast path run as in a plain call.

    torch's test is evaluated as a plain call sees it: with the observer's mode taken off the
    top of the mode stack and the observer's hooks ignored.  Where the call runs fused, the
    mode stays off and, where torch checks hooks or calls submodules, the observer's hooks
    leave the module's subtree until the observer gives them back when the call closes (with
    a global forward hook: the module's own hooks are gone).  Used by the recording
    (:class:`FastPaths`) and by op capture (:class:`~torchrecorder.hooks.opcapture.OpWatch`).

    Args:
        hook_fns: returns the observer's hook functions; a hook of any other function counts
            as the user's (torch's encoder layer runs its Python path when it has one).
        handles: the observer's hook handles; those of an unhooked subtree leave the list.
    """

    def __init__(self, hook_fns: Callable[[], tuple[Any, ...]], handles: list[Any]) -> None:
        self.hook_fns = hook_fns
        self.handles = handles

    def hooked(self, module: nn.Module) -> bool:
        """Whether forward hooks other than the observer's are on ``module`` or its submodules."""
        own = self.hook_fns()
        for m in module.modules():
            for hooks in (m._forward_hooks, m._forward_pre_hooks):
                if hooks and any(all(h is not fn for fn in own) for h in hooks.values()):
                    return True
        return False

    def test(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
             mine: Callable[[Any], bool]) -> tuple[Optional[str], Any]:
        """The fused kernel that a plain call ``module(*args, **kwargs)`` runs, and the
        observer's mode if it was on top of the stack (``mine(mode)``): it is then off the
        stack while the kernel is not ``None``, back on it otherwise.  ``(None, None)`` where
        torch's mode stack cannot be reached."""
        if not _CAN_STEP_ASIDE:
            return None, None
        top = _current_mode()  # type: ignore[misc]
        # another mode on top blocks the fast path of a plain call too: tested as it stands
        mode = _pop_mode() if top is not None and mine(top) else None  # type: ignore[misc]
        try:
            kernel = fused_kernel(module, args, kwargs, self.hooked)
        except BaseException:
            self.give_back(mode, [], None)
            raise
        if kernel is None:
            self.give_back(mode, [], None)
            return None, None
        return kernel, mode

    def unhook(self, module: nn.Module) -> list[nn.Module]:
        """Remove the observer's hooks from ``module`` and its submodules; return those unhooked."""
        owners = {id(d): m for m in module.modules() for d in (m._forward_pre_hooks, m._forward_hooks)}
        handles = self.handles
        kept, removed = [], {}
        for handle in handles:
            hooks = handle.hooks_dict_ref()
            owner = owners.get(id(hooks)) if hooks is not None else None
            if owner is None:
                kept.append(handle)
            else:
                handle.remove()
                removed[id(owner)] = owner
        handles[:] = kept
        return list(removed.values())

    @staticmethod
    def give_back(mode: Any, unhooked: list[nn.Module],
                  rehook: Optional[Callable[[nn.Module], None]]) -> None:
        """Put ``mode`` (if any) back on the stack and ``rehook`` the modules unhooked."""
        if mode is not None:
            _push_mode(mode)  # type: ignore[misc]
        if rehook is not None:
            for m in unhooked:
                rehook(m)


class HookOwner(Protocol):
    """What :class:`FastPaths` needs of the engine."""

    graph: Any
    live: dict[int, tuple[Any, Key]]
    _sources: set[Key]
    _handles: list[Any]
    _hook_fns: tuple[Any, ...]

    def hook(self, module: nn.Module) -> None: ...
    def param_node(self, param: nn.Parameter, scope: LayerNode, path: str) -> Any: ...
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
        call.subnets.add(key)
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
            graph.edges.add((src, key))
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
                engine.live[id(t)] = (weakref.ref(t), entry.op)
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
