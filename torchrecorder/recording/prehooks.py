"""The recording engine's forward pre-hooks, put on every module of the model and taken off
again, at a fraction of what ``module.register_forward_pre_hook`` costs per module.

torch's method makes a :class:`~torch.utils.hooks.RemovableHandle` per hook (a fresh id and
two weak references), and its ``remove()`` reads them back: about 4 us per module on and
off, 2 ms on a model of 400 modules, on every recording.  :func:`add_pre_hook` does what the
method does with ``with_kwargs=True`` (the hook under an id in the module's
``_forward_pre_hooks``, the id in ``_forward_pre_hooks_with_kwargs``), with one id for all the
hooks of a recording, reserved from torch's counter (:func:`new_hook_id`), and a small
:class:`PreHookHandle` per module that takes the hook off as torch's handle does.  The hooks
are the same for torch (called in the same order, with the same arguments) and are taken off
by the same code path whatever happens (:meth:`~.engine.Engine.remove_hooks`): none stays on
the model after a recording.  On a torch whose modules lack these dicts, the method is used.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from torch import nn
from torch.utils.hooks import RemovableHandle

from .._fused import has_fast_path

__all__ = ["CompileHooksQuiet", "PreHookHandle", "add_pre_hook", "add_pre_hooks", "hooked_copy",
           "new_hook_id", "take_off"]

#: whether modules keep their pre-hooks as torch 2 does (else torch's method is used)
_DIRECT = all(isinstance(getattr(nn.Module(), name, None), dict)
              for name in ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs"))


def new_hook_id() -> int:
    """A hook id of torch's counter that no other hook has, or will be given."""
    return int(RemovableHandle(OrderedDict()).id)


class PreHookHandle:
    """Takes one pre-hook of id ``hid`` off ``module`` (:meth:`remove`, harmless twice), as
    torch's ``RemovableHandle`` does; ``hooks_dict_ref()`` gives the dict the hook is in, as
    the handle's weak reference does (read by :class:`~torchrecorder._fused.StepAside`)."""

    __slots__ = ("hid", "module")

    def __init__(self, module: nn.Module, hid: int) -> None:
        self.module = module
        self.hid = hid

    def hooks_dict_ref(self) -> Any:
        """The dict of ``module``'s forward pre-hooks."""
        return self.module._forward_pre_hooks

    def remove(self) -> None:
        """Take the hook off (nothing happens when it is off already)."""
        module, hid = self.module, self.hid
        module._forward_pre_hooks.pop(hid, None)
        module._forward_pre_hooks_with_kwargs.pop(hid, None)


def add_pre_hook(handles: list[Any], module: nn.Module, hook: Callable[..., Any], hid: int) -> None:
    """``handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))``, with the
    hook under the id ``hid`` (see the module's docstring).  The handle is in ``handles``
    before the hook is on the module: an interrupt in between leaves no hook that
    ``handles`` cannot take off."""
    if not _DIRECT:
        handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
        return
    handles.append(PreHookHandle(module, hid))
    hooks = module._forward_pre_hooks
    hooks[hid] = hook
    module._forward_pre_hooks_with_kwargs[hid] = True
    if len(hooks) > 1 and isinstance(hooks, OrderedDict) and not has_fast_path(module):
        # first of the module's pre-hooks: what the others compute (torch's pruning makes the
        # weight from weight_orig and the mask in one) belongs to the call, as in a plain call;
        # a module with a fused fast path keeps its hook last, where it sees what forward gets
        hooks.move_to_end(hid, last=False)


def hooked_copy(handles: list[Any], module: nn.Module, hid: int) -> None:
    """Give ``handles`` a handle for each module in ``module`` that has the pre-hook ``hid``
    without the engine having put it there: a copy that ``forward`` made of a module of the
    model (``copy.deepcopy``: an EMA teacher made on first use, the base model of the
    ``torch.func`` ensemble recipe), hooks and all.  The engine copies as itself
    (``Engine.__deepcopy__``), so the copy's hooks record its calls (as those of a module
    outside the model, :meth:`~.engine.Engine.module_info` calls this on its first call)
    and are taken off with the others; a copy not called during the pass takes its hook off
    on its first call after it (:func:`take_off`)."""
    for inner in module.modules():
        if hid in getattr(inner, "_forward_pre_hooks", ()):
            handles.append(PreHookHandle(inner, hid))


def take_off(module: nn.Module, hid: int) -> None:
    """Take the pre-hook of id ``hid`` off ``module`` if it has one (see :func:`hooked_copy`)."""
    if _DIRECT and isinstance(module, nn.Module):
        PreHookHandle(module, hid).remove()


def add_pre_hooks(handles: list[Any], modules: list[nn.Module], hook: Callable[..., Any], hid: int) -> None:
    """:func:`add_pre_hook` on each of ``modules``, in order."""
    for module in modules:
        add_pre_hook(handles, module, hook, hid)


class CompileHooksQuiet:
    """A hook handle of sorts: while on, torch's warning that ``torch.compile(module)`` fires
    global module hooks twice is not shown; the global hook is the recorder's, which records
    the compiled wrapper's call and its module's as they are (the user registered none)."""

    def __init__(self) -> None:
        warnings.filterwarnings("ignore", r"Using `torch\.compile\(module\)` when there are global hooks")
        self.entry = warnings.filters[0]

    def remove(self) -> None:
        """Show the warning again (harmless twice)."""
        if isinstance(warnings.filters, list) and self.entry in warnings.filters:  # (typed a Sequence)
            warnings.filters.remove(self.entry)
