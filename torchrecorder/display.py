"""How a graph shows itself: its layer table, JSON text, and pictures in Jupyter.

:class:`Display` is a mixin for :class:`~torchrecorder.graph.Graph` subclasses;
:class:`~torchrecorder.recorder.Recorder` is composed from the two.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Optional, Union

from ._files import write_atomically
from .export import dumps
from .graph import Graph
from .projection import FoldRepeats
from .projection.budget import VIEW_DEPTH
from .renderer.graphviz import GraphvizRenderer
from .renderer.notebook import mimebundle, svg_of

if TYPE_CHECKING:  # the page and the table are imported on first use
    from .renderer.html import HtmlPage

__all__ = ["Display"]


class Display:
    """Text and pictures of a :class:`~torchrecorder.graph.Graph` (mixed into one)."""

    def _graph(self) -> Graph:
        if not isinstance(self, Graph):
            raise TypeError(f"{type(self).__name__} mixes in Display without being a Graph")
        return self

    def summary(self, *, columns: Optional[Iterable[str]] = None, depth: Optional[int] = None,
                fold: FoldRepeats = "auto", col_names: Optional[Iterable[str]] = None) -> str:
        """A table of the recorded module calls: dotted name, type, ``depth-idx`` label, shapes,
        parameters and their share, and totals; repeated blocks fold into one group marked
        ``×N`` (options as in :func:`~torchrecorder.summary.summary_table`).

        ``col_names`` is torchinfo's name for ``columns`` (give one of them, not both)."""
        from .summary import summary_table

        if col_names is not None:
            if columns is not None:
                raise TypeError("give columns= or col_names= (torchinfo's name for it), not both")
            columns = col_names
        return summary_table(self._graph(), columns=columns, depth=depth, fold=fold)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        graph = self._graph()
        n_layers = sum(1 for _ in graph.layers())
        return (f"<{type(self).__name__} {graph.name!r}: {n_layers} module calls, "
                f"{len(graph.nodes) - 1} nodes, {len(graph.links)} edges>")

    def to_json(self, path: Union[str, os.PathLike[str], None] = None) -> str:
        """The graph as JSON (schema in :mod:`torchrecorder.export`); also written to ``path``
        if given (atomically: on any failure the file is left as it was).
        :func:`torchrecorder.load_json` rebuilds a graph that draws the same."""
        text = dumps(self._graph())
        if path is not None:
            write_atomically(path, text)  # all or nothing: a failure leaves the old file
        return text

    def show(self, render_depth: Optional[int] = VIEW_DEPTH, **options: Any) -> HtmlPage:
        """The interactive view of the graph: an :class:`~torchrecorder.renderer.html.HtmlPage` that
        shows itself inline in Jupyter (JupyterLab, Notebook, VS Code) and ``.save(path)`` writes.

        ``render_depth`` is the depth it opens at (by default 1, within the drawing budget); ``options`` as in
        :class:`~torchrecorder.renderer.html.HtmlRenderer` (``fold_repeats``, ``preset``, ...).
        """
        from .renderer.html import HtmlRenderer

        return HtmlRenderer(self._graph(), render_depth, **options).render()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None,
                          **kwargs: Any) -> dict[str, str]:
        """Jupyter display: the graph at ``render_depth=1``, at a readable size."""
        source = GraphvizRenderer(self._graph(), VIEW_DEPTH).render().source
        return mimebundle(source, repr(self), include=include, exclude=exclude)

    def _repr_svg_(self) -> Optional[str]:
        """The graph at ``render_depth=1`` as SVG text, or ``None`` without Graphviz."""
        return svg_of(GraphvizRenderer(self._graph(), VIEW_DEPTH).render().source)
