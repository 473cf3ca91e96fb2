"""PyTorch's fused fast paths, as a plain call takes them, and how an observer steps aside.

A few torch modules decide at the start of ``forward`` whether to run one fused
kernel instead of their Python code: :class:`torch.nn.MultiheadAttention`
(``torch._native_multi_head_attention``), :class:`torch.nn.TransformerEncoderLayer`
(``torch._transformer_encoder_layer_fwd``) and :class:`torch.nn.TransformerEncoder`
(nested tensors built from the padding mask).  Among their conditions (inference:
``eval()`` and no gradient, batch-first inputs, ...) is that
``torch.overrides.has_torch_function`` is false, which it never is while any
``TorchFunctionMode`` is active, and, for the encoder layer, that no forward hook is
registered on it or its submodules.

:func:`fused_kernel` evaluates torch's conditions the way ``forward`` does (mirroring
``torch/nn/modules/activation.py`` and ``transformer.py``); :class:`StepAside` is what an
observer of a model (a function mode and module hooks: the recording,
:mod:`torchrecorder.recording.fastpath`, and op capture,
:mod:`torchrecorder.hooks.opcapture`) does so that such a call runs exactly as in a plain
call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Optional

import torch
from torch import Tensor, nn
from torch.nn.modules import module as _torch_module
from torch.nn.modules.module import register_module_forward_hook
from torch.overrides import has_torch_function

__all__ = ["FAST_PATHS", "GLOBAL_POST_HOOK", "StepAside", "checks_hooks", "fused_kernel", "has_fast_path"]

# The mode stack has no public accessors: without these an observer cannot step aside (the
# recording then records fused modules through their Python path, marked ``unfused``).
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


class _KwargsHookHandle:
    """Takes a global forward hook registered with ``with_kwargs=True`` off, its entry in
    torch's ``_global_forward_hooks_with_kwargs`` too (torch's handle leaves that behind)."""

    __slots__ = ("handle",)

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def remove(self) -> None:
        self.handle.remove()
        getattr(_torch_module, "_global_forward_hooks_with_kwargs", {}).pop(self.handle.id, None)


def global_forward_hook_with_kwargs(hook: Callable[..., Any]) -> Any:
    """``register_module_forward_hook(hook, with_kwargs=True)``, with a handle that removes all
    it registered."""
    return _KwargsHookHandle(register_module_forward_hook(hook, with_kwargs=True))


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
