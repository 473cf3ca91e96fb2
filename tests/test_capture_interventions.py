"""``capture(edit_inputs=...)`` edits what a call receives and ``capture(skip=...)`` replaces a
call's forward by a value; each is checked against the same intervention done by hand (a plain
forward pre-hook, the module replaced by a lambda) and against nnsight where it is installed."""

from __future__ import annotations

import copy
import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Optional

import pytest
import torch
from torch import nn

import torchrecorder

from .hook_checks import hook_count
from .nnsight_oracle import gpt2_config


class Lambda(nn.Module):
    """A module that returns ``fn(*args, **kwargs)``: the stand-in for a skipped module."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


class Scaled(nn.Module):
    """A linear layer given a keyword (``scale``) and an optional second positional input."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, bias: Optional[torch.Tensor] = None, *,
                scale: float = 1.0) -> torch.Tensor:
        y = self.lin(x) * scale
        return y if bias is None else y + bias


class Net(nn.Module):
    """``blk`` called three times (twice with a keyword, once with two positionals), a head."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.inp = nn.Linear(4, 4)
        self.blk = Scaled()
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.inp(x))
        h = self.blk(h, scale=2.0)
        h = self.blk(h, scale=0.5)
        h = self.blk(h, h * 0.1)
        return self.head(h)


X = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))


def untouched(model: nn.Module) -> bool:
    """No hook and no instance ``forward`` left on any module."""
    return hook_count(model) == 0 and not any("forward" in m.__dict__ for m in model.modules())


def by_pre_hook(model: nn.Module, module: nn.Module, fn: Callable[..., Any], *args: Any,
                calls: tuple[int, ...] = (1, 2, 3), **kwargs: Any) -> torch.Tensor:
    """``model(*args)`` with ``fn(args, kwargs) -> (args, kwargs)`` run by a plain forward
    pre-hook on the ``calls``-th calls of ``module``."""
    seen = [0]

    def hook(mod: nn.Module, a: tuple[Any, ...], k: dict[str, Any]) -> Any:
        seen[0] += 1
        return fn(a, k) if seen[0] in calls else None

    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        return model(*args, **kwargs)
    finally:
        handle.remove()


# ------------------------------------------------------------------ edit_inputs
def test_a_returned_argument_replaces_the_one_a_call_got() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with torchrecorder.capture(model, "2", edit_inputs=lambda name, x: x.flip(0), inputs=True) as cap:
        y = model(X)
    plain = by_pre_hook(model, model[2], lambda a, k: ((a[0].flip(0),), k), X)
    assert torch.equal(y, plain) and not torch.equal(y, model(X))
    assert torch.equal(cap.inputs["2"], torch.relu(model[0](X)).flip(0))  # what the layer received
    on = [False]
    with torchrecorder.capture(model, "2", edit_inputs=lambda name, x: x.flip(0), condition=lambda: on[0],
                               skip=lambda name, x: x.sum()):
        assert torch.equal(model(X), model[2](torch.relu(model[0](X))))  # condition= says no: as is
        on[0] = True
        assert torch.equal(model(X), torch.relu(model[0](X)).sum())  # flipped, then skipped
    assert untouched(model)


def test_keywords_positionals_and_one_call_of_several() -> None:
    model = Net()

    def edit(name: str, inputs: Any) -> Any:
        if name == "blk#3":  # two positionals, no keyword: a tuple of them
            x, bias = inputs
            return x, bias * 10
        args, kwargs = inputs  # a keyword: (args, kwargs)
        return (args[0] + 1,), {**kwargs, "scale": -kwargs["scale"]}

    with torchrecorder.capture(model, "blk", edit_inputs=edit, inputs=True) as cap:
        y = model(X)

    def by_hand(a: tuple[Any, ...], k: dict[str, Any]) -> Any:
        if not k:
            return (a[0], a[1] * 10), k
        return (a[0] + 1,), {**k, "scale": -k["scale"]}

    assert torch.equal(y, by_pre_hook(model, model.blk, by_hand, X))
    assert cap.inputs["blk"][1] == {"scale": -2.0} and cap.inputs["blk#2"][1] == {"scale": -0.5}
    # "blk#2" chooses the second call only
    with torchrecorder.capture(model, "blk#2", edit_inputs=edit):
        y2 = model(X)
    assert torch.equal(y2, by_pre_hook(model, model.blk, by_hand, X, calls=(2,)))
    assert not torch.equal(y2, y) and untouched(model)
    # an (args, kwargs) pair from a call given no keyword adds keywords
    with torchrecorder.capture(model, "blk#3", edit_inputs=lambda name, xs: (xs, {"scale": 5.0})):
        y3 = model(X)
    assert torch.equal(y3, by_pre_hook(model, model.blk, lambda a, k: (a, {"scale": 5.0}), X, calls=(3,)))
    assert not torch.equal(y3, model(X))


def test_an_edit_in_place_that_returns_none_reaches_the_layer() -> None:
    model = Net()

    def in_place(name: str, inputs: Any) -> None:
        inputs[0][0].mul_(3)
        inputs[1]["scale"] = 7.0  # the keywords' dict too

    with torchrecorder.capture(model, "blk#1", edit_inputs=in_place, record=False):
        y = model(X)

    def by_hand(a: tuple[Any, ...], k: dict[str, Any]) -> None:
        a[0].mul_(3)
        k["scale"] = 7.0

    assert torch.equal(y, by_pre_hook(model, model.blk, by_hand, X, calls=(1,)))
    assert not torch.equal(y, model(X))


@pytest.mark.parametrize("mode", [nullcontext, torch.no_grad, torch.inference_mode])
def test_edits_under_no_grad_and_inference_mode_and_with_stop(mode: Callable[[], AbstractContextManager[Any]]
                                                               ) -> None:
    model = Net()

    def edit(name: str, inputs: Any) -> Any:
        args, _ = inputs
        args[0].add_(0.25)  # in place, and a new keyword too
        return args, {"scale": 3.0}

    with mode():
        with torchrecorder.capture(model, "blk", edit_inputs=edit, stop="blk#2") as cap:
            model(X)
        plain = torch.relu(model.inp(X)) + 0.25
        plain = model.blk.lin(plain) * 3.0
        plain = model.blk.lin(plain + 0.25) * 3.0
    assert torch.equal(cap["blk#2"], plain) and "blk#3" not in cap.outputs
    assert cap["blk#2"].requires_grad is False and untouched(model)


def test_a_wrong_return_is_refused_naming_the_call_and_leaves_the_model_as_it_was() -> None:
    model = Net()
    state = copy.deepcopy(model.state_dict())
    cases: list[tuple[Callable[[str, Any], Any], str]] = [
        (lambda name, inputs: inputs[0], r"edit_inputs returned a tuple for the inputs of 'blk'; it "
                                         r"returns an \(args, kwargs\) pair"),
        (lambda name, inputs: "blk", r"returned a str .* with the name first"),
    ]
    for fn, match in cases:
        with pytest.raises(TypeError, match=match):
            with torchrecorder.capture(model, "blk", edit_inputs=fn):
                model(X)
        assert untouched(model)
    seq = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    with pytest.raises(TypeError, match=r"a tuple for the inputs of '1', which got one tensor \(a forward "
                                        r"pre-hook's tuple of arguments"):
        with torchrecorder.capture(seq, "1", edit_inputs=lambda name, x: (x * 2,)):
            seq(X)

    def raises(name: str, inputs: Any) -> Any:
        raise KeyError("boom")

    with pytest.raises(KeyError) as info:
        with torchrecorder.capture(model, "blk#2", edit_inputs=raises):
            model(X)
    assert "raised in edit_inputs('blk#2', inputs)" in "".join(getattr(info.value, "__notes__", []))
    assert untouched(model) and untouched(seq)
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    with pytest.raises(TypeError, match="edit_inputs must be callable"):
        torchrecorder.capture(model, "blk", edit_inputs=3)  # type: ignore[arg-type]


# ------------------------------------------------------------------ skip
def test_a_skipped_module_does_not_run_and_its_children_record_no_call() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Sequential(nn.Linear(8, 8), nn.Tanh()), nn.Linear(8, 2))
    ran: list[str] = []
    model[1][0].register_forward_hook(lambda *a: ran.append("inner"))
    fn = lambda x: x.flip(-1) * 2  # noqa: E731

    with torchrecorder.capture(model, ["1", "1.*"], skip=lambda name, x: fn(x) if name == "1" else None,
                               inputs=True) as cap:
        y = model(X)
    assert ran == [] and sorted(cap.outputs) == ["1"]
    assert torch.equal(cap["1"], fn(model[0](X))) and torch.equal(cap.inputs["1"], model[0](X))
    swapped = copy.deepcopy(model)
    swapped[1] = Lambda(fn)
    assert torch.equal(y, swapped(X))
    # a recording made meanwhile has the skipped call, and no call inside it
    with torchrecorder.capture(model, "1", skip=lambda name, x: fn(x)):
        table = str(torchrecorder.record(model, input_data=X).summary(columns=["label"]))
    assert "1 (Sequential)" in table and "1.0" not in table and "1.1" not in table
    assert "1.0 (Linear)" in str(torchrecorder.record(model, input_data=X).summary(columns=["label"]))
    # a fixed value, and skip=None-returning runs the module as usual
    value = torch.zeros(3, 8)
    with torchrecorder.capture(model, "1", skip=lambda name, x: value, record=False):
        assert torch.equal(model(X), model[2](value))
    ran.clear()
    with torchrecorder.capture(model, "1.*", skip=lambda name, x: None) as cap:
        y = model(X)
    assert sorted(cap.outputs) == ["1.0", "1.1"] and ran == ["inner"]
    assert torch.equal(y, model[2](torch.tanh(model[1][0](model[0](X)))))
    model[1][0]._forward_hooks.clear()
    assert untouched(model)


def test_skip_of_one_call_and_of_a_module_with_an_instance_forward() -> None:
    model = Net()
    own = model.head.forward  # a bound method put on the instance, as some patching libraries do
    model.head.forward = own  # type: ignore[method-assign]

    def skip(name: str, inputs: Any) -> Any:
        return inputs[0][0] if name == "blk#2" else None  # blk#2 becomes the identity

    with torchrecorder.capture(model, ["blk", "head"], skip=skip) as cap:
        y = model(X)
    h = torch.relu(model.inp(X))
    h = model.blk(h, scale=2.0)
    assert torch.equal(cap["blk#2"], h)
    assert torch.equal(y, model.head(model.blk(h, h * 0.1)))
    assert model.head.__dict__["forward"] is own and hook_count(model) == 0
    del model.head.forward


def test_a_skip_that_raises_or_returns_a_str_leaves_the_model_as_it_was() -> None:
    model = Net()
    with pytest.raises(TypeError, match="skip returned a str for 'blk'"):
        with torchrecorder.capture(model, "blk", skip=lambda name, inputs: "blk"):
            model(X)
    assert untouched(model)

    def raises(name: str, inputs: Any) -> Any:
        raise ValueError("no")

    with pytest.raises(ValueError) as info:
        with torchrecorder.capture(model, "head", skip=raises):
            model(X)
    assert "raised in skip('head', inputs)" in "".join(getattr(info.value, "__notes__", []))
    assert untouched(model) and torch.equal(model(X), Net()(X))


# ------------------------------------------------------------------ a transformer, generating
@pytest.fixture(scope="module")
def gpt2() -> Iterator[nn.Module]:
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    yield transformers.GPT2LMHeadModel(gpt2_config()).eval()


def _generate(model: nn.Module) -> Any:
    ids = torch.tensor([[1, 2, 3, 4]])
    return model.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0, output_scores=True,
                          return_dict_in_generate=True)


def test_editing_the_residual_stream_while_generating(gpt2: nn.Module) -> None:
    steer = torch.linspace(-1, 1, 32) * 4

    def edit(name: str, inputs: Any) -> Any:  # TransformerLens' hook_resid_pre patching
        args, kwargs = inputs
        return (args[0] + steer, *args[1:]), kwargs

    with torch.no_grad(), torchrecorder.capture(gpt2, "transformer.h.1", edit_inputs=edit) as cap:
        edited = _generate(gpt2)
    with torch.no_grad():
        handle = gpt2.transformer.h[1].register_forward_pre_hook(
            lambda m, a, k: ((a[0] + steer, *a[1:]), k), with_kwargs=True)
        try:
            by_hand = _generate(gpt2)
        finally:
            handle.remove()
    assert cap.passes == 4 and torch.equal(edited.sequences, by_hand.sequences)
    assert all(torch.equal(a, b) for a, b in zip(edited.scores, by_hand.scores, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(edited.scores, _generate(gpt2).scores, strict=True))
    assert untouched(gpt2)


def test_skipping_a_block_while_generating_is_replacing_it_by_a_lambda(gpt2: nn.Module) -> None:
    with torchrecorder.capture(gpt2, ["transformer.h.1", "transformer.h.1.**"],
                               skip=lambda name, inputs: inputs[0][0] if name == "transformer.h.1" else None
                               ) as cap:
        skipped = _generate(gpt2)
    assert list(cap.outputs) == ["transformer.h.1"]
    swapped = copy.deepcopy(gpt2)
    swapped.transformer.h[1] = Lambda(lambda hidden, *args, **kwargs: hidden)
    by_hand = _generate(swapped)
    assert torch.equal(skipped.sequences, by_hand.sequences)
    assert all(torch.equal(a, b) for a, b in zip(skipped.scores, by_hand.scores, strict=True))
    assert untouched(gpt2)


def test_a_fused_transformer_layer_is_edited_as_by_a_pre_hook() -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        with torchrecorder.capture(model, "layers.1", edit_inputs=lambda name, i: ((i[0][0] * 2,), i[1])):
            y = model(x)
        plain = by_pre_hook(model, model.layers[1], lambda a, k: ((a[0] * 2,), k), x)
        with torchrecorder.capture(model, "layers.1", skip=lambda name, i: i[0][0]):
            z = model(x)
        assert torch.equal(y, plain) and torch.equal(z, model.layers[0](x))
    assert untouched(model)


@pytest.mark.parametrize("section", ["## Editing a layer's inputs", "## Skipping a layer"])
def test_the_guide_examples_run(section: str) -> None:
    """The examples of docs/guide/activations.md's two sections run as written."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "guide" / "activations.md").read_text()
    text = page.split(section + "\n", 1)[1].split("\n## ", 1)[0]
    blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]
    assert blocks
    for code in blocks:
        exec(compile(code, f"activations.md: {section}", "exec"), {})


def test_a_skip_that_runs_every_module_changes_nothing(gpt2: nn.Module) -> None:
    """Every module's forward wrapped (no names: all of them), none skipped: ``generate``, which
    reads the model's ``forward`` signature, makes the same tokens, and nothing stays behind."""
    import inspect

    plain = _generate(gpt2)
    with torchrecorder.capture(gpt2, skip=lambda name, inputs: None) as cap:
        assert inspect.signature(gpt2.forward) == inspect.signature(type(gpt2).forward.__get__(gpt2))
        wrapped = _generate(gpt2)
    assert torch.equal(wrapped.sequences, plain.sequences) and cap.passes == 4
    assert untouched(gpt2)


def test_a_skip_whose_call_never_reached_forward_does_not_leak_into_the_next_call() -> None:
    """A hook after capture's raised before the skipped call's forward; the model retries the
    call, which is not chosen ("blk#1" only), so it runs its own forward."""

    class Retry(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blk = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            try:
                return self.blk(x)
            except RuntimeError:
                return self.blk(x) * 2

    model = Retry()
    tries = [0]

    def fails_once(module: nn.Module, args: Any) -> None:
        tries[0] += 1
        if tries[0] == 1:
            raise RuntimeError("first try")

    with torchrecorder.capture(model, "blk#1", skip=lambda name, x: torch.zeros(3, 4)):
        handle = model.blk.register_forward_pre_hook(fails_once)
        y = model(X)
        handle.remove()
    assert torch.equal(y, model.blk(X) * 2) and untouched(model)


def test_the_same_edits_as_nnsight(gpt2: nn.Module, tmp_path: Path) -> None:
    """nnsight's ``.input =`` and ``.skip`` on GPT-2's second block, in a forward pass and at
    every step of ``generate`` (nnsight runs in a process of its own: see tests/nnsight_oracle.py)."""
    if importlib.util.find_spec("nnsight") is None:  # (not imported here: see the docstring)
        pytest.skip("nnsight is not installed")
    from . import nnsight_oracle as oracle

    torch.save(gpt2.state_dict(), tmp_path / "weights.pt")
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-m", "tests.nnsight_oracle", str(tmp_path / "weights.pt"),
                    str(tmp_path / "theirs.pt")], cwd=root, env=env, check=True, timeout=300)
    theirs = torch.load(tmp_path / "theirs.pt")
    ids, steer = torch.tensor(oracle.IDS), oracle.steer()

    def edit(name: str, inputs: Any) -> Any:
        (hidden, *rest), kwargs = inputs
        return (hidden + steer, *rest), kwargs

    with torchrecorder.capture(gpt2, "transformer.h.1", edit_inputs=edit):
        edited = gpt2(ids).logits
        generated = gpt2.generate(ids, **oracle.OPTIONS)
    with torchrecorder.capture(gpt2, "transformer.h.1", skip=lambda name, inputs: inputs[0][0]):
        skipped = gpt2(ids).logits
    assert torch.equal(edited, theirs["edited"]) and torch.equal(skipped, theirs["skipped"])
    assert torch.equal(generated, theirs["generated"])
    assert not torch.equal(generated, gpt2.generate(ids, **oracle.OPTIONS))
    assert untouched(gpt2) and "nnsight" not in sys.modules
