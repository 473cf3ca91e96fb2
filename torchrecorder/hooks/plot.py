"""The per-layer bar chart of a capture's statistic (``cap.plot("grad_norm")``), with matplotlib."""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["plot_stat"]

_LOG_STATS = ("grad_norm", "absmax")


def plot_stat(cap: Any, stat: str = "grad_norm", *, log: Optional[bool] = None, ax: Any = None,
              title: Optional[str] = None) -> Any:
    """Draw one bar per captured call or operation, in the order they ran.

    Args:
        cap: a :class:`~torchrecorder.capture.Capture` (or a saved one) holding ``stat``.
        stat: a statistic of :data:`~torchrecorder.capture.STATS` the capture gathered.
        log: a logarithmic value axis (default: for ``grad_norm`` and ``absmax`` when every
            value is positive, where vanishing and exploding values differ by orders of magnitude).
        ax: a matplotlib ``Axes`` to draw into; default a new figure.
        title: the axes' title (default: the statistic's name).

    Returns:
        the matplotlib ``Figure`` (made without pyplot, so nothing global changes).

    Raises:
        ImportError: matplotlib is not installed (``pip install matplotlib``).
        ValueError: the capture has no such statistic, or no value for it.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("cap.plot() draws with matplotlib, which is not installed: "
                          "pip install matplotlib (or torchrecorder's [plot] extra)") from None
    values = cap.stats(stat)
    if not values:
        raise ValueError(f"the capture holds no {stat!r} value: was the model run (and, for "
                         "gradient statistics, backward called) inside the with block?")
    names, heights = list(values), list(values.values())
    if log is None:
        log = stat in _LOG_STATS and min(heights) > 0
    if ax is None:
        fig = Figure(figsize=(max(4.0, 0.28 * len(names) + 1.5), 3.2), layout="constrained")
        ax = fig.subplots()
    else:
        fig = ax.figure
    ax.bar(range(len(names)), heights, color="#4a77a8")
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(stat)
    ax.set_title(title if title is not None else f"{stat} per layer")
    return fig
