"""What a recording needs around the forward pass: inputs made from shapes, and the model's
state put back afterwards."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import threading
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, Optional, Union

import torch
from torch import Tensor, nn
from torch.nn.parameter import is_lazy

from .ops import write_info

__all__ = ["EAGER_COPY_BYTES", "InputShapes", "ModelState", "gc_paused", "make_inputs",
           "model_state_kept", "normalise_shapes", "random_state_kept"]

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


# Buffers and existing ``.grad`` tensors up to this many bytes in all are copied before the
# forward pass, so that even a change torchrecorder cannot see (a write through ``.numpy()``,
# under ``torch._C.DisableTorchFunction``, by a compiled graph, by autograd accumulating
# into ``.grad``) is put back; the rest is copied only when the forward is about to write it.
EAGER_COPY_BYTES = 32 << 20

_MISSING = object()


class _Tracked:
    """One parameter, buffer or ``.grad`` of the model, as it was before the forward pass (for a
    parameter also its ``requires_grad`` flag and ``.grad``: one object per tensor, so that a
    recording leaves the garbage collector few objects to scan).  ``what`` says what it is, for a
    warning: (kind, module path, tensor name), ``("parameter", "fc", "weight")`` (the text is made
    only when needed)."""

    __slots__ = ("alias", "grad", "requires_grad", "saved", "tensor", "version", "what")

    def __init__(self, tensor: Tensor, what: tuple[str, str, str]) -> None:
        self.tensor = tensor
        self.what = what
        self.alias = tensor.detach()  # the original storage and view, whatever forward rebinds
        self.version = _version(tensor)
        self.saved: Optional[Tensor] = None
        self.requires_grad = False
        self.grad: Optional[Tensor] = None

    @property
    def label(self) -> str:
        """``parameter 'fc.weight'``, ``buffer 'bn.running_mean'``, ``the gradient of 'fc.weight'``."""
        kind, module, name = self.what
        path = f"{module}.{name}" if module else name
        return f"the gradient of '{path}'" if kind == "grad" else f"{kind} '{path}'"

    def snapshot(self) -> None:
        if self.saved is None:
            self.saved = self.alias.clone()


def _version(t: Tensor) -> Optional[int]:
    """``t``'s version counter, or ``None`` for an inference tensor (which keeps none)."""
    try:
        return int(t._version)
    except RuntimeError:
        return None


def _storage_key(t: Any) -> int:
    """The address of ``t``'s storage (0 for none: meta, empty, or a tensor without one)."""
    try:  # the storage's own data_ptr, without making a Python storage object (slow)
        return int(t.data_ptr() - t.storage_offset() * t.element_size())
    except Exception:  # sparse, nested or other tensors without a plain storage
        return 0


def _same_view(t: Tensor, alias: Tensor) -> bool:
    """Whether ``t`` still looks at the storage, offset, shape, strides and dtype of ``alias``."""
    if t.dtype != alias.dtype:
        return False
    if not t.is_meta and t.layout == torch.strided:
        try:  # one call: the same storage (or a storage sharing it), offset, sizes and strides
            return bool(t.is_set_to(alias))
        except Exception:  # a tensor without a plain storage: compared below
            pass
    if t.device != alias.device or t.shape != alias.shape:
        return False
    if t.layout != torch.strided:
        return True
    if t.stride() != alias.stride() or t.storage_offset() != alias.storage_offset():
        return False
    if t.device.type == "meta":
        return True
    try:  # same dtype and offset: the same storage exactly when the same data pointer
        return bool(t.data_ptr() == alias.data_ptr())
    except Exception:  # a tensor without a plain storage
        return _storage_key(t) == _storage_key(alias)


def _expanded(t: Tensor) -> bool:
    """Whether several elements of ``t`` share memory (``expand``): nothing can write it in place."""
    if t.layout != torch.strided:
        return False
    return any(st == 0 and n > 1 for st, n in zip(t.stride(), t.shape, strict=True))


class ModelState:
    """The model's parameters, buffers, gradients, flags and modes before a forward pass, and
    what :func:`model_state_kept` puts back afterwards (a ``with`` block).  :meth:`before_write`
    is called before every torch operation of the recorded pass (by the engine's function mode).
    """

    def __init__(self, net: nn.Module, walk: Optional[list[tuple[str, nn.Module]]] = None) -> None:
        self.grad_mode = torch.is_grad_enabled()
        self.modules: list[nn.Module] = []
        self.training: list[bool] = []
        self.slots: list[tuple[dict[str, Any], str, Any]] = []
        self.params: list[_Tracked] = []  # with their requires_grad flags and .grad
        self.tracked: list[_Tracked] = []
        self._by_storage: Optional[dict[int, list[_Tracked]]] = None  # made on the first write
        self.cuda: set[int] = set()
        # a walk made by check_model has refused lazy tensors already
        lazy_possible = walk is None
        seen: set[int] = set()
        eager: list[_Tracked] = []
        modules, training, slots, tracked = self.modules, self.training, self.slots, self.tracked
        with torch.no_grad():
            for path, module in (net.named_modules(remove_duplicate=False) if walk is None else walk):
                if id(module) in seen:
                    continue
                seen.add(id(module))
                modules.append(module)
                training.append(module.training)
                for kind, tensors in (("parameter", module._parameters), ("buffer", module._buffers)):
                    if not tensors:
                        continue
                    for tname, t in tensors.items():
                        slots.append((tensors, tname, t))
                        if t is None or id(t) in seen or (lazy_possible and is_lazy(t)):
                            continue
                        seen.add(id(t))
                        entry = _Tracked(t, (kind, path, tname))
                        tracked.append(entry)
                        if t.is_cuda:
                            self.cuda.add(t.device.index or 0)
                        if kind == "buffer":
                            eager.append(entry)
                        else:
                            entry.requires_grad = t.requires_grad
                            entry.grad = grad = t.grad
                            self.params.append(entry)
                            if grad is not None:
                                eager.append(self._track(grad, ("grad", path, tname)))
            budget = EAGER_COPY_BYTES
            for entry in eager:
                t = entry.tensor
                if t.device.type == "meta" or _expanded(t) or not _storage_key(t):
                    continue
                size = t.numel() * t.element_size()
                if size <= budget:
                    budget -= size
                    entry.snapshot()
        self.rng = random_state_kept(sorted(self.cuda))

    def _track(self, t: Tensor, what: tuple[str, str, str]) -> _Tracked:
        entry = _Tracked(t, what)
        self.tracked.append(entry)
        if t.is_cuda:
            self.cuda.add(t.device.index or 0)
        return entry

    @property
    def by_storage(self) -> dict[int, list[_Tracked]]:
        """The tracked tensors by storage address (meta tensors and tensors without a storage
        left out), indexed on first use: most passes write no tensor in place."""
        got = self._by_storage
        if got is None:
            got = self._by_storage = {}
            for entry in self.tracked:  # the original storage, whatever forward rebound since
                t = entry.alias
                key = _storage_key(t) if t.device.type != "meta" else 0
                if key:
                    got.setdefault(key, []).append(entry)
        return got

    def before_write(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Copy each tracked tensor that ``func(*args, **kwargs)`` may write, before it runs
        (:class:`~torchrecorder.recording.ops.OpMode` calls it only for a ``func`` that can
        write an argument (:func:`~torchrecorder.recording.ops.write_info`) or with ``out=``)."""
        positions, flag, stats = write_info(func)
        if flag is not None:  # F.relu(x, inplace=True) writes x
            on = kwargs["inplace"] if "inplace" in kwargs else len(args) > flag and args[flag]
            if on is True:
                positions = (0,)
        if not (positions or stats or (kwargs and "out" in kwargs)) or not self.by_storage:
            return
        written: list[Any] = [args[i] for i in positions if i < len(args)]
        if stats and (len(args) <= 5 or args[5] is not False):  # training / use_input_stats
            written.extend(args)
            written.extend(kwargs.values())
        elif kwargs:
            written.extend(v for k, v in kwargs.items() if k == "out")
        by_storage = self.by_storage
        for value in written:  # (snapshot() clones a detached alias: no autograd involved)
            for t in (value if isinstance(value, (list, tuple)) else (value,)):
                if isinstance(t, Tensor):
                    for entry in by_storage.get(_storage_key(t), ()):
                        entry.snapshot()

    def restore(self) -> list[str]:
        """Put everything back; returns what could not be put back (or was changed unseen)."""
        problems: list[str] = []
        with torch.no_grad():
            for tensors, tname, obj in self.slots:  # (a ScriptModule's dicts have no .get)
                if (tensors[tname] if tname in tensors else _MISSING) is not obj:
                    tensors[tname] = obj
            for entry in self.tracked:
                t, alias = entry.tensor, entry.alias
                try:
                    if not _same_view(t, alias):
                        t.data = alias  # ``.data = other`` inside forward: back to the original
                    if entry.saved is not None:
                        if not torch.equal(alias, entry.saved):
                            with torch.inference_mode(alias.is_inference()):
                                alias.copy_(entry.saved)
                    elif (entry.version is not None and _version(alias) != entry.version
                          and alias.device.type != "meta"):
                        problems.append(f"{entry.label} was changed in place where torchrecorder "
                                        "could not see it (with torch functions disabled, by a "
                                        "compiled graph or by autograd); it keeps its new value")
                except Exception as exc:  # reported, the rest is still put back
                    problems.append(f"{entry.label} could not be put back: {type(exc).__name__}: {exc}")
            for entry in self.params:
                param, grad = entry.tensor, entry.grad
                if param.grad is not grad:
                    try:
                        param.grad = grad
                    except Exception as exc:
                        problems.append(f"the gradient of a parameter could not be put back: {exc}")
            for entry in self.params:
                if entry.tensor.requires_grad is not entry.requires_grad:
                    entry.tensor.requires_grad_(entry.requires_grad)
        for module, training in zip(self.modules, self.training, strict=True):
            if module.training is not training:
                module.training = training
        torch.set_grad_enabled(self.grad_mode)
        return problems

    def close(self) -> None:
        """Forget every tensor and copy (the recording may live much longer than the pass)."""
        self.tracked, self._by_storage, self.slots = [], {}, []
        self.params, self.modules, self.training = [], [], []

    # a class, not a contextlib generator: the user's exception passes through untouched
    def __enter__(self) -> ModelState:
        self.rng.__enter__()
        return self

    def __exit__(self, typ: Any, exc: Optional[BaseException], tb: Any) -> None:
        try:
            self.rng.__exit__(typ, exc, tb)
        finally:
            problems = self.restore()
            self.close()
            for problem in problems:
                warnings.warn(f"torchrecorder: {problem}", RuntimeWarning, stacklevel=3)


def model_state_kept(net: nn.Module, walk: Optional[list[tuple[str, nn.Module]]] = None) -> ModelState:
    """A ``with`` block that puts back what a forward pass of ``net`` may change, whatever it
    raised; ``as`` gives the :class:`ModelState`.

    Put back: the objects registered as parameters and buffers, their values (buffers up to
    :data:`EAGER_COPY_BYTES` in all are copied beforehand; any other tensor is copied when the
    forward is about to write it, as seen through :meth:`ModelState.before_write`), what
    ``.data = x`` rebinds, ``requires_grad`` flags, ``.grad`` (the same object, and its values
    within the copy budget), training flags, grad mode and the random state
    (:func:`random_state_kept`).  A write that torchrecorder cannot see, to a tensor it did not
    copy beforehand, is reported with a :class:`RuntimeWarning` when the tensor's version
    counter shows it (a write through ``.numpy()`` does not).  ``walk``: the model's
    ``named_modules(remove_duplicate=False)`` as a list, when the caller has it already.
    """
    return ModelState(net, walk)


_RNG_LOCK = threading.Lock()
_rng_users = 0
_rng_saved: dict[int, Tensor] = {}  # -1 for the CPU generator, else the CUDA device index
_rng_private: dict[int, int] = {}  # the seed each generator was given for the recordings


def _private_seed(state: Tensor) -> int:
    """A seed drawn from ``state``: the recording's own stream, reproducible, not the caller's."""
    try:
        data = state.numpy().tobytes()  # the same bytes as bytes(state.tolist()), 60x faster
    except Exception:  # torch without numpy
        data = bytes(state.tolist())
    digest = hashlib.blake2b(data, digest_size=8, person=b"torchrecorder")
    return int.from_bytes(digest.digest(), "little") >> 1


class random_state_kept:  # used like a function: ``with random_state_kept():``
    """Give the recorded pass its own random stream and put the caller's back afterwards.

    While any recording of the process runs, torch's default generators (CPU and the given
    CUDA devices) draw from a stream seeded from their state when the first recording
    began; when the last one ends, that state comes back.  So the caller's stream is where
    it was, two overlapping recordings (in two threads) leave it as it was, and another
    thread that draws meanwhile gets numbers of the other stream, never ones it will be
    given again.

    Only what the recording itself changed is put back: a generator that was seeded (or
    given a state) meanwhile, by another thread calling ``torch.manual_seed`` or by the
    model itself, no longer holds the recording's stream, and keeps what it was given.
    """

    def __init__(self, cuda_devices: Sequence[int] = ()) -> None:
        self.cuda_devices = tuple(cuda_devices)
        self.entered = False

    def __enter__(self) -> None:
        global _rng_users
        with _RNG_LOCK:
            fresh = [d for d in (-1, *self.cuda_devices) if d not in _rng_saved]
            for d in fresh:
                _rng_saved[d] = torch.get_rng_state() if d < 0 else torch.cuda.get_rng_state(d)
            for d in fresh:
                seed = _private_seed(_rng_saved[-1]) + max(d, 0)
                _rng_private[d] = seed
                if d < 0:
                    torch.default_generator.manual_seed(seed)
                else:
                    with torch.cuda.device(d):
                        torch.cuda.manual_seed(seed)
            _rng_users += 1
            self.entered = True

    def __exit__(self, *exc_info: Any) -> None:
        global _rng_users
        if not self.entered:
            return
        self.entered = False
        with _RNG_LOCK:
            _rng_users -= 1
            if _rng_users == 0:
                saved, private = dict(_rng_saved), dict(_rng_private)
                _rng_saved.clear()
                _rng_private.clear()
                for d, st in saved.items():
                    # a generator seeded meanwhile (another thread's ``torch.manual_seed``)
                    # keeps that seed: only the recording's own stream is taken back
                    if _initial_seed(d) != private.get(d):
                        continue
                    if d < 0:
                        torch.set_rng_state(st)
                    else:
                        torch.cuda.set_rng_state(st, d)


def _initial_seed(device: int) -> int:
    """The seed that torch's default generator of ``device`` (-1: the CPU) was last given."""
    if device < 0:
        return torch.default_generator.initial_seed()
    return torch.cuda.default_generators[device].initial_seed()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the duration of one drawing.

    Never used around a forward pass: user code runs there, and reference cycles it leaves
    would pile up until the pass ends.  A drawing allocates a few objects per node, all kept
    until the end; every 700 allocations the collector would scan them (and, now and then,
    every object of the process, which is slow in a process that has imported a large
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
