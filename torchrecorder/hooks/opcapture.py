"""Reach operations inside modules by the keys a recording gives them (``"h.0.attn/softmax"``).

A recording names an operation ``<call>/<op>``: the key of the module call that ran it
(its dotted path, ``path#2`` for a second call, the network's name for the top level) and
the operation's name, with ``_1``, ``_2``, ... for later operations of the same name in
that call (``"h.0.attn/softmax_1"``).  :class:`OpWatch` gives every operation run inside
the chosen calls that same key while a model runs, without recording anything else:

* an ``ops`` pattern is ``"<call pattern>/<op pattern>"`` or an op pattern alone (any
  call).  The call pattern is matched one dotted component at a time as layer names are
  (:func:`~torchrecorder.hooks.select.glob_match`: ``*`` within a component, ``**`` for any
  number), against the module's path, or its path with ``#n`` for one call only; the op
  pattern against the op's name (``softmax`` matches every softmax of the call) or its
  name with its ordinal (``softmax_1``: the second only);
* a torch function mode is on only while a chosen call, or a module called inside it,
  runs: operations elsewhere cost nothing;
* operations are counted as the recording counts them (the same names, the same
  rule for what made nothing new: :mod:`torchrecorder.opnames`), so the keys agree
  with ``make_dot``'s nodes.  Operations run inside a fused kernel that a plain call
  takes (``scaled_dot_product_attention``) are one operation: there is no softmax inside;
* a call of a module with one of PyTorch's fused fast paths (``nn.MultiheadAttention``,
  ``nn.TransformerEncoderLayer``, ``nn.TransformerEncoder`` with a padding mask, in
  ``eval()`` without gradients) runs fused wherever a plain call would: the function mode
  and the watch's hooks step aside as the recording's do
  (:class:`~torchrecorder._fused.StepAside`), and the call is one operation
  named after its kernel, as in the recording (``"layers.0/_transformer_encoder_layer_fwd"``),
  whose output is the call's output.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase
from threading import get_ident
from typing import Any, Optional

from torch import Tensor, nn
from torch.nn.modules.module import register_module_forward_hook
from torch.overrides import TorchFunctionMode
from torch.utils.hooks import RemovableHandle

from .._fused import GLOBAL_POST_HOOK, StepAside, has_fast_path
from ..graph import Graph
from ..nodes import LayerNode, OpNode
from ..opnames import op_info, op_outputs
from .select import UnknownLayerError, glob_match, nearest, split_call

__all__ = ["OpRule", "OpWatch", "check_call_patterns", "check_rec_patterns", "nearest_ops",
           "parse_op_patterns"]

#: called for every chosen operation: (key, output, args, kwargs) -> replacement or None
OpCallback = Callable[[str, Any, tuple[Any, ...], dict[str, Any]], Any]


class OpRule:
    """One ``ops`` pattern, split into its call part and its op part."""

    __slots__ = ("call", "op", "pattern")

    def __init__(self, pattern: str) -> None:
        if not isinstance(pattern, str) or not pattern or pattern.endswith("/"):
            raise ValueError(f"an ops pattern is '<layer pattern>/<op>' or an op name, got {pattern!r}")
        self.pattern = pattern
        call, sep, op = pattern.rpartition("/")
        self.call: Optional[str] = call if sep else None  # None: any call
        self.op = op

    def matches_call(self, path: str, key: Optional[str], root: str) -> bool:
        """Whether the call ``key`` of the module at dotted ``path`` is chosen (any of its calls
        when ``key`` is ``None``)."""
        if self.call is None or self.call in ("*", "**"):  # "*/softmax": in any call
            return True
        want, n = split_call(self.call)
        if key is not None and n > 1 and key != f"{path or root}#{n}":
            return False
        if not path:  # the network: named by the recording's name, or "" as capture names it
            return want in ("", root, "**") or fnmatchcase(root, want)
        return glob_match(want, path)

    def matches_op(self, name: str, tail: str) -> bool:
        """Whether the op ``name`` (``tail``: with its ordinal) is chosen."""
        return fnmatchcase(name, self.op) or fnmatchcase(tail, self.op)


def parse_op_patterns(ops: Any) -> list[OpRule]:
    """``ops`` (a pattern or a list of them) as rules; a clear error for anything else."""
    if isinstance(ops, str):
        ops = [ops]
    try:
        patterns = list(ops)
    except TypeError:
        raise TypeError(f"ops must be a pattern or a list of patterns, got {ops!r}") from None
    if not patterns:
        raise ValueError("ops is empty: give a pattern such as '*/softmax'")
    return [OpRule(p) for p in patterns]


def check_call_patterns(model: nn.Module, rules: Sequence[OpRule], root: str) -> None:
    """Raise :class:`UnknownLayerError` for a rule whose call part names no module."""
    paths = [p for p, _ in model.named_modules()]
    for rule in rules:
        if not any(rule.matches_call(p, None, root) for p in paths):
            own = ""
            if rule.call and not any(c in rule.call for c in ".*?[#"):  # a network's name?
                own = (f"; the network's own operations are {root + '/' + rule.op!r} here (named "
                       "after rec.name with rec=, 'net' without)")
            raise UnknownLayerError(f"ops pattern {rule.pattern!r}: {rule.call!r} names no layer; "
                                    + nearest(rule.call or "", paths) + own)


#: fused operations -> the operations that run inside them, unseen (one call of the fused one)
FUSED_PARTS = {
    "scaled_dot_product_attention": ("softmax", "matmul", "bmm", "baddbmm", "dropout", "masked_fill",
                                     "div", "mul", "add", "where", "transpose"),
    "multi_head_attention_forward": ("softmax", "matmul", "bmm", "baddbmm", "dropout", "linear",
                                     "masked_fill", "scaled_dot_product_attention"),
    "_native_multi_head_attention": ("softmax", "matmul", "bmm", "baddbmm", "dropout", "linear"),
}
#: how to have the parts run on their own, where there is a way
_UNFUSE = {
    "scaled_dot_product_attention": ', or load a transformers model with attn_implementation="eager" '
                                    '(its config: config._attn_implementation = "eager")',
}


def _op_name(key: str) -> str:
    """``"h.0.attn/softmax_2"`` -> ``"softmax"``."""
    tail = key.rpartition("/")[2]
    head, sep, n = tail.rpartition("_")
    return head if sep and head and n.isdigit() else tail


def nearest_ops(rule: OpRule, keys: Sequence[str]) -> str:
    """``"nearest: 'a/softmax', ..."`` for a rule's op part among operation ``keys``; first, for
    an operation that ran inside a fused one (a ``softmax`` inside ``scaled_dot_product_attention``),
    which one and how to have it run on its own."""
    by_name: dict[str, list[str]] = {}
    for key in keys:
        by_name.setdefault(_op_name(key), []).append(key)
    for fused, parts in FUSED_PARTS.items():
        if fused in by_name and any(fnmatchcase(part, rule.op) for part in parts):
            return (f"{rule.op!r} runs inside {fused!r} here ({by_name[fused][0]!r}, one fused operation "
                    f"whose insides are not operations of the model): capture {fused!r} itself"
                    f"{_UNFUSE.get(fused, '')}")
    close = difflib.get_close_matches(rule.op, list(by_name), n=3, cutoff=0.5)
    if close:
        return "nearest: " + ", ".join(repr(k) for name in close for k in by_name[name][:2])
    return nearest(rule.op, sorted(by_name))


class _Mode(TorchFunctionMode):
    """Hands each operation run in a watched call to :meth:`OpWatch._op`."""

    def __init__(self, watch: OpWatch) -> None:
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (),
                           kwargs: Optional[dict[str, Any]] = None) -> Any:
        kwargs = kwargs or {}
        watch = self.watch
        before = None  # an in-place operation's first argument as it was, where its inputs are kept
        if watch.keep_inputs and not watch.paused and watch.thread == get_ident() and watch.stack:
            before = watch.input_before(func, args, kwargs)
        out = func(*args, **kwargs)
        if watch.paused or watch.thread != get_ident() or not watch.stack:
            return out
        return watch.op(func, args, kwargs, out, before)


class _Closed:
    """A call running fused, without the watch inside."""

    __slots__ = ("args", "chosen", "kernel", "key", "kwargs", "mode", "module", "unhooked")

    def __init__(self, module: nn.Module, key: str, chosen: list[OpRule], kernel: str, mode: Any,
                 unhooked: list[nn.Module], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.module, self.key, self.chosen, self.kernel = module, key, chosen, kernel
        self.mode, self.unhooked, self.args, self.kwargs = mode, unhooked, args, kwargs


class OpWatch:
    """Module hooks that keep the call stack of the chosen calls, and the function mode that
    names their operations (see the module docstring).

    Args:
        model: the model whose passes are watched.
        rules: the parsed ``ops`` patterns.
        root: the name of the network's own calls (the recording's name).
        callback: ``callback(key, output, args, kwargs)`` for each chosen operation; what it
            returns (not ``None``) replaces the output.
        keep_inputs: whether the callback keeps ``args``: a chosen in-place operation's first
            argument is then copied before the operation changes it.
    """

    def __init__(self, model: nn.Module, rules: Sequence[OpRule], root: str, callback: OpCallback,
                 keep_inputs: bool = False) -> None:
        self.model, self.rules, self.root, self.callback = model, list(rules), root, callback
        self.paused = 0
        self.thread = get_ident()
        # (call key, whether chosen, module) of each watched call open now, innermost last
        self.stack: list[tuple[str, list[OpRule], nn.Module]] = []
        self._calls: dict[int, int] = {}
        self._ordinals: dict[str, int] = {}
        self._paths: dict[int, str] = {}
        self._handles: list[RemovableHandle] = []
        self._mode: Optional[_Mode] = None
        self._hook_fns = (self._pre, self._post)  # the objects registered (see StepAside)
        self._aside = StepAside(lambda: self._hook_fns, self._handles)
        # calls running fused without the watch inside, innermost last
        self._closed: list[_Closed] = []
        self._closer: Optional[RemovableHandle] = None  # the global hook that closes them
        self._info: dict[Any, tuple[str, bool, Optional[int]]] = {}
        self.on_first: Optional[Callable[[], None]] = None  # called as a call opens while none is
        self.seen: dict[str, None] = {}  # op keys met in chosen calls (for "did you mean")
        self.matched: set[str] = set()  # patterns that chose at least one op
        self.keep_inputs = keep_inputs

    # ------------------------------------------------------------ on and off
    def start(self) -> None:
        """Hook the modules that may hold a chosen call, and everything called inside them."""
        self.thread = get_ident()
        watched: dict[int, tuple[str, nn.Module]] = {}
        for path, module in self.model.named_modules():
            if any(r.matches_call(path, None, self.root) for r in self.rules):
                for sub_path, sub in module.named_modules(prefix=path):
                    watched.setdefault(id(sub), (sub_path, sub))
        try:
            for path, module in watched.values():
                self._paths[id(module)] = path
                self._hook(module)
            if GLOBAL_POST_HOOK and any(has_fast_path(m) for _, m in watched.values()):
                # closes the calls that run fused (their modules' own hooks are off meanwhile)
                self._closer = register_module_forward_hook(self._close, always_call=True)
        except BaseException:
            self.stop()
            raise

    def _hook(self, module: nn.Module) -> None:
        pre, post = self._hook_fns
        self._handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        self._handles.append(module.register_forward_hook(post, prepend=True, always_call=True))

    def stop(self) -> None:
        """Take every hook off and the mode off the stack (also after a failed pass)."""
        self._reopen(0)
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if self._closer is not None:
            self._closer.remove()
            self._closer = None
        self._leave_mode()
        self.stack.clear()

    def watches(self, module: nn.Module) -> bool:
        """Whether the watch hooks ``module`` (a chosen call, or a module inside one)."""
        return id(module) in self._paths

    def begin_pass(self) -> None:
        """A new pass of the model: calls and operations are counted afresh."""
        self._calls.clear()
        self._ordinals.clear()

    # ------------------------------------------------------------ hooks
    def _pre(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self.paused or self._closed:
            return
        if self.thread != get_ident():
            if self.stack:  # another thread's pass is open: one thread is watched at a time
                return
            self.thread = get_ident()  # model.generate run in a thread inside the with block
        if not self.stack and self.on_first is not None:
            self.on_first()
        n = self._calls[id(module)] = self._calls.get(id(module), 0) + 1
        path = self._paths[id(module)]
        base = path or self.root
        key = base if n == 1 else f"{base}#{n}"
        chosen = [r for r in self.rules if r.matches_call(path, key, self.root)]
        if (self._closer is not None and has_fast_path(module)
                and self._step_aside(module, args, kwargs, key, chosen)):
            return
        self.stack.append((key, chosen, module))
        if self._mode is None:
            self._mode = _Mode(self)
            self._mode.__enter__()

    def _post(self, module: nn.Module, args: Any, output: Any) -> None:
        stack = self.stack
        if not stack or self.thread != get_ident() or self._closed:
            return
        while stack and stack[-1][2] is not module:  # left open by an exception handled inside
            if all(entry[2] is not module for entry in stack):
                return
            stack.pop()
        stack.pop()
        if not stack:
            self._leave_mode()

    # ------------------------------------------------------------ fused calls
    def _step_aside(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], key: str,
                    chosen: list[OpRule]) -> bool:
        """If a plain call of ``module`` runs a fused kernel, let it: the mode off the stack, the
        watch's hooks off its subtree, until the global hook :meth:`_close` sees it return.
        Whether it did."""
        kernel, mode = self._aside.test(module, args, kwargs, lambda m: m is self._mode)
        if kernel is None:
            return False
        self._closed.append(_Closed(module, key, chosen, kernel, mode, self._aside.unhook(module),
                                    args, kwargs))
        return True

    def _close(self, module: nn.Module, args: Any, output: Any) -> Any:
        """Global forward hook: the fused call of ``module`` returned (``output`` is ``None`` if
        it raised); the watch goes back in, and the call is one operation of its caller."""
        closed = self._closed
        if self.thread != get_ident() or all(c.module is not module for c in closed):
            return None
        while closed[-1].module is not module:  # left open by an exception handled inside
            self._reopen(len(closed) - 1)
        call = closed[-1]
        self._reopen(len(closed) - 1)
        if output is None or not call.chosen:
            return None
        return self._fused_op(call, output)

    def _reopen(self, down_to: int) -> None:
        """Give the watch's mode and hooks back to the closed calls from the innermost one to
        ``closed[down_to]``."""
        closed = self._closed
        while len(closed) > down_to:
            call = closed.pop()
            self._aside.give_back(call.mode, call.unhooked, self._hook)

    def _fused_op(self, call: _Closed, output: Any) -> Any:
        """The fused call as one operation named after its kernel, as the recording names it."""
        self.stack.append((call.key, call.chosen, call.module))
        self.paused += 1
        try:
            return self._chosen_op(call.key, call.chosen, call.kernel.replace(" ", "_"), output,
                                   call.args, call.kwargs, False)
        finally:
            self.paused -= 1
            self.stack.pop()

    def _leave_mode(self) -> None:
        mode, self._mode = self._mode, None
        if mode is not None and self.thread == get_ident():
            mode.__exit__(None, None, None)
        # else the block ended while a thread's pass was still open: the mode is on that thread's
        # stack, which no other thread can pop; with the stack cleared it only passes calls on

    # ------------------------------------------------------------ operations
    def _op_info(self, func: Callable[..., Any]) -> tuple[str, bool, Optional[int]]:
        info = self._info.get(func)
        if info is None:
            info = self._info[func] = op_info(func)
        return info

    def input_before(self, func: Callable[..., Any], args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Optional[tuple[Any, ...]]:
        """``args`` with a copy of the first, taken before ``func`` runs, where ``func`` is a
        chosen in-place operation (``x += y``, ``x.relu_()``, ``F.relu(x, inplace=True)``): the
        operation changes that argument, and what is kept as its input is what it was given."""
        key, chosen, _ = self.stack[-1]
        if not chosen or not args or not isinstance(args[0], Tensor):
            return None
        name, inplace, flag_at = self._op_info(func)
        if flag_at is not None:
            inplace = kwargs.get("inplace", args[flag_at] if flag_at < len(args) else False) is True
        if not inplace:
            return None
        n = self._ordinals.get(f"{key}/{name}", -1) + 1  # the ordinal it will be given
        if not any(r.matches_op(name, name if n == 0 else f"{name}_{n}") for r in chosen):
            return None
        self.paused += 1
        try:
            return (args[0].clone(), *args[1:])
        finally:
            self.paused -= 1

    def op(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], out: Any,
           before: Optional[tuple[Any, ...]] = None) -> Any:
        """Name the operation that returned ``out``; hand it to the callback where chosen
        (with ``before``, the arguments as they were, for an in-place operation)."""
        key, chosen, _ = self.stack[-1]
        if not chosen:
            return out
        info = self._op_info(func)
        self.paused += 1
        try:
            outs, inplace = op_outputs(info, args, kwargs, out)
            if not outs:
                return out
            replaced = self._chosen_op(key, chosen, info[0], out, args if before is None else before,
                                       kwargs, inplace)
            return out if replaced is None else replaced
        finally:
            self.paused -= 1

    def _chosen_op(self, key: str, chosen: list[OpRule], name: str, out: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any], inplace: bool) -> Any:
        """Count the operation ``name`` of the call ``key``; hand it to the callback where a rule
        chooses it.  The checked replacement, or ``None``."""
        candidate = f"{key}/{name}"
        n = self._ordinals.get(candidate, -1) + 1
        self._ordinals[candidate] = n
        tail = name if n == 0 else f"{name}_{n}"
        op_key = f"{key}/{tail}"
        self.seen[op_key] = None
        hits = [r for r in chosen if r.matches_op(name, tail)]
        if not hits:
            return None
        self.matched.update(r.pattern for r in hits)
        replaced = self.callback(op_key, out, args, kwargs)
        if replaced is None:
            return None
        if inplace:
            raise ValueError(f"edit returned a replacement for the in-place operation {op_key!r}; "
                             "an in-place operation's result cannot be replaced: edit the "
                             "operation that made its input instead")
        return _check_replacement(op_key, out, replaced)

    def unmatched(self) -> list[OpRule]:
        """The rules that have chosen no operation so far."""
        return [r for r in self.rules if r.pattern not in self.matched]


def _check_replacement(key: str, out: Any, new: Any, item: str = "") -> Any:
    """An edit must hand back what the model expects: same kind, shape and dtype, item by item
    for an operation that returns several tensors (``chunk``, ``split``, ``max(dim)``).  The
    replacement, as the output's own type where it is one of torch's named tuples
    (``torch.return_types.max``) and the edit gave a plain tuple or list."""
    what = f"item {item} of the output" if item else "output"
    if isinstance(out, Tensor):
        if not isinstance(new, Tensor):
            raise TypeError(f"edit returned a {type(new).__name__} for the {what} of the operation "
                            f"{key!r}, which is a tensor")
        if new.shape != out.shape or new.dtype != out.dtype:
            raise ValueError(f"edit returned a tensor of shape {tuple(new.shape)} and dtype "
                             f"{new.dtype} for the operation {key!r}, whose {what} has shape "
                             f"{tuple(out.shape)} and dtype {out.dtype}")
        return new
    if isinstance(out, (tuple, list)):
        if not isinstance(new, (tuple, list)):
            raise TypeError(f"edit returned a {type(new).__name__} for the {what} of the operation "
                            f"{key!r}, which is a {type(out).__name__} of {len(out)}")
        if len(new) != len(out):
            raise ValueError(f"edit returned {len(new)} items for the operation {key!r}, whose "
                             f"{what} has {len(out)}")
        items = [_check_replacement(key, o, n, f"{item}[{i}]") for i, (o, n) in
                 enumerate(zip(out, new, strict=True))]
        if type(new) is not type(out) and hasattr(type(out), "n_fields"):  # a torch named tuple
            return type(out)(items)
        return new
    return new


def check_rec_patterns(rec: Graph, rules: list[OpRule]) -> None:
    """Raise :class:`UnknownLayerError` for a rule that chooses none of ``rec``'s operations."""
    ops = [n for n in rec.nodes.values() if isinstance(n, OpNode) and isinstance(n.key, str)]
    for rule in rules:
        for op in ops:
            call = rec.nodes.get(op.parent_key)
            path = call.path if isinstance(call, LayerNode) else ""
            if rule.matches_call(path, str(op.parent_key), rec.name) and \
                    rule.matches_op(op.op, str(op.key).rpartition("/")[2]):
                break
        else:
            raise UnknownLayerError(f"ops pattern {rule.pattern!r} chooses no operation of the "
                                    "recording; " + nearest_ops(rule, [str(o.key) for o in ops]))
