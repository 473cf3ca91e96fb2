"""The promises under stress: long autograd chains, forwards that rebuild their containers,
concurrent recordings of one model, renderers given the wrong destination."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

import torchrecorder

ROOT = Path(__file__).resolve().parents[1]


def test_releasing_the_grad_fns_of_a_long_chain_does_not_crash() -> None:
    """A Python loop of 60,000 operations: the recording holds each output's ``grad_fn`` and
    lets them go when it ends; oldest first, the newest freed the whole chain at once and torch
    overflowed the C stack (a segfault, so the check runs in a child process)."""
    code = textwrap.dedent("""
        import torch
        from torchrecorder.recording.untraced import Untraced
        held = Untraced(None)
        x = torch.zeros(2, requires_grad=True) * 1
        for i in range(60_000):
            x = x * 1.0 if i % 2 else x + 1.0
            held.grad_fns[id(x.grad_fn)] = (x.grad_fn, i)
        del x
        held.clear()
        print("released")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0 and proc.stdout.strip() == "released", (proc.returncode, proc.stderr[-500:])


class _Prunes(nn.Module):
    """A forward that takes modules out of its ``Sequential`` as it runs: ``del seq[i]`` and
    ``seq.pop(i)`` build a new ``_modules`` dict, ``delattr`` takes a slot out of the old one."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.seq = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))

    def forward(self, x: Tensor) -> Tensor:
        y = self.seq(x)
        if self.how == "del":
            del self.seq[1]
        elif self.how == "pop":
            self.seq.pop(0)
            self.seq.insert(0, nn.Sigmoid())
        elif self.how == "delattr":
            delattr(self.seq, "1")
        else:
            self.seq._modules = {k: v for k, v in self.seq._modules.items() if k != "3"}
        return y


@pytest.mark.parametrize("how", ["del", "pop", "delattr", "rebind"])
def test_a_sequential_that_forward_prunes_is_put_back_in_its_order(how: str) -> None:
    net = _Prunes(how)
    before = list(net.seq.named_children())
    x = torch.randn(3, 4)
    expected = net.seq(x)
    torchrecorder.record(net, "net", input_data=x)
    assert list(net.seq.named_children()) == before
    assert torch.equal(net.seq(x), expected)


class _Meets(nn.Module):
    """Two threads recording it meet inside ``forward``: both recordings' hooks are then on
    its submodules while each thread calls them."""

    def __init__(self) -> None:
        super().__init__()
        self.meet = threading.Barrier(2, timeout=30)
        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))

    def forward(self, x: Tensor) -> Tensor:
        self.meet.wait()
        y = self.body(x)
        self.meet.wait()
        return y


def test_two_threads_recording_one_model_at_once_warn_of_no_other_thread() -> None:
    net = _Meets()
    alone = torchrecorder.record(net.body, "body", (2, 4))
    got: list[object] = [None, None]

    def run(i: int) -> None:
        got[i] = torchrecorder.record(net, f"t{i}", (2, 4))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    with warnings.catch_warnings(record=True) as caught:  # one catcher: it is not thread-safe
        warnings.simplefilter("always")
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not any("another thread" in str(w.message) for w in caught), [str(w.message) for w in caught]
    for rec in got:
        assert isinstance(rec, torchrecorder.Recorder)
        assert not rec.notes, rec.notes
        assert len([n for n in rec.nodes.values() if n.kind == "op"]) == len(
            [n for n in alone.nodes.values() if n.kind == "op"])


class _Sized(nn.Sequential):
    """A container whose length cannot be told before it ran (as a streaming dataset's)."""

    def __len__(self) -> int:
        raise TypeError("length unknown until the stream is read")


def test_a_layer_inside_a_module_with_no_truth_value_is_captured() -> None:
    net = nn.Sequential(_Sized(nn.Linear(4, 4), nn.ReLU()), nn.Linear(4, 2))
    with torchrecorder.capture(net, "0.0") as cap:
        net(torch.randn(3, 4))
    assert list(cap.keys()) == ["0.0"] and cap["0.0"].shape == (3, 4)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in net._modules.values())


@pytest.mark.parametrize("dest", ["net.svg", None])
def test_a_renderer_given_a_path_instead_of_a_digraph_says_so(dest: object) -> None:
    rec = torchrecorder.record(nn.Linear(2, 2), "fc", (1, 2))
    with pytest.raises(TypeError, match=r"draws into a graphviz\.Digraph, not (None|'net\.svg')"):
        torchrecorder.GraphvizRenderer(rec)(dest)


def test_recording_a_compiled_module_does_not_blame_global_hooks_on_the_user() -> None:
    """torch warns that ``torch.compile(module)`` fires global module hooks twice; the only
    global hook is the recorder's, which records both calls as they are."""
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    compiled = torch.compile(net, backend="eager")
    filters = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = torchrecorder.record(compiled, "net", (2, 4))
    assert not [str(w.message) for w in caught if "global hooks" in str(w.message)]
    assert [layer.path for layer in rec.layers()] == ["", "_orig_mod", "_orig_mod.0", "_orig_mod.1"]
    assert warnings.filters == filters  # the user's own global hooks are warned of again


@pytest.mark.parametrize("kwargs", [{}, {"with_kwargs": True}, {"always_call": True}])
def test_an_error_in_a_users_forward_hook_is_said_to_come_from_the_hook(kwargs: dict[str, bool]) -> None:
    net = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 4), nn.ReLU()))

    def hook(*args: object, **more: object) -> None:
        raise KeyError("the hook's own bug")

    handle = net[1][0].register_forward_hook(hook, **kwargs)
    try:
        with pytest.raises(KeyError) as info:
            torchrecorder.record(net, "net", (2, 4))
    finally:
        handle.remove()
    note = info.value.__notes__[-1]
    assert "'1.0' (Linear) called with input shapes [2×4], in a forward hook after its forward returned" \
        in note


@pytest.mark.parametrize("value", ["red\\", "a\\\\\\"])
def test_a_styler_value_ending_in_a_lone_backslash_is_refused_before_the_model_runs(
        value: str, tmp_path: Path) -> None:
    net = nn.Sequential(nn.Linear(2, 2))
    calls: list[int] = []
    net.register_forward_pre_hook(lambda *args: calls.append(1))
    with pytest.raises(ValueError, match=r"'color' of .* ends in a lone backslash"):
        torchrecorder.render_network(net, "net", (1, 2), str(tmp_path), color=value)
    assert calls == [] and list(tmp_path.iterdir()) == []
    rec = torchrecorder.record(net, "net", (1, 2))
    assert torchrecorder.make_dot(rec, color="red\\\\").source  # an even run is a backslash


class _Names(TorchFunctionMode):
    """The caller's own function mode: the names of the functions it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.names.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def test_the_callers_function_mode_is_handed_the_models_functions_not_the_recorders() -> None:
    """A mode that counts what the model calls (around ``record``) is handed the model's
    functions; the recorder's reading and putting back of the model's state (``detach``,
    ``clone``, ``numel``, the random state's ``numpy``) is kept from it.  (Reading the results
    of the model's operations, ``__get__`` of ``shape``, still reaches it.)"""
    net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    with _Names() as plain:
        net(x)
    with _Names() as seen:
        torchrecorder.record(net, "net", input_data=x)
    assert set(seen.names) - {"__get__"} == set(plain.names) - {"__get__"}


@pytest.mark.parametrize("cut", [0, 1, 2])
def test_a_saved_recording_cut_short_is_named_as_not_valid_json(cut: int, tmp_path: Path) -> None:
    rec = torchrecorder.record(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), "net", (2, 4))
    text = rec.to_json()
    path = tmp_path / "net.json"
    path.write_text(text[: [0, len(text) // 2, len(text) - 2][cut]])
    with pytest.raises(ValueError) as info:
        torchrecorder.load_json(path)
    message = str(info.value)
    assert str(path) in message and "not a torchrecorder graph: the text" in message
    assert ("is empty" if cut == 0 else "is not valid JSON (a file cut short") in message
