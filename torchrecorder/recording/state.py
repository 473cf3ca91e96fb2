"""What a recording needs around the forward pass: inputs made from shapes, and the model's
state put back afterwards."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from typing import Any, Optional, Union

import torch
from torch import nn

from .meta import buffer_snapshot, restore_buffer

__all__ = ["InputShapes", "gc_paused", "make_inputs", "model_state_kept", "normalise_shapes"]

Shape = Sequence[int]
InputShapes = Union[None, Shape, list[Shape]]


def normalise_shapes(input_shapes: Any) -> list[tuple[int, ...]]:
    """``(1, 3)`` -> ``[(1, 3)]``; ``[(1, 3), (1, 5)]`` -> itself; anything else is an error.

    >>> normalise_shapes((1, 3)), normalise_shapes([(1, 3), [2]])
    ([(1, 3)], [(1, 3), (2,)])
    """
    def as_shape(s: Any) -> tuple[int, ...]:
        if isinstance(s, (tuple, list, torch.Size)) and all(
            isinstance(d, int) and not isinstance(d, bool) for d in s
        ):
            if any(d < 0 for d in s):
                raise ValueError(f"input shape {tuple(s)} has a negative dimension")
            return tuple(s)
        raise TypeError(
            "input_shapes must be a tuple of ints for one input, or a list of such tuples "
            f"for several, got {input_shapes!r}"
        )

    if isinstance(input_shapes, (tuple, torch.Size)) and all(isinstance(d, int) for d in input_shapes):
        return [as_shape(input_shapes)]
    if isinstance(input_shapes, (list, tuple)) and input_shapes:
        return [as_shape(s) for s in input_shapes]
    return [as_shape(input_shapes)]


def _default_device_dtype(net: nn.Module) -> tuple[torch.device, torch.dtype]:
    device, dtype = torch.device("cpu"), torch.get_default_dtype()
    for t in (*net.parameters(), *net.buffers()):
        device = t.device
        break
    for p in net.parameters():
        if p.is_floating_point():
            dtype = p.dtype
            break
    return device, dtype


def make_inputs(net: nn.Module, input_shapes: Any, input_data: Any, device: Any,
                dtype: Optional[torch.dtype]) -> tuple[Any, ...]:
    """The positional arguments of the recorded call: ``input_data`` as a tuple, or random
    tensors of ``input_shapes`` on the model's device (or ``device``) in its dtype (or ``dtype``)."""
    if input_data is not None:
        return input_data if isinstance(input_data, tuple) else (input_data,)
    if input_shapes is None:  # keyword inputs only
        return ()
    shapes = normalise_shapes(input_shapes)
    dev, dt = _default_device_dtype(net)
    dev = torch.device(device) if device is not None else dev
    dt = dtype if dtype is not None else dt
    gen = torch.Generator().manual_seed(0)
    if dev.type == "meta":
        return tuple(torch.empty(s, dtype=dt, device=dev) for s in shapes)
    return tuple(torch.randn(s, generator=gen, dtype=dt).to(dev) for s in shapes)


@contextlib.contextmanager
def model_state_kept(net: nn.Module) -> Iterator[None]:
    """Put back buffers, training flags and the random state that a forward pass may change."""
    modes = []
    buffers = []
    cuda: set[int] = set()
    with torch.no_grad():
        for module in net.modules():  # one walk: this runs on every record()
            modes.append((module, module.training))
            if module._buffers:
                for bname, buf in module._buffers.items():
                    if buf is not None:
                        buffers.append((module, bname, buf, buffer_snapshot(buf)))
                        if buf.device.type == "cuda":
                            cuda.add(buf.device.index or 0)
            for param in module._parameters.values():
                if param is not None and param.device.type == "cuda":
                    cuda.add(param.device.index or 0)
    try:
        with torch.random.fork_rng(devices=sorted(cuda)):
            yield
    finally:
        with torch.no_grad():
            # copied back whatever happened: kernels such as batch_norm update running
            # statistics in place without bumping the tensor's version counter
            for module, bname, buf, saved in buffers:
                held = module._buffers  # a ScriptModule's has no .get()
                if (held[bname] if bname in held else None) is not buf:
                    held[bname] = buf
                if saved is not None and buf.device.type != "meta":
                    restore_buffer(buf, saved)
        for module, training in modes:
            if module.training is not training:
                module.training = training


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the duration of one recording or drawing.

    A recording allocates a few objects per operation, all kept until the end;
    every 700 allocations the collector would scan them (and, now and then, every
    object of the process, which is slow in a process that has imported a large
    library).  Reference counting still frees everything as usual; only cycles
    wait until the collector is switched back on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
