"""Captures saved to disk in the safetensors format, and read back.

:meth:`torchrecorder.capture.Capture.save` writes every kept tensor (outputs, inputs,
gradients) into one safetensors file; the structure around them (tuples, dicts, ``None``,
plain numbers), the names, the number of passes and the statistics go into the file's
metadata as JSON.  Nothing is pickled: a file from elsewhere cannot run code when it is
read.  :func:`load_capture` gives back a :class:`SavedCapture`, which reads like the capture
(``cap[name]``, ``cap.inputs``, ``cap.grads``, ``cap.stats(stat)``) and colours drawings the
same way (``make_dot(rec, activations=saved, stat=...)``).

The file is written atomically: a failure leaves any file already there untouched.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator, Mapping
from typing import Any, Optional, Union

import torch

from .._files import write_atomically

__all__ = ["FORMAT", "FORMAT_VERSION", "KeptOutputs", "SavedCapture", "load_capture", "save_capture"]

#: the ``format`` field of a saved capture's metadata, and the newest version this package reads
FORMAT = "torchrecorder-capture"
FORMAT_VERSION = 1
TABLES = ("outputs", "inputs", "grads")
_JSON_SCALARS = (bool, int, float, str)


def _require_safetensors() -> Any:
    try:
        import safetensors.torch
    except ImportError:
        raise ImportError("saving and loading captures needs the safetensors package: "
                          "pip install safetensors") from None
    return safetensors.torch


class _Packer:
    """Flattens kept values into named tensors and a JSON tree describing them."""

    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}

    def pack(self, value: Any, where: str) -> Any:
        if isinstance(value, torch.Tensor):
            if value.device.type == "meta":
                raise ValueError(f"cannot save {where}: a tensor on the meta device has no values")
            if value.layout != torch.strided:
                value = value.to_dense()
            name = f"t{len(self.tensors)}"
            self.tensors[name] = value.detach().to("cpu").contiguous().clone()
            return {"tensor": name}
        if value is None:
            return None
        if isinstance(value, _JSON_SCALARS):
            return {"value": value}
        if isinstance(value, Mapping):
            return {"dict": [[str(k), self.pack(v, f"{where}[{k!r}]")] for k, v in value.items()]}
        if isinstance(value, (tuple, list)):
            kind = "list" if isinstance(value, list) else "tuple"
            return {kind: [self.pack(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if hasattr(value, "__dataclass_fields__"):
            fields = {f: getattr(value, f) for f in value.__dataclass_fields__}
            return {"dict": [[k, self.pack(v, f"{where}.{k}")] for k, v in fields.items()]}
        raise TypeError(f"cannot save {where}: a {type(value).__name__} is neither a tensor, a "
                        "number, a string, None nor a container of them")


def _unpack(tree: Any, tensors: Mapping[str, torch.Tensor]) -> Any:
    if tree is None:
        return None
    if not isinstance(tree, dict) or len(tree) != 1:
        raise ValueError(f"malformed capture file: unexpected entry {tree!r:.60}")
    (kind, body), = tree.items()
    if kind == "tensor":
        if body not in tensors:
            raise ValueError(f"malformed capture file: tensor {body!r} is missing")
        return tensors[body]
    if kind == "value":
        return body
    if kind in ("tuple", "list") and isinstance(body, list):
        items = [_unpack(v, tensors) for v in body]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict" and isinstance(body, list):
        return {str(k): _unpack(v, tensors) for k, v in body}
    raise ValueError(f"malformed capture file: unknown entry {kind!r}")


def save_capture(cap: Any, path: Union[str, os.PathLike[str]]) -> str:
    """Write the capture ``cap`` to ``path`` (safetensors); returns the path written.

    Raises:
        TypeError: a kept value holds an object that is not a tensor, number, string,
            ``None`` or a container of them.
        ValueError: a kept tensor is on the meta device.
        ImportError: safetensors is not installed.
    """
    st = _require_safetensors()
    packer = _Packer()
    tables = {t: {name: packer.pack(v, f"{t}[{name!r}]") for name, v in getattr(cap, t).items()}
              for t in TABLES}
    stats: dict[str, dict[str, float]] = {}
    for stat in cap.available_stats():
        stats[stat] = {k: float(v) for k, v in cap.stats(stat).items()}
    meta = {"format": FORMAT, "version": FORMAT_VERSION, "names": list(cap.names),
            "ops": list(getattr(cap, "ops", [])), "passes": int(cap.passes), "tables": tables,
            "stats": stats}
    data = st.save(packer.tensors, metadata={"torchrecorder": json.dumps(meta)})
    target = os.fspath(path)
    write_atomically(target, data)
    return target


def _header(data: bytes, path: str) -> dict[str, Any]:
    """The JSON header of a safetensors file, checked before anything else is read."""
    if len(data) < 8:
        raise ValueError(f"{path!r} is not a capture file: it is {len(data)} bytes long")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"{path!r} is truncated or not a capture file: its header says "
                         f"{n} bytes, the file holds {len(data) - 8}")
    try:
        header = json.loads(data[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"{path!r} is not a capture file: its header is not JSON") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path!r} is not a capture file: its header is not a JSON object")
    return header


def load_capture(path: Union[str, os.PathLike[str]]) -> SavedCapture:
    """Read a capture written by :meth:`~torchrecorder.capture.Capture.save`.

    Raises:
        ValueError: the file is not a saved capture (another safetensors file, any other
            file), is truncated, or comes from a newer version of torchrecorder.
        OSError: the file cannot be read.
        ImportError: safetensors is not installed.
    """
    st = _require_safetensors()
    where = os.fspath(path)
    if not os.path.isfile(where):
        if os.path.exists(where):
            raise ValueError(f"{where!r} is not a regular file")
        raise FileNotFoundError(f"no capture file {where!r}")
    with open(where, "rb") as f:
        data = f.read()
    header = _header(data, where)
    raw = (header.get("__metadata__") or {}).get("torchrecorder")
    if not isinstance(raw, str):
        raise ValueError(f"{where!r} is not a torchrecorder capture (a safetensors file without "
                         "torchrecorder's metadata)")
    try:
        meta = json.loads(raw)
    except json.JSONDecodeError:
        raise ValueError(f"{where!r}: its torchrecorder metadata is not JSON") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{where!r} is not a torchrecorder capture")
    version = meta.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(f"{where!r} was written by a newer torchrecorder (capture format "
                         f"{version!r}; this one reads up to {FORMAT_VERSION}): upgrade torchrecorder")
    try:
        tensors = st.load(data)
    except Exception as exc:  # safetensors' own error type varies between its versions
        raise ValueError(f"{where!r} is truncated or corrupt: {exc}") from None
    tables = meta.get("tables")
    if not isinstance(tables, dict):
        raise ValueError(f"malformed capture file {where!r}: no tables")
    out = SavedCapture(names=[str(n) for n in meta.get("names", [])],
                       ops=[str(n) for n in meta.get("ops", [])], passes=int(meta.get("passes", 0)))
    for table in TABLES:
        entries = tables.get(table, {})
        if not isinstance(entries, dict):
            raise ValueError(f"malformed capture file {where!r}: {table} is not a mapping")
        getattr(out, table).update({str(k): _unpack(v, tensors) for k, v in entries.items()})
    stats = meta.get("stats", {})
    if isinstance(stats, dict):
        out._stats = {str(s): {str(k): float(v) for k, v in vals.items()}
                      for s, vals in stats.items() if isinstance(vals, dict)}
    return out


class KeptOutputs:
    """Reading what a capture kept, by name: ``name in cap``, ``iter(cap)``, ``len(cap)``,
    ``cap.keys()`` (shared by :class:`~torchrecorder.capture.Capture` and :class:`SavedCapture`)."""

    outputs: dict[str, Any]

    def __contains__(self, name: object) -> bool:
        return name in self.outputs

    def __iter__(self) -> Iterator[str]:
        return iter(self.outputs)

    def __len__(self) -> int:
        return len(self.outputs)

    def keys(self) -> list[str]:
        """The names of the kept calls and operations, in the order they ran."""
        return list(self.outputs)


class SavedCapture(KeptOutputs):
    """A capture read back from a file: what it kept, readable as the capture was.

    Attributes:
        names: the captured layers' dotted paths.
        ops: the ``ops`` patterns of the capture.
        passes: how many forward passes it saw.
        outputs, inputs, grads: name -> the kept value.
    """

    def __init__(self, names: Optional[list[str]] = None, ops: Optional[list[str]] = None,
                 passes: int = 0) -> None:
        self.names = names or []
        self.ops = ops or []
        self.passes = passes
        self.outputs: dict[str, Any] = {}
        self.inputs: dict[str, Any] = {}
        self.grads: dict[str, Any] = {}
        self._stats: dict[str, dict[str, float]] = {}

    def __getitem__(self, name: str) -> Any:
        """The kept output of the call or operation ``name``."""
        try:
            return self.outputs[name]
        except KeyError:
            raise KeyError(f"{name!r} is not in this capture; it holds {list(self.outputs)[:5]}") from None

    def available_stats(self) -> list[str]:
        """The statistics the file holds."""
        return list(self._stats)

    def stats(self, stat: str = "mean") -> dict[str, float]:
        """The statistic ``stat`` as the capture computed it (see ``Capture.stats``)."""
        if stat not in self._stats:
            raise ValueError(f"this capture holds no {stat!r} statistic; it holds "
                             f"{', '.join(self._stats) or 'none'}")
        return dict(self._stats[stat])

    def __repr__(self) -> str:
        return f"<SavedCapture of {len(self.outputs)} outputs, {self.passes} passes>"
