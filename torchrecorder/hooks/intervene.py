"""Interventions of :func:`torchrecorder.capture` on a module call: the user's ``edit`` of its
output, ``edit_inputs`` of its inputs, and ``skip``, which replaces the call's forward by a
value (nnsight's ``.skip``).

Each user function is called with the call's name first, and what it returns is checked here,
so that an error names the call: ``edit(name, output)``, ``edit_inputs(name, inputs)`` and
``skip(name, inputs)``, where ``inputs`` has the form ``cap.inputs`` keeps: the argument
itself for a call with one positional argument, a tuple of them for several, and
``(args, kwargs)`` for a call given keyword arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Optional

import torch
from torch import nn

from ._values import add_note, check_edit_result, inputs_value

__all__ = ["Edit", "Skipper", "call_edit", "edit_call_inputs"]

Args = tuple[tuple[Any, ...], dict[str, Any]]
#: a user's intervention: called with the call's name and its output (or inputs)
Edit = Callable[[str, Any], Any]


def call_edit(edit: Callable[[str, Any], Any], name: str, output: Any, module: bool = True) -> Any:
    """``edit(name, output)``, checked: its replacement, or ``None`` to keep the output (an error
    it raises carries a note naming the call)."""
    try:
        replaced = edit(name, output)
    except Exception as exc:
        # a str used as a tensor (TypeError, AttributeError) is what an edit written
        # for baukit's order meets; other errors are the edit's own
        hint = (": capture calls edit with the name first (baukit's edit_output takes "
                "output, layer)" if isinstance(exc, (TypeError, AttributeError)) else "")
        add_note(exc, f"torchrecorder: raised in edit({name!r}, output){hint}")
        raise
    check_edit_result(name, output, replaced, module=module)
    return replaced


def _form(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """How the inputs of a call are shown, for messages."""
    if kwargs:
        return "an (args, kwargs) pair: a tuple of the positional arguments and a dict of the keywords"
    if len(args) == 1:
        return "the new argument (the call got one positional argument)"
    return f"a tuple of the {len(args)} positional arguments"


def _pair(value: Any) -> bool:
    """Whether ``value`` has the shape of an ``(args, kwargs)`` pair."""
    return isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], (tuple, list)) \
        and isinstance(value[1], Mapping)


def _changed(given: Mapping[str, Any], kwargs: Mapping[str, Any]) -> bool:
    """Whether the keywords' dict handed to ``edit_inputs`` was changed in place (an item
    set, added or removed)."""
    return len(given) != len(kwargs) or any(k not in kwargs or kwargs[k] is not v for k, v in given.items())


def edit_call_inputs(fn: Callable[[str, Any], Any], name: str, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Optional[Args]:
    """``fn(name, inputs)`` on the inputs of the call ``name``; the new ``(args, kwargs)`` the
    module is to receive, or ``None`` where ``fn`` returned ``None`` (it kept them, or changed
    them in place).

    ``fn`` returns the inputs in the form it was given them: the new argument for a call with
    one positional argument, a tuple (or list) of the positional arguments for several, an
    ``(args, kwargs)`` pair for a call given keyword arguments.  An ``(args, kwargs)`` pair
    (a tuple of arguments and a mapping) is taken as one from any call (to add keywords),
    unless the call's own inputs have that shape.

    Raises:
        TypeError: ``fn`` returned something of another form (the message names the call
            and the form expected); an error ``fn`` raises carries a note naming the call.
    """
    value = inputs_value(args, kwargs)
    try:
        new = fn(name, value)
    except Exception as exc:
        add_note(exc, f"torchrecorder: raised in edit_inputs({name!r}, inputs)")
        raise
    if new is None or new is value:
        if kwargs and _changed(value[1], kwargs):  # the keywords' dict given to fn, edited in place
            return tuple(args), dict(value[1])
        return None

    def wrong(why: str, hint: str = "") -> TypeError:
        return TypeError(f"edit_inputs returned {why} for the inputs of {name!r}{hint}; it returns "
                         f"{_form(args, kwargs)}, or None to keep them (they may be changed in place)")

    if isinstance(new, str) and not (len(args) == 1 and not kwargs and isinstance(args[0], str)):
        raise wrong("a str (capture calls edit_inputs(name, inputs) with the name first)")
    if kwargs or (_pair(new) and not _pair(value)):
        if not _pair(new):
            raise wrong(f"a {type(new).__name__}")
        if not all(isinstance(k, str) for k in new[1]):
            raise wrong("keywords that are not all strings")
        return tuple(new[0]), dict(new[1])
    if len(args) == 1:
        if isinstance(args[0], torch.Tensor) and not isinstance(new, torch.Tensor):
            raise wrong(f"a {type(new).__name__}", ", which got one tensor" + (
                " (a forward pre-hook's tuple of arguments: return the tensor itself)"
                if isinstance(new, (tuple, list)) else ""))
        return (new,), {}
    if not isinstance(new, (tuple, list)):
        raise wrong(f"a {type(new).__name__}")
    return tuple(new), {}


class Skipper:
    """Lets a hooked call skip its module's forward: :meth:`install` puts a ``forward`` on each
    module's instance that returns the value :meth:`decide` set for the call about to run, and
    calls the module's own ``forward`` otherwise; :meth:`remove` puts each module back as it
    was.  (``nn.Module.__call__`` reads ``forward`` before the pre-hooks run, so the choice is
    made in the pre-hook and read by the installed ``forward``.)"""

    def __init__(self, fn: Callable[[str, Any], Any]) -> None:
        self.fn = fn
        self._saved: list[tuple[nn.Module, Any]] = []  # module -> its instance forward (or _NONE)
        self._pending: dict[int, Any] = {}  # id(module) -> the value its next forward returns

    def install(self, modules: list[nn.Module]) -> None:
        """Wrap the ``forward`` of each of ``modules`` (each once)."""
        done = {id(m) for m, _ in self._saved}
        for module in modules:
            if id(module) in done:
                continue
            done.add(id(module))
            own = module.__dict__.get("forward", _NONE)
            self._saved.append((module, own))
            module.__dict__["forward"] = self._forward(module, module.forward)

    def _forward(self, module: nn.Module, original: Callable[..., Any]) -> Callable[..., Any]:
        pending = self._pending

        @functools.wraps(original)  # (its signature stays the module's: generate() reads it)
        def forward(*args: Any, **kwargs: Any) -> Any:
            key = id(module)
            if key in pending:
                return pending.pop(key)
            return original(*args, **kwargs)

        return forward

    def decide(self, module: nn.Module, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
               on: bool = True) -> bool:
        """Ask ``fn(name, inputs)`` whether the call ``name`` of ``module``, about to run, is
        skipped: a value other than ``None`` is its output, and its forward does not run.  A
        call that is not captured (``on`` false: not chosen, or ``condition`` said no) runs."""
        self._pending.pop(id(module), None)  # (one left by a call that never reached forward)
        if not on:
            return False
        try:
            value = self.fn(name, inputs_value(args, kwargs))
        except Exception as exc:
            add_note(exc, f"torchrecorder: raised in skip({name!r}, inputs)")
            raise
        if value is None:
            return False
        if isinstance(value, str):
            raise TypeError(f"skip returned a str for {name!r}: capture calls skip(name, inputs) "
                            "with the name first, and what it returns is the call's output "
                            "(None runs the module)")
        self._pending[id(module)] = value
        return True

    def clear(self) -> None:
        """Forget the values set for calls that never reached their forward (a pre-hook after
        ours raised)."""
        self._pending.clear()

    def remove(self) -> None:
        """Put every wrapped module's ``forward`` back as it was."""
        for module, own in reversed(self._saved):
            if own is _NONE:
                module.__dict__.pop("forward", None)
            else:
                module.__dict__["forward"] = own
        self._saved.clear()
        self._pending.clear()


_NONE = object()
