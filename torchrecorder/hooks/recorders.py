"""Record what flows through chosen layers over many passes: torchfunc's recorders.

The five recorders work as in torchfunc (``torchfunc.hooks.recorders``):

* :class:`ForwardPre`: the input of a layer, before its ``forward`` runs;
* :class:`ForwardInput`: the input of a layer, seen after its ``forward`` ran;
* :class:`ForwardOutput`: the output of a layer;
* :class:`BackwardInput`: the gradient with respect to a layer's input;
* :class:`BackwardOutput`: the gradient with respect to a layer's output
  (both through tensor hooks on the layer's inputs and outputs, not
  ``register_full_backward_hook``: in-place activations after a layer train as usual).

Register one on layers with :meth:`~_Recorder.children` or
:meth:`~_Recorder.modules`, by ``types`` and ``indices`` as in torchfunc, and
also by ``names`` (dotted paths, glob patterns) or by the summary's
``labels`` (see :mod:`torchrecorder.hooks.select`).  Each registered layer is a
*subrecorder*; ``recorder[i]`` (``recorder.data[i]``) is the list of what
subrecorder ``i`` saw, one whole value per call, or the running result of
``reduction`` when one is given.

>>> import torch
>>> from torchrecorder.hooks.recorders import ForwardOutput
>>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
>>> recorder = ForwardOutput(reduction=lambda x, y: x + y).modules(model, types=torch.nn.Linear)
>>> for _ in range(3):
...     _ = model(torch.randn(5, 4))
>>> len(recorder), recorder.names, recorder[0].shape, list(recorder.iter_samples())
(2, ['0', '2'], torch.Size([5, 8]), [3, 3])
>>> _ = recorder.remove()  # every hook off; the data stays

Unlike torchfunc, which keeps row 0 of each output (element 0 of a tuple output,
the first input, the first gradient), whole values are kept: tensors are
detached and copied (``detach``, ``clone``) and may be moved (``to="cpu"``);
inputs and gradients of several tensors, and tuple outputs, are kept as tuples.
"""

from __future__ import annotations

import io
import os
import pathlib
from collections.abc import Callable, Iterator
from typing import Any, Optional, Protocol, Union

import torch
from torch import nn
from torch.autograd.graph import register_multi_grad_hook
from torch.utils.hooks import RemovableHandle

from .._files import write_atomically
from ..graph import Graph
from ._values import Device, add_note, check_device, inputs_value, keep_value, leaves, reduce_values
from .select import Names, select_modules

__all__ = ["BackwardInput", "BackwardOutput", "ForwardInput", "ForwardOutput", "ForwardPre"]


class _Removable(Protocol):
    """A hook handle: :class:`torch.utils.hooks.RemovableHandle`, or a pair of them."""

    def remove(self) -> None: ...


class _Subrecorder:
    """One registered layer: its hook handle, its position in the recorder's ``data`` and how
    many calls it kept."""

    __slots__ = ("handle", "module", "name", "pos", "samples")

    def __init__(self, name: str, module: nn.Module, pos: int) -> None:
        self.name = name
        self.module = module
        self.pos = pos
        self.samples = 0
        self.handle: Optional[_Removable] = None


class _Recorder:
    """Record {what} of the chosen layers.

    Args:
        condition: a callable of no arguments; a call is recorded only when it
            returns true (an outside switch, e.g. the label of the current
            batch).  ``None``: every call.
        reduction: a function of two values returning one, applied as in
            :func:`functools.reduce` to merge each new value into the kept one
            (part by part for tuples, lists, dicts and dataclasses, ``None``
            staying ``None``; a value whose structure changes between calls
            raises :class:`~torchrecorder.hooks.ReductionError` naming the
            layer); memory then stays flat.  ``None``: every value is appended
            to a list.
        detach: detach kept tensors from autograd (default).
        to: move kept tensors to this device (``"cpu"`` frees accelerator
            memory).
        clone: copy kept tensors, so that later in-place changes in the model
            cannot alter them (default).

    Attributes:
        data: what each subrecorder kept, in registration order: a list with
            one value per call, or the reduced value (``None`` before the
            first call).
        subrecorders: the registered layers, in registration order.
        handles: their hook handles.
        names: their dotted paths in the module they were registered on.
    """

    def __init__(self, condition: Optional[Callable[[], Any]] = None,
                 reduction: Optional[Callable[[Any, Any], Any]] = None, *, detach: bool = True,
                 to: Device = None, clone: bool = True) -> None:
        if condition is not None and not callable(condition):
            raise TypeError(f"condition must be a callable of no arguments, got {condition!r}")
        if reduction is not None and not callable(reduction):
            raise TypeError(f"reduction must be a callable of two arguments, got {reduction!r}")
        self.condition = condition
        self.reduction = reduction
        self.detach = detach
        self.to = check_device(to)
        self.clone = clone
        self._subs: list[_Subrecorder] = []
        self.data: list[Any] = []

    # ------------------------------------------------------------ registering
    def modules(self, module: nn.Module, types: Any = None, indices: Any = None, *, names: Names = None,
                labels: Names = None, rec: Optional[Graph] = None) -> _Recorder:
        """Register on ``module.modules()`` (recursively; index 0 is ``module`` itself) chosen by
        ``types``, ``indices``, ``names`` (dotted paths or globs) or ``labels`` (``"1-3"``, from
        ``rec`` when given); with none of them, on every module.  Returns ``self``.

        Raises:
            UnknownLayerError: a name or label names no module.
            IndexError: an index is out of range.
        """
        return self._register_on(module, False, types, indices, names, labels, rec)

    def children(self, network: nn.Module, types: Any = None, indices: Any = None, *,
                 names: Names = None, labels: Names = None, rec: Optional[Graph] = None) -> _Recorder:
        """Register on ``network.children()`` (direct children only), chosen as in :meth:`modules`.
        Returns ``self``."""
        return self._register_on(network, True, types, indices, names, labels, rec)

    def _register_on(self, net: nn.Module, children: bool, types: Any, indices: Any, names: Names,
                     labels: Names, rec: Optional[Graph]) -> _Recorder:
        chosen = select_modules(net, names=names, types=types, indices=indices, labels=labels, rec=rec,
                                children=children)
        added: list[_Subrecorder] = []
        try:
            for path, module in chosen:
                sub = _Subrecorder(path, module, len(self._subs) + len(added))
                sub.handle = self._hook(module, sub)
                added.append(sub)
        except BaseException:
            for sub in added:
                if sub.handle is not None:
                    sub.handle.remove()
            raise
        self._subs.extend(added)
        self.data.extend(None if self.reduction is not None else [] for _ in added)
        return self

    def _hook(self, module: nn.Module, sub: _Subrecorder) -> _Removable:
        raise NotImplementedError

    def _record(self, sub: _Subrecorder, value: Any) -> None:
        if self.condition is not None and not self.condition():
            return
        value = keep_value(value, detach=self.detach, to=self.to, clone=self.clone)
        sub.samples += 1
        data = self.data
        if self.reduction is None:
            data[sub.pos].append(value)
        elif data[sub.pos] is None:
            data[sub.pos] = value
        else:
            data[sub.pos] = reduce_values(data[sub.pos], value, self.reduction, sub.name)

    # ------------------------------------------------------------ reading
    @property
    def subrecorders(self) -> list[_Subrecorder]:
        """The registered layers, in order (each with ``name``, ``module``, ``samples``)."""
        return list(self._subs)

    @property
    def handles(self) -> list[Optional[_Removable]]:
        """The hook handles, one per subrecorder."""
        return [s.handle for s in self._subs]

    @property
    def names(self) -> list[str]:
        """Dotted paths of the registered layers (``""``: the module registered on itself)."""
        return [s.name for s in self._subs]

    def __getitem__(self, index: int) -> Any:
        return self.data[self._index(index)]

    def __setitem__(self, index: int, item: Any) -> None:
        self.data[self._index(index)] = item

    def __iter__(self) -> Iterator[Any]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self._subs)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} on {self.names}>"

    def _index(self, index: int) -> int:
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"subrecorder index must be an int, got {index!r}")
        n = len(self._subs)
        if not -n <= index < n:
            raise IndexError(f"subrecorder index {index} is out of range: {n} registered"
                             + (f" ({', '.join(repr(s) for s in self.names)})" if n else ""))
        return index % n

    def samples(self, index: int) -> int:
        """How many calls subrecorder ``index`` recorded."""
        return self._subs[self._index(index)].samples

    def iter_samples(self) -> Iterator[int]:
        """The number of recorded calls of each subrecorder, in order."""
        for s in self._subs:
            yield s.samples

    # ------------------------------------------------------------ changing
    def remove(self, index: Optional[int] = None) -> Any:
        """Remove subrecorder ``index`` (its hook comes off) and return its data.

        With no index, take every hook off and return the list of all data;
        the data stays readable (``recorder[i]``, :meth:`save`), nothing more
        is recorded.
        """
        if index is None:
            for s in self._subs:
                if s.handle is not None:
                    s.handle.remove()
                    s.handle = None
            return list(self.data)
        i = self._index(index)
        sub = self._subs.pop(i)
        if sub.handle is not None:
            sub.handle.remove()
            sub.handle = None
        for later in self._subs[i:]:
            later.pos -= 1
        return self.data.pop(i)

    def __enter__(self) -> _Recorder:
        """``with ForwardOutput().modules(net) as rec:``: every hook comes off at the end."""
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def apply(self, function: Callable[[Any], Any]) -> None:
        """Replace the data of each subrecorder by ``function(data)`` (subrecorders with a
        reduction that recorded nothing yet are left out).

        A function that returns ``None`` (one that prints, or changes the data in place,
        such as ``data.clear()`` on a list) leaves the data
        in place rather than replacing it by ``None``: torchfunc never replaced it.
        """
        for i, data in enumerate(self.data):
            if data is not None:  # None: a reduction that saw nothing yet
                self.data[i] = _applied(data, function(data))

    def apply_sample(self, function: Callable[[Any, int], Any]) -> None:
        """Replace the data of each subrecorder by ``function(data, samples)`` (a mean from a sum:
        ``lambda data, n: data / n``); as with :meth:`apply`, ``None`` keeps the data."""
        for i, (data, s) in enumerate(zip(self.data, self._subs, strict=True)):
            if data is not None:
                self.data[i] = _applied(data, function(data, s.samples))

    def save(self, path: Union[str, os.PathLike[str]], mkdir: bool = False, *args: Any,
             **kwargs: Any) -> None:
        """Save the data of subrecorder ``i`` as ``path/i.pt`` (read it with :func:`torch.load`).

        Each file is written atomically: the data is serialised in memory, then
        written to a temporary file in ``path`` and renamed over ``i.pt``, so a
        value that cannot be pickled, or a full disk, leaves no partial file and
        an existing ``i.pt`` as it was.

        The directory is created when missing; ``mkdir=True`` passes ``*args``
        and ``**kwargs`` to :meth:`pathlib.Path.mkdir` as torchfunc did
        (``exist_ok`` defaults to true).

        Raises:
            NotADirectoryError: ``path`` exists and is not a directory.
            Exception: what :func:`torch.save` raised for data it cannot pickle
                (with a note naming the subrecorder); the files before it are written.
        """
        folder = pathlib.Path(path)
        if mkdir:
            if not args:
                kwargs.setdefault("exist_ok", True)
            folder.mkdir(*args, **kwargs)
        elif not folder.exists():
            folder.mkdir(parents=True)
        if not folder.is_dir():
            raise NotADirectoryError(f"cannot save recordings into {str(folder)!r}: not a directory")
        for i, data in enumerate(self.data):
            buffer = io.BytesIO()
            try:
                torch.save(data, buffer)
            except Exception as exc:
                add_note(exc, f"torchrecorder: while saving subrecorder {i} ({self._subs[i].name!r}) "
                              f"to {str(folder / f'{i}.pt')!r}; nothing was written for it")
                raise
            write_atomically(folder / f"{i}.pt", buffer.getvalue())


def _applied(data: Any, result: Any) -> Any:
    """What :meth:`_Recorder.apply` keeps: the function's result, or the data itself when the
    function returned ``None`` (it worked by side effect)."""
    return data if result is None else result


def _doc(what: str) -> str:
    return (_Recorder.__doc__ or "").format(what=what)


class ForwardPre(_Recorder):
    __doc__ = _doc("the input of each call (before ``forward`` runs)")

    def _hook(self, module: nn.Module, sub: _Subrecorder) -> RemovableHandle:
        def hook(mod: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            self._record(sub, inputs_value(args, kwargs))

        return module.register_forward_pre_hook(hook, with_kwargs=True)


class ForwardInput(_Recorder):
    __doc__ = _doc("the input of each call, after ``forward`` ran (what the module left of it)")

    def _hook(self, module: nn.Module, sub: _Subrecorder) -> RemovableHandle:
        def hook(mod: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
            self._record(sub, inputs_value(args, kwargs))

        return module.register_forward_hook(hook, with_kwargs=True)


class ForwardOutput(_Recorder):
    __doc__ = _doc("the output of each call")

    def _hook(self, module: nn.Module, sub: _Subrecorder) -> RemovableHandle:
        def hook(mod: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            self._record(sub, output)

        return module.register_forward_hook(hook)


def _grads(grads: tuple[Optional[torch.Tensor], ...]) -> Any:
    return grads[0] if len(grads) == 1 else tuple(grads)


def _on_gradients(tensors: list[Any], record: Callable[[tuple[Optional[torch.Tensor], ...]], None]) -> None:
    """Call ``record`` once with the gradients of ``tensors`` (``None`` for those needing none or
    getting none) when a backward pass has computed them.

    Through tensor hooks (:func:`torch.autograd.graph.register_multi_grad_hook`), not
    ``register_full_backward_hook``: torch's full hooks wrap a module's outputs in a
    custom function whose outputs may not be modified in place (a following
    ``ReLU(inplace=True)`` then breaks ``backward``), and leave the module's
    full-hook flag set.  A tensor hook registered before an in-place change gets the
    gradient with respect to the value before the change, as the module produced it.
    """
    slots = [i for i, t in enumerate(tensors) if isinstance(t, torch.Tensor) and t.requires_grad]
    if not slots:
        return

    def hook(grads: Any) -> None:
        out: list[Optional[torch.Tensor]] = [None] * len(tensors)
        for i, g in zip(slots, grads, strict=True):
            out[i] = g
        record(tuple(out))

    register_multi_grad_hook([tensors[i] for i in slots], hook, mode="all")


class _BackwardHandle:
    """The handles of a backward recorder's two module hooks, removed together."""

    def __init__(self, *handles: RemovableHandle) -> None:
        self.handles = handles

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


class BackwardInput(_Recorder):
    __doc__ = _doc("the gradient with respect to the input of each call: one per positional "
                   "argument, ``None`` where one needs none (a tuple when there are several)")

    def _hook(self, module: nn.Module, sub: _Subrecorder) -> _Removable:
        # a fresh alias of each input (``view_as``) gives this module's share of the input's
        # gradient, as torch's full hooks do, while a shortcut that uses the input too keeps its own
        aliases: list[tuple[Any, ...]] = []

        def pre(mod: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
            new = tuple(a.view_as(a) if isinstance(a, torch.Tensor) and a.requires_grad else a
                        for a in args)
            aliases.append(new)
            return new

        def post(mod: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            if not aliases:
                return
            inputs = list(aliases.pop())

            def record(grads: tuple[Optional[torch.Tensor], ...]) -> None:
                if sub.handle is not None:  # not removed since
                    self._record(sub, _grads(grads))

            if any(isinstance(t, torch.Tensor) and t.requires_grad for t in inputs):
                _on_gradients(inputs, record)
            else:  # no input needs a gradient: record Nones when the output's gradient arrives
                _on_gradients(leaves(output), lambda _: record((None,) * len(inputs)))

        return _BackwardHandle(module.register_forward_pre_hook(pre),
                               module.register_forward_hook(post, always_call=True))


class BackwardOutput(_Recorder):
    __doc__ = _doc("the gradient with respect to the output of each call (one per output tensor, "
                   "``None`` where one needs none)")

    def _hook(self, module: nn.Module, sub: _Subrecorder) -> RemovableHandle:
        def post(mod: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            def record(grads: tuple[Optional[torch.Tensor], ...]) -> None:
                if sub.handle is not None:  # not removed since
                    self._record(sub, _grads(grads))

            _on_gradients(leaves(output), record)

        return module.register_forward_hook(post)
