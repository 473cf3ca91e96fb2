"""Edits of operations that return several tensors (``chunk``, ``split``, ``max(dim)``) are
checked item by item, as edits of single outputs are."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder

from .hook_checks import hook_count


class Tuples(nn.Module):
    """chunk, split and max(dim), each output used afterwards."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = torch.chunk(x, 2, dim=1)
        c, d = x.split([1, 3], dim=1)
        top = x.max(dim=1)
        return a.sum() + b.sum() + c.sum() + d.sum() + top.values.sum() + top.indices.sum()


X = torch.arange(12.0).reshape(3, 4)


def _run(op: str, edit: Callable[[str, Any], Any]) -> torch.Tensor:
    model = Tuples()
    try:
        with torchrecorder.capture(model, ops=op, edit=edit):
            return model(X)
    finally:
        assert hook_count(model) == 0 and torch._C._len_torch_function_stack() == 0


@pytest.mark.parametrize("op", ["chunk", "split", "max"])
def test_an_item_of_the_wrong_shape_or_dtype_is_refused_naming_it(op: str) -> None:
    with pytest.raises(ValueError, match=rf"'net/{op}', whose item \[0\] of the output has shape"):
        _run(op, lambda k, out: (out[0][:1], *out[1:]))
    with pytest.raises(ValueError, match=rf"'net/{op}', whose item \[1\] .*dtype torch\.(float32|int64)"):
        _run(op, lambda k, out: (out[0], out[1].to(torch.float16), *out[2:]))


@pytest.mark.parametrize("op", ["chunk", "split", "max"])
def test_a_wrong_number_or_kind_of_items_is_refused(op: str) -> None:
    with pytest.raises(ValueError, match=rf"edit returned 1 items for the operation 'net/{op}'"):
        _run(op, lambda k, out: (out[0],))
    with pytest.raises(TypeError, match=rf"returned a Tensor for the output of the operation 'net/{op}'"):
        _run(op, lambda k, out: out[0])


def test_right_edits_reach_the_model_and_a_named_tuple_stays_one() -> None:
    plain = Tuples()(X)
    assert torch.equal(_run("chunk", lambda k, out: [t * 0 for t in out]),
                       plain - X.sum())
    # max(dim): the edit gives a plain tuple; the model still reads .values and .indices
    values = X.max(dim=1).values
    assert torch.equal(_run("max", lambda k, out: (out[0] * 2, out[1])), plain + values.sum())


class _Attn(nn.Module):
    """Returns ``(output, weights)``, as Hugging Face attention classes do."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.proj(x), x.softmax(-1)


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = _Attn()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, _ = self.attn(x)  # a batch of two unpacks from a tensor too: no error follows
        return x + a


def test_an_edit_that_returns_one_item_of_the_output_it_changed_in_place_is_warned_of() -> None:
    """``edit=lambda name, out: out[0].mul_(2)`` returns the item, not the output: the tuple is
    replaced by one tensor, and ``a, _ = attn(x)`` on a batch of two silently reads its rows."""
    torch.manual_seed(0)
    net, x = _Block(), torch.randn(2, 4)
    said = (r"edit returned item 0 of the output of 'attn' \(a tuple of 2\), which replaces the whole "
            r"output with that one tensor: an edit that changes the output in place returns None")
    with pytest.warns(RuntimeWarning, match=said), torch.no_grad(), \
            torchrecorder.capture(net, "attn", edit=lambda name, out: out[0].mul_(2)):
        net(x)
    def in_place(name: str, out: Any) -> None:  # changes the output, returns None
        out[0].mul_(2)

    for edit in (in_place,
                 lambda name, out: (out[0] * 2, out[1]),      # a new output
                 lambda name, out: out,                       # the output itself
                 lambda name, out: out[0].clone()):           # a copy replaces it on purpose
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with torch.no_grad(), torchrecorder.capture(net, "attn", edit=edit, record=False):
                net(x)
    class Dict(nn.Module):
        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"a": x + 1, "b": x * 2}

    with pytest.warns(RuntimeWarning, match=r"returned item 'b' of the output of '' \(a dict with keys"), \
            torchrecorder.capture(Dict(), "", edit=lambda name, out: out["b"]) as cap:
        cap.model(x)
    assert torch.equal(cap[""], x * 2) and hook_count(net) == 0
