"""Capture the activations of chosen layers by name, edit them in flight, stop early.

>>> import torch, torchrecorder
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
>>> x = torch.randn(3, 4)
>>> with torchrecorder.capture(model, ["0", "2"]) as cap:
...     y = model(x)
>>> torch.equal(cap["2"], y), cap["0"].shape
(True, torch.Size([3, 8]))

Layers are chosen by the names the graph and the summary show (see
:mod:`torchrecorder.hooks.select`): dotted paths, glob patterns, ``depth-idx``
labels, types.  A module called several times in one pass is captured per
call under ``"name"``, ``"name#2"``, ... as the graph names its calls.  A pass
begins at each call of the model given to :func:`capture`; a part of it called on
its own (``model.transformer(ids)``) numbers the calls inside it afresh each time.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any, Optional, Union

import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.utils.hooks import RemovableHandle

from ._compiled import EagerStance
from ._fused import GLOBAL_POST_HOOK, checks_hooks, global_forward_hook_with_kwargs
from .graph import Graph
from .hooks import _values
from .hooks._values import Device, add_note, check_device, inputs_value, keep_value, leaves, reduce_values
from .hooks.intervene import Edit, Skipper, call_edit, edit_call_inputs
from .hooks.opcapture import (
    OpRule,
    OpWatch,
    check_call_patterns,
    check_rec_patterns,
    nearest_ops,
    parse_op_patterns,
)
from .hooks.plot import plot_stat
from .hooks.running import GradStats, RunningStats, summarise
from .hooks.saved import KeptOutputs, save_capture
from .hooks.select import (
    Names,
    UnknownLayerError,
    as_names,
    call_numbers,
    canonical_call,
    check_types,
    modules_above,
    nearest,
    select_modules,
    split_call,
)

__all__ = ["GRAD_STATS", "STATS", "Capture", "StopForward", "capture"]

#: the statistics :meth:`Capture.stats` computes: the mean, the standard deviation, the fraction of zero
#: elements, the largest magnitude, the fraction of units (positions after the batch dimension) that
#: were zero in every sample, the time a call took (milliseconds); and of the gradient with respect to
#: the output (``grads=True``): its L2 norm (mean over calls), the mean and the fraction of zeros
STATS = ("mean", "std", "zeros", "absmax", "dead", "time", "grad_norm", "grad_mean", "grad_zeros")
GRAD_STATS = ("grad_norm", "grad_mean", "grad_zeros")


class StopForward(Exception):
    """Raised after the ``stop=`` layer ran, to end the forward pass; :class:`Capture` catches it
    when its ``with`` block ends and in :meth:`Capture.run`."""


class Capture(KeptOutputs):
    """Activations of chosen layers, captured while the ``with`` block runs the model.

    Made by :func:`capture` (see there for the arguments).  Read by the names
    the graph shows: ``cap[name]`` (output), ``cap.inputs[name]``,
    ``cap.grads[name]`` (gradient of the loss with respect to the output),
    ``cap.stats("zeros")`` and ``cap.stats("time")``.

    Attributes:
        names: dotted paths of the chosen layers.
        outputs, inputs, grads: call name -> what was kept (the last pass's
            value, the reduced value, or a list of every pass's with
            ``keep="all"``).
        passes: how many forward passes of the model ran while capturing.
        unsummarised: call name -> why ``stats=True`` could not summarise its
            output (``"a sparse_coo tensor"``, ``"a nested tensor"``).
    """

    def __init__(self, model: nn.Module, chosen: list[tuple[str, nn.Module]], *, inputs: bool, grads: bool,
                 record: bool, edit: Optional[Callable[[str, Any], Any]], stop: Optional[str],
                 condition: Optional[Callable[[], Any]], reduction: Optional[Callable[[Any, Any], Any]],
                 to: Optional[torch.device], detach: bool, clone: bool, keep: str, stats: bool,
                 timing: bool, ops: Optional[list[OpRule]] = None, root: str = "net",
                 calls: Optional[dict[str, set[int]]] = None, edit_inputs: Optional[Edit] = None,
                 skip: Optional[Edit] = None) -> None:
        self.model = model
        self.root = root  # the name of the network's own operations: "net", or rec.name with rec=
        self._chosen, self._only = chosen, calls or {}  # path -> the only call numbers chosen
        self.names = [p for p, _ in chosen]
        self.ops = [r.pattern for r in ops or ()]
        self._watch = OpWatch(model, ops, root, self._on_op, record and inputs) if ops else None
        if self._watch is not None:
            self._watch.on_first = self._fresh
        self._record, self._want_inputs, self._want_grads = record, inputs, grads
        self._edit, self._stop, self._edit_inputs = edit, stop, edit_inputs
        self._skipper = Skipper(skip) if skip is not None else None
        self._condition, self._reduction = condition, reduction
        self._to, self._detach, self._clone, self._keep = to, detach, clone, keep
        self._want_stats, self._timing = stats, timing
        self.outputs: dict[str, Any] = {}
        self.inputs: dict[str, Any] = {}
        self.grads: dict[str, Any] = {}
        self.passes = 0
        self._stats: dict[str, RunningStats] = {}
        self._grad_stats: dict[str, GradStats] = {}
        self.unsummarised: dict[str, str] = {}
        self._reshaped: dict[str, str] = {}  # this pass's edits that changed shapes: name -> how
        self._times: dict[str, list[float]] = {}  # name -> [total seconds, calls]
        self._handles: list[Union[RemovableHandle, EagerStance]] = []
        self._tensor_hooks: list[RemovableHandle] = []
        self._calls: dict[str, int] = {}
        self._open: dict[str, list[tuple[str, bool, float]]] = {}
        self._depth = 0  # how deep the model's own calls are nested (a pass runs while > 0)
        self._outside = 0  # the same for the outer modules' calls made outside a pass

    # ------------------------------------------------------------ hooks on and off
    def __enter__(self) -> Capture:
        if self._handles:
            raise RuntimeError("this capture is already active")
        try:  # a compiled model runs eagerly in the block: compiled, it would run no hook
            self._handles.append(EagerStance(self.model.named_modules(remove_duplicate=False)))
            if self._watch is not None:  # first: its global hook closes fused calls before a pass ends
                self._watch.start()
            self._hook_passes()
            hooked = dict(self._chosen)
            stop = self._stop  # (an operation's key has a "/": its watch stops the pass)
            stop_path = split_call(stop)[0] if stop is not None and "/" not in stop else None
            if stop_path is not None and stop_path not in hooked:
                hooked[stop_path] = self.model.get_submodule(stop_path)
            # (a call whose inputs are edited or that is skipped loses torch's fused fast path)
            fused = {id(m): p for p, m in hooked.items() if GLOBAL_POST_HOOK and checks_hooks(m)
                     and self._edit_inputs is None and self._skipper is None}
            for path, module in hooked.items():
                if id(module) not in fused:
                    self._handles.append(module.register_forward_pre_hook(self._pre(path), with_kwargs=True))
                    self._handles.append(module.register_forward_hook(self._post(path)))
            if fused:
                self._hook_globally(fused)
            if self._skipper is not None:
                self._skipper.install([m for _, m in self._chosen])
            # above them, the modules whose call made outside a pass numbers its calls afresh
            watched = self._watch.watches if self._watch is not None else None
            for module in modules_above(self.model, list(hooked), watched):
                self._handles.append(module.register_forward_pre_hook(self._outside_begins, prepend=True))
                self._handles.append(module.register_forward_hook(self._outside_ends, always_call=True))
        except BaseException:
            self.remove()
            raise
        return self

    def _hook_passes(self) -> None:
        """Hooks that see each pass of the model begin and end: on the model, or, where the
        model's own fused fast path runs only without hooks on it (``nn.TransformerEncoderLayer``),
        global ones that look for its calls, so that ops capture lets it run fused."""
        model = self.model
        if not (GLOBAL_POST_HOOK and checks_hooks(model)):
            self._handles.append(model.register_forward_pre_hook(self._pass_begins, prepend=True))
            self._handles.append(model.register_forward_hook(self._pass_ends, always_call=True))
            return

        def begins(module: nn.Module, args: Any) -> None:
            if module is model:
                self._pass_begins(module, args)

        def ends(module: nn.Module, args: Any, output: Any) -> None:
            if module is model:
                self._pass_ends(module, args, output)

        self._handles.append(register_module_forward_pre_hook(begins))
        self._handles.append(register_module_forward_hook(ends, always_call=True))

    def _hook_globally(self, paths: dict[int, str]) -> None:
        """Hook the chosen modules whose fused fast path a hook on them turns off
        (``nn.TransformerEncoderLayer``, ``id(module) -> path``) through global hooks, which
        torch's test does not see: they run as in a plain call (their inputs are kept after
        the call, the global pre-hook sees no keywords)."""
        pres = {i: self._pre(p, inputs=False) for i, p in paths.items()}
        posts = {i: self._post(p, inputs=True) for i, p in paths.items()}

        def pre(module: nn.Module, args: tuple[Any, ...]) -> None:
            hook = pres.get(id(module))
            if hook is not None:
                hook(module, args, {})

        def post(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> Any:
            hook = posts.get(id(module))
            return None if hook is None else hook(module, args, output, kwargs)

        self._handles.append(register_module_forward_pre_hook(pre))
        self._handles.append(global_forward_hook_with_kwargs(post))

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self.remove()
        if exc is not None and self._reshaped:  # the model met a value of another shape: say whose
            add_note(exc, "torchrecorder: edit changed the output of " + "; of ".join(
                f"{name!r} from {how}" for name, how in self._reshaped.items()))
        return exc_type is not None and issubclass(exc_type, StopForward)

    def remove(self, grads: bool = False) -> None:
        """Take every module hook off (the ``with`` block does this on exit, whatever happened).

        The gradient hooks that ``grads=True`` put on the output tensors of the
        passes already run stay on those tensors (and go with them), so that a
        ``backward`` after the block still fills :attr:`grads`; ``grads=True``
        takes them off too.
        """
        for h in self._handles + (self._tensor_hooks if grads else []):
            h.remove()
        if self._watch is not None:
            self._watch.stop()
        if self._skipper is not None:
            self._skipper.remove()
        self._handles.clear()
        self._tensor_hooks = [] if grads else [h for h in self._tensor_hooks
                                               if h.hooks_dict_ref() is not None]
        self._open.clear()
        self._depth = self._outside = 0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Call the model; ``None`` if the ``stop=`` layer ended the pass early.

        Outside the ``with`` block the hooks go on for this one call and come off after it."""
        if not self._handles:
            with self:
                return self.model(*args, **kwargs)
            return None  # the stop= layer ended the pass (the block swallowed StopForward)
        try:
            return self.model(*args, **kwargs)
        except StopForward:
            return None

    # ------------------------------------------------------------ the hooks
    def _pass_begins(self, module: nn.Module, args: Any) -> None:
        if self._depth == 0:
            self.passes += 1
            self._calls.clear()
            self._reshaped.clear()
            self._open.clear()
            if self._skipper is not None:
                self._skipper.clear()
            self._tensor_hooks = [h for h in self._tensor_hooks if h.hooks_dict_ref() is not None]
            if self._watch is not None:
                self._watch.begin_pass()
        self._depth += 1

    def _fresh(self) -> None:
        """Before a hooked or watched call: one made outside a pass of the model while no other
        is open (``model.transformer(ids)`` called on its own) numbers its calls afresh."""
        watch = self._watch
        if self._depth == 0 and self._outside == 0 and not any(self._open.values()) and \
                (watch is None or not watch.stack):
            self._calls.clear()
            self._open.clear()
            if watch is not None:
                watch.begin_pass()

    def _outside_begins(self, module: nn.Module, args: Any) -> None:
        if self._depth == 0:
            self._fresh()
            self._outside += 1

    def _outside_ends(self, module: nn.Module, args: Any, output: Any) -> None:
        if self._depth == 0:
            self._outside = max(0, self._outside - 1)

    def _pass_ends(self, module: nn.Module, args: Any, output: Any) -> None:
        self._depth = max(0, self._depth - 1)
        watch = self._watch
        if self._depth == 0 and watch is not None and sys.exc_info()[1] is None and watch.unmatched():
            rule = watch.unmatched()[0]
            raise UnknownLayerError(f"ops pattern {rule.pattern!r} chose no operation in a whole "
                                    "forward pass; " + nearest_ops(rule, list(watch.seen)))
        stop = self._stop
        if self._depth == 0 and stop is not None and sys.exc_info()[1] is None:
            path, n = split_call(stop)
            if "/" in stop:  # an operation's key: reaching it would have ended the pass
                warnings.warn(f"stop={stop!r} was not reached: the pass ran to its end without that "
                              "operation (stop= ends a pass at an operation that ops= chooses); "
                              + nearest(stop, [*(watch.seen if watch else ())]), RuntimeWarning, stacklevel=2)
            elif self._calls.get(path, 0) < n:  # the pass ran to its end: stop= never came
                warnings.warn(f"stop={stop!r} was not reached: the pass ran to its end, calling "
                              f"{path!r} {self._calls.get(path, 0)} times", RuntimeWarning, stacklevel=2)

    def _pre(self, path: str, inputs: bool = True) -> Callable[..., None]:
        chosen = path in dict(self._chosen)

        def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            self._fresh()
            n = self._calls[path] = self._calls.get(path, 0) + 1
            name = path if n == 1 else f"{path}#{n}"
            on = chosen and (path not in self._only or n in self._only[path]) and self._wanted(name)
            new = edit_call_inputs(self._edit_inputs, name, args, kwargs) \
                if on and self._edit_inputs is not None else None
            if new is not None:
                args, kwargs = new
            if on and inputs and self._record and self._want_inputs:
                self._store(self.inputs, name, inputs_value(args, kwargs))
            if self._skipper is not None:
                self._skipper.decide(module, name, args, kwargs, on)
            start = 0.0
            if on and self._timing:
                _values.sync(args, kwargs)
                start = time.perf_counter()
            self._open.setdefault(path, []).append((name, on, start))
            return new

        return hook

    def _post(self, path: str, inputs: bool = False) -> Callable[..., Any]:
        def hook(module: nn.Module, args: tuple[Any, ...], output: Any, kwargs: Any = None) -> Any:
            stack = self._open.get(path)
            if not stack:
                return None
            name, on, start = stack.pop()
            if on and inputs and self._record and self._want_inputs:
                self._store(self.inputs, name, inputs_value(args, kwargs))
            if on and self._timing:
                _values.sync(output)
                total = self._times.setdefault(name, [0.0, 0])
                total[0] += time.perf_counter() - start
                total[1] += 1
            replaced = self._finish(name, on, output)
            if replaced is not None and (how := _values.reshaped(output, replaced)) is not None:
                self._reshaped[name] = how  # (an operation's edit must keep its shape: OpWatch checks)
            return replaced

        return hook

    def _on_op(self, key: str, output: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A chosen operation ran (see :class:`~torchrecorder.hooks.opcapture.OpWatch`)."""
        on = self._wanted(key)
        if on and self._record and self._want_inputs:
            self._store(self.inputs, key, inputs_value(args, kwargs))
        return self._finish(key, on, output)

    def _wanted(self, name: str) -> bool:
        """What ``condition()`` says of the call ``name`` (an error it raises names it)."""
        if self._condition is None:
            return True
        try:
            return bool(self._condition())
        except Exception as exc:
            add_note(exc, f"torchrecorder: raised in condition(), asked whether to capture {name!r}")
            raise

    def _finish(self, name: str, on: bool, output: Any) -> Any:
        """Edit, keep and maybe stop after the call or operation ``name``; the replacement."""
        replaced = None
        if on and self._edit is not None:
            replaced = call_edit(self._edit, name, output, module="/" not in name)
            if replaced is not None:
                output = replaced
        if on:
            self._keep_output(name, output)
        if name == self._stop:
            raise StopForward(f"capture stopped the forward pass after {name!r}")
        return replaced

    def _keep_output(self, name: str, output: Any) -> None:
        if self._record:
            self._store(self.outputs, name, output)
        if self._want_stats:
            summarise(self._stats, self.unsummarised, name, output)
        if self._want_grads and (self._record or self._want_stats):
            for i, t in enumerate(leaves(output)):
                if t.requires_grad:
                    key = name if i == 0 else f"{name}[{i}]"
                    self._tensor_hooks.append(t.register_hook(self._grad_hook(key)))

    def _grad_hook(self, key: str) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            if self._record:
                self._store(self.grads, key, grad)
            if self._want_stats and grad.layout == torch.strided and (
                    grad.is_floating_point() or grad.is_complex()) and grad.device.type != "meta":
                self._grad_stats.setdefault(key, GradStats()).add(grad)

        return hook

    def _store(self, table: dict[str, Any], name: str, value: Any) -> None:
        value = keep_value(value, detach=self._detach, to=self._to, clone=self._clone)
        if self._reduction is not None:
            table[name] = (value if name not in table
                           else reduce_values(table[name], value, self._reduction, name))
        elif self._keep == "all":
            table.setdefault(name, []).append(value)
        else:
            table[name] = value

    # ------------------------------------------------------------ reading
    def __getitem__(self, name: str) -> Any:
        """The output of the call ``name`` (a dotted path, ``path#2`` for a second call)."""
        if name in self.outputs or canonical_call(name) in self.outputs:
            return self.outputs[name if name in self.outputs else canonical_call(name)]
        path = split_call(name)[0]
        if not self._record:
            raise UnknownLayerError(f"nothing is kept for {name!r}: the capture was made with "
                                    "record=False")
        if path in self.names and not self.passes:
            raise UnknownLayerError(f"nothing is recorded for {name!r}: the model never ran while the "
                                    "capture was on (call it inside `with capture(...) as cap:`, or "
                                    "through cap.run(...))")
        if path in self.names:
            raise UnknownLayerError(f"{name!r} was chosen but no output was recorded for it (it was "
                                    "not called, or condition= said no); recorded: "
                                    + (", ".join(map(repr, self.outputs)) or "nothing"))
        raise UnknownLayerError(f"{name!r} is not a captured layer; " + nearest(name, self.names))

    def stats(self, stat: str = "mean") -> dict[str, float]:
        """One statistic per captured call (made with ``stats=True``, or ``timing=True`` for
        ``"time"``): call name -> value over every recorded pass.  ``stat`` is one of
        :data:`STATS`; ``"time"`` is the mean milliseconds per call."""
        if stat not in STATS:
            raise ValueError(f"unknown statistic {stat!r}; choose from {', '.join(STATS)}")
        if stat == "time":
            if not self._timing:
                raise ValueError("no timings: make the capture with timing=True")
            return {k: 1000 * v[0] / v[1] for k, v in self._times.items() if v[1]}
        if not self._want_stats:
            raise ValueError(f"no statistics: make the capture with stats=True to get {stat!r}")
        table: dict[str, Any] = self._stats
        if stat in GRAD_STATS:
            if not self._want_grads:
                raise ValueError(f"no gradient statistics: make the capture with grads=True and "
                                 f"stats=True (and call backward inside or after the block) to get "
                                 f"{stat!r}")
            table = self._grad_stats
        else:
            missing = [f"{k!r} ({why})" for k, why in self.unsummarised.items() if k not in self._stats]
            if missing:
                warnings.warn("stats(): not summarised (no strided tensor with values): "
                              + ", ".join(missing), RuntimeWarning, stacklevel=2)
        out = {}
        for k, s in table.items():
            v = s.value(stat)
            if v is not None:
                out[k] = v
        return out

    def available_stats(self) -> list[str]:
        """The statistics :meth:`stats` can give for this capture."""
        out = list(STATS[:5]) if self._want_stats else []
        if self._want_stats and self._want_grads:
            out.extend(GRAD_STATS)
        if self._timing:
            out.append("time")
        return out

    def save(self, path: Union[str, os.PathLike[str]]) -> str:
        """Write what was kept (outputs, inputs, gradients, statistics) to ``path`` in the
        safetensors format, atomically; :func:`torchrecorder.load_capture` reads it back.
        No pickle: loading a file cannot run code.  Returns the path."""
        return save_capture(self, path)

    def plot(self, stat: str = "grad_norm", **kwargs: Any) -> Any:
        """The bar chart of ``stat`` per captured call (see :func:`~torchrecorder.hooks.plot.plot_stat`)."""
        return plot_stat(self, stat, **kwargs)

    def __repr__(self) -> str:
        return f"<Capture of {len(self.names)} layers, {self.passes} passes, {len(self.outputs)} outputs>"


def capture(model: nn.Module, names: Names = None, *, types: Any = None, labels: Names = None,
            rec: Optional[Graph] = None, inputs: bool = False, grads: bool = False, record: bool = True,
            edit: Optional[Edit] = None, edit_inputs: Optional[Edit] = None, skip: Optional[Edit] = None,
            stop: Optional[str] = None, condition: Optional[Callable[[], Any]] = None,
            reduction: Optional[Callable[[Any, Any], Any]] = None, to: Device = None,
            detach: bool = True, clone: bool = True, keep: str = "last", stats: bool = False,
            timing: bool = False, ops: Names = None) -> Capture:
    """Capture what chosen layers or operations of ``model`` compute while a ``with`` block runs it.

    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    >>> with capture(model, "2", edit=lambda name, out: out * 0) as cap:   # edit in flight
    ...     y = model(torch.randn(3, 4))
    >>> bool((y == 0).all()), bool((cap["2"] == 0).all())
    (True, True)

    Args:
        model: the module whose forward passes are captured.
        names: dotted paths (``"encoder.0"``, ``""`` for ``model`` itself) or
            glob patterns (``"encoder.layer.*.attention"``, ``"**"``); ``"blk#2"`` chooses
            only the second call of ``blk`` in each pass (``"blk#1"`` the first).  With
            no ``names``, ``types``, ``labels`` or ``ops``: every module
            (``names=[]`` chooses none).
        types: a class or tuple of classes to capture.
        labels: ``depth-idx`` labels of the summary (``"1-3"``), read from
            ``rec`` (a recording of ``model``) when given.
        inputs: keep each call's inputs too (``cap.inputs[name]``).
        grads: keep the gradient with respect to each output
            (``cap.grads[name]``), from a ``backward`` inside the block or after
            it (the gradient hooks stay on the captured passes' output tensors
            until they are freed; :meth:`Capture.remove` with ``grads=True``
            takes them off).
        record: keep outputs (and inputs, gradients); ``False`` only edits,
            stops or gathers statistics.
        edit: ``edit(name, output)`` returns a replacement for the output of
            the call ``name`` (or ``None`` to keep it); what is kept is what the
            rest of the model receives.
        edit_inputs: ``edit_inputs(name, inputs)`` returns new inputs for the call ``name``
            in the form ``cap.inputs`` keeps (the argument; a tuple of several; ``(args, kwargs)``
            with keywords), or ``None`` (also after an in-place edit); nnsight's ``.input =``.
        skip: ``skip(name, inputs)`` returns the output of the call ``name``, whose forward
            then does not run (nnsight's ``.skip``), or ``None`` to run it.
        stop: a layer name; the forward pass ends right after that layer ran
            (the call raises :class:`StopForward`, which the ``with`` block
            and :meth:`Capture.run` swallow); a pass that never reached it
            ends as usual, with a ``RuntimeWarning``.
        condition: a callable of no arguments; calls are captured only when it
            returns true.
        reduction: merge each new value into the kept one (``lambda a, b: a +
            b``), part by part (``None`` stays ``None``; a structure that changes
            between calls raises :class:`~torchrecorder.hooks.ReductionError`);
            memory stays flat over any number of passes.
        to: move kept tensors to this device (``"cpu"``).
        detach, clone: detach kept tensors from autograd and copy them (both
            on by default), so that nothing the model does later alters them.
        keep: ``"last"`` keeps the latest pass's value, ``"all"`` a list of
            every pass's (memory grows with the passes; not with ``reduction``).
        stats: gather running statistics of each output for :meth:`Capture.stats`
            (mean, std, zeros, absmax, dead) without keeping tensors.
        timing: time each call for ``cap.stats("time")``.
        ops: operations inside modules, by the keys the recording gives them
            (``"transformer.h.*.attn/softmax"``, ``"*/softmax"``, an op name alone
            such as ``"softmax"``, or a list): see :mod:`torchrecorder.hooks.opcapture`.
            They are kept, edited, reduced and summarised under their keys as layers
            are under their names (``cap["transformer.h.0.attn/softmax"]``), so
            ``make_dot(rec, activations=cap)`` colours their nodes.  The network's own
            operations are named after ``rec.name`` (``"net"`` without ``rec``).  Only the
            chosen calls run under a function mode; elsewhere the model runs as it is.
            ``edit`` must return a tensor of the operation's shape and dtype.

    Returns:
        a :class:`Capture`; its hooks are on inside the ``with`` block only
        and come off on exit, also when the forward pass raised.

    Raises:
        UnknownLayerError: a name, pattern or label names no layer (the
            message lists the nearest existing names), or a class of ``types``
            chooses none; raised here, before the model runs.  An ``ops``
            pattern whose layer part names no layer raises here too; one that
            chose no operation in a whole pass raises at the end of that pass,
            with the nearest operation keys (or here, checked against ``rec``,
            when it is given).
        TypeError, ValueError: an argument of the wrong kind.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"capture() needs a torch.nn.Module, got {type(model).__name__}")
    for arg, fn in (("edit", edit), ("edit_inputs", edit_inputs), ("skip", skip), ("condition", condition),
                    ("reduction", reduction)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{arg} must be callable, got {fn!r}")
    if keep not in ("last", "all"):
        raise ValueError(f"keep must be 'last' or 'all', got {keep!r}")
    if keep == "all" and reduction is not None:
        raise ValueError("keep='all' and reduction= do not go together: reduction keeps one value "
                         "merged over the calls, keep='all' a list of every pass's; choose one")
    device = check_device(to)
    wanted, calls = call_numbers(as_names(names), [p for p, _ in model.named_modules()])
    root = rec.name if rec is not None else "net"
    rules = parse_op_patterns(ops) if ops is not None else None
    if rules:
        check_call_patterns(model, rules, root)
        if rec is not None:
            check_rec_patterns(rec, rules)
    if rules and not wanted and types is None and labels is None:
        chosen: list[tuple[str, nn.Module]] = []  # operations only
    else:
        chosen = select_modules(model, names=None if names is None else wanted, types=types, labels=labels,
                                rec=rec)
        check_types(model, types)
    if stop is not None:
        if not isinstance(stop, str):
            raise TypeError(f"stop must be a layer name, got {stop!r}")
        stop = canonical_call(stop)  # "blk#1" is the call kept as "blk"
        paths = [p for p, _ in model.named_modules()]
        if split_call(stop.rpartition("/")[0] if "/" in stop and rules else stop)[0] not in [*paths, root]:
            raise UnknownLayerError(f"stop={stop!r} names no layer; " + nearest(stop, paths))
    return Capture(model, chosen, inputs=inputs, grads=grads, record=record, edit=edit, stop=stop,
                   edit_inputs=edit_inputs, skip=skip, condition=condition, reduction=reduction, to=device,
                   detach=detach, clone=clone, keep=keep, stats=stats, timing=timing, ops=rules, root=root,
                   calls=calls)
