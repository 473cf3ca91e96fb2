"""A reader for the named pipes the tests write into."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path


def fifo_reader(fifo: Path, got: list[bytes]) -> threading.Thread:
    """A thread that reads the named pipe ``fifo`` to its end into ``got``.  The pipe is opened
    for reading before this returns (without blocking), so a writer that refuses a pipe nobody
    reads finds the reader there, however late the thread runs."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)

    def read() -> None:
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        deadline = time.monotonic() + 60
        with os.fdopen(fd, "rb") as fh:
            while time.monotonic() < deadline:
                chunk = fh.read(1 << 16)
                if chunk:
                    chunks.append(chunk)
                elif chunks:  # the writer wrote and closed
                    break
                else:  # no writer yet reads as an end too: wait for one
                    time.sleep(0.01)
        got.append(b"".join(chunks))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread
