"""The convenience functions: :func:`record`, :func:`make_dot` and :func:`render_network`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional, Union

import graphviz
import torch
from torch import nn

from ._files import write_atomically
from .backend import check_format, render_source
from .cost import COST_STATS
from .errors import not_a_recording
from .export import MAX_JSON_BYTES, load, loads
from .graph import Graph
from .projection import FoldRepeats
from .projection.backward import backward_view
from .projection.budget import default_depth
from .recorder import Recorder
from .recording import (
    InputShapes,
    gc_paused,
    integer_inputs,
    is_integer_dtype,
    keyword_data,
    keyword_inputs,
    list_argument_hint,
    make_inputs,
    mixed_inputs,
    model_state_kept,
    normalise_shapes,
)
from .recording.meta import check_model
from .renderer._once import render_once
from .renderer.activations import ActivationStyler, check_cost_stat, cost_values
from .renderer.backward import NO_COLOURING, BackwardRenderer
from .renderer.base import DEFAULT_RENDER_DEPTH
from .renderer.graphviz import GraphvizRenderer, GraphvizStyler
from .renderer.paper import fit_options
from .svgfont import embed_fonts

if TYPE_CHECKING:
    from .diff import Diff

__all__ = ["load_json", "loads_json", "make_dot", "record", "render_network"]


def _check_module(net: Any) -> nn.Module:
    if not isinstance(net, nn.Module):
        got = f"the class {net.__name__}: pass an instance" if isinstance(net, type) else type(net).__name__
        raise TypeError(f"net must be a torch.nn.Module, got {got}")
    return net


def _check_name(name: Any) -> str:
    """The network's name: it becomes the root module's key, label and default file name."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str (the name shown for the network), got {name!r}")
    return name


def record(
    net: nn.Module,
    name: str = "net",
    input_shapes: InputShapes = None,
    input_data: Any = None,
    *,
    input_kwargs: Optional[dict[str, Any]] = None,
    device: Union[str, torch.device, None] = None,
    dtype: Union[torch.dtype, Sequence[torch.dtype], None] = None,
    keep_tensors: bool = False,
    unfuse_fast_paths: bool = False,
    backward: bool = False,
    source: bool = True,
    timing: bool = False,
) -> Recorder:
    """Record the graph by running a single forward pass of ``net``.

    The model is left as it was: hooks are removed whatever happens;
    parameters and buffers (BatchNorm statistics, caches, in-place updates),
    ``requires_grad``, ``.grad``, training flags, grad mode and the random
    state are put back (what exactly, and what a buffer copy costs: see
    :func:`~torchrecorder.recording.state.model_state_kept`).  The forward
    pass runs in the caller's grad mode (wrap the call in ``torch.no_grad()``
    to save memory), with the garbage collector as the caller left it.

    The output is the one a plain call gives.  Modules that PyTorch runs as one
    fused kernel in inference (``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer``,
    ``nn.TransformerEncoder`` with a padding mask, in ``eval()`` without gradients)
    run fused and are drawn as a closed box marked ``fused: <kernel>`` around one op;
    ``torch.jit`` scripted or traced modules are drawn the same way, marked
    ``TorchScript``.

    Args:
        net: the module to record.
        name: the name shown for the network.
        input_shapes: a tuple if ``net`` has one input (a list of ints is read as one
            shape too, as torchinfo reads it), a list of tuples for several, ``None``
            when ``input_data`` is given.  Random inputs of
            these shapes are made on the model's device, in its dtype.
        input_data: a tensor, or a tuple (or a list ``forward`` can only take item by item) of
            positional arguments; instead of ``input_shapes`` (for token ids, for instance).  A
            dict whose keys all name arguments of ``forward`` (``{"input_ids": ids}``, a
            tokenizer's output) is its keyword arguments, as torchinfo reads a dict.
        input_kwargs: keyword arguments for ``net.forward``.
        device: device for inputs made from ``input_shapes``
            (default: where the model's parameters are).
        dtype: dtype for inputs made from ``input_shapes``
            (default: the model's floating dtype).  An integer dtype makes
            valid token ids (below the smallest ``num_embeddings`` of the
            model's embedding modules), ``torch.bool`` masks of ``True``.
            A list (torchinfo's ``dtypes=[torch.long, torch.bool]``) gives one dtype
            per input shape.
        keep_tensors: keep the tensors on the graph's tensor nodes.
        unfuse_fast_paths: run those fused modules through their unfused Python path
            instead, so that their insides are recorded; they are marked
            ``unfused``, and the output can differ from a plain call's by rounding
            (and in padded positions, which the fused kernels leave at zero).
        backward: also keep the autograd graph the pass built (``grad_fn`` nodes, grouped
            by the module call that created each; ``rec.backward``), drawn by
            ``make_dot(rec, backward=True)``.  It needs gradients on.
        source: give each module call and each operation the line of code it comes from
            (``node.source``: file, line, function): for a call, the line that called the
            module (in the calling module's ``forward``, or your script for the root); for
            an operation, the first line outside torch and torchrecorder that ran it.
            Read off the call stack as the pass runs (no source file is read); ``False``
            leaves every ``node.source`` ``None``.
        timing: measure each module call's wall time (on the CPU; ``rec.call_times``,
            seconds by call key, and ``cost(rec)[key].time``; drawn by
            ``make_dot(rec, stat="time")``): the recorder's own work inside each call is
            measured and subtracted (``rec.timing_subtracted``, in seconds); torch handing
            each operation to the recorder (about a microsecond) is not.  Off by default:
            it adds two clock reads per operation and hook.

    Returns:
        a :class:`~torchrecorder.recorder.Recorder` holding the execution graph.

    Raises:
        TypeError: ``net`` is not a module, ``input_shapes`` is malformed, ``input_kwargs``
            is not a dict of names, or ``net`` has uninitialized (lazy) parameters, which
            recording would initialize.
        ValueError: neither ``input_shapes`` nor ``input_data`` was given.
        Exception: whatever ``net`` raised, the same object, with a note naming
            the module that raised and its input shapes; ``exc.recording`` is the
            partial graph (both where the exception takes attributes).

    Warns:
        RuntimeWarning: a tensor of the model was changed where torchrecorder
            could not see it, and not copied beforehand: it keeps its new value.

    >>> import torch
    >>> rec = record(torch.nn.Linear(3, 2), "fc", (1, 3))
    >>> [n.key for n in rec.nodes.values() if n.key]
    ['fc', 'weight', 'bias', 'input:input', 'fc/linear', 'fc:out']
    """
    _check_module(net)
    _check_name(name)
    kwargs = keyword_inputs(input_kwargs)
    if input_shapes is None and input_data is None and not kwargs:
        raise ValueError("record() needs input_shapes (a tuple, or a list of tuples) or "
                         "input_data (a tensor or a tuple of them); both are None")
    walk = check_model(net)
    input_data, kwargs = keyword_data(net, input_shapes, input_data, kwargs)
    dtype, per_input = _dtypes(dtype, input_shapes if input_data is None else None)
    if per_input:  # one dtype per input shape
        input_data = mixed_inputs(net, normalise_shapes(input_shapes), per_input, device)
    if input_data is None and input_shapes is not None and is_integer_dtype(dtype):
        input_data = integer_inputs(net, input_shapes, dtype, device)  # type: ignore[arg-type]
    args = make_inputs(net, input_shapes, input_data, device, dtype, kwargs)
    rec = Recorder(name, keep_tensors=keep_tensors, unfuse_fast_paths=unfuse_fast_paths,
                   backward=backward, source=source, timing=timing)
    rec.engine.walk = walk  # one walk of the model for the check, the state and the hooks
    with model_state_kept(net, walk) as kept, rec.engine.active(net, name, rec):
        rec.engine.write_guard = kept.before_write  # copies what the pass is about to write
        try:
            with list_argument_hint(input_data, args):
                net(*args, **kwargs)
        finally:
            rec.engine.write_guard = None
    return rec


#: formats written as pixels, at :data:`DEFAULT_RASTER_DPI` unless ``dpi=`` says otherwise
RASTER_FORMATS = frozenset(("png", "jpg", "jpeg", "jpe", "gif", "bmp", "tif", "tiff", "webp", "ico",
                            "gd", "gd2", "wbmp"))
#: pixels per inch of a PNG (or other raster) picture: twice Graphviz's 96, sharp on a
#: high-density screen and in print
DEFAULT_RASTER_DPI = 192

#: render_network's default depth: the network's direct children, within the drawing budget
RENDER_NETWORK_DEPTH = default_depth(1)


def make_dot(rec: Union[Graph, Diff], render_depth: Optional[int] = DEFAULT_RENDER_DEPTH,
             styler_cls: Optional[type[GraphvizStyler]] = None, *,
             fold_repeats: FoldRepeats = "auto", backward: bool = False, show_saved: bool = False,
             **styler_args: Any) -> graphviz.Digraph:
    """Produce the Graphviz representation of a recording.

    Args:
        rec: a :class:`~torchrecorder.recorder.Recorder`, or a
            :class:`~torchrecorder.diff.Diff` (drawn as one union graph; ``view="a"|"b"``
            the same layout showing one side, ``legend=False``, ``changes_only=False``;
            see :func:`~torchrecorder.diff.draw.make_diff_dot`).
        render_depth: depth until which modules are drawn expanded (see
            :class:`~torchrecorder.renderer.base.BaseRenderer`); ``None``: every
            depth.  By default every module opens, within the drawing budget
            (``max_nodes``); a depth given explicitly is drawn as asked.
        styler_cls: styler class; ``None`` means
            :class:`~torchrecorder.renderer.GraphvizStyler`.
        fold_repeats: draw runs of identical consecutive blocks once, marked
            ``×N``: ``"auto"`` (runs of 8 or more), ``True`` (2 or more), an
            int (that many or more) or ``False`` (see
            :class:`~torchrecorder.renderer.base.BaseRenderer`).
        backward: draw the autograd graph of the recorded pass instead (``grad_fn``
            nodes, as torchviz draws them, inside the clusters of the module calls whose
            forward created them; see :func:`~torchrecorder.projection.backward.backward_view`).
            The recording must be made with ``record(..., backward=True)``; a clear
            ``ValueError`` otherwise, and for a pass that ran without gradients.
        show_saved: with ``backward``, also draw the tensors each autograd node saved.
        **styler_args: the drawing options of
            :class:`~torchrecorder.renderer.GraphvizRenderer`:
            ``direction="LR"`` (the layout direction), ``tensor_nodes=True``
            (draw the tensors passed between layers as boxes instead of
            writing their shapes on the edges), ``expand_leaves=True`` (open
            leaf modules above ``render_depth`` into their operations),
            ``all_ops=True`` (draw data-movement operations and operations
            without a drawn input too), ``margin=0.25`` (white space around the
            figure, in inches; by default none beyond Graphviz's 4-point pad,
            in PDF and PNG too), ``max_nodes`` (the drawing budget:
            ``"auto"``, an int, or ``None`` to draw everything; see
            :class:`~torchrecorder.renderer.base.BaseRenderer`); and the styler's: ``preset`` (one of
            :data:`~torchrecorder.renderer.graphviz.PRESETS`),
            ``param_shapes``, ``edge_shapes``, ``KIND_attrs`` mappings, and
            Graphviz attributes (``rankdir``, ``dpi``, ``size`` and the other
            graph attributes set the graph's; any other sets every node's).
            With ``preset="paper"`` and ``size="W,H"`` (inches), a drawing that
            Graphviz would shrink until its smallest text prints under 6 points
            is made more compact first: identical blocks folded, tighter
            spacing, no shapes on the edges nor parameter counts, the layout
            turned (see
            :func:`~torchrecorder.renderer.paper.fit_options`); a ``UserWarning``
            says so if even that prints under 6 points.
            ``activations=`` (a :func:`~torchrecorder.capture` made with
            ``stats=True``) with ``stat=`` colours modules by a statistic of
            their activations (:class:`~torchrecorder.renderer.activations.ActivationStyler`);
            such a drawing folds nothing unless ``fold_repeats`` says so, since each
            call has its own value.  ``stat="flops"``, ``"activation_bytes"``,
            ``"param_bytes"`` or ``"saved_bytes"`` (for a recording made with
            ``backward=True``) without ``activations=`` colours each module call (and,
            for FLOPs, each drawn operation) by its cost (:func:`torchrecorder.cost`)
            on a log scale, with a legend in the statistic's unit; calls that cost
            nothing keep the default style.

    Returns:
        a :class:`graphviz.Digraph`; ``.source`` is the DOT text, and it shows
        itself in Jupyter.

    Raises:
        ValueError: a bad option, or a Graphviz number that is not finite or out of
            range (``dpi=float("inf")``, ``size="nan,3"``, ``nodesep=-1``; see
            :mod:`torchrecorder.renderer.attr_values`), or a ``stat=`` without
            ``activations=`` that the recording cannot give (not a cost, ``"time"``
            without ``timing=True``, ``"saved_bytes"`` without ``backward=True``), or
            ``stat=`` or ``activations=`` with ``backward=True``.
    """
    if not isinstance(rec, Graph):  # a diff (imported on first use): its union graph
        from .diff import Diff
        from .diff.draw import DiffStyler, make_diff_dot

        if not isinstance(rec, Diff):
            raise not_a_recording(rec, "render", "a Recorder (or Graph) or a Diff")
        if styler_cls is not None:  # view=, legend=, changes_only= in styler_args
            if not (isinstance(styler_cls, type) and issubclass(styler_cls, DiffStyler)):
                raise TypeError("a diff is drawn by torchrecorder.diff.draw.DiffStyler, which colours "
                                "by status: styler_cls must subclass it, got "
                                f"{getattr(styler_cls, '__name__', styler_cls)!r}")
            styler_args["styler_cls"] = styler_cls
        return make_diff_dot(rec, render_depth=render_depth, fold_repeats=fold_repeats or False,
                             **styler_args)
    styler_cls = _styler_class(styler_cls, styler_args)
    if "activations" in styler_args and isinstance(fold_repeats, str) and fold_repeats == "auto":
        fold_repeats = False  # coloured by each call's own value: nothing folded unless asked
    stat = styler_args.get("stat")
    if stat is not None and "activations" not in styler_args and not backward and (
            styler_cls is None or stat in (*COST_STATS, "time")):
        # coloured by the cost of each call (identical blocks cost the same: folding stays), or
        # by its time (record(..., timing=True)); a stat the recording cannot give is an error
        styler_args["activations"] = cost_values(rec, stat)
        styler_cls = styler_cls or ActivationStyler
    renderer_cls = GraphvizRenderer
    if backward:
        rec, renderer_cls = backward_view(rec, saved=show_saved), BackwardRenderer
    elif show_saved:
        raise ValueError("show_saved=True draws the tensors saved for the backward pass: "
                         "pass backward=True too")
    size = styler_args.get("size") or (styler_args.get("graph_attrs") or {}).get("size")
    if styler_args.get("preset") == "paper" and size:
        def draw(options: dict[str, Any]) -> str:
            options = dict(options)
            fold = options.pop("fold_repeats")
            return str(render_once(renderer_cls(rec, render_depth, styler_cls, fold_repeats=fold,
                                                **options)).source)

        options = fit_options(draw, {**styler_args, "fold_repeats": fold_repeats}, str(size))
        fold_repeats = options.pop("fold_repeats")
        styler_args = options
    with gc_paused():  # many small objects, none of them garbage until the drawing is done
        return render_once(renderer_cls(rec, render_depth, styler_cls, fold_repeats=fold_repeats,
                                        **styler_args))


def _styler_class(styler_cls: Optional[type[GraphvizStyler]],
                  styler_args: dict[str, Any]) -> Optional[type[GraphvizStyler]]:
    """``styler_cls``, or :class:`ActivationStyler` where none is given and ``activations=`` is."""
    if styler_cls is None and "activations" in styler_args:
        return ActivationStyler  # colour by a capture's statistics
    return styler_cls


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


#: the package's atomic writer (kept under its old name)
_write_atomically = write_atomically


def _target_stem(name: str) -> str:
    """``name`` as a file name: path separators replaced by ``_`` and leading dots left out,
    so that the file is neither outside ``directory`` nor hidden (``"../net"`` -> ``"_net"``)."""
    stem = name.replace(os.sep, "_").replace("/", "_")
    if os.altsep:
        stem = stem.replace(os.altsep, "_")
    return stem.lstrip(".")


def _target_path(directory: str, name: str, filename: Any, fmt: str) -> str:
    """``directory/stem.fmt``, checked before anything runs: the stem is ``filename`` (a name,
    or a path that stays inside ``directory``), else ``name`` with path separators replaced."""
    if filename is None:
        stem = _target_stem(name)
        what = f"name {name!r}"
    else:
        if not isinstance(filename, (str, os.PathLike)):
            raise TypeError(f"filename must be a str, got {type(filename).__name__}")
        stem = os.fspath(filename)
        if not isinstance(stem, str):
            raise TypeError(f"filename must be a str, got {type(stem).__name__}")
        what = f"filename {stem!r}"
    if stem.endswith("." + fmt):
        stem = stem[: -len(fmt) - 1]
    if not stem or stem.endswith(("/", os.sep)) or os.path.basename(stem) in ("", ".", ".."):
        raise ValueError(f"{what} gives no file name (it would write the hidden file "
                         f"'.{fmt}' or a directory): pass a non-empty name or filename=")
    if "\0" in stem:
        raise ValueError(f"{what} contains a NUL character, which no file name can hold")
    try:
        os.fsencode(stem)
    except UnicodeEncodeError as exc:  # a lone surrogate: no file name can hold it either
        raise ValueError(f"{what} contains {exc.object[exc.start]!r}, which no file name can hold "
                         "(the file system encoding cannot write it): pass filename=") from None
    if os.path.isabs(stem):
        raise ValueError(f"filename {stem!r} is an absolute path: pass its directory as "
                         "directory= and the file name as filename=")
    root = os.path.abspath(directory)
    path = os.path.join(directory, f"{stem}.{fmt}")
    if os.path.commonpath([root, os.path.abspath(path)]) != root:
        raise ValueError(f"filename {stem!r} leads outside directory {directory!r}: pass the "
                         "directory as directory= and a plain file name as filename=")
    base = os.path.basename(path)
    if len(os.fsencode(base)) > 255:
        raise ValueError(f"file name {base[:40]!r}... is {len(os.fsencode(base))} bytes long; "
                         "file systems allow 255: pass a shorter filename=")
    return path


def _dtypes(dtype: Any, input_shapes: Any) -> tuple[Optional[torch.dtype], list[torch.dtype]]:
    """``dtype`` checked: one dtype for every input, or (a list of several) one per shape."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype, []
    listed = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype]
    wrong = [d for d in listed if not isinstance(d, torch.dtype)]
    if wrong or not listed:
        raise TypeError("dtype must be a torch.dtype, or a list of them with one per input shape "
                        f"(torchinfo's dtypes=), got {dtype!r}")
    if len(listed) == 1 or input_shapes is None:  # one dtype, or inputs given as data
        return listed[0], []
    shapes = normalise_shapes(input_shapes)
    if len(shapes) != len(listed):
        raise ValueError(f"dtype lists {len(listed)} dtypes for {len(shapes)} input shapes; "
                         "give one per shape, or one dtype for all")
    return (listed[0], []) if len(set(listed)) == 1 else (None, listed)


def render_network(
    net: nn.Module,
    name: str,
    input_shapes: InputShapes = None,
    directory: Union[str, os.PathLike[str]] = ".",
    filename: Optional[str] = None,
    fmt: str = "svg",
    input_data: Any = None,
    render_depth: Optional[int] = RENDER_NETWORK_DEPTH,
    *,
    input_kwargs: Optional[dict[str, Any]] = None,
    device: Union[str, torch.device, None] = None,
    dtype: Union[torch.dtype, Sequence[torch.dtype], None] = None,
    fold_repeats: FoldRepeats = "auto",
    unfuse_fast_paths: bool = False,
    embed_font: Optional[bool] = None,
    backward: bool = False,
    **styler_args: Any,
) -> str:
    """Record ``net`` and write its picture to ``directory/filename.fmt``.

    Args:
        net: the module to draw.
        name: name of the network (a str); with the depth, also the file name
            unless ``filename`` is given, with path separators replaced by ``_`` and
            leading dots left out (``"../net"`` writes ``_net-1.svg``).
        input_shapes: as in :func:`record`; leave it out (or pass ``None``)
            when ``input_data`` is given: ``render_network(net, "net",
            input_data=x)``.
        directory: where to write (default: the current directory); created if needed.
        filename: file name without extension (default: ``{name}-{render_depth}``,
            as torchrecorder 1.0.3 named it, ``{name}-all`` for ``render_depth=None``,
            so that one folder holds a network drawn at several depths; ``{name}``
            for ``fmt="json"``, the whole graph whatever the depth); it may name
            a subdirectory (``"plots/net"``) but must stay inside ``directory``.
        fmt: any format of the installed Graphviz (``svg``, ``png``, ``pdf``,
            ...), ``dot``/``gv`` for the DOT source, ``json`` for the recorded
            graph (schema in :mod:`torchrecorder.export`; Graphviz's own JSON
            is ``json0``), ``mmd`` for a Mermaid flowchart, or ``html`` for one
            self-contained interactive page (see :func:`torchrecorder.make_html`).
        input_data: as in :func:`record`.
        render_depth: depth until which modules are drawn expanded (default 1:
            the network's direct children as boxes); ``None`` draws every depth.
        input_kwargs, device, dtype: as in :func:`record`.
        unfuse_fast_paths: as in :func:`record`: draw the unfused Python path of
            modules that PyTorch runs as one fused kernel (marked ``unfused``)
            instead of a closed box marked ``fused``.
        fold_repeats: as in :func:`make_dot`.
        embed_font: an SVG carries the glyphs it draws, as ``@font-face`` rules with the
            fonts Graphviz laid it out with (see :func:`torchrecorder.svgfont.embed_fonts`),
            so that it looks the same on every machine; ``None`` (the default): only with
            ``preset="paper"``.  Other formats are unchanged (PDF embeds its fonts anyway).
        backward: record the autograd graph too and draw it instead of the forward graph,
            as ``make_dot(record(..., backward=True), backward=True)`` does (``show_saved=True``
            adds the saved tensors); ``fmt="json"`` keeps it with the forward graph.
        **styler_args: as in :func:`make_dot`, ``styler_cls=`` and ``stat=`` included (for
            ``fmt="html"`` as in :func:`~torchrecorder.renderer.html.make_html`).  Raster formats
            (``png``, ``jpg``, ...) are drawn at 192 dpi unless ``dpi=`` is given.

    Returns:
        the path of the written file.

    Raises:
        TypeError: ``net`` is not a module, ``name`` not a str, or a keyword
            is neither an option nor a Graphviz node attribute.
        ValueError: ``fmt`` is unknown or refused (``vrml``, which writes side
            files); the file name is empty (``name=""``: no hidden ``.svg``),
            leads outside ``directory`` (``"../x"``, an absolute path) or is
            longer than 255 bytes; ``preset``, ``render_depth`` or
            ``fold_repeats`` is invalid; a Graphviz number (``dpi``, ``size``,
            ``ranksep``, ``fontsize``, ...) is not finite or out of range.
        GraphvizNotFoundError: an image format was asked for and Graphviz is
            not installed.
        OSError: ``directory`` cannot be created or written.

    All of these are raised before the model runs.  The file is written
    atomically: nothing is written unless everything succeeded, and a file
    already there is replaced whole, keeping its permissions.
    """
    _check_module(net)
    _check_name(name)
    fmt = check_format(fmt)
    directory = os.fspath(directory)
    if filename is None and fmt != "json" and _target_stem(name) and (render_depth is None or (
            isinstance(render_depth, int) and not isinstance(render_depth, bool))):
        filename = _target_stem(name) + f"-{'all' if render_depth is None else int(render_depth)}"
    path = _target_path(directory, name, filename, fmt)
    if styler_args.get("show_saved") and not backward:
        raise ValueError("show_saved=True draws the tensors saved for the backward pass: "
                         "pass backward=True too")
    if backward and fmt == "mmd":
        raise ValueError("the backward graph is drawn by Graphviz or as an HTML page, not as Mermaid")
    if backward and fmt != "json" and ("stat" in styler_args or "activations" in styler_args):
        raise ValueError(NO_COLOURING)
    drawing = {k: v for k, v in styler_args.items() if k != "show_saved"}
    _check_drawing(name, render_depth, fold_repeats, drawing)
    _check_directory(os.path.dirname(path))
    rec = record(net, name, input_shapes, input_data, input_kwargs=input_kwargs, device=device,
                 dtype=dtype, unfuse_fast_paths=unfuse_fast_paths, backward=backward)
    if backward and fmt != "json":
        styler_args = {**styler_args, "backward": True}
    data, source = _picture(rec, fmt, render_depth, fold_repeats, styler_args, embed_font)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_atomically(path, data, dot_source=source)
    return path


def _check_drawing(name: str, render_depth: Optional[int], fold_repeats: FoldRepeats,
                   styler_args: dict[str, Any]) -> None:
    """Check every drawing option on an empty graph, before the model runs."""
    stat = styler_args.get("stat")
    if stat is not None and "activations" not in styler_args:  # coloured by a cost: checked here
        check_cost_stat(stat)
        if stat in ("time", "saved_bytes"):
            raise ValueError(f"stat={stat!r} colours the forward drawing from a recording made with "
                             f"record(..., {'timing=True' if stat == 'time' else 'backward=True'}): record "
                             "the model so and draw it with make_dot (render_network's backward=True "
                             "draws the backward graph instead)")
        styler_args = {**styler_args, "activations": {}}
    options = {k: v for k, v in styler_args.items() if k != "styler_cls"}  # (as make_dot takes it)
    GraphvizRenderer(Graph(name), render_depth, _styler_class(styler_args.get("styler_cls"), options),
                     fold_repeats=fold_repeats, **options)


def _picture(rec: Recorder, fmt: str, render_depth: Optional[int], fold_repeats: FoldRepeats,
             styler_args: dict[str, Any], embed_font: Optional[bool] = None) -> tuple[bytes, Optional[str]]:
    """The bytes of the ``fmt`` file of ``rec`` (``fmt`` checked by :func:`check_format`), and
    the DOT source they were drawn from (``None`` for JSON, HTML and Mermaid); an SVG with its
    fonts embedded if ``embed_font`` (``None``: with ``preset="paper"``)."""
    if fmt == "json":
        return rec.to_json().encode(), None
    if fmt == "html":  # (make_html: a stat= of a cost coloured as make_dot colours it)
        from .renderer.html import make_html

        return make_html(rec, render_depth, fold_repeats=fold_repeats, **styler_args).text.encode(), None
    if fmt == "mmd":
        from .renderer.mermaid import MermaidRenderer

        return MermaidRenderer(rec, render_depth, fold_repeats=fold_repeats,
                               tensor_nodes=bool(styler_args.get("tensor_nodes", True)),
                               max_nodes=styler_args.get("max_nodes", "auto")).render().encode(), None
    if fmt in RASTER_FORMATS and "dpi" not in styler_args \
            and "dpi" not in (styler_args.get("graph_attrs") or {}):
        styler_args = {**styler_args, "dpi": DEFAULT_RASTER_DPI}
    dot = make_dot(rec, render_depth, fold_repeats=fold_repeats, **styler_args)
    source = dot.source
    if fmt in ("dot", "gv"):
        return source.encode(), source
    data = render_source(source, fmt)
    if embed_font is None:
        embed_font = styler_args.get("preset") == "paper"
    if embed_font and fmt == "svg":
        data = embed_fonts(data)
    return data, source


def load_json(path: Union[str, os.PathLike[str]], *, max_bytes: Optional[int] = MAX_JSON_BYTES) -> Recorder:
    """Read back a recording saved with ``rec.to_json(path)`` or ``fmt="json"``.

    ``path`` is a file name, or the JSON text itself (what ``rec.to_json()``
    returns: a string starting with ``{``, after white space or a byte-order
    mark), so ``load_json(rec.to_json())`` works as well as :func:`loads_json`.

    Only a regular file is read (a named pipe or a device such as ``/dev/zero``
    is refused before anything is read), and at most ``max_bytes`` of it:
    :data:`~torchrecorder.export.MAX_JSON_BYTES` (256 MiB) unless told
    otherwise, ``None`` for no limit.

    The result draws, prints and exports like the recording it was saved
    from; it holds metadata only (``fn`` is ``None`` on every node) and builds
    no recording engine.

    Raises:
        ValueError: the file is not a torchrecorder graph, is not a regular file
            or is larger than ``max_bytes``; a field has the wrong type or a number
            out of range (beyond 64-bit integers); an object names a key twice;
            :class:`~torchrecorder.errors.GraphError` (a ``ValueError``) for a
            graph that breaks an invariant.
        OSError: the file cannot be opened (``IsADirectoryError`` for a directory).
    """
    if isinstance(path, str) and path.lstrip("\ufeff \t\r\n").startswith("{") and not os.path.exists(path):
        return loads(path, Recorder)  # the JSON text itself
    return load(path, Recorder, max_bytes=max_bytes)


def loads_json(text: Union[str, bytes]) -> Recorder:
    """Read back a recording from JSON text (see :func:`load_json`)."""
    return loads(text, Recorder)
