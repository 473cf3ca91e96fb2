"""Which notebook view carries the HTML viewer: one per kernel session, not one per call.

The first view shown in a notebook cell of this kernel carries the whole viewer (about 1.4 MB);
the views after it carry only their data and borrow the viewer from it in the browser (see
:mod:`~torchrecorder.renderer.html_page`).  This module remembers which cells' outputs carry it.
A cell's output is replaced when the cell runs again, so a cell that starts running stops being
one (IPython's ``pre_run_cell`` event); the next view then carries the viewer again.  Where the
running cell cannot be told (no IPython, or a front end that sends no cell id), every view
carries its own viewer, as a standalone page would.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Optional

__all__ = ["SESSION", "ViewerSession", "current_cell", "listen_if_running"]


def _shell() -> Any:
    """The running IPython shell, or ``None``."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _header_cell(shell: Any) -> Optional[str]:
    """The cell id the front end sent with the running execute request (ipykernel), or ``None``."""
    header = getattr(shell, "parent_header", None)
    metadata = header.get("metadata") if isinstance(header, dict) else None
    cell = metadata.get("cellId") if isinstance(metadata, dict) else None
    return cell if isinstance(cell, str) and cell else None


class ViewerSession:
    """The cells of this kernel session whose latest output carries the viewer."""

    def __init__(self) -> None:
        self.holders: set[str] = set()
        self.running: Optional[str] = None  # the running cell's id, as pre_run_cell told it
        self._hooked: Any = None  # the shell whose events this session listens to
        self._lock = threading.Lock()

    def cell_started(self, cell: Optional[str]) -> None:
        """A cell starts running: its output (and any viewer in it) is about to be replaced.
        ``None`` (a cell whose id is unknown) may be any cell: no output is counted on."""
        with self._lock:
            self.running = cell
            if cell is None:
                self.holders.clear()
            else:
                self.holders.discard(cell)

    def carries_viewer(self, cell: Optional[str]) -> bool:
        """Whether a view shown now in ``cell`` must carry the viewer (and then counts on it)."""
        with self._lock:
            if cell is None:
                return True
            if self.holders:
                return False
            self.holders.add(cell)
            return True

    def listen(self, shell: Any) -> None:
        """Follow ``shell``'s ``pre_run_cell`` event (once per shell)."""
        if shell is None or self._hooked is shell:
            return
        events = getattr(shell, "events", None)
        if events is None:
            return

        def pre_run_cell(info: Any = None) -> None:
            cell = getattr(info, "cell_id", None)
            self.cell_started(cell if isinstance(cell, str) and cell else _header_cell(shell))

        events.register("pre_run_cell", pre_run_cell)
        self._hooked = shell
        self.holders.clear()  # outputs of cells that ran before: not seen, not counted on


#: this process's session
SESSION = ViewerSession()


def listen_if_running() -> None:
    """Follow the running IPython shell's cells from now on, if IPython runs (torchrecorder's
    import calls it: a cell that shows a view after the import's cell is told apart)."""
    if "IPython" in sys.modules:
        SESSION.listen(_shell())


def current_cell() -> Optional[str]:
    """The id of the notebook cell running now, or ``None`` if it cannot be told."""
    shell = _shell()
    if shell is None:
        return None
    SESSION.listen(shell)
    return _header_cell(shell) or SESSION.running
