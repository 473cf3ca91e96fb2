"""torchfunc-compatible recorders: what they keep, how they choose layers, save/apply/remove."""

from __future__ import annotations

import copy
import os
import pathlib
import re

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.hooks import UnknownLayerError
from torchrecorder.hooks.recorders import (
    BackwardInput,
    BackwardOutput,
    ForwardInput,
    ForwardOutput,
    ForwardPre,
)

from .hook_checks import Encoder, hook_count, mlp


def test_the_recorders_are_exported_from_the_package() -> None:
    assert torchrecorder.ForwardPre is ForwardPre
    assert torchrecorder.hooks.recorders.BackwardOutput is BackwardOutput


def test_forward_recorders_keep_whole_batches_equal_to_tensors_computed_by_hand() -> None:
    net = mlp()
    ref = copy.deepcopy(net)  # computes by hand, without hooks
    pre = ForwardPre().children(net, indices=(2,))
    out = ForwardOutput().children(net, types=nn.Linear)
    xs = [torch.randn(5, 4), torch.randn(7, 4)]
    for x in xs:
        net(x)
    assert len(pre) == 1 and len(out) == 3 and out.names == ["0", "2", "4"]
    for i, x in enumerate(xs):
        h0 = ref[0](x)
        h2 = ref[2](torch.relu(h0))
        assert torch.equal(pre[0][i], torch.relu(h0))  # the whole batch, not row 0
        assert torch.equal(out[0][i], h0) and out[0][i].shape == (len(x), 8)
        assert torch.equal(out[1][i], h2)
        assert torch.equal(out[2][i], ref(x))
    assert list(out.iter_samples()) == [2, 2, 2] and pre.samples(0) == 2
    assert not out[0][0].requires_grad  # detached by default
    pre.remove()
    out.remove()
    assert hook_count(net) == 0


def test_forward_pre_and_forward_input_differ_around_an_in_place_module() -> None:
    """ForwardPre sees the input before forward, ForwardInput after (ReLU(inplace) changed it);
    the kept copies are not changed by the model afterwards."""
    net = mlp(inplace=True)
    pre = ForwardPre().children(net, indices=[1])
    post = ForwardInput().children(net, indices=[1])
    out0 = ForwardOutput().children(net, indices=[0])
    x = torch.randn(6, 4)
    with torch.no_grad():
        net(x)
        h = net[0](x)
    assert torch.equal(pre[0][0], h) and (h < 0).any()
    assert torch.equal(post[0][0], torch.relu(h))
    assert torch.equal(out0[0][0], h)  # a copy: the in-place ReLU did not reach it
    for r in (pre, post, out0):
        r.remove()


def test_backward_recorders_equal_autograd_grad() -> None:
    net = mlp()
    x = torch.randn(5, 4, requires_grad=True)
    gout = BackwardOutput().modules(net, types=nn.Linear)
    gin = BackwardInput().modules(net, names=["2", "4"])
    loss = (net(x) ** 2).sum()
    loss.backward()
    assert gout.names == ["0", "2", "4"]
    gout_data, gin_data = gout.remove(), gin.remove()
    h0 = net[0](x)
    a1 = torch.relu(h0)
    h2 = net[2](a1)
    a3 = torch.relu(h2)
    y = net[4](a3)
    want = torch.autograd.grad((y ** 2).sum(), [h0, h2, y, a1, a3])
    for got, w in zip([gout_data[0][0], gout_data[1][0], gout_data[2][0]], want[:3], strict=True):
        torch.testing.assert_close(got, w, rtol=0, atol=0)
    torch.testing.assert_close(gin_data[0][0], want[3], rtol=0, atol=0)
    torch.testing.assert_close(gin_data[1][0], want[4], rtol=0, atol=0)
    assert hook_count(net) == 0


def test_reduction_condition_apply_and_apply_sample() -> None:
    net = mlp()
    ref = copy.deepcopy(net)
    record_it = {"on": True}
    rec = ForwardOutput(condition=lambda: record_it["on"], reduction=lambda a, b: a + b)
    rec.modules(net, indices=[1])
    xs = [torch.randn(3, 4) for _ in range(4)]
    for i, x in enumerate(xs):
        record_it["on"] = i != 2
        net(x)
    want = sum(ref[0](x) for i, x in enumerate(xs) if i != 2)  # index 0 of modules() is net
    torch.testing.assert_close(rec[0], want)
    assert rec.samples(0) == 3
    rec.apply_sample(lambda data, n: data / n)
    torch.testing.assert_close(rec[0], want / 3)
    rec.apply(lambda data: data * 0)
    assert torch.equal(rec[0], torch.zeros(3, 8))
    rec[0] = torch.ones(1)
    assert torch.equal(rec.data[0], torch.ones(1)) and list(rec) == [rec[0]]
    rec.data[0] = torch.zeros(1)  # data is the recorder's own list, as in torchfunc
    assert torch.equal(rec[0], torch.zeros(1))
    rec.remove()


def test_seed_forward_pre_example_with_reduction_runs_unchanged(tmp_path: pathlib.Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # the seed's example, with torchfunc.hooks.recorders -> torchrecorder.hooks.recorders
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 100),
        torch.nn.ReLU(),
        torch.nn.Linear(100, 50),
        torch.nn.ReLU(),
        torch.nn.Linear(50, 10),
    )
    recorder = torchrecorder.hooks.recorders.ForwardPre(reduction=lambda x, y: x + y)
    recorder.children(model, indices=(2, 3))
    data = [torch.randn(16, 784) for _ in range(3)]
    for batch in data:  # "train your network normally"
        model(batch)
    recorder.save(pathlib.Path("./analysis"))
    recorder.remove()
    assert sorted(os.listdir(tmp_path / "analysis")) == ["0.pt", "1.pt"]
    a = torch.load(tmp_path / "analysis" / "0.pt")
    b = torch.load(tmp_path / "analysis" / "1.pt")
    with torch.no_grad():
        assert a.shape == (16, 100) and b.shape == (16, 50)
        torch.testing.assert_close(a, sum(torch.relu(model[0](x)) for x in data))
        torch.testing.assert_close(b, sum(model[2](torch.relu(model[0](x))) for x in data))


def test_save_then_load_gives_the_same_tensors(tmp_path: pathlib.Path) -> None:
    net = mlp()
    rec = ForwardOutput().modules(net, types=nn.Linear)
    for _ in range(2):
        net(torch.randn(2, 4))
    target = tmp_path / "deep" / "run"
    rec.save(target, mkdir=True, parents=True)
    rec.save(target, mkdir=True, parents=True)  # an existing folder is fine
    for i in range(3):
        loaded = torch.load(target / f"{i}.pt")
        assert len(loaded) == 2 and all(torch.equal(a, b) for a, b in zip(loaded, rec[i], strict=True))
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        rec.save(tmp_path / "file")
    rec.remove()


def _names(net: nn.Module, children: bool = False, **how: object) -> list[str]:
    rec = ForwardOutput()
    (rec.children if children else rec.modules)(net, **how)  # type: ignore[arg-type]
    names = rec.names
    rec.remove()
    return names


def test_selection_by_name_glob_label_type_and_index() -> None:
    net = Encoder()
    assert _names(net, names="layer.*.attention") == ["layer.0.attention", "layer.1.attention"]
    assert _names(net, names=["head", "layer.1.out"]) == ["layer.1.out", "head"]
    assert _names(net, names="layer.**") == [
        "layer.0", "layer.0.attention", "layer.0.out", "layer.1", "layer.1.attention", "layer.1.out"]
    assert _names(net, names="**.out") == ["layer.0.out", "layer.1.out"]
    # labels: the summary's (from a recording), or numbered over the module tree alike (torchinfo's
    # numbers: the never-called ModuleList and ModuleDicts take labels, their items one level down)
    x = torch.randn(2, 4)
    graph = torchrecorder.record(net, "enc", input_data=x)
    assert re.search(r"─layer\.1\.out \(Linear\) +3-4\n", graph.summary(columns=["label"]))
    assert _names(net, labels=["3-4", "0-1"], rec=graph) == ["", "layer.1.out"]
    assert _names(net, labels=["3-4", "1-2"]) == ["layer.1.out", "head"]  # the same without it
    assert _names(net, labels=["1-1", "2-2"], rec=graph) == ["layer", "layer.1"]
    # types and indices, as torchfunc: either chooses a module
    assert _names(net, types=nn.ModuleDict) == ["layer.0", "layer.1"]
    assert _names(net, indices=[0]) == [""]  # modules() starts with net itself
    assert _names(net, children=True, indices=[-1], types=nn.ModuleList) == ["layer", "head"]
    assert len(_names(net)) == len(list(net.modules()))
    assert hook_count(net) == 0
    # the recorder chosen by name records that layer's output
    rec = ForwardOutput().modules(net, names="layer.1.out")
    net(x)
    rec.remove()
    with torch.no_grad():
        x1 = torch.relu(net.layer[0]["out"](net.layer[0]["attention"](x)))
        assert torch.equal(rec[0][0], net.layer[1]["out"](net.layer[1]["attention"](x1)))
    rec.remove()


def test_unknown_names_labels_bad_indices_and_types_raise_clear_errors() -> None:
    net = Encoder()
    with pytest.raises(UnknownLayerError,
                       match=r"no layer named 'layer\.0\.atention'; nearest: 'layer\.0\.attention'"):
        ForwardOutput().modules(net, names="layer.0.atention")
    with pytest.raises(UnknownLayerError, match=re.escape("no layer matches the pattern 'encoder.*'")):
        ForwardOutput().modules(net, names="encoder.*")
    with pytest.raises(UnknownLayerError, match=re.escape("no child named 'layer.0'")):
        ForwardOutput().children(net, names="layer.0")
    with pytest.raises(UnknownLayerError, match="label '7-1'"):
        ForwardOutput().modules(net, labels="7-1")
    with pytest.raises(IndexError, match=r"index 9 is out of range: Encoder.children\(\) has 2 modules"):
        ForwardOutput().children(net, indices=(0, 9))
    with pytest.raises(TypeError, match="types must be classes"):
        ForwardOutput().modules(net, types="Linear")
    with pytest.raises(TypeError, match="indices must be ints"):
        ForwardOutput().modules(net, indices=["0"])
    with pytest.raises(TypeError, match="condition must be"):
        ForwardOutput(condition=3)  # type: ignore[arg-type]
    rec = ForwardOutput()
    with pytest.raises(IndexError, match="subrecorder index 0 is out of range: 0 registered"):
        rec[0]
    assert hook_count(net) == 0  # nothing was registered by the calls that raised


def test_remove_by_index_returns_the_data_and_unhooks_that_layer_only() -> None:
    net = mlp()
    rec = ForwardOutput().modules(net, types=nn.Linear)
    assert hook_count(net) == 3
    net(torch.randn(2, 4))
    data = rec.remove(1)
    assert len(data) == 1 and data[0].shape == (2, 6)
    assert rec.names == ["0", "4"] and hook_count(net) == 2
    net(torch.randn(2, 4))
    assert rec.samples(0) == 2 and rec.samples(1) == 2 and rec[1][0].shape == (2, 3)
    assert len(rec.remove()) == 2
    assert hook_count(net) == 0 and len(rec) == 2 and rec.samples(1) == 2  # the data stays
    net(torch.randn(2, 4))
    assert list(rec.iter_samples()) == [2, 2]  # nothing more is recorded
    with ForwardPre().modules(net, indices=[1]) as scoped:
        net(torch.randn(1, 4))
        assert hook_count(net) == 1
    assert hook_count(net) == 0 and scoped[0][0].shape == (1, 4)


def test_recorders_move_tensors_and_work_on_meta() -> None:
    net = mlp()
    kept = ForwardOutput(to="cpu", detach=False).modules(net, indices=[1])
    net(torch.randn(2, 4))
    assert kept[0][0].requires_grad and kept[0][0].device.type == "cpu"
    kept.remove()
    with torch.device("meta"):
        big = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU())
    rec = ForwardOutput().modules(big, types=nn.Linear)
    grads = BackwardOutput().modules(big, indices=[1])
    big(torch.empty(3, 4096, device="meta", requires_grad=True)).sum().backward()
    assert rec[0][0].device.type == "meta" and rec[0][0].shape == (3, 4096)
    assert grads[0][0].shape == (3, 4096)
    with pytest.raises(ValueError, match="to= must be a device"):
        ForwardOutput(to="gpu please")
    rec.remove()
    grads.remove()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_recorders_on_cuda_move_to_cpu() -> None:
    net = mlp().cuda()
    rec = ForwardOutput(to="cpu").modules(net, indices=[1])
    net(torch.randn(2, 4, device="cuda"))
    assert rec[0][0].device.type == "cpu"
    rec.remove()


def test_apply_with_a_function_that_returns_none_keeps_the_data() -> None:
    # a torchfunc user's visitor (print, an in-place change) returns None; torchfunc kept the data
    net = mlp()
    rec = ForwardPre()
    rec.children(net, indices=[0])
    net(torch.randn(2, 4))
    seen: list[int] = []
    rec.apply(lambda data: seen.append(len(data)))
    rec.apply_sample(lambda data, n: seen.append(n))
    assert seen == [1, 1]
    assert isinstance(rec[0], list) and len(rec[0]) == 1 and rec[0][0].shape == (2, 4)
    rec.apply(lambda data: [t * 0 for t in data])  # a returned value still replaces the data
    assert torch.equal(rec[0][0], torch.zeros(2, 4))
