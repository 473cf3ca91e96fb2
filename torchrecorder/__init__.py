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

import sys
import types
from importlib import import_module
from typing import TYPE_CHECKING, Any


class _Package(types.ModuleType):
    """The package's module type: importing the submodule ``torchrecorder.capture`` or
    ``torchrecorder.diff`` leaves the package's ``capture`` and ``diff`` the functions of
    those names (an import sets a submodule as its package's attribute)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("capture", "diff") and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


# before any submodule is imported
sys.modules[__name__].__class__ = _Package

from . import hooks  # noqa: E402
from .api import load_json, loads_json, make_dot, record, render_network  # noqa: E402
from .cost import Cost, cost  # noqa: E402
from .errors import GraphError, GraphvizNotFoundError, RenderError  # noqa: E402
from .graph import Graph  # noqa: E402
from .nodes import BaseNode, ContextNode, LayerNode, OpNode, ParamNode, ScopeNode, TensorNode  # noqa: E402
from .recorder import Recorder, recording  # noqa: E402
from .renderer import BaseRenderer, GraphvizRenderer, GraphvizStyler  # noqa: E402
from .renderer.activations import ActivationStyler  # noqa: E402
from .renderer.notebook_viewer import listen_if_running  # noqa: E402

if TYPE_CHECKING:  # imported on first use (``_LAZY``); named here for type checkers
    from .capture import Capture, StopForward, capture
    from .diff import Diff, diff
    from .hooks.recorders import BackwardInput, BackwardOutput, ForwardInput, ForwardOutput, ForwardPre
    from .hooks.saved import SavedCapture, load_capture
    from .layer_recorder import LayerRecorder
    from .renderer.html import HtmlPage, HtmlRenderer, make_html
    from .renderer.mermaid import MermaidRenderer, make_mermaid

__version__ = "2.0.0"

#: public name -> the module that defines it, imported on first use so that ``import
#: torchrecorder`` loads (and, without a bytecode cache, compiles) only what ``record`` and
#: ``make_dot`` need; ``graph_breaks`` runs dynamo
_LAZY = {
    **dict.fromkeys(("Capture", "StopForward", "capture"), ".capture"),
    **dict.fromkeys(("Diff", "diff"), ".diff"),
    **dict.fromkeys(("compile_breaks", "CompileBreaks", "GraphBreak"), ".graph_breaks"),
    **dict.fromkeys(("BackwardInput", "BackwardOutput", "ForwardInput", "ForwardOutput", "ForwardPre"),
                    ".hooks.recorders"),
    **dict.fromkeys(("SavedCapture", "load_capture"), ".hooks.saved"),
    "LayerRecorder": ".layer_recorder",
    **dict.fromkeys(("HtmlPage", "HtmlRenderer", "make_html"), ".renderer.html"),
    **dict.fromkeys(("MermaidRenderer", "make_mermaid"), ".renderer.mermaid"),
}


def __getattr__(name: str) -> Any:
    """A public name of ``_LAZY``, imported from its module on first use and kept."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'torchrecorder' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazily imported ones included."""
    return sorted({*globals(), *_LAZY})


def _get_sg_image_scraper() -> Any:
    """The sphinx-gallery image scraper (``'image_scrapers': ('torchrecorder',)``): a
    :class:`torchrecorder.scraper.Scraper`."""
    from .scraper import get_scraper

    return get_scraper()


def _layer_recorder() -> Any:
    from .layer_recorder import LayerRecorder

    return LayerRecorder


# scio's wrapped network sits above capture and record, so hooks/__init__ cannot import it;
# it is published there from here (the package runs before any of its submodules), on first use
hooks.ABOVE["LayerRecorder"] = _layer_recorder

# in IPython, follow its cells from the import's on (a view shown in a later cell is told apart)
listen_if_running()

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
