"""The least a recorder built on torch's hooks and a function mode does: a yardstick.

:func:`toy_record` records a forward pass the way ``record`` does at its core and no more:
a forward pre-hook on every module and one global forward hook open and close each call,
a ``TorchFunctionMode`` sees each operation; every module call, parameter (on first use),
module input and output and every operation becomes a small node object with a unique key,
its shapes and its line of code, and edges join them by the identity of live tensors (weak
references).  It leaves out everything else ``record`` promises: the model check and its
state kept and put back, in-place writes, aliases and pass-throughs, operations the mode
cannot see (``grad_fn`` recovery), fused fast paths, lines of code inside torch, nested
containers, keyword arguments, failures, threads, the pruning of unused operations.

``breakdown.py`` times it beside ``record``: what a Python recorder on these mechanisms costs
before it keeps any of those promises, and so what a speed target leaves room for.  Nothing
here is used by torchrecorder.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any, Optional

import torch
from torch import Tensor, nn
from torch.nn.modules.module import register_module_forward_hook
from torch.overrides import TorchFunctionMode

__all__ = ["ToyRecording", "toy_record"]


class _Node:
    __slots__ = ("fn", "key", "kids", "line", "name", "parent", "shapes")

    def __init__(self, name: str, fn: Any, parent: Optional[_Node], key: str,
                 shapes: list[tuple[int, ...]], line: Any) -> None:
        self.name, self.fn, self.parent, self.key = name, fn, parent, key
        self.shapes, self.line = shapes, line
        self.kids: dict[str, None] = {}


class ToyRecording:
    """Nodes by key, edges as ``(source key, target key)`` and the live tensors' keys."""

    def __init__(self) -> None:
        self.nodes: dict[str, _Node] = {}
        self.edges: dict[tuple[str, str], None] = {}
        self.live: dict[int, tuple[Any, str]] = {}
        self.stack: list[_Node] = []
        self._used: dict[str, int] = {}

    def key(self, candidate: str) -> str:
        n = self._used.get(candidate)
        if n is None:
            self._used[candidate] = 0
            return candidate
        self._used[candidate] = n + 1
        return f"{candidate}_{n + 1}"

    def add(self, name: str, fn: Any, candidate: str, shapes: list[tuple[int, ...]], line: Any) -> _Node:
        scope = self.stack[-1] if self.stack else None
        key = self.key(f"{scope.key}/{candidate}" if scope is not None else candidate)
        node = self.nodes[key] = _Node(name, fn, scope, key, shapes, line)
        if scope is not None:
            scope.kids[key] = None
        return node

    def link(self, t: Tensor, key: str) -> None:
        entry = self.live.get(id(t))
        if entry is not None and entry[0]() is t:
            self.edges[(entry[1], key)] = None

    def tensor(self, t: Tensor, candidate: str) -> None:
        node = self.add("tensor", None, candidate, [tuple(t.shape)], None)
        self.link(t, node.key)
        self.live[id(t)] = (weakref.ref(t), node.key)

    def pre(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        frame = sys._getframe(1)
        call = self.add(type(module).__name__, module, type(module).__name__,
                        [tuple(a.shape) for a in args if type(a) is Tensor], (frame.f_code, frame.f_lasti))
        for pname, p in module._parameters.items():
            if p is not None and id(p) not in self.live:
                node = _Node(pname, p, call, self.key(f"{call.key}.{pname}"), [tuple(p.shape)], None)
                self.nodes[node.key] = node
                call.kids[node.key] = None
                self.live[id(p)] = (weakref.ref(p), node.key)
        self.stack.append(call)
        for a in args:
            if type(a) is Tensor:
                self.tensor(a, "in")

    def post(self, module: nn.Module, args: Any, out: Any) -> None:
        if self.stack and self.stack[-1].fn is module:
            if type(out) is Tensor:
                self.tensor(out, "out")
            self.stack.pop()


class _ToyMode(TorchFunctionMode):
    def __init__(self, rec: ToyRecording) -> None:
        super().__init__()
        self.rec = rec

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: Optional[dict[str, Any]] = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if type(out) is Tensor:
            rec = self.rec
            frame = sys._getframe(1)
            name = getattr(func, "__name__", "op")
            node = rec.add(name, func, name, [tuple(out.shape)], (frame.f_code, frame.f_lasti))
            for a in args:
                if type(a) is Tensor or type(a) is nn.Parameter:
                    rec.link(a, node.key)
            rec.live[id(out)] = (weakref.ref(out), node.key)
        return out


def toy_record(model: nn.Module, args: tuple[Any, ...]) -> ToyRecording:
    """Record one forward pass of ``model`` on ``args`` with the toy recorder."""
    rec = ToyRecording()
    handles = [m.register_forward_pre_hook(rec.pre) for m in model.modules()]
    handles.append(register_module_forward_hook(rec.post, always_call=True))
    try:
        with _ToyMode(rec):
            model(*args)
    finally:
        for h in handles:
            h.remove()
    rec.live.clear()
    return rec


if __name__ == "__main__":  # a smoke run: python benchmarks/toy_recorder.py
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    got = toy_record(net, (torch.randn(1, 4),))
    print(len(got.nodes), "nodes,", len(got.edges), "edges")
