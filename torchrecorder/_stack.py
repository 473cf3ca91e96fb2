"""Stack room where the depth is the user's.

A module call under the recorder's hooks takes one Python frame more than a plain call (torch's
``inner`` closure), and the recorder's function mode a few frames at each operation; a renderer
draws an expanded layer through its documented hooks (``render_node`` calls
``render_recursive_node`` for each open level).  While such work runs, the recursion limit is
raised by exactly the frames it adds, so that a model nested as deep as a plain call allows can
be recorded and drawn; the limit goes back when the last of them ends (unless other code set
another limit meanwhile).  Pure Python frames: no C stack is involved beyond what the plain
call itself takes."""

from __future__ import annotations

import sys
import threading

__all__ = ["OP_FRAMES", "StackRoom"]

# frames the function mode and the recorder's hooks add at the innermost call (an operation
# under ``handle_torch_function``, the mode, ``record_op``; a pre-hook reading the arguments)
OP_FRAMES = 40

_LOCK = threading.Lock()
_users = 0
_base = 0  # the limit before the first recording raised it
_set = 0  # the limit the recordings set last


class StackRoom:
    """One piece of work's share of the raised recursion limit (a refcount across threads)."""

    __slots__ = ("extra", "joined")

    def __init__(self) -> None:
        self.joined = False
        self.extra = 0

    def grow(self, depth: int) -> None:
        """Make room for ``depth`` more frames and :data:`OP_FRAMES` (never lowers the limit)."""
        global _users, _base, _set
        with _LOCK:
            if not self.joined:
                if _users == 0:
                    _base = _set = sys.getrecursionlimit()
                _users += 1
                self.joined = True
            self.extra = max(self.extra, depth + OP_FRAMES)
            want = _base + self.extra
            current = sys.getrecursionlimit()
            if current == _set and want > current:
                sys.setrecursionlimit(want)
                _set = want

    def release(self) -> None:
        """Give the share back; the last share puts the limit back as it found it."""
        global _users
        with _LOCK:
            if not self.joined:
                return
            self.joined = False
            _users -= 1
            if _users == 0 and sys.getrecursionlimit() == _set:
                sys.setrecursionlimit(_base)
