"""Write a file all at once or not at all: every file torchrecorder writes goes through here.

:func:`write_atomically` writes to a new temporary file in the target's
directory and renames it over the target.  The temporary file is made with
``O_CREAT | O_EXCL | O_NOFOLLOW`` under a short random name (``.tr-`` and 16 hex
digits), so a link planted in the directory cannot redirect the write, a
245-character target name still fits in 255 bytes, and two threads or processes
writing one path never share a temporary file (the last rename wins, and the
file is always one whole version).  On any failure (a full disk, an error while
producing the data) the temporary file is removed and the target is left as it
was.  A device or a named pipe already at the target is written to instead, never
replaced, and a path that names one of the process's own descriptors (``/dev/stdout``,
``/dev/fd/3``) is written through that descriptor, after what ``print`` has buffered for
it: into a pipe, or appended to the file a shell's ``>`` opened.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import secrets
import stat
import sys
from collections import OrderedDict, deque
from typing import BinaryIO, Optional, Union

from ._text import utf8_safe

__all__ = ["dot_source_of", "files_written_after", "is_stdout", "is_stream", "open_regular",
           "write_atomically", "write_output"]

_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
          | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
_ATTEMPTS = 64

# (serial number, absolute path) of the latest files written, oldest first: the
# sphinx-gallery scraper embeds the pictures a gallery example wrote (bounded, so a
# long-running program keeps no growing list)
_WRITTEN: deque[tuple[int, str]] = deque(maxlen=1024)
_SERIALS = itertools.count(1)
# absolute path -> the DOT source of the picture last written there (the latest few only): the
# scraper draws a gallery thumbnail from it, with no SVG rasterizer on the machine
_SOURCES: OrderedDict[str, str] = OrderedDict()
_SOURCES_KEPT = 16


def dot_source_of(path: Union[str, os.PathLike[str]]) -> Optional[str]:
    """The DOT source of the picture torchrecorder last wrote at ``path``, if it is one of the
    latest it wrote from DOT and nothing else was written there since; else ``None``."""
    return _SOURCES.get(os.path.abspath(os.fspath(path)))


def files_written_after(serial: int) -> tuple[int, list[str]]:
    """The latest serial number and the paths written since ``serial`` (0: all remembered),
    oldest first, each once (a path written twice is listed where it was written last)."""
    recent = [(n, p) for n, p in list(_WRITTEN) if n > serial]
    last = recent[-1][0] if recent else max(serial, _WRITTEN[-1][0] if _WRITTEN else 0)
    order: dict[str, int] = {}
    for n, p in recent:
        order.pop(p, None)
        order[p] = n
    return last, list(order)


def _existing_mode(path: str) -> Optional[int]:
    """The permission bits of the file at ``path``, or ``None`` if there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None


def _special_kind(path: str) -> Optional[str]:
    """What is at ``path`` when it is neither a regular file nor absent: ``"directory"``, or
    the kind of special file (a device, a named pipe, a socket); else ``None``."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "directory"
    return next((w for test, w in _FILE_KINDS if test(mode)), "a special file")


def _write_special(target: str, data: bytes, kind: str) -> None:
    """Write ``data`` into the device or named pipe at ``target`` (``kind``: what it is, for
    the error).  A named pipe that no process reads is refused at once (opened without
    blocking) instead of waiting for one."""
    try:
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, f"{kind} that no process reads: start its reader first, "
                          "or write to a file", target) from None
        raise _naming(exc, target) from None
    try:
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as fh:
            fd = -1
            fh.write(data)
    except OSError as exc:
        raise _naming(exc, target) from None
    finally:
        if fd >= 0:
            os.close(fd)


_STANDARD = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def _own_descriptor(target: str) -> Optional[int]:
    """The number of this process's open file descriptor that ``target`` names
    (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``, ``/proc/self/fd/N``, ``/proc/<pid>/fd/N``
    of this process), or ``None``."""
    path = os.path.normpath(os.path.abspath(target))
    number = _STANDARD.get(path)
    if number is not None:
        return number
    head, _, tail = path.rpartition("/")
    if not tail.isdigit() or head not in ("/dev/fd", "/proc/self/fd", f"/proc/{os.getpid()}/fd"):
        return None
    return int(tail)


def _write_stream(target: str, data: bytes) -> None:
    """Write ``data`` into a stream: through this process's own descriptor where ``target``
    names one (after what Python has buffered for it, at its current position: a shell's
    ``> file`` behind ``/dev/stdout`` is appended to, not replaced or truncated), else into
    the device or named pipe at ``target``."""
    number = _own_descriptor(target)
    if number is None:
        kind = _special_kind(target) or "a special file"
        if kind == "directory":
            raise IsADirectoryError(errno.EISDIR, "is a directory: name a file to write", target)
        _write_special(target, data, kind)
        return
    for stream in (sys.stdout, sys.stderr):  # what print() has buffered goes first
        with contextlib.suppress(Exception):
            if stream is not None and stream.fileno() == number:
                stream.flush()
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(number, view):]
    except OSError as exc:  # a closed descriptor, a full disk, a reader gone
        raise _naming(exc, target) from None


def _naming(exc: OSError, target: str) -> OSError:
    """``exc`` as an error of its own type that names ``target`` (and keeps its errno)."""
    if exc.errno is None:
        return exc
    return type(exc)(exc.errno, exc.strerror or os.strerror(exc.errno), target)


def _open_temporary(directory: str, target: str) -> tuple[int, str]:
    """A new file in ``directory`` under an unpredictable name, opened exclusively."""
    for _ in range(_ATTEMPTS):
        tmp = os.path.join(directory, f".tr-{secrets.token_hex(8)}.tmp")
        try:
            # 0o666 less the umask, as for any file the user writes (mkstemp's 0o600 would
            # make a new picture private)
            return os.open(tmp, _FLAGS, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as exc:  # name the file the caller asked for, not the temporary one
            raise _naming(exc, target) from None
    raise FileExistsError(f"cannot create a temporary file in {directory!r} to write {target!r}")


def write_atomically(path: Union[str, os.PathLike[str]], data: Union[bytes, str], *,
                     dot_source: Optional[str] = None) -> None:
    """Write ``data`` to ``path`` atomically.

    ``dot_source``: the DOT source ``data`` was drawn from, when it is a picture (remembered
    for :func:`dot_source_of`).

    Text is written as UTF-8, a lone surrogate (which UTF-8 cannot encode) as ``\\uXXXX``
    (:func:`~torchrecorder._text.utf8_safe`).  A file already at ``path`` keeps its
    permission bits (a ``0600`` file stays private); a new file gets ``0666`` less the umask.
    If ``path`` is a symbolic link, the file it points to is replaced and the link stays.
    A device or a named pipe at ``path`` (``/dev/null``) is opened and written to, never
    replaced by a regular file.

    Raises:
        IsADirectoryError: ``path`` is a directory.
        OSError: the file cannot be written (the error names ``path``, never the temporary
            file); a regular file at ``path`` is then unchanged.
    """
    target = os.fspath(path)
    if isinstance(data, str):
        data = utf8_safe(data).encode("utf-8")
    if _own_descriptor(target) is not None:  # /dev/stdout, /dev/fd/3: the stream itself
        _write_stream(target, data)
        return
    if os.path.islink(target):
        target = os.path.realpath(target)
    kind = _special_kind(target)
    if kind == "directory":
        raise IsADirectoryError(errno.EISDIR, "is a directory: name a file to write", target)
    if kind is not None:  # a device or a named pipe is written to, never replaced by a file
        _write_special(target, data, kind)
        return
    directory = os.path.dirname(target) or "."
    mode = _existing_mode(target)
    fd, tmp = _open_temporary(directory, target)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if mode is not None:
                os.chmod(fh.fileno() if os.chmod in os.supports_fd else tmp, mode)
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):  # name the file asked for, not the temporary one
            raise _naming(exc, target) from None
        raise
    written = os.path.abspath(os.fspath(path))
    _WRITTEN.append((next(_SERIALS), written))
    _SOURCES.pop(written, None)
    if dot_source is not None:
        _SOURCES[written] = dot_source
        while len(_SOURCES) > _SOURCES_KEPT:
            _SOURCES.popitem(last=False)


def is_stream(path: Union[str, os.PathLike[str]]) -> bool:
    """Whether ``path`` names something that is written to, never replaced: a device
    (``/dev/null``), a named pipe, a socket, or any path under ``/dev/`` or ``/proc/``
    (``/dev/stdout`` is one even when the shell sends it to a regular file)."""
    target = os.path.abspath(os.fspath(path))
    if target.startswith(("/dev/", "/proc/")):
        return True
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def is_stdout(path: Union[str, os.PathLike[str]]) -> bool:
    """Whether writing ``path`` writes this process's standard output: ``-``, or a stream
    (:func:`is_stream`) that is the very file, pipe or terminal standard output is open on
    (``/dev/stdout``, ``/dev/fd/1``, a link to one), after whose data ``torchrecorder diff``
    prints nothing (the main command names these paths in ``__main__._STDOUT``)."""
    target = os.fspath(path)
    if target == "-":
        return True
    if not is_stream(target):
        return False
    try:
        here, out = os.stat(target), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no such file; a stdout without a descriptor
        return False
    return (here.st_dev, here.st_ino) == (out.st_dev, out.st_ino)


def write_output(path: Union[str, os.PathLike[str]], data: bytes, *,
                 dot_source: Optional[str] = None) -> None:
    """Write ``data`` to ``path``: a stream (:func:`is_stream`) is opened and written, anything
    else is written atomically (:func:`write_atomically`, which takes ``dot_source``), its
    folder made if needed.

    Raises:
        IsADirectoryError: ``path`` is a directory.
        OSError: the file cannot be written.
    """
    target = os.fspath(path)
    if os.path.isdir(target):
        raise IsADirectoryError(errno.EISDIR, "is a directory: name a file to write", target)
    if is_stream(target):
        _write_stream(target, data)
        return
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    write_atomically(target, data, dot_source=dot_source)


_READ_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
               | getattr(os, "O_BINARY", 0))
_FILE_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def open_regular(path: Union[str, os.PathLike[str]], what: str) -> tuple[BinaryIO, os.stat_result]:
    """Open the regular file at ``path`` for reading ``what`` (``"a graph"``), and its status.

    The file is opened without blocking and checked before anything is read, so a named
    pipe, a device (``/dev/zero``) or a socket is refused instead of waiting for a writer or
    reading forever; nothing stays open when it is refused.

    Raises:
        IsADirectoryError: ``path`` is a directory (the error names it).
        ValueError: ``path`` is another kind of file that is not a regular file.
        OSError: the file cannot be opened.
    """
    name = os.fspath(path)
    fd = os.open(name, _READ_FLAGS)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"cannot read {what} from a directory", name)
        if not stat.S_ISREG(st.st_mode):
            kind = next((w for test, w in _FILE_KINDS if test(st.st_mode)), "a special file")
            raise ValueError(f"{name!r} is not a regular file but {kind}: save {what} to a file "
                             "and load that")
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)  # fdopen owns the descriptor only once it returned
        raise
