"""Inputs of integer and boolean dtypes made from shapes: valid token ids and masks.

Random normal numbers exist only for floating dtypes, so ``record(net, "n", (1, 16),
dtype=torch.long)`` needs another rule.  Integer inputs of a language model are
token ids: every id must be a row of every embedding table it may reach, so ids are
drawn below the smallest ``num_embeddings`` of the model's embedding modules (a
model without one gets ids below 2).  Boolean inputs are masks of ``True``.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import nn

from .inputs import make_inputs, normalise_shapes

__all__ = ["DEFAULT_ID_LIMIT", "id_limit", "integer_inputs", "is_integer_dtype", "mixed_inputs"]

#: ids drawn for a model with no embedding module: 0 and 1 (valid class indices, masks)
DEFAULT_ID_LIMIT = 2


def is_integer_dtype(dtype: Optional[torch.dtype]) -> bool:
    """Whether random inputs of ``dtype`` cannot be normal numbers (integer or bool dtypes).

    >>> is_integer_dtype(torch.long), is_integer_dtype(torch.bool), is_integer_dtype(torch.float16)
    (True, True, False)
    """
    return dtype is not None and not dtype.is_floating_point and not dtype.is_complex


def id_limit(net: nn.Module) -> int:
    """One past the largest id every embedding table of ``net`` accepts.

    >>> id_limit(nn.Sequential(nn.Embedding(100, 4), nn.Embedding(7, 4)))
    7
    >>> id_limit(nn.Linear(2, 2))
    2
    """
    sizes = [m.num_embeddings for m in net.modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag))]
    return max(1, min(sizes)) if sizes else DEFAULT_ID_LIMIT


def integer_inputs(net: nn.Module, input_shapes: Any, dtype: torch.dtype,
                   device: Any = None) -> tuple[torch.Tensor, ...]:
    """Tensors of ``input_shapes`` (a tuple, or a list of tuples) in the integer or bool
    ``dtype`` on ``device`` (default: where the model's parameters are): token ids below
    :func:`id_limit` (from a private generator, so the global random state is untouched),
    masks of ``True``; empty tensors on ``meta``.

    >>> net = nn.Embedding(5, 3)
    >>> ids, = integer_inputs(net, (2, 8), torch.long)
    >>> ids.shape, ids.dtype, bool(ids.min() >= 0 and ids.max() < 5)
    (torch.Size([2, 8]), torch.int64, True)
    """
    if not is_integer_dtype(dtype):
        raise TypeError(f"integer_inputs makes integer or bool tensors, not {dtype}")
    shapes = normalise_shapes(input_shapes)
    if device is None:
        device = next((t.device for t in (*net.parameters(), *net.buffers())), "cpu")
    dev = torch.device(device)
    if dev.type == "meta":
        return tuple(torch.empty(s, dtype=dtype, device=dev) for s in shapes)
    if dtype == torch.bool:
        return tuple(torch.ones(s, dtype=dtype).to(dev) for s in shapes)
    high = min(id_limit(net), torch.iinfo(dtype).max + 1)
    gen = torch.Generator().manual_seed(0)
    return tuple(torch.randint(0, high, s, generator=gen, dtype=dtype).to(dev) for s in shapes)


def mixed_inputs(net: nn.Module, shapes: list[tuple[int, ...]], dtypes: list[torch.dtype],
                 device: Any) -> tuple[torch.Tensor, ...]:
    """The inputs of ``shapes``, each in its dtype (``record(..., dtype=[torch.long,
    torch.bool])``), made as :func:`~torchrecorder.record` makes inputs of one dtype."""
    made = {dt: (integer_inputs(net, shapes, dt, device) if is_integer_dtype(dt)
                 else make_inputs(net, shapes, None, device, dt)) for dt in set(dtypes)}
    return tuple(made[dt][i] for i, dt in enumerate(dtypes))
