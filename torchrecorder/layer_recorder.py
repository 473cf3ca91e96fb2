"""A network wrapped to record chosen layers by their ``(depth, idx)`` labels, as scio's ``Recorder``.

Published as ``torchrecorder.hooks.LayerRecorder`` (and ``torchrecorder.LayerRecorder``).  It
lives here, in the top layer, because it records with :func:`torchrecorder.record` and runs
:func:`torchrecorder.capture`, which both sit above :mod:`torchrecorder.hooks`; the package's
``__init__`` sets the name on :mod:`torchrecorder.hooks`.

>>> import torch
>>> from torch.nn import Linear, ReLU, Sequential
>>> toynet = Sequential(Linear(5, 4), ReLU(), Linear(4, 3), ReLU())
>>> rnet = LayerRecorder(toynet, input_size=(1, 5))
>>> rnet.record((0, 1), (1, 3))
>>> out = rnet(torch.rand((1, 5)))
>>> list(rnet.activations), torch.equal(rnet.activations[(0, 1)], out)
([(1, 3), (0, 1)], True)

The labels are the summary's (``print(rnet)`` shows them; ``0-1`` is the whole
network), numbered by :func:`torchrecorder.summary.layer_labels` over one
recording of the network made when the wrapper is built.  Each forward pass
runs the network inside a :func:`torchrecorder.capture` of the recorded layers,
whose ``edit`` keeps each output and applies the postprocessor: the same hooks,
with the same guarantees (every hook off after the pass, also when it raised).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Optional, Union

from torch import nn

from .api import record as record_graph
from .capture import capture
from .hooks._values import add_note
from .hooks.select import nearest, split_call
from .nodes import LayerNode
from .recorder import Recorder
from .recording import keyword_inputs
from .summary import layer_labels

__all__ = ["DepthIdx", "LayerRecorder", "Postprocessor"]

#: a layer label: ``(depth, idx)``, as the summary's ``depth-idx``
DepthIdx = tuple[int, int]
#: ``output -> modified output or None`` (``None``: keep the output, changed in place or not)
Postprocessor = Callable[[Any], Optional[Any]]


#: torchinfo's keywords that only shape its table, which scio passes on: accepted, unused here
_DISPLAY_KEYWORDS = ("col_names", "col_width", "depth", "row_settings", "verbose", "cache_forward_pass")


def _label_text(label: DepthIdx) -> str:
    return f"{label[0]}-{label[1]}"


def _with_batch_dim(input_size: Any, batch_dim: int) -> Any:
    """torchinfo's ``batch_dim``: the shapes of ``input_size`` leave out the batch dimension,
    which is inserted, of size 1, at ``batch_dim`` of each (as ``Tensor.unsqueeze`` does)."""
    def one(shape: Sequence[int]) -> tuple[int, ...]:
        n = len(shape)
        if not -n - 1 <= batch_dim <= n:
            raise ValueError(f"batch_dim={batch_dim} is out of range for the input size {tuple(shape)} "
                             f"(a batch dimension goes at -{n + 1} to {n})")
        dims = list(shape)
        dims.insert(batch_dim if batch_dim >= 0 else n + 1 + batch_dim, 1)
        return tuple(dims)

    if isinstance(input_size, Sequence) and all(isinstance(d, int) for d in input_size):
        return one(input_size)
    if isinstance(input_size, Sequence):
        shapes = [one(shape) for shape in input_size]
        return tuple(shapes) if isinstance(input_size, tuple) else shapes
    raise TypeError(f"input_size is a shape (a tuple of ints) or a list of them, got {input_size!r}")


def _numbering_pass(net: nn.Module, input_size: Any, input_data: Any, mode: Optional[str],
                    record_kwargs: dict[str, Any]) -> Recorder:
    """Record ``net`` once to number its layers, in ``mode`` (torchinfo's), then put its own
    training flags back."""
    flags = [(m, m.training) for m in net.modules()]
    try:
        if mode in ("train", "eval"):
            net.train(mode == "train")
        return record_graph(net, type(net).__name__, input_size, input_data, **record_kwargs)
    finally:
        for module, training in flags:
            module.training = training


class LayerRecorder(nn.Module):
    """``net`` wrapped to record the outputs of chosen layers, named by ``(depth, idx)`` labels.

    Built like scio's ``Recorder``: the network is recorded once (with
    :func:`torchrecorder.record`, from ``input_size`` or ``input_data``) to
    number its layers; :meth:`record` chooses layers by label; each call of the
    wrapper runs ``net`` and keeps the outputs of those layers in
    :attr:`activations`.  The control flow is taken to be static: a layer the
    network did not call in a pass is an error.

    Args:
        net: the network to wrap (registered as the submodule ``_net``).
        input_size: the shape of the input (a tuple; a list of tuples for
            several inputs), as ``torchinfo.summary`` takes it.
        input_data: a tensor, or a tuple or list of positional arguments, or a
            dict of ``forward``'s keyword arguments (as ``torchinfo.summary``
            reads it), instead of ``input_size``.
        force_static_flow: scio's switch.  Both values work: the layers are numbered
            from one pass either way (nothing is traced), and each pass is recorded by
            hooks, so a pass whose control flow differs is fine as long as the
            recorded layers run in it (else ``RuntimeError``).  scio sets ``False``
            for Hugging Face models.
        dtypes, mode: torchinfo's keywords, as scio passes them on: ``dtypes`` (a
            list with a dtype for each input made from ``input_size``, or one for all of
            them, as ``torchinfo.summary`` takes it) and
            ``mode`` (``"train"``, ``"eval"`` or ``"same"``: the mode the numbering
            pass runs in; the network's own mode is put back after it).
        batch_dim: torchinfo's: ``input_size`` leaves out the batch dimension, and
            a batch dimension of size 1 is inserted at ``batch_dim`` of each shape
            (``input_size=(5,), batch_dim=0`` numbers the layers on a ``1×5`` input).
        **record_kwargs: passed to :func:`torchrecorder.record` (``input_kwargs``,
            ``device``, ``dtype``); torchinfo's display keywords (``col_names``,
            ``col_width``, ``depth``, ``row_settings``, ``verbose``,
            ``cache_forward_pass``) are accepted and ignored.

    Raises:
        TypeError: ``net`` is not a module.
        ValueError: neither ``input_size`` nor ``input_data`` is given, ``mode`` is
            not one of torchinfo's, ``dtypes`` names several different dtypes, or
            ``batch_dim`` is out of range for a shape.
    """

    def __init__(self, net: nn.Module, /, *, input_size: Any = None, input_data: Any = None,
                 force_static_flow: bool = True, dtypes: Optional[Sequence[Any]] = None,
                 mode: Optional[str] = None, batch_dim: Optional[int] = None,
                 **record_kwargs: Any) -> None:
        if not isinstance(net, nn.Module):
            raise TypeError(f"LayerRecorder wraps a torch.nn.Module, got {type(net).__name__}")
        if batch_dim is not None and input_size is not None:
            input_size = _with_batch_dim(input_size, batch_dim)
        del force_static_flow  # the labels come from one pass in both cases (see above)
        for ignored in _DISPLAY_KEYWORDS:
            record_kwargs.pop(ignored, None)
        if dtypes is not None:  # one per input of input_size, or one for all (record's dtype=)
            record_kwargs.setdefault("dtype", list(dtypes))
        if mode not in (None, "train", "eval", "same"):
            raise ValueError(f"mode must be 'train', 'eval' or 'same' (torchinfo's), got {mode!r}")
        # torchinfo's input_data, as scio passes it on: a list holds positional inputs, a dict
        # forward's keyword arguments
        if isinstance(input_data, list):
            input_data = tuple(input_data)
        elif isinstance(input_data, Mapping):
            if record_kwargs.get("input_kwargs") is not None:
                raise ValueError("input_data is a dict of keyword inputs (torchinfo's); "
                                 "give input_kwargs or such an input_data, not both")
            record_kwargs["input_kwargs"], input_data = dict(input_data), None
        keywords = keyword_inputs(record_kwargs.get("input_kwargs"))
        if input_size is None and input_data is None and not keywords:
            raise ValueError("LayerRecorder needs input_size (a tuple, or a list of tuples) or "
                             "input_data (a tensor or a tuple of them) to number the layers")
        super().__init__()
        self._net = net
        self._graph = _numbering_pass(net, input_size, input_data, mode, record_kwargs)
        labels: dict[DepthIdx, str] = {}
        calls: dict[DepthIdx, str] = {}
        paths = {p for p, _ in net.named_modules()}
        for key, text in layer_labels(self._graph).items():
            node = self._graph.nodes.get(key)
            layer = node if isinstance(node, LayerNode) else None
            path = layer.path if layer is not None else str(key)
            if path in paths:
                depth, _, idx = text.partition("-")
                label = (int(depth), int(idx))
                labels[label] = path
                # the name capture() gives this call: each call of a shared module has its label
                index = layer.call_index if layer is not None else 1
                calls[label] = path if index == 1 else f"{path}#{index}"
        self._labels = labels
        self._calls = calls
        self._recording: tuple[DepthIdx, ...] = ()
        self._activations: dict[DepthIdx, Any] = {}

    # ------------------------------------------------------------ what is recorded
    @property
    def net(self) -> nn.Module:
        """The wrapped network."""
        return self._net

    @property
    def labels(self) -> dict[DepthIdx, str]:
        """Every label -> the dotted path of the layer it names (``""``: the network)."""
        return dict(self._labels)

    def record(self, *depth_idxs: Union[DepthIdx, str]) -> None:
        """Set the recorded layers: ``record((0, 1), (1, 3))`` (``"1-3"`` works too); duplicates
        and order are ignored; no argument records nothing.

        Raises:
            ValueError: a label names no layer (the message lists the nearest labels).
        """
        chosen: set[DepthIdx] = set()
        for item in depth_idxs:
            label = self._parse(item)
            if label not in self._labels:
                known = [_label_text(k) for k in sorted(self._labels)]
                raise ValueError(f"no layer has the label {_label_text(label)}; "
                                 + nearest(_label_text(label), known))
            chosen.add(label)
        self._recording = tuple(sorted(chosen))

    @staticmethod
    def _parse(item: Any) -> DepthIdx:
        if isinstance(item, str):
            depth, sep, idx = item.partition("-")
            if sep and depth.isdigit() and idx.isdigit():
                return int(depth), int(idx)
        elif (isinstance(item, Sequence) and len(item) == 2
              and all(isinstance(v, int) and not isinstance(v, bool) for v in item)):
            return int(item[0]), int(item[1])
        raise ValueError(f"a layer label is a (depth, idx) pair of ints such as (1, 3), got {item!r}")

    @property
    def recording(self) -> tuple[DepthIdx, ...]:
        """The labels being recorded, sorted."""
        return self._recording

    @property
    def activations(self) -> MappingProxyType[DepthIdx, Any]:
        """The recorded outputs of the latest forward pass (read-only), label -> output, in the
        order the layers returned.  The outputs themselves, not copies: they keep their
        autograd history, and an in-place postprocessor changes them."""
        return MappingProxyType(self._activations)

    @property
    def recorded_modules(self) -> dict[DepthIdx, nn.Module]:
        """The recorded layers: label -> module, in the order of the layer table (the order the
        layers are called, a layer before what it contains), as scio lists them."""
        chosen = set(self._recording)
        return {label: self._net.get_submodule(path) for label, path in self._labels.items()
                if label in chosen}

    @property
    def recorded_params(self) -> dict[str, nn.Parameter]:
        """The parameters of the recorded layers (and of what they contain), named as in
        ``self.named_parameters()`` (``"_net.0.weight"``); shared ones once."""
        prefixes = ["_net" + (f".{self._labels[label]}" if self._labels[label] else "")
                    for label in self._recording]
        out = {}
        for name, param in self.named_parameters():
            module_path = name.rpartition(".")[0]
            if any(module_path == p or module_path.startswith(p + ".") for p in prefixes):
                out[name] = param
        return out

    # ------------------------------------------------------------ the pass
    def forward(self, *args: Any, activation_postproc: Union[Postprocessor, Iterable[Optional[Postprocessor]],
                                                             None] = None,
                dont_record: bool = False, **kwargs: Any) -> Any:
        """Run ``net(*args, **kwargs)``, recording the outputs of the recorded layers.

        Args:
            activation_postproc: applied to each recorded layer's output after it
                is recorded, before the network goes on: one callable for every
                recorded layer, or a list with one (or ``None``) per recorded layer
                in the order the layers are called (longer lists: the rest is
                ignored).  It gets the output itself, not a copy, and returns a
                replacement or ``None`` (keep the output, changed in place or not).
            dont_record: only postprocess; :attr:`activations` is left empty.

        :attr:`activations` is emptied when the pass starts, so a pass that raises leaves none.

        Raises:
            ValueError: the postprocessor list is shorter than :attr:`recording`.
            TypeError: a postprocessor is not callable.
            RuntimeError: a recorded layer did not run in this pass.
        """
        # a pass that raises (the network, a postprocessor, a layer that did not run) leaves no
        # activations, rather than the previous pass's under the labels (scio cleared them too)
        self._activations = {}
        posts = self._postprocessors(activation_postproc)
        by_call = {self._calls[label]: label for label in self._recording}
        seen: list[DepthIdx] = []
        kept: dict[DepthIdx, Any] = {}

        def edit(name: str, output: Any) -> Any:
            label = by_call.get(name)
            if label is None:  # another call of a recorded module
                return None
            if label not in seen:
                seen.append(label)
            if not dont_record:
                kept[label] = output
            post = posts(seen.index(label)) if posts is not None else None
            if post is None:
                return None
            try:
                return post(output)
            except Exception as exc:
                add_note(exc, f"torchrecorder: raised in activation_postproc for layer "
                              f"{label[0]}-{label[1]} ({name!r})")
                raise

        if not by_call:
            return self._net(*args, **kwargs)
        paths = list(dict.fromkeys(split_call(name)[0] for name in by_call))
        with capture(self._net, paths, record=False, edit=edit):
            out = self._net(*args, **kwargs)
        missing = [label for label in self._recording if label not in seen]
        if missing:
            raise RuntimeError("recorded layers did not run in this forward pass: "
                               + ", ".join(f"{_label_text(m)} ({self._labels[m] or 'the network'!s})"
                                           for m in missing)
                               + " (the network's control flow differs from the pass that numbered "
                               "its layers)")
        self._activations = {label: kept[label] for label in kept}
        return out

    def _postprocessors(self, posts: Any) -> Optional[Callable[[int], Optional[Postprocessor]]]:
        if posts is None:
            return None
        if callable(posts):
            return lambda i: posts
        if isinstance(posts, (str, bytes)) or not isinstance(posts, Iterable):
            raise TypeError("activation_postproc must be a callable or a list of callables, got "
                            f"{type(posts).__name__}")
        items = list(posts)
        if len(items) < len(self._recording):
            raise ValueError(f"activation_postproc lists {len(items)} postprocessors for "
                             f"{len(self._recording)} recorded layers; give one per recorded layer")
        bad = [p for p in items[: len(self._recording)] if p is not None and not callable(p)]
        if bad:
            raise TypeError(f"activation_postproc: {bad[0]!r} is not callable")
        return lambda i: items[i]

    # ------------------------------------------------------------ showing
    def __repr__(self) -> str:
        current = ", ".join(_label_text(label) for label in self._recording) or "None"
        table = self._graph.summary()
        rule = table.splitlines()[0] if table else ""
        return (f"{type(self).__name__} for the following network\n{table}\n"
                f"Currently recording: {current}\n{rule}")

    def extra_repr(self) -> str:
        return ""
