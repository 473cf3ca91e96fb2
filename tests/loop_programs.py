"""Python loops in ``forward`` for the folding tests (``test_loops``): a few written out, and
random ones.

A :class:`LoopSpec` says what one program does; :class:`LoopProgram` runs it.  The loop runs
``steps`` iterations over a carried state ``h`` (``1×4``) with one kind of cell, reads the
input's slice ``x[:, t]`` (or a value computed before the loop, or nothing), keeps each
iteration's state in a list and may write it in place into a buffer; after the loop, the
states of chosen iterations are read again (``outs[-2]``), the buffer summed, the list
stacked.  ``x`` is ``1×steps×4``.  The whole loop may itself run again and again
(``outer``): in a run of identical blocks, or in an outer loop, each time in a block of
its own, so that loops fold inside the first block of a run or iteration.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["CELLS", "Flows", "LoopProgram", "LoopSpec", "StatesReadAfter", "loop_specs"]

#: the cells an iteration applies to its state (see :meth:`LoopProgram._cell`)
CELLS = ("linear", "gru", "block", "ops", "lists", "blocks")


@dataclass(frozen=True)
class LoopSpec:
    """One random loop program.

    Attributes:
        steps: the number of iterations.
        cell: one of :data:`CELLS`.
        read: what each iteration reads besides its state: ``"slice"`` (``x[:, t]``),
            ``"fixed"`` (one value computed before the loop) or ``"none"``.
        carry: ``"one"`` (``h = f(h)``) or ``"two"`` (``a, b = b, f(a + b)``: two iterations back).
        lists: for the ``"lists"`` cell, how many ModuleLists each iteration calls.
        after: the iterations whose state is read again after the loop (indices into the
            list of states, negative ones too).
        inplace: write each state into a buffer (``buf[:, t] = h``) summed after the loop.
        stack: stack the list of states after the loop.
        nested: run the loop inside a submodule (drawn as a group from ``render_depth=2``).
        outer: ``"none"``; ``"run"``: ``repeats`` blocks each running the loop, one after
            the other (``x = block(x)``); ``"loop"``: the same with an operation between them
            (``x = flip(block(x))``), an outer loop.
        repeats: how many blocks ``outer`` runs.
    """

    steps: int
    cell: str
    read: str = "slice"
    carry: str = "one"
    lists: int = 1
    after: tuple[int, ...] = ()
    inplace: bool = False
    stack: bool = False
    nested: bool = False
    outer: str = "none"
    repeats: int = 2


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.fc(x))


class _Loop(nn.Module):
    """The loop itself (the network, or a submodule of it if ``spec.nested``)."""

    def __init__(self, spec: LoopSpec) -> None:
        super().__init__()
        self.spec = spec
        n = spec.steps
        self.lin = nn.Linear(4, 4)
        self.gru = nn.GRUCell(4, 4)
        self.block = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.lists = nn.ModuleList(nn.ModuleList(nn.Linear(4, 4) for _ in range(n))
                                   for _ in range(spec.lists))
        self.blocks = nn.ModuleList(_Block() for _ in range(n))
        self.head = nn.Linear(4, 4)

    def _cell(self, t: int, h: torch.Tensor, inp: torch.Tensor | None) -> torch.Tensor:
        cell = self.spec.cell
        if cell == "linear":
            z = self.lin(h)
            return torch.tanh(z if inp is None else z + inp)
        if cell == "gru":
            return self.gru(h if inp is None else inp, h)
        if cell == "block":
            z = self.block(h)
        elif cell == "ops":
            z = torch.sin(h) * 0.5
        elif cell == "lists":  # y = dil[i](x * mask); ...; x = x + y
            y = h * 0.5
            for layers in self.lists:
                y = torch.relu(layers[t](y))
            z = y
        else:  # "blocks": a ModuleList of identical blocks, one per iteration
            return self.blocks[t](h if inp is None else h + inp)
        return h + (z if inp is None else z + inp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spec = self.spec
        fixed = x.mean(1) if spec.read == "fixed" else None
        buf = torch.zeros(1, spec.steps, 4) if spec.inplace else None
        a = b = x[:, 0] * 1.0
        outs: list[torch.Tensor] = []
        for t in range(spec.steps):
            inp = x[:, t] if spec.read == "slice" else fixed
            if spec.carry == "two":
                a, b = b, self._cell(t, a + b, inp)
            else:
                b = self._cell(t, b, inp)
            outs.append(b)
            if buf is not None:
                buf[:, t] = b
        y = b
        for j in spec.after:
            y = y + self.head(outs[j])
        if buf is not None:
            y = y + buf.sum(1)
        if spec.stack:
            y = y + torch.stack(outs, 1).mean(1)
        if spec.outer != "none":  # a block of a run or outer loop: x's shape in and out
            return x + y.unsqueeze(1)
        return y


class LoopProgram(nn.Module):
    """The network running ``spec``'s loop (in a submodule ``body`` if ``spec.nested``, in
    ``spec.repeats`` blocks ``bodies`` if ``spec.outer``)."""

    def __init__(self, spec: LoopSpec) -> None:
        super().__init__()
        self.spec = spec
        self.body = _Loop(spec)
        repeats = spec.repeats if spec.outer != "none" else 0
        self.bodies = nn.ModuleList(_Loop(spec) for _ in range(repeats))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spec = self.spec
        if spec.outer != "none":
            for body in self.bodies:
                x = body(x)
                if spec.outer == "loop":
                    x = torch.flip(x, [1])
            return x
        if spec.nested:
            return self.body(x)
        return _Loop.forward(self.body, x)  # the loop at the network's own level


class StatesReadAfter(nn.Module):
    """``outs.append(h)`` in the loop, ``outs[-2]`` (an iteration's state other than the last)
    read after it."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(4, 4)
        self.head = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (1, 10, 4)
        h = torch.zeros(1, 4)
        outs = []
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
            outs.append(h)
        return self.head(outs[-2]) + outs[-1]


class _WaveNet(nn.Module):
    """VITS' WaveNet: a loop over two ModuleLists, ``x = (x + res[i](acts)) * 0.5``."""

    def __init__(self, n: int = 4) -> None:
        super().__init__()
        self.ins = nn.ModuleList(nn.Linear(4, 4) for _ in range(n))
        self.res = nn.ModuleList(nn.Linear(4, 4) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for inp, res in zip(self.ins, self.res, strict=True):
            h = inp(x)
            g = torch.zeros_like(h)
            r = res(torch.tanh(h + g) * torch.sigmoid(h + g))
            x = (x + r) * 0.5
            out = out + r
        return out


class Flows(nn.Module):
    """VITS' flows: a loop over WaveNet blocks, each running its own loop (the inner loop
    folds inside the first iteration of the outer one)."""

    def __init__(self) -> None:
        super().__init__()
        self.flows = nn.ModuleList(_WaveNet() for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for flow in self.flows:
            x = torch.flip(flow(x), [1])
        return x


def loop_specs():  # type: ignore[no-untyped-def]
    """A hypothesis strategy of :class:`LoopSpec` (imported here so that only the tests using
    it need hypothesis)."""
    from hypothesis import strategies as st

    @st.composite
    def specs(draw):  # type: ignore[no-untyped-def]
        steps = draw(st.integers(3, 9))
        index = st.integers(-steps, steps - 1)
        return LoopSpec(
            steps=steps,
            cell=draw(st.sampled_from(CELLS)),
            read=draw(st.sampled_from(("slice", "fixed", "none"))),
            carry=draw(st.sampled_from(("one", "two"))),
            lists=draw(st.integers(1, 3)),
            after=tuple(draw(st.lists(index, max_size=2, unique=True))),
            inplace=draw(st.booleans()),
            stack=draw(st.booleans()),
            nested=draw(st.booleans()),
            outer=draw(st.sampled_from(("none", "none", "run", "loop"))),
            repeats=draw(st.integers(2, 3)),
        )

    return specs()
