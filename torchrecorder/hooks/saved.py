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

import errno
import json
import os
import struct
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any, BinaryIO, Optional, Union

import torch

from .._files import open_regular, write_atomically

__all__ = ["FORMAT", "FORMAT_VERSION", "MAX_DEPTH", "KeptOutputs", "SavedCapture", "load_capture",
           "save_capture"]

#: the ``format`` field of a saved capture's metadata, and the newest version this package reads
FORMAT = "torchrecorder-capture"
FORMAT_VERSION = 3
#: containers inside containers, at most, in a saved value
MAX_DEPTH = 100
#: the largest JSON header read (safetensors' own limit)
MAX_HEADER_BYTES = 100 * 2**20
TABLES = ("outputs", "inputs", "grads")
_JSON_SCALARS = (bool, int, float, str)
_LAYOUTS = {"strided": torch.strided, "jagged": getattr(torch, "jagged", None)}
#: torch's objects saved by their name in ``torch`` (``torch.float32`` as ``"float32"``)
_SPECIALS: dict[str, type] = {"dtype": torch.dtype, "memory_format": torch.memory_format,
                              "layout": torch.layout}


def _require_safetensors() -> Any:
    try:
        import safetensors.torch
    except ImportError:
        raise ImportError("saving and loading captures needs the safetensors package: "
                          "pip install safetensors") from None
    return safetensors.torch


@cache
def _savable(dtype: torch.dtype) -> bool:
    """Whether the installed safetensors has a type for ``dtype`` (asked, not listed)."""
    try:
        _require_safetensors().save({"x": torch.zeros(1, dtype=dtype)})
    except Exception:
        return False
    return True


def _dict_key(key: Any, where: str) -> Any:
    """``key`` as JSON keeps it, type included: a string, a number, a boolean or ``None``."""
    if isinstance(key, str):
        return str(key)
    for kind in (bool, int, float):
        if isinstance(key, kind):
            return kind(key)
    if key is None:
        return None
    raise TypeError(f"cannot save {where}: its key {key!r} is a {type(key).__name__}; the keys a "
                    "capture file holds are strings, numbers, booleans or None")


class _Packer:
    """Flattens kept values into named tensors and a JSON tree describing them.

    Format version 1 holds tensors, ``None``, plain numbers and strings, tuples, lists and
    dicts with string keys; version 2 adds dict keys of other types (``{1: a, "1": b}``
    keeps both) and nested tensors; version 3 the small objects an operation's arguments
    hold (``torch.float32``, ``torch.device``, ``torch.Size``, a memory format or layout,
    ``slice``, ``...``, complex numbers), which ``capture(ops=..., inputs=True)`` keeps
    (``softmax(x, dim=-1, dtype=torch.float32)``, ``x[..., :2]``).  A file is marked with the
    oldest version that reads it (:attr:`version`), so that an older torchrecorder refuses
    only what it would misread.
    """

    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self.version = 1

    def pack(self, value: Any, where: str, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise ValueError(f"cannot save {where}: containers nested more than {MAX_DEPTH} deep")
        if isinstance(value, torch.Tensor):
            return self._tensor(value, where)
        if value is None:
            return None
        if isinstance(value, _JSON_SCALARS):
            return {"value": value}
        if isinstance(value, Mapping):
            items = []
            for k, v in value.items():
                key = _dict_key(k, where)
                if not isinstance(key, str):
                    self.version = max(self.version, 2)
                items.append([key, self.pack(v, f"{where}[{k!r}]", depth + 1)])
            return {"dict": items}
        special = self._special(value, where, depth)
        if special is not None:
            self.version = max(self.version, 3)
            return {"torch": special}
        if isinstance(value, (tuple, list)):
            kind = "list" if isinstance(value, list) else "tuple"
            return {kind: [self.pack(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]}
        if hasattr(value, "__dataclass_fields__"):
            fields = {f: getattr(value, f) for f in value.__dataclass_fields__}
            return {"dict": [[k, self.pack(v, f"{where}.{k}", depth + 1)] for k, v in fields.items()]}
        raise TypeError(f"cannot save {where}: a {type(value).__name__} is neither a tensor, a "
                        "number, a string, None, one of torch's dtypes, devices, sizes, memory "
                        "formats or layouts, a slice, ... nor a container of them")

    def _special(self, value: Any, where: str, depth: int) -> Optional[list[Any]]:
        """``[kind, body]`` for an object of :data:`_SPECIALS`, or ``None`` for any other."""
        if isinstance(value, torch.Size):
            return ["size", list(value)]
        if isinstance(value, slice):
            return ["slice", [self.pack(v, f"{where}.{part}", depth + 1) for part, v in
                              (("start", value.start), ("stop", value.stop), ("step", value.step))]]
        if value is Ellipsis:
            return ["ellipsis", None]
        if isinstance(value, complex):
            return ["complex", [value.real, value.imag]]
        if isinstance(value, torch.device):
            return ["device", str(value)]
        for kind, cls in _SPECIALS.items():
            if isinstance(value, cls):
                return [kind, str(value).replace("torch.", "")]
        return None

    def _tensor(self, value: torch.Tensor, where: str) -> Any:
        if value.device.type == "meta":
            raise ValueError(f"cannot save {where}: a tensor on the meta device has no values")
        if value.is_quantized:
            raise ValueError(f"cannot save {where}: a quantized tensor ({value.dtype}) has no "
                             "safetensors type; keep its dequantize() instead (an edit= or a "
                             "reduction= of the capture can)")
        if value.is_nested:
            layout = "jagged" if value.layout == _LAYOUTS["jagged"] else "strided"
            parts = [self._tensor(t, f"{where} (part {i} of a nested tensor)")
                     for i, t in enumerate(value.detach().unbind())]
            self.version = max(self.version, 2)
            return {"nested": {"layout": layout, "parts": parts}}
        if value.layout != torch.strided:
            value = value.to_dense()
        if not _savable(value.dtype):
            raise ValueError(f"cannot save {where}: safetensors has no type for {value.dtype}")
        name = f"t{len(self.tensors)}"
        self.tensors[name] = value.detach().to("cpu").contiguous().clone()
        return {"tensor": name}


def _malformed(where: str, what: str) -> ValueError:
    return ValueError(f"malformed capture file {where!r}: {what}")


def _unpack(tree: Any, tensors: Mapping[str, torch.Tensor], where: str, depth: int = 0) -> Any:
    if tree is None:
        return None
    if depth > MAX_DEPTH:
        raise _malformed(where, f"values nested more than {MAX_DEPTH} deep")
    if not isinstance(tree, dict) or len(tree) != 1:
        raise _malformed(where, f"unexpected entry {tree!r:.60}")
    (kind, body), = tree.items()
    if kind == "tensor":
        if not isinstance(body, str) or body not in tensors:
            raise _malformed(where, f"tensor {body!r:.60} is missing")
        return tensors[body]
    if kind == "value":
        if not isinstance(body, _JSON_SCALARS):
            raise _malformed(where, f"the value {body!r:.60} is not a number or a string")
        return body
    if kind in ("tuple", "list") and isinstance(body, list):
        items = [_unpack(v, tensors, where, depth + 1) for v in body]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict" and isinstance(body, list):
        out = {}
        for item in body:
            if not (isinstance(item, list) and len(item) == 2
                    and (item[0] is None or isinstance(item[0], _JSON_SCALARS))):
                raise _malformed(where, f"a dict entry {item!r:.60} is not a [key, value] pair")
            out[item[0]] = _unpack(item[1], tensors, where, depth + 1)
        return out
    if kind == "nested" and isinstance(body, dict):
        return _nested(body, tensors, where, depth)
    if kind == "torch" and isinstance(body, list) and len(body) == 2:
        return _special(body[0], body[1], tensors, where, depth)
    raise _malformed(where, f"unknown entry {kind!r:.60}")


def _special(kind: Any, body: Any, tensors: Mapping[str, torch.Tensor], where: str, depth: int) -> Any:
    """The object a ``{"torch": [kind, body]}`` entry describes (see :meth:`_Packer._special`)."""
    if kind == "size" and isinstance(body, list) and all(type(n) is int for n in body):
        return torch.Size(body)
    if kind == "slice" and isinstance(body, list) and len(body) == 3:
        return slice(*(_unpack(v, tensors, where, depth + 1) for v in body))
    if kind == "ellipsis" and body is None:
        return Ellipsis
    if kind == "complex" and isinstance(body, list) and len(body) == 2 and \
            all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in body):
        return complex(*body)
    if kind == "device" and isinstance(body, str):
        try:
            return torch.device(body)
        except (RuntimeError, ValueError, TypeError):
            raise _malformed(where, f"{body!r:.60} is not a device") from None
    cls = _SPECIALS.get(kind)
    if cls is not None and isinstance(body, str):
        value = getattr(torch, body, None)
        if isinstance(value, cls):
            return value
        raise _malformed(where, f"{body!r:.60} is not a torch {kind}")
    raise _malformed(where, f"unknown torch entry {kind!r:.60}")


def _nested(body: dict[str, Any], tensors: Mapping[str, torch.Tensor], where: str, depth: int) -> Any:
    layout, parts = _LAYOUTS.get(body.get("layout")), body.get("parts")  # type: ignore[arg-type]
    if layout is None or not isinstance(parts, list) or set(body) != {"layout", "parts"}:
        raise _malformed(where, f"a nested tensor entry {body!r:.60}")
    values = [_unpack(p, tensors, where, depth + 1) for p in parts]
    if not all(isinstance(v, torch.Tensor) for v in values):
        raise _malformed(where, "a nested tensor holds something other than tensors")
    try:
        return torch.nested.nested_tensor(values, layout=layout)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise _malformed(where, f"a nested tensor cannot be rebuilt: {exc}") from None


def save_capture(cap: Any, path: Union[str, os.PathLike[str]]) -> str:
    """Write the capture ``cap`` to ``path`` (safetensors); returns the path written.

    Every value kept is saved as it is, or refused: dict keys keep their type (strings,
    numbers, booleans, ``None``), nested tensors are saved part by part and read back
    nested, sparse tensors are saved dense.

    Raises:
        TypeError: a kept value holds an object that is not a tensor, number, string,
            ``None`` or a container of them, or a dict key of another type.
        ValueError: a kept tensor is on the meta device, is quantized or has a dtype that
            safetensors has no type for; containers are nested more than
            :data:`MAX_DEPTH` deep.
        ImportError: safetensors is not installed.
    """
    st = _require_safetensors()
    packer = _Packer()
    tables = {t: {name: packer.pack(v, f"{t}[{name!r}]") for name, v in getattr(cap, t).items()}
              for t in TABLES}
    stats: dict[str, dict[str, float]] = {}
    for stat in cap.available_stats():
        stats[stat] = {k: float(v) for k, v in cap.stats(stat).items()}
    meta = {"format": FORMAT, "version": packer.version, "names": list(cap.names),
            "ops": list(getattr(cap, "ops", [])), "passes": int(cap.passes), "tables": tables,
            "stats": stats}
    data = st.save(packer.tensors, metadata={"torchrecorder": json.dumps(meta)})
    target = os.fspath(path)
    write_atomically(target, data)
    return target


def _json(data: Union[bytes, str], where: str, what: str) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"{where!r} is not a capture file: {what} is not JSON") from None
    except RecursionError:
        raise ValueError(f"{where!r} is not a capture file: {what} is nested too deep") from None


def _header(fh: BinaryIO, size: int, where: str) -> dict[str, Any]:
    """The JSON header of a safetensors file, read and checked before the rest of it."""
    prefix = fh.read(8)
    if len(prefix) < 8:
        raise ValueError(f"{where!r} is not a capture file: it is {len(prefix)} bytes long")
    (n,) = struct.unpack("<Q", prefix)
    if n > size - 8:
        raise ValueError(f"{where!r} is truncated or not a capture file: its header says "
                         f"{n:,} bytes, the file holds {size - 8:,}")
    if n > MAX_HEADER_BYTES:
        raise ValueError(f"{where!r} is not a capture file: its header would be {n:,} bytes")
    header = _json(fh.read(n), where, "its header")
    if not isinstance(header, dict):
        raise ValueError(f"{where!r} is not a capture file: its header is not a JSON object")
    return header


def _metadata(header: dict[str, Any], where: str) -> dict[str, Any]:
    """torchrecorder's metadata in a safetensors header, its format and version checked."""
    block = header.get("__metadata__")
    raw = block.get("torchrecorder") if isinstance(block, dict) else None
    if not isinstance(raw, str):
        raise ValueError(f"{where!r} is not a torchrecorder capture (a safetensors file without "
                         "torchrecorder's metadata)")
    meta = _json(raw, where, "its torchrecorder metadata")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{where!r} is not a torchrecorder capture")
    version = meta.get("version")
    if type(version) is not int or version < 1:
        raise _malformed(where, f"the format version {version!r:.40} is not a number from 1")
    if version > FORMAT_VERSION:
        raise ValueError(f"{where!r} was written by a newer torchrecorder (capture format "
                         f"{version!r}; this one reads up to {FORMAT_VERSION}): upgrade torchrecorder")
    return meta


def _strings(value: Any, field: str, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _malformed(where, f"{field} is not a list of strings")
    return list(value)


def _stats(value: Any, where: str) -> dict[str, dict[str, float]]:
    if not isinstance(value, dict):
        raise _malformed(where, "stats is not a mapping")
    out: dict[str, dict[str, float]] = {}
    for stat, values in value.items():
        if not isinstance(values, dict):
            raise _malformed(where, f"the statistic {stat!r:.40} is not a mapping")
        row = out[stat] = {}
        for name, v in values.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _malformed(where, f"the {stat!r:.40} of {name!r:.40} is not a number")
            try:
                row[name] = float(v)
            except OverflowError:
                raise _malformed(where, f"the {stat!r:.40} of {name!r:.40} is out of range") from None
    return out


def load_capture(path: Union[str, os.PathLike[str]]) -> SavedCapture:
    """Read a capture written by :meth:`~torchrecorder.capture.Capture.save`.

    Only a regular file is read, and only its header until the header says it is a
    capture this package reads: another file is refused before the rest is read.
    Containers read back as plain tuples, lists and dicts: a dataclass (``transformers``'
    ``ModelOutput``) is a dict of its fields and a named tuple a tuple, no class being imported.

    Raises:
        ValueError: the file is not a saved capture (another safetensors file, any other
            file, a directory, a pipe or a device), is truncated or malformed, or comes from
            a newer version of torchrecorder.
        OSError: the file cannot be read (``FileNotFoundError`` if there is none).
        ImportError: safetensors is not installed.
    """
    st = _require_safetensors()
    where = os.fspath(path)
    try:
        fh, status = open_regular(where, "a capture")
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "no capture file", where) from None
    except IsADirectoryError:
        raise ValueError(f"{where!r} is not a regular file but a directory") from None
    with fh:
        meta = _metadata(_header(fh, status.st_size, where), where)
        fh.seek(0)
        data = fh.read()
    try:
        tensors = st.load(data)
    except Exception as exc:  # safetensors' own error type varies between its versions
        raise ValueError(f"{where!r} is truncated or corrupt: {exc}") from None
    tables = meta.get("tables")
    if not isinstance(tables, dict):
        raise _malformed(where, "no tables")
    passes = meta.get("passes", 0)
    if type(passes) is not int or passes < 0:
        raise _malformed(where, f"passes {passes!r:.40} is not a count")
    out = SavedCapture(names=_strings(meta.get("names", []), "names", where),
                       ops=_strings(meta.get("ops", []), "ops", where), passes=passes)
    for table in TABLES:
        entries = tables.get(table, {})
        if not isinstance(entries, dict):
            raise _malformed(where, f"{table} is not a mapping")
        getattr(out, table).update({k: _unpack(v, tensors, where) for k, v in entries.items()})
    out._stats = _stats(meta.get("stats", {}), where)
    return out


class KeptOutputs:
    """Reading what a capture kept, by name, as a dict is read (baukit's ``TraceDict`` is one):
    ``name in cap``, ``iter(cap)``, ``len(cap)``, ``cap.keys()``, ``cap.values()``,
    ``cap.items()``, ``cap.get(name)`` (shared by :class:`~torchrecorder.capture.Capture` and
    :class:`SavedCapture`)."""

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

    def values(self) -> list[Any]:
        """The kept outputs, in the order of :meth:`keys`."""
        return list(self.outputs.values())

    def items(self) -> list[tuple[str, Any]]:
        """``(name, output)`` pairs, in the order of :meth:`keys`."""
        return list(self.outputs.items())

    def get(self, name: str, default: Any = None) -> Any:
        """The output kept for ``name``, or ``default`` when none was (not chosen, not called)."""
        return self.outputs.get(name, default)


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
