"""torchrecorder: record the execution graph of a PyTorch module and draw it.

>>> import torch, torchrecorder
>>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
>>> rec = torchrecorder.record(net, "mlp", (1, 4))
>>> [layer.key for layer in rec.layers()]
['mlp', '0', '1', '2']
>>> "cluster_mlp" in torchrecorder.make_dot(rec, render_depth=1).source
True

What each call costs (FLOPs exactly as ``torch.utils.flop_counter`` counts them, bytes):

>>> c = torchrecorder.cost(rec)
>>> c["0"].flops, c.total.flops, c.total.param_bytes
(64, 96, 232)
"""

from typing import Any

from . import hooks
from .api import load_json, loads_json, make_dot, record, render_network
from .capture import Capture, StopForward, capture
from .cost import Cost, cost
from .diff import Diff, diff
from .errors import GraphError, GraphvizNotFoundError, RenderError
from .graph import Graph
from .hooks.recorders import BackwardInput, BackwardOutput, ForwardInput, ForwardOutput, ForwardPre
from .hooks.saved import SavedCapture, load_capture
from .layer_recorder import LayerRecorder
from .nodes import BaseNode, ContextNode, LayerNode, OpNode, ParamNode, ScopeNode, TensorNode
from .recorder import Recorder, recording
from .renderer import (
    BaseRenderer,
    GraphvizRenderer,
    GraphvizStyler,
    HtmlPage,
    HtmlRenderer,
    MermaidRenderer,
    make_html,
    make_mermaid,
)
from .renderer.activations import ActivationStyler

__version__ = "2.0.0"


def _get_sg_image_scraper() -> Any:
    """The sphinx-gallery image scraper (``'image_scrapers': ('torchrecorder',)``): a
    :class:`torchrecorder.scraper.Scraper`."""
    from .scraper import get_scraper

    return get_scraper()


_LAZY = {"compile_breaks", "CompileBreaks", "GraphBreak"}


def __getattr__(name: str) -> Any:
    """``compile_breaks``, ``CompileBreaks`` and ``GraphBreak``, from
    :mod:`torchrecorder.graph_breaks`, imported on first use (it runs dynamo)."""
    if name in _LAZY:
        from . import graph_breaks

        return getattr(graph_breaks, name)
    raise AttributeError(f"module 'torchrecorder' has no attribute {name!r}")


# scio's wrapped network sits above capture and record, so hooks/__init__ cannot import it;
# it is published there from here (the package runs before any of its submodules)
setattr(hooks, "LayerRecorder", LayerRecorder)  # noqa: B010 (mypy: a module attribute set at import)

__all__ = [
    "ActivationStyler",
    "BackwardInput",
    "BackwardOutput",
    "BaseNode",
    "BaseRenderer",
    "Capture",
    "ContextNode",
    "Cost",
    "Diff",
    "ForwardInput",
    "ForwardOutput",
    "ForwardPre",
    "Graph",
    "GraphError",
    "GraphvizNotFoundError",
    "GraphvizRenderer",
    "GraphvizStyler",
    "HtmlPage",
    "HtmlRenderer",
    "LayerNode",
    "LayerRecorder",
    "MermaidRenderer",
    "OpNode",
    "ParamNode",
    "Recorder",
    "RenderError",
    "SavedCapture",
    "ScopeNode",
    "StopForward",
    "TensorNode",
    "capture",
    "cost",
    "diff",
    "hooks",
    "load_capture",
    "load_json",
    "loads_json",
    "make_dot",
    "make_html",
    "make_mermaid",
    "record",
    "recording",
    "render_network",
]
