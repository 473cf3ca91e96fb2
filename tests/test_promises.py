"""The promises under bad input (redteam 7): a special file at the target is written to, never
replaced; a failed write names the file asked for; the model and torch are left as they were."""

from __future__ import annotations

import errno
import os
import resource
import signal
import stat
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn.utils import prune

import torchrecorder
from torchrecorder.hooks import UnknownLayerError

from .fifo import fifo_reader


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
@pytest.mark.parametrize("write", ["to_json", "save", "render_network"])
def test_a_named_pipe_at_the_target_is_written_to_and_stays_a_pipe(tmp_path: Path, write: str) -> None:
    net = _net()
    fifo = tmp_path / ("net-1.svg" if write == "render_network" else "out")
    os.mkfifo(fifo)
    got: list[bytes] = []
    thread = fifo_reader(fifo, got)
    if write == "render_network":
        torchrecorder.render_network(net, "net", (1, 3), tmp_path)
    else:
        rec = torchrecorder.record(net, "net", (1, 3))
        rec.to_json(fifo) if write == "to_json" else torchrecorder.make_html(rec).save(fifo)
    thread.join(30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # not replaced by a regular file
    assert got and got[0].lstrip().startswith((b"{", b"<")), got
    assert sorted(p.name for p in tmp_path.iterdir()) == [fifo.name]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_a_named_pipe_nobody_reads_is_refused_at_once_by_name(tmp_path: Path) -> None:
    fifo = tmp_path / "g.json"
    os.mkfifo(fifo)
    rec = torchrecorder.record(_net(), "net", (1, 3))
    with pytest.raises(OSError, match="no process reads") as info:
        rec.to_json(fifo)
    assert info.value.errno == errno.ENXIO and info.value.filename == str(fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json"]


def test_a_directory_at_the_target_is_named_not_the_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "g.json").mkdir()
    (tmp_path / "net-1.svg").mkdir()
    rec = torchrecorder.record(_net(), "net", (1, 3))
    with pytest.raises(IsADirectoryError) as info:
        rec.to_json(tmp_path / "g.json")
    assert info.value.filename == str(tmp_path / "g.json") and ".tr-" not in str(info.value)
    with pytest.raises(IsADirectoryError) as info:
        torchrecorder.render_network(_net(), "net", (1, 3), tmp_path)
    assert info.value.filename == str(tmp_path / "net-1.svg") and ".tr-" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json", "net-1.svg"]


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="no file size limit")
def test_a_write_that_fails_midway_names_the_file_and_keeps_the_old_one(tmp_path: Path) -> None:
    rec = torchrecorder.record(nn.Sequential(*[nn.Linear(3, 3) for _ in range(20)]), "net", (1, 3))
    path = tmp_path / "g.json"
    path.write_text("old")
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100, hard))  # a full disk, for this process only
    try:
        with pytest.raises(OSError) as info:
            rec.to_json(path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert info.value.errno == errno.EFBIG and info.value.filename == str(path)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json"]


def test_capture_with_an_empty_list_of_names_captures_nothing_not_everything() -> None:
    net = _net()
    with torchrecorder.capture(net, []) as cap:
        net(torch.randn(2, 3))
    assert list(cap.keys()) == []
    wanted = [name for name in ("enc", "dec") if hasattr(net, name)]  # a filter that kept nothing
    with torchrecorder.capture(net, wanted, inputs=True) as cap:
        net(torch.randn(2, 3))
    assert list(cap.keys()) == [] and not any(m._forward_hooks for m in net.modules())


@pytest.mark.parametrize("types", [int, nn.Conv2d, (nn.Linear, nn.LSTM)])
def test_capture_by_a_type_no_layer_has_raises_before_the_model_runs(types: object) -> None:
    net = _net()
    calls = []
    net.register_forward_pre_hook(lambda *args: calls.append(1))
    with pytest.raises(UnknownLayerError, match=r"chooses no layer.*Linear"):
        with torchrecorder.capture(net, types=types):
            net(torch.randn(2, 3))
    assert calls == [] and not any(m._forward_hooks for m in net.modules())


class _Rewires(nn.Module):
    """A forward that replaces one submodule and deletes another as it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)
        self.c = nn.Sequential(nn.Linear(3, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.b(self.a(x))
        if "c" in self._modules:
            y = self.c(y)
            del self.c
        self.b = nn.Identity()
        self.a.extra = nn.ReLU()  # added: stays, as documented
        return y


def test_a_submodule_that_forward_replaces_or_deletes_is_put_back() -> None:
    net = _Rewires()
    before = dict(net.named_modules())
    params = dict(net.named_parameters())
    for _ in range(2):  # the second recording reads the kept layout of the first
        torchrecorder.record(net, "net", (2, 3))
        assert dict(net.named_modules()) == {**before, "a.extra": net.a.extra}
        assert all(p is params[n] for n, p in net.named_parameters())
        del net.a.extra


class _KeepsState(nn.Module):
    """A forward that rebinds, deletes and adds plain attributes (truncated backpropagation's
    hidden state, a step counter, a cache), beside torch's pruning, whose pre-hook rebinds
    the plain attribute ``weight`` before every call."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(3, 3, batch_first=True)
        self.out = nn.Linear(3, 3)
        prune.l1_unstructured(self.out, "weight", amount=0.5)
        self.hidden: Any = None
        self.steps = 0
        self.cache: Any = "old"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, h = self.rnn(x, self.hidden)
        self.hidden = tuple(t.detach() for t in h)
        self.steps += 1
        del self.cache
        self.head = nn.Linear(3, 2)  # a plain attribute turned into a submodule: stays
        self.seen = True  # added: stays, as documented
        return self.out(y)


def test_plain_attributes_that_forward_rebinds_or_deletes_are_put_back() -> None:
    net = _KeepsState()
    net(torch.randn(2, 4, 3))  # a hidden state from an earlier step
    del net.head, net.seen
    net.cache = "old"
    hidden, steps, weight = net.hidden, net.steps, net.out.weight
    for _ in range(2):  # the second recording reads the kept layout of the first
        torchrecorder.record(net, "net", (2, 4, 3))
        assert net.hidden is hidden and net.steps == steps and net.cache == "old"
        assert net.out.weight is weight
        assert net.seen is True and isinstance(net.head, nn.Linear)
        del net.head, net.seen


@pytest.mark.parametrize("bad", [5, torch.ones(2, 3), "mask", [("x", 1)], {1: torch.ones(2, 3)}])
def test_input_kwargs_that_is_not_a_dict_of_names_is_named_before_the_model_runs(bad: object) -> None:
    net = _net()
    calls = []
    net.register_forward_pre_hook(lambda *args: calls.append(1))
    with pytest.raises(TypeError, match="input_kwargs"):
        torchrecorder.record(net, "net", (2, 3), input_kwargs=bad)  # type: ignore[arg-type]
    assert calls == [] and len(net._forward_pre_hooks) == 1


def test_a_name_no_file_name_can_hold_is_refused_by_name_before_the_model_runs(tmp_path: Path) -> None:
    net = _net()
    calls = []
    net.register_forward_pre_hook(lambda *args: calls.append(1))
    for kwargs in ({}, {"filename": "odd\ud800"}):
        with pytest.raises(ValueError, match=r"contains '\\ud800', which no file name can hold"):
            torchrecorder.render_network(net, "a\ud800b", (1, 3), tmp_path, **kwargs)
    assert calls == [] and list(tmp_path.iterdir()) == []
    # in a graph's name (not a file name) the character is kept: the recording draws as usual
    rec = torchrecorder.record(net, "a\ud800b", (1, 3))
    assert rec.name == "a\ud800b"


@pytest.mark.parametrize("shapes", [torch.zeros(1, 3), [torch.zeros(1, 3)], (torch.zeros(1, 3), (1, 3))])
def test_a_tensor_given_as_input_shapes_says_to_pass_it_as_input_data(shapes: object) -> None:
    match = r"input_shapes holds a tensor \(\(1, 3\)\): pass tensors as input_data="
    with pytest.raises(TypeError, match=match) as info:
        torchrecorder.record(_net(), "net", shapes)  # type: ignore[arg-type]
    assert "tensor(" not in str(info.value)  # its values are not printed


@pytest.mark.skipif(not (os.path.exists("/dev/full") and stat.S_ISCHR(os.stat("/dev/full").st_mode)),
                    reason="no /dev/full")
def test_a_full_device_is_named_and_stays_a_device() -> None:
    from torchrecorder._files import write_output

    rec = torchrecorder.record(_net(), "net", (1, 3))
    for write in (rec.to_json, torchrecorder.make_html(rec).save,
                  lambda path: write_output(path, b"digraph {}")):  # the command line's -o
        with pytest.raises(OSError) as info:
            write("/dev/full")
        assert info.value.errno == errno.ENOSPC and info.value.filename == "/dev/full"
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_an_error_in_a_users_pre_hook_names_the_module_whose_hook_raised() -> None:
    net = nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2)))

    def refuse(module: nn.Module, args: tuple[object, ...]) -> None:
        raise ValueError("refused by the user's pre-hook")

    handle = net[1][1].register_forward_pre_hook(refuse)
    with pytest.raises(ValueError) as info:
        torchrecorder.record(net, "net", (2, 3))
    assert info.value.__notes__ == [
        "torchrecorder: raised in module '1.1' (Linear) called with input shapes [2×4], in a forward "
        "pre-hook before its forward ran; the partial recording is in the exception's 'recording' "
        "attribute"]
    assert info.value.recording.failed_key == "1.1"  # its call opens before the user's pre-hooks run
    assert dict(net[1][1]._forward_pre_hooks) == {handle.id: refuse}
    assert not net[1][1]._forward_hooks


def test_a_module_class_given_instead_of_a_module_says_to_pass_an_instance(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="got the class Linear: pass an instance"):
        torchrecorder.record(nn.Linear, "net", (1, 3))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got the class Linear: pass an instance"):
        torchrecorder.render_network(nn.Linear, "net", (1, 3), tmp_path)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_labels_read_from_a_recording_of_another_model_are_refused() -> None:
    net = _net()
    other = torchrecorder.record(nn.Sequential(nn.Conv2d(3, 3, 1)), "other", (1, 3, 4, 4))
    with pytest.raises(UnknownLayerError,
                       match="'0', a Conv2d there, but the model's '0' is a Linear"):
        with torchrecorder.capture(net, labels=["1-1"], rec=other):
            net(torch.randn(2, 3))
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in net.modules())
    own = torchrecorder.record(net, "net", (2, 3))
    with torchrecorder.capture(net, labels=["1-1"], rec=own) as cap:
        net(torch.randn(2, 3))
    assert list(cap.keys()) == ["0"]


def test_a_model_with_full_backward_hooks_records_as_without_them() -> None:
    x = torch.randn(2, 3, requires_grad=True)
    plain = torchrecorder.record(_net(), "net", input_data=x)
    net = _net()
    seen: list[str] = []
    net[0].register_full_backward_hook(lambda m, gi, go: seen.append("0"))
    net[2].register_full_backward_pre_hook(lambda m, go: seen.append("2"))
    net.register_full_backward_hook(lambda m, gi, go: seen.append("net"))
    hooked = torchrecorder.record(net, "net", input_data=x)
    ops = sorted(n.op for n in hooked.nodes.values() if isinstance(n, torchrecorder.OpNode))
    assert ops == ["linear", "linear", "relu"]  # no view_as of torch's backward-hook plumbing
    assert list(hooked.edges) == list(plain.edges)
    assert torchrecorder.make_dot(hooked).source == torchrecorder.make_dot(plain).source
    net(x).sum().backward()  # the user's hooks still work
    assert sorted(seen) == ["0", "2", "net"]


class _Reinitialises(nn.Module):
    """A forward that re-initialises its layer: ``nn.init`` hands its call to torch's function
    mode with the tensor as a keyword (``kaiming_uniform_(tensor=w, ...)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.fc.reset_parameters()
        nn.init.zeros_(tensor=self.fc.bias)
        return self.fc(x)


def test_a_parameter_written_by_nn_init_inside_forward_is_put_back_without_a_warning() -> None:
    net = _Reinitialises()
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "changed where torchrecorder could not see it"
        torchrecorder.record(net, "net", (2, 3))
    assert all(torch.equal(p, before[n]) for n, p in net.named_parameters())


_WRITES_TO_STDOUT = """
import sys, torch, torchrecorder
net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
rec = torchrecorder.record(net, "net", (1, 4))
print("before")
{write}
print("after")
"""


@pytest.mark.parametrize("write", ['rec.to_json("/dev/stdout")',
                                   'torchrecorder.make_html(rec).save("/dev/stdout")'])
@pytest.mark.parametrize("into", ["pipe", "file"])
def test_dev_stdout_is_written_in_order_into_a_pipe_or_a_redirected_file(tmp_path: Path, write: str,
                                                                          into: str) -> None:
    script = _WRITES_TO_STDOUT.format(write=write)
    env = {**os.environ, "PYTHONPATH": str(Path(torchrecorder.__file__).parents[1])}
    if into == "pipe":
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, env=env, timeout=120)
        text = out.stdout.decode()
    else:  # the shell's `> file`: replacing the file would lose what is printed around the write
        path = tmp_path / "out.txt"
        with open(path, "wb") as fh:
            out = subprocess.run([sys.executable, "-c", script], stdout=fh, stderr=subprocess.PIPE,
                                 env=env, timeout=120)
        text = path.read_text()
    assert out.returncode == 0, out.stderr.decode()[-800:]
    assert text.startswith("before\n") and text.endswith("after\n")
    body = text[len("before\n"):-len("after\n")]
    if "to_json" in write:
        assert torchrecorder.load_json(body).nodes.keys() == torchrecorder.record(
            nn.Sequential(nn.Linear(4, 3), nn.ReLU()), "net", (1, 4)).nodes.keys()
    else:
        assert body.lstrip().lower().startswith("<!doctype html") and body.rstrip().endswith("</html>")
