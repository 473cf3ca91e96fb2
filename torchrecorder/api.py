"""The convenience functions: :func:`record`, :func:`make_dot` and :func:`render_network`."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Optional, Union

import graphviz
import torch
from torch import nn

from .backend import SOURCE_FORMATS, available_formats, render_source
from .export import load, loads
from .graph import Graph
from .projection import FoldRepeats
from .recorder import Recorder, recording
from .recording import InputShapes, gc_paused, make_inputs, model_state_kept
from .recording.meta import check_model
from .renderer.graphviz import GraphvizRenderer, GraphvizStyler
from .renderer.mermaid import MermaidRenderer

__all__ = ["load_json", "loads_json", "make_dot", "record", "render_network"]


def _check_module(net: Any) -> nn.Module:
    if not isinstance(net, nn.Module):
        raise TypeError(f"net must be a torch.nn.Module, got {type(net).__name__}")
    return net



def record(
    net: nn.Module,
    name: str = "net",
    input_shapes: InputShapes = None,
    input_data: Any = None,
    *,
    input_kwargs: Optional[dict[str, Any]] = None,
    device: Union[str, torch.device, None] = None,
    dtype: Optional[torch.dtype] = None,
    keep_tensors: bool = False,
    unfuse_fast_paths: bool = False,
) -> Recorder:
    """Record the graph by running a single forward pass of ``net``.

    The model is left as it was: hooks are removed whatever happens, buffers
    (such as BatchNorm statistics) and training flags are put back, and the
    global random state is untouched.  The forward pass runs in the caller's
    grad mode (wrap the call in ``torch.no_grad()`` to save memory).

    The output is the one a plain call gives.  Modules that PyTorch runs as one
    fused kernel in inference (``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer``,
    ``nn.TransformerEncoder`` with a padding mask, in ``eval()`` without gradients)
    run fused and are drawn as a closed box marked ``fused: <kernel>`` around one op;
    ``torch.jit`` scripted or traced modules are drawn the same way, marked
    ``TorchScript``.

    Args:
        net: the module to record.
        name: the name shown for the network.
        input_shapes: a tuple if ``net`` has one input, a list of tuples for
            several, ``None`` when ``input_data`` is given.  Random inputs of
            these shapes are made on the model's device, in its dtype.
        input_data: a tensor, or a tuple of positional arguments; used instead
            of ``input_shapes`` (needed for integer token ids, for instance).
        input_kwargs: keyword arguments for ``net.forward``.
        device: device for inputs made from ``input_shapes``
            (default: where the model's parameters are).
        dtype: dtype for inputs made from ``input_shapes``
            (default: the model's floating dtype).
        keep_tensors: keep the tensors on the graph's tensor nodes.
        unfuse_fast_paths: run those fused modules through their unfused Python path
            instead, so that their insides are recorded; they are marked
            ``unfused``, and the output can differ from a plain call's by rounding
            (and in padded positions, which the fused kernels leave at zero).

    Returns:
        a :class:`~torchrecorder.recorder.Recorder` holding the execution graph.

    Raises:
        TypeError: ``net`` is not a module, ``input_shapes`` is malformed, or ``net``
            has uninitialized (lazy) parameters, which recording would initialize.
        ValueError: neither ``input_shapes`` nor ``input_data`` was given.
        Exception: whatever ``net`` raised, with a note naming the module that
            raised and its input shapes; ``exc.recording`` is the partial graph.

    >>> import torch
    >>> rec = record(torch.nn.Linear(3, 2), "fc", (1, 3))
    >>> [n.key for n in rec.nodes.values() if n.key]
    ['fc', 'weight', 'bias', 'input:input', 'fc/linear', 'fc:out']
    """
    _check_module(net)
    if input_shapes is None and input_data is None and not input_kwargs:
        raise ValueError("record() needs input_shapes (a tuple, or a list of tuples) or "
                         "input_data (a tensor or a tuple of them); both are None")
    check_model(net)
    args = make_inputs(net, input_shapes, input_data, device, dtype)
    kwargs = dict(input_kwargs or {})
    with gc_paused(), model_state_kept(net), recording(net, name, keep_tensors=keep_tensors,
                                                       unfuse_fast_paths=unfuse_fast_paths) as rec:
        net(*args, **kwargs)
    return rec


def make_dot(rec: Graph, render_depth: int = 256,
             styler_cls: Optional[type[GraphvizStyler]] = None, *,
             fold_repeats: FoldRepeats = "auto", **styler_args: Any) -> graphviz.Digraph:
    """Produce the Graphviz representation of a recording.

    Args:
        rec: a :class:`~torchrecorder.recorder.Recorder`.
        render_depth: depth until which modules are drawn expanded (see
            :class:`~torchrecorder.renderer.base.BaseRenderer`).
        styler_cls: styler class; ``None`` means
            :class:`~torchrecorder.renderer.GraphvizStyler`.
        fold_repeats: draw runs of identical consecutive blocks once, marked
            ``×N``: ``"auto"`` (runs of 8 or more), ``True`` (2 or more), an
            int (that many or more) or ``False`` (see
            :class:`~torchrecorder.renderer.base.BaseRenderer`).
        **styler_args: passed to the styler (Graphviz attributes for all nodes,
            ``KIND_attrs`` mappings, ``preset`` of
            :data:`~torchrecorder.renderer.graphviz.PRESETS`), except
            ``tensor_nodes=False``, which writes tensor shapes on the edges
            instead of drawing tensor nodes (the ``compact`` preset's default).

    Returns:
        a :class:`graphviz.Digraph`; ``.source`` is the DOT text, and it shows
        itself in Jupyter.
    """
    with gc_paused():  # many small objects, none of them garbage until the drawing is done
        return GraphvizRenderer(rec, render_depth, styler_cls, fold_repeats=fold_repeats,
                                **styler_args).render()


def _check_directory(directory: str) -> None:
    """Fail early, before running the model, if ``directory`` cannot be created or written."""
    path = os.path.abspath(directory)
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        raise NotADirectoryError(f"cannot write to {directory!r}: {probe!r} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write to {directory!r}: {probe!r} is not writable")


def _write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    # 0o666 less the umask, like any other file the user writes (mkstemp would make it private)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def render_network(
    net: nn.Module,
    name: str,
    input_shapes: InputShapes,
    directory: Union[str, os.PathLike[str]],
    filename: Optional[str] = None,
    fmt: str = "svg",
    input_data: Any = None,
    render_depth: int = 1,
    *,
    input_kwargs: Optional[dict[str, Any]] = None,
    device: Union[str, torch.device, None] = None,
    dtype: Optional[torch.dtype] = None,
    fold_repeats: FoldRepeats = "auto",
    unfuse_fast_paths: bool = False,
    **styler_args: Any,
) -> str:
    """Record ``net`` and write its picture to ``directory/filename.fmt``.

    Args:
        net: the module to draw.
        name: name of the network; also the file name unless ``filename`` is given.
        input_shapes: as in :func:`record`.
        directory: where to write; created if needed.
        filename: file name without extension (default: ``name``).
        fmt: any format of the installed Graphviz (``svg``, ``png``, ``pdf``,
            ...), ``dot``/``gv`` for the DOT source, ``json`` for the recorded
            graph (schema in :mod:`torchrecorder.export`; Graphviz's own JSON
            is ``json0``), or ``mmd`` for a Mermaid flowchart.
        input_data: as in :func:`record`.
        render_depth: depth until which modules are drawn expanded (default 1:
            the network's direct children as boxes).
        input_kwargs, device, dtype: as in :func:`record`.
        unfuse_fast_paths: as in :func:`record`: draw the unfused Python path of
            modules that PyTorch runs as one fused kernel (marked ``unfused``)
            instead of a closed box marked ``fused``.
        fold_repeats, **styler_args: as in :func:`make_dot`.

    Returns:
        the path of the written file.

    Raises:
        ValueError: ``fmt`` is unknown.
        GraphvizNotFoundError: an image format was asked for and Graphviz is
            not installed.
        OSError: ``directory`` cannot be created or written.

    Nothing is written unless everything succeeded.
    """
    _check_module(net)
    fmt = str(fmt).lower().lstrip(".")
    if fmt not in SOURCE_FORMATS and fmt not in available_formats():
        raise ValueError(f"unknown format {fmt!r}; available: {', '.join(sorted(available_formats()))}")
    directory = os.fspath(directory)
    _check_directory(directory)
    rec = record(net, name, input_shapes, input_data, input_kwargs=input_kwargs, device=device,
                 dtype=dtype, unfuse_fast_paths=unfuse_fast_paths)
    if fmt == "json":
        data = rec.to_json().encode()
    elif fmt == "mmd":
        data = MermaidRenderer(rec, render_depth, fold_repeats=fold_repeats,
                               tensor_nodes=bool(styler_args.get("tensor_nodes", True))).render().encode()
    else:
        dot = make_dot(rec, render_depth, fold_repeats=fold_repeats, **styler_args)
        data = dot.source.encode() if fmt in ("dot", "gv") else render_source(dot.source, fmt)
    stem = filename if filename is not None else name.replace(os.sep, "_").replace("/", "_")
    if stem.endswith("." + fmt):
        stem = stem[: -len(fmt) - 1]
    path = os.path.join(directory, f"{stem}.{fmt}")
    _write_atomically(path, data)
    return path




def load_json(path: Union[str, os.PathLike[str]]) -> Recorder:
    """Read back a recording saved with ``rec.to_json(path)`` or ``fmt="json"``.

    The result draws, prints and exports like the recording it was saved
    from; it holds metadata only (``fn`` is ``None`` on every node) and builds
    no recording engine.

    Raises:
        ValueError: the file is not a torchrecorder graph, or a field has the
            wrong type; :class:`~torchrecorder.errors.GraphError` (a
            ``ValueError``) for a graph that breaks an invariant.
    """
    return load(path, Recorder)


def loads_json(text: Union[str, bytes]) -> Recorder:
    """Read back a recording from JSON text (see :func:`load_json`)."""
    return loads(text, Recorder)
