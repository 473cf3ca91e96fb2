"""What a recording needs around the forward pass: inputs made from shapes, and the model's
state put back afterwards."""

from __future__ import annotations

import contextlib
import gc
import operator
import warnings
from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from typing import Any, Optional, cast

import torch
from torch import Tensor, nn
from torch.nn.parameter import is_lazy

from .attrs import Attributes, attribute_slots
from .meta import ModelWalk, picker
from .ops import write_info, writes_arguments
from .rng import random_state_kept

__all__ = ["EAGER_COPY_BYTES", "ModelState", "gc_paused", "model_state_kept", "random_state_kept"]

# Buffers and existing ``.grad`` tensors up to this many bytes in all are copied before the
# forward pass, so that even a change torchrecorder cannot see (a write through ``.numpy()``,
# under ``torch._C.DisableTorchFunction``, by a compiled graph, by autograd accumulating
# into ``.grad``) is put back; the rest is copied only when the forward is about to write it.
EAGER_COPY_BYTES = 32 << 20

_MISSING = object()
# what is read and written here is the recorder's own business: kept from the function modes
# and tensor subclasses of the caller (a mode counting operations, a logging subclass)
_NO_TORCH_FUNCTION: Callable[[], Any] = getattr(torch._C, "DisableTorchFunction", contextlib.nullcontext)


def _label(what: tuple[str, str, str]) -> str:
    """``parameter 'fc.weight'``, ``buffer 'bn.running_mean'``, ``the gradient of 'fc.weight'``
    for ``what`` = (kind, module path, tensor name)."""
    kind, module, name = what
    path = f"{module}.{name}" if module else name
    return f"the gradient of '{path}'" if kind == "grad" else f"{kind} '{path}'"


def _version(t: Tensor) -> Optional[int]:
    """``t``'s version counter, or ``None`` for an inference tensor (which keeps none)."""
    try:
        return int(t._version)
    except RuntimeError:
        return None


def _versions(tensors: list[Tensor]) -> list[Optional[int]]:
    """:func:`_version` of each of ``tensors`` (one comprehension unless one is an inference tensor)."""
    try:
        return [t._version for t in tensors]
    except RuntimeError:
        return [_version(t) for t in tensors]


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
    if t.layout != torch.strided or t.is_contiguous():  # (a contiguous tensor repeats nothing)
        return False
    return any(st == 0 and n > 1 for st, n in zip(t.stride(), t.shape, strict=True))


_DTYPE = operator.attrgetter("dtype")
_TRAINING = operator.attrgetter("training")
_REQUIRES_GRAD = operator.attrgetter("requires_grad")
_GRAD = operator.attrgetter("grad")
_IS_CUDA = operator.attrgetter("is_cuda")


def _libc_memcmp() -> Optional[Callable[[int, int, int], int]]:
    """The C library's ``memcmp`` through ctypes, or ``None`` where it cannot be loaded."""
    try:
        import ctypes

        func = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError, TypeError):  # no C library by that name (Windows)
        return None
    func.restype = ctypes.c_int
    func.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return cast(Callable[[int, int, int], int], func)


_MEMCMP = _libc_memcmp()


def _memory_equal(a: int, b: int, size: int) -> bool:
    """Whether the ``size`` bytes at address ``a`` equal those at ``b`` (both readable)."""
    if _MEMCMP is not None:
        return _MEMCMP(a, b, size) == 0
    import ctypes

    return ctypes.string_at(a, size) == ctypes.string_at(b, size)


def _same_bytes(t: Tensor, copy: Tensor) -> bool:
    """Whether ``t`` holds what ``copy`` (its clone) holds: for a contiguous tensor in the CPU's
    memory the same bytes, compared in place (``memcmp``, once its storage is known to hold
    them: the forward may have resized it), else ``torch.equal`` (``torch.equal`` compares
    booleans and bytes one by one, much slower).

    Nothing here reads ``t`` (the model's tensor) through NumPy: ``t.numpy()`` would mark its
    storage as not resizable for good (a NumPy array may point into it), a change the
    recording left in the model (``resize_`` of a buffer failing afterwards)."""
    if (t.device.type == "cpu" and t.layout == torch.strided and t.dtype is copy.dtype
            and not t.dtype.is_complex and not t.is_neg() and t.is_contiguous() and copy.is_contiguous()
            and t.shape == copy.shape):  # (complex: a conjugate view's bytes are not its values)
        try:
            size, ptr = t.numel() * t.element_size(), t.data_ptr()
            held = t.untyped_storage().nbytes() >= t.storage_offset() * t.element_size() + size
        except Exception:  # a tensor without a plain storage: compared by torch
            held = False
        if held and ptr and size:
            return _memory_equal(ptr, copy.data_ptr(), size)
    return bool(torch.equal(t, copy))


class _Layout:
    """Where the state of a model lies, read in one walk of it: its distinct modules, the
    slots of their ``_parameters``, ``_buffers`` and ``_modules`` dicts (owner, name, object), and its
    distinct parameters and buffers with what each is, for a warning: ``("parameter", "fc",
    "weight")``."""

    __slots__ = ("attr_lens", "attr_names", "attr_owners", "buffers", "modules", "params", "slot_attrs",
                 "slot_modules", "slot_names", "slot_objects", "tensors", "whats")

    def __init__(self) -> None:
        self.modules: list[Any] = []
        # the modules' plain attributes (:mod:`~.attrs`): module positions, names, ``__dict__`` sizes
        self.attr_owners: list[int] = []
        self.attr_names: list[str] = []
        self.attr_lens: list[int] = []
        self.slot_modules: list[Any] = []  # the module of each slot
        self.slot_attrs: list[str] = []  # "_parameters", "_buffers" or "_modules"
        self.slot_names: list[str] = []
        self.slot_objects: list[Any] = []
        self.tensors: list[Any] = []
        self.whats: list[tuple[str, str, str]] = []
        self.params: list[int] = []  # positions in ``tensors``
        self.buffers: list[int] = []

    @classmethod
    def read(cls, walk: Iterable[tuple[str, nn.Module]], lazy_possible: bool) -> _Layout:
        """The layout of the model whose ``named_modules(remove_duplicate=False)`` is ``walk``
        (uninitialized tensors left out where ``lazy_possible``)."""
        layout = cls()
        modules, owners, attrs = layout.modules, layout.slot_modules, layout.slot_attrs
        names, objects = layout.slot_names, layout.slot_objects
        tensors, whats, params, buffers = layout.tensors, layout.whats, layout.params, layout.buffers
        seen: set[int] = set()
        for path, module in walk:
            if id(module) in seen:
                continue
            seen.add(id(module))
            modules.append(module)
            for kind, attr, tensor_dict, into in (("parameter", "_parameters", module._parameters, params),
                                                  ("buffer", "_buffers", module._buffers, buffers)):
                if not tensor_dict:
                    continue
                for tname, t in tensor_dict.items():
                    owners.append(module)
                    attrs.append(attr)
                    names.append(tname)
                    objects.append(t)
                    if t is None or id(t) in seen or (lazy_possible and is_lazy(t)):
                        continue
                    seen.add(id(t))
                    into.append(len(tensors))
                    tensors.append(t)
                    whats.append((kind, path, tname))
            children = module._modules
            if children:  # a submodule that ``forward`` replaces or deletes is put back too
                for cname, child in children.items():
                    owners.append(module)
                    attrs.append("_modules")
                    names.append(cname)
                    objects.append(child)
        dicts = [m.__dict__ for m in modules]
        layout.attr_owners, layout.attr_names = attribute_slots(dicts)
        layout.attr_lens = list(map(len, dicts))
        return layout

    def positions(self, objects: list[Any]) -> _KeptLayout:
        """This layout with every module and tensor as its position in ``objects`` (the walk's
        stamp, :class:`~.meta.ModelWalk`): what is kept between recordings, keeping nothing
        of the model alive (:meth:`_KeptLayout.objects` reads it back)."""
        return _KeptLayout(self, objects)


class _KeptLayout:
    """A :class:`_Layout` by positions in the objects of the model's stamp
    (:class:`~.meta.ModelWalk`), each list read back by one ``itemgetter``: kept on the
    model's memo, it keeps nothing of the model alive and is valid for any walk of the same
    stamp."""

    __slots__ = ("attr_lens", "attr_names", "attr_owners", "buffers", "modules", "none", "params",
                 "slot_attrs", "slot_modules", "slot_names", "slot_objects", "tensors", "whats")

    def __init__(self, layout: _Layout, objects: list[Any]) -> None:
        at = {id(o): i for i, o in reversed(list(enumerate(objects)))}  # first position of each
        none = len(objects)  # a ``None`` slot: one past the objects (read with ``None`` appended)
        # names, kinds and positions in ``tensors`` (no object of the model)
        self.slot_attrs, self.slot_names = layout.slot_attrs, layout.slot_names
        self.whats, self.params, self.buffers = layout.whats, layout.params, layout.buffers
        self.attr_owners, self.attr_names = layout.attr_owners, layout.attr_names
        self.attr_lens = layout.attr_lens
        self.modules = picker([at[id(m)] for m in layout.modules])
        self.slot_modules = picker([at[id(m)] for m in layout.slot_modules])
        self.none = any(o is None for o in layout.slot_objects)
        self.slot_objects = picker([none if o is None else at[id(o)] for o in layout.slot_objects])
        self.tensors = picker([at[id(t)] for t in layout.tensors])

    def objects(self, objects: list[Any]) -> _Layout:
        """The layout of a model whose stamp's objects are ``objects`` (of the stamp this
        was made from)."""
        got = _Layout()
        got.modules = self.modules(objects)
        got.slot_modules = self.slot_modules(objects)
        got.slot_objects = self.slot_objects([*objects, None] if self.none else objects)
        got.tensors = self.tensors(objects)
        got.slot_attrs, got.slot_names = self.slot_attrs, self.slot_names
        got.whats, got.params, got.buffers = self.whats, self.params, self.buffers
        got.attr_owners, got.attr_names, got.attr_lens = self.attr_owners, self.attr_names, self.attr_lens
        return got


def _layout(net: nn.Module, walk: Optional[list[tuple[str, nn.Module]]]) -> _Layout:
    """Where ``net``'s state lies: kept on the model's memo (:mod:`~.memo`) between recordings
    when ``walk`` is a :func:`~.meta.check_model` walk, read again on any change of its stamp."""
    if walk is None:
        return _Layout.read(net.named_modules(remove_duplicate=False), True)
    if not isinstance(walk, ModelWalk):
        return _Layout.read(walk, True)
    memo = walk.memo  # (a walk made by check_model has refused lazy tensors already)
    if memo is None:
        return _Layout.read(walk, False)
    kept = memo.state
    if isinstance(kept, _KeptLayout):
        return kept.objects(walk.objects)
    layout = _Layout.read(walk, False)
    memo.state = layout.positions(walk.objects)
    return layout


class ModelState:
    """The model's parameters, buffers, gradients, flags and modes before a forward pass, and
    what :func:`model_state_kept` puts back afterwards (a ``with`` block).  :meth:`before_write`
    is called before every torch operation of the recorded pass (by the engine's function mode).

    Where the state lies (which modules, which tensors under which names) is kept per model
    between recordings while the model's stamp is unchanged (:mod:`~.memo`); everything a
    recording puts back (objects in the slots, views, values, version counters,
    ``requires_grad``, ``.grad``, training flags) is read afresh on every recording.
    """

    def __init__(self, net: nn.Module, walk: Optional[list[tuple[str, nn.Module]]] = None) -> None:
        self.grad_mode = torch.is_grad_enabled()
        layout = _layout(net, walk)
        self.modules = modules = layout.modules
        self.training = list(map(_TRAINING, modules))
        self.attrs = Attributes(modules, layout.attr_owners, layout.attr_names, layout.attr_lens)
        self.slot_modules, self.slot_attrs = layout.slot_modules, layout.slot_attrs
        self.slot_dicts: list[Any] = list(map(getattr, layout.slot_modules, layout.slot_attrs))
        self.slot_names, self.slot_objects = layout.slot_names, layout.slot_objects
        # the tracked tensors: the distinct parameters and buffers, then each existing .grad
        tensors, whats = list(layout.tensors), list(layout.whats)
        self.params: list[Tensor] = [tensors[i] for i in layout.params]
        self.requires_grad = list(map(_REQUIRES_GRAD, self.params))
        self.grads: list[Optional[Tensor]] = list(map(_GRAD, self.params))
        eager = list(layout.buffers)  # copied beforehand within the budget: buffers and grads
        if any(map(operator.is_not, self.grads, repeat(None))):
            for i, grad in zip(layout.params, self.grads, strict=True):
                if grad is not None:
                    eager.append(len(tensors))
                    tensors.append(grad)
                    whats.append(("grad", whats[i][1], whats[i][2]))
        self.tensors, self.whats = tensors, whats
        self.aliases = list(map(Tensor.detach, tensors))  # the original storages and views
        self.versions = _versions(self.aliases)
        self.saved: list[Optional[Tensor]] = [None] * len(tensors)
        self._saved_at: list[int] = []
        self._by_storage: Optional[dict[int, list[int]]] = None  # made on the first write
        self.cuda = ({t.device.index or 0 for t in tensors if t.is_cuda}
                     if any(map(_IS_CUDA, tensors)) else set())
        budget = EAGER_COPY_BYTES
        with torch.no_grad():
            for i in eager:
                t = tensors[i]
                if t.is_meta or _expanded(t) or not _storage_key(t):
                    continue
                size = t.numel() * t.element_size()
                if size <= budget:
                    budget -= size
                    self.snapshot(i)
        self.rng = random_state_kept(sorted(self.cuda))

    def snapshot(self, i: int) -> None:
        """Copy the ``i``-th tracked tensor (its original view), unless it is copied already."""
        if self.saved[i] is None:
            self.saved[i] = self.aliases[i].clone()
            self._saved_at.append(i)

    @property
    def by_storage(self) -> dict[int, list[int]]:
        """The positions of the tracked tensors by storage address (meta tensors and tensors
        without a storage left out), indexed on first use: most passes write no tensor in place."""
        got = self._by_storage
        if got is None:
            got = self._by_storage = {}
            for i, t in enumerate(self.aliases):  # the original storage, whatever forward rebound since
                key = _storage_key(t) if t.device.type != "meta" else 0
                if key:
                    got.setdefault(key, []).append(i)
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
        if stats is not None and not writes_arguments(stats, args, kwargs):
            stats = None  # batch norm in eval, an embedding without max_norm: writes nothing
        # (the storage index is made only for a call that may write: most passes have none)
        if not (positions or stats or (kwargs and "out" in kwargs)):
            return
        with _NO_TORCH_FUNCTION():  # the copies: none of the caller's function modes' business
            self._copy_written(positions, stats, args, kwargs)

    def _copy_written(self, positions: Any, stats: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> None:
        """:meth:`before_write`'s copies, for a call that may write."""
        if not self.by_storage:
            return
        written: list[Any] = [args[i] for i in positions if i < len(args)]
        if kwargs and any(i >= len(args) for i in positions):
            # a written argument given by keyword (``nn.init.uniform_`` hands itself to the mode
            # as ``f(tensor=w, ...)``): every tensor among the keywords may be the one written
            written.extend(kwargs.values())
        if stats is not None:  # training, max_norm
            written.extend(args)
            written.extend(kwargs.values())
        elif kwargs:
            written.extend(v for k, v in kwargs.items() if k == "out")
        by_storage = self.by_storage
        for value in written:  # (snapshot() clones a detached alias: no autograd involved)
            for t in (value if isinstance(value, (list, tuple)) else (value,)):
                if isinstance(t, Tensor):
                    for i in by_storage.get(_storage_key(t), ()):
                        self.snapshot(i)

    def _moved(self) -> Iterable[int]:
        """The positions of the tracked tensors that may no longer look at their original view
        (``.data = x`` inside forward): one C call each for plain tensors."""
        tensors, aliases = self.tensors, self.aliases
        try:
            if all(map(Tensor.is_set_to, tensors, aliases)) and list(map(_DTYPE, tensors)) == list(
                    map(_DTYPE, aliases)):
                return ()
            return [i for i, (t, alias) in enumerate(zip(tensors, aliases, strict=True))
                    if t.dtype != alias.dtype or not t.is_set_to(alias)]
        except Exception:  # a tensor without a plain storage: each is compared in full
            return range(len(tensors))

    def restore(self) -> list[str]:
        """Put everything back; returns what could not be put back (or was changed unseen)."""
        problems: list[str] = []
        tensors, aliases, versions = self.tensors, self.aliases, self.versions
        with torch.no_grad():
            dicts, names, objects = self.slot_dicts, self.slot_names, self.slot_objects
            try:  # one C pass over the slots
                now = list(map(dict.get, dicts, names, repeat(_MISSING)))
            except TypeError:  # a ScriptModule's dicts (no .get)
                now = [d[n] if n in d else _MISSING for d, n in zip(dicts, names, strict=True)]
            current = list(map(getattr, self.slot_modules, self.slot_attrs))
            if not all(map(operator.is_, now, objects)) or not all(map(operator.is_, current, dicts)):
                self._restore_slots(now, current)
            self.attrs.restore()
            now_versions = _versions(aliases)  # before anything below writes
            moved = set(self._moved())
            todo = moved.union(self._saved_at)
            if now_versions != versions:
                todo.update(i for i, (a, b) in enumerate(zip(now_versions, versions, strict=True)) if a != b)
            for i in sorted(todo):
                t, alias, saved = tensors[i], aliases[i], self.saved[i]
                try:
                    if i in moved and not _same_view(t, alias):
                        t.data = alias  # ``.data = other`` inside forward: back to the original
                    if saved is not None:
                        if not _same_bytes(alias, saved):
                            with torch.inference_mode(alias.is_inference()):
                                alias.copy_(saved)
                    elif (versions[i] is not None and now_versions[i] != versions[i]
                          and alias.device.type != "meta"):
                        problems.append(f"{_label(self.whats[i])} was changed in place where torchrecorder "
                                        "could not see it (with torch functions disabled, by a "
                                        "compiled graph or by autograd); it keeps its new value")
                except Exception as exc:  # reported, the rest is still put back
                    problems.append(f"{_label(self.whats[i])} could not be put back: "
                                    f"{type(exc).__name__}: {exc}")
            params = self.params
            if any(map(operator.is_not, list(map(_GRAD, params)), self.grads)):
                for param, grad in zip(params, self.grads, strict=True):
                    if param.grad is not grad:
                        try:
                            param.grad = grad
                        except Exception as exc:
                            problems.append(f"the gradient of a parameter could not be put back: {exc}")
            if list(map(_REQUIRES_GRAD, params)) != self.requires_grad:
                for param, flag in zip(params, self.requires_grad, strict=True):
                    if param.requires_grad is not flag:
                        param.requires_grad_(flag)
        modules = self.modules
        if list(map(_TRAINING, modules)) != self.training:
            for module, training in zip(modules, self.training, strict=True):
                if module.training is not training:
                    module.training = training
        torch.set_grad_enabled(self.grad_mode)
        return problems

    def _restore_slots(self, now: list[Any], current: list[Any]) -> None:
        """Put back the objects of the registries' slots that ``forward`` replaced or deleted
        (``now`` holds what the slots hold, ``current`` each slot's registry as its module has it
        now).  A registry ``forward`` rebound (``del seq[1]`` and ``seq.pop(0)`` build a new
        ``_modules``) is put back on its module; one that lost a slot gets it back in its place
        (a ``Sequential`` runs its modules in that order); what ``forward`` added stays, after."""
        groups: dict[int, tuple[Any, str, Any, Any, list[str], list[Any]]] = {}
        changed: set[int] = set()
        for module, attr, d, cur, name, obj, got in zip(self.slot_modules, self.slot_attrs, self.slot_dicts,
                                                        current, self.slot_names, self.slot_objects, now,
                                                        strict=True):
            group = groups.get(id(d))
            if group is None:
                group = groups[id(d)] = (module, attr, d, cur, [], [])
            group[4].append(name)
            group[5].append(obj)
            if got is not obj or cur is not d:
                changed.add(id(d))
        for key in changed:
            module, attr, d, cur, names, objects = groups[key]
            if type(d) is not dict:  # a ScriptModule's registry: slot by slot
                for name, obj in zip(names, objects, strict=True):
                    d[name] = obj
                continue
            kept = set(names)
            added = [(k, v) for k, v in d.items() if k not in kept]
            if cur is not d:
                added += [(k, v) for k, v in cur.items() if k not in kept]
            d.clear()
            d.update(zip(names, objects, strict=True))
            d.update(added)
            if cur is not d:
                module.__dict__[attr] = d

    def close(self) -> None:
        """Forget every tensor and copy (the recording may live much longer than the pass)."""
        self.tensors, self.aliases, self.saved, self._saved_at, self._by_storage = [], [], [], [], {}
        self.params, self.grads, self.modules, self.training = [], [], [], []
        self.attrs.close()
        self.slot_dicts, self.slot_objects, self.slot_modules = [], [], []

    # a class, not a contextlib generator: the user's exception passes through untouched
    def __enter__(self) -> ModelState:
        with _NO_TORCH_FUNCTION():
            self.rng.__enter__()
        return self

    def __exit__(self, typ: Any, exc: Optional[BaseException], tb: Any) -> None:
        try:
            with _NO_TORCH_FUNCTION():
                self.rng.__exit__(typ, exc, tb)
        finally:
            with _NO_TORCH_FUNCTION():
                problems = self.restore()
            self.close()
            for problem in problems:
                warnings.warn(f"torchrecorder: {problem}", RuntimeWarning, stacklevel=3)


def model_state_kept(net: nn.Module, walk: Optional[list[tuple[str, nn.Module]]] = None) -> ModelState:
    """A ``with`` block that puts back what a forward pass of ``net`` may change, whatever it
    raised; ``as`` gives the :class:`ModelState`.

    Put back: the objects registered as parameters, buffers and submodules, those the modules'
    plain attributes held (:mod:`~.attrs`; one ``forward`` adds stays), the values (buffers up to
    :data:`EAGER_COPY_BYTES` in all are copied beforehand; any other tensor is copied when the
    forward is about to write it, as seen through :meth:`ModelState.before_write`), what
    ``.data = x`` rebinds, ``requires_grad`` flags, ``.grad`` (the same object, and its values
    within the copy budget), training flags, grad mode and the random state
    (:func:`random_state_kept`).  A write that torchrecorder cannot see, to a tensor it did not
    copy beforehand, is reported with a :class:`RuntimeWarning` when the tensor's version
    counter shows it (a write through ``.numpy()`` does not).  ``walk``: the model's
    ``named_modules(remove_duplicate=False)`` as a list, when the caller has it already.
    """
    with _NO_TORCH_FUNCTION():
        return ModelState(net, walk)


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
