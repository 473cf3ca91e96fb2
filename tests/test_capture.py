"""capture(): outputs, inputs and gradients by name; edit, stop; bounded memory; no hooks left."""

from __future__ import annotations

import copy
import gc
import re
import sys
import tracemalloc
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder import StopForward, capture
from torchrecorder.hooks import UnknownLayerError
from torchrecorder.hooks.recorders import (
    BackwardInput,
    BackwardOutput,
    ForwardInput,
    ForwardOutput,
    ForwardPre,
)
from torchrecorder.renderer.activations import call_name

from .hook_checks import Encoder, hook_count, mlp


def test_outputs_inputs_and_grads_equal_tensors_computed_by_hand(tmp_path: Path) -> None:
    net = mlp(inplace=True)
    ref = copy.deepcopy(net)
    x = torch.randn(5, 4, requires_grad=True)
    with capture(net, ["0", "2", "4"], inputs=True, grads=True) as cap:
        y = net(x)
        (y ** 2).sum().backward()
    h0 = ref[0](x)
    a1 = torch.relu(h0)
    h2 = ref[2](a1)
    out = ref[4](torch.relu(h2))
    g_h0, g_h2, g_out = torch.autograd.grad((out ** 2).sum(), [h0, h2, out])
    assert torch.equal(cap["0"], h0)  # a copy: the in-place ReLU that followed did not change it
    assert torch.equal(cap["2"], h2) and torch.equal(cap["4"], y.detach())
    assert torch.equal(cap.inputs["0"], x.detach()) and torch.equal(cap.inputs["2"], a1)
    for name, want in (("0", g_h0), ("2", g_h2), ("4", g_out)):
        torch.testing.assert_close(cap.grads[name], want, rtol=0, atol=0)
    assert not cap["0"].requires_grad and cap.keys() == ["0", "2", "4"] and cap.passes == 1
    # read as a dict, as baukit's TraceDict is: items(), values(), get()
    assert [name for name, _ in cap.items()] == cap.keys() and cap.items()[1][1] is cap["2"]
    assert [id(v) for v in cap.values()] == [id(cap[k]) for k in cap.keys()]
    assert cap.get("4") is cap["4"] and cap.get("1") is None and cap.get("1", 7) == 7
    path = tmp_path / "acts.safetensors"
    cap.save(path)
    back = torchrecorder.load_capture(path)
    assert [k for k, _ in back.items()] == cap.keys() and torch.equal(back.get("2"), cap["2"])
    assert hook_count(net) == 0


def test_names_are_the_graphs_calls_including_repeated_calls() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)
            self.out = nn.Linear(3, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(self.fc(torch.tanh(self.fc(x))))

    net = Twice()
    x = torch.randn(2, 3)
    with capture(net) as cap:
        net(x)
    rec = torchrecorder.record(net, "twice", input_data=x)
    assert cap.keys() == ["fc", "fc#2", "out", ""]
    assert sorted(cap.keys()) == sorted(call_name(layer) for layer in rec.layers())
    with torch.no_grad():
        first = net.fc(x)
        assert torch.equal(cap["fc"], first) and torch.equal(cap["fc#2"], net.fc(torch.tanh(first)))
    # a second pass numbers its calls afresh
    with capture(net, "fc", keep="all") as cap:
        net(x)
        net(x)
    assert cap.keys() == ["fc", "fc#2"] and len(cap["fc"]) == 2 and cap.passes == 2


def test_globs_labels_and_types_choose_several_layers() -> None:
    net = Encoder()
    x = torch.randn(2, 4)
    with capture(net, "layer.*.attention") as cap:
        net(x)
    assert cap.names == ["layer.0.attention", "layer.1.attention"] and len(cap) == 2
    rec = torchrecorder.record(net, "enc", input_data=x)
    with capture(net, labels=["1-2"], rec=rec) as by_label, capture(net, types=nn.Linear) as by_type:
        net(x)
    assert by_label.keys() == ["head"]
    assert len(by_type.keys()) == 5
    with torch.no_grad():
        assert torch.equal(by_label["head"], net(x))


def test_an_edit_written_for_baukits_argument_order_says_which_comes_first() -> None:
    """baukit's ``edit_output(output, layer)`` takes the output first; here the name comes
    first, and an edit written the other way round says so instead of a bare 'str' error."""
    net = mlp()
    x = torch.randn(3, 4)
    with pytest.raises(TypeError, match=r"edit returned a str for '1'.*edit\(name, output\)"):
        with capture(net, "1", edit=lambda output, layer: output * 0):  # '1' * 0 == ''
            net(x)
    with pytest.raises(AttributeError) as info:
        with capture(net, "1", edit=lambda output, layer: output.clone()):
            net(x)
    assert any("edit('1', output)" in note and "name first" in note for note in info.value.__notes__)
    with pytest.raises(TypeError) as info2:  # an edit of one argument: the note names the call too
        with capture(net, ops="*/relu", edit=lambda out: out):
            net(x)
    assert any("edit('1/relu', output)" in note for note in info2.value.__notes__)
    assert hook_count(net) == 0


def test_edit_replaces_an_output_in_flight_and_can_skip_recording() -> None:
    net = mlp()
    x = torch.randn(3, 4)
    seen = []

    def silence(name: str, out: torch.Tensor) -> torch.Tensor:
        seen.append(name)
        return torch.zeros_like(out)

    with capture(net, "1", edit=silence) as cap:
        y = net(x)
    with torch.no_grad():
        assert torch.equal(y, net[4](torch.relu(net[2](torch.zeros(3, 8)))))
    assert seen == ["1"] and torch.equal(cap["1"], torch.zeros(3, 8))  # what the model went on with
    with capture(net, "4", edit=lambda name, out: out + 1, record=False) as cap:
        y2 = net(x)
    with torch.no_grad():
        assert torch.equal(y2, net(x) + 1)
    assert len(cap) == 0
    with pytest.raises(UnknownLayerError, match="record=False"):
        cap["4"]
    # an edit returning None keeps the output
    with capture(net, "4", edit=lambda name, out: None) as cap:
        y3 = net(x)
    assert torch.equal(y3, cap["4"])


def test_stop_ends_the_forward_pass_after_the_named_layer() -> None:
    net = mlp()
    calls = []
    net[3].register_forward_hook(lambda m, a, o: calls.append("3"))
    x = torch.randn(2, 4)
    with capture(net, ["0", "2"], stop="2") as cap:
        net(x)
        raise AssertionError("not reached: the pass stopped")
    assert cap.keys() == ["0", "2"] and calls == []
    net[3]._forward_hooks.clear()
    assert hook_count(net) == 0
    with capture(net, stop="1", record=False) as cap:
        assert cap.run(x) is None
        assert cap.run(x) is None  # again: each pass stops
    assert cap.passes == 2 and hook_count(net) == 0
    with pytest.raises(UnknownLayerError, match=r"stop='3x' names no layer"):
        capture(net, stop="3x")
    with pytest.warns(RuntimeWarning, match=r"stop='2#2' was not reached: the pass ran to its end, "
                                            r"calling '2' 1 times"), capture(net, "4", stop="2#2") as cap:
        net(x)
    assert cap.keys() == ["4"] and hook_count(net) == 0
    calls.clear()
    net[3].register_forward_hook(lambda m, a, o: calls.append("3"))
    with capture(net, "2", stop="2#1") as cap:  # "#1": the first call, kept as "2"
        net(x)
    assert calls == [] and torch.equal(cap["2#1"], cap["2"])
    net[3]._forward_hooks.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a stop that came, the model's own output included: no warning
        for stop in ("2", ""):
            with capture(net, "4", stop=stop):
                net(x)


def test_run_outside_the_block_captures_that_call_and_takes_the_hooks_off() -> None:
    net = mlp()
    x = torch.randn(2, 4)
    cap = capture(net, ["2"], stop="2")
    assert cap.run(x) is None  # hooked for this call: the pass stopped after "2"
    assert torch.equal(cap["2"], net[:3](x)) and cap.passes == 1 and hook_count(net) == 0
    cap = capture(net, "4")
    assert torch.equal(cap.run(x), net(x)) and torch.equal(cap["4"], net(x))
    assert hook_count(net) == 0
    # a model called without the capture on: the error says so, not that the layer did not run
    cap = capture(net, "4")
    net(x)
    with pytest.raises(UnknownLayerError, match="never ran while the capture was on"):
        cap["4"]


def test_calls_of_a_submodule_made_outside_a_pass_are_numbered_afresh_each_time() -> None:
    """``model.encoder(x)`` called twice in the block: each call's layers keep their names, so
    ``cap[name]`` is the last call's value (not the first's, with ``name#2`` for the next)."""
    net = nn.Sequential(Encoder(), nn.Linear(2, 2))
    xs = [torch.randn(2, 4) for _ in range(3)]
    with torch.no_grad(), capture(net, ["0.layer.1.out", "0.head"], ops="0.layer.0.out/linear",
                                  keep="all") as cap:
        for x in xs:
            net[0](x)  # the encoder alone, not a pass of net
        net[0].head(torch.ones(1, 4))  # a chosen layer called on its own
    assert cap.passes == 0
    assert sorted(cap.outputs) == ["0.head", "0.layer.0.out/linear", "0.layer.1.out"]
    with torch.no_grad():
        assert all(torch.equal(got, net[0](x)) for got, x in zip(cap["0.head"], xs, strict=False))
        assert torch.equal(cap["0.head"][-1], net[0].head(torch.ones(1, 4)))
    assert len(cap["0.layer.0.out/linear"]) == 3 and hook_count(net) == 0


class _Twice(nn.Module):
    """One layer called twice."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.tanh(self.lin(x)))


@pytest.mark.parametrize("kw", [{"names": "0.1.lin"}, {"ops": "0.1.lin/linear"}, {"ops": "*/tanh"},
                                {"names": "**"}])
def test_a_layer_called_twice_in_a_part_called_on_its_own_is_numbered_per_call(kw: dict[str, str]) -> None:
    net = nn.Sequential(nn.Sequential(nn.Identity(), _Twice()), nn.Identity())
    with torch.no_grad(), capture(net, keep="all", **kw) as cap:  # type: ignore[arg-type]
        for _ in range(3):
            net[0](torch.randn(2, 4))
    key = {"0.1.lin": "0.1.lin", "0.1.lin/linear": "0.1.lin/linear", "*/tanh": "0.1/tanh"}.get(
        kw.get("names") or kw.get("ops", ""), "0.1.lin")
    assert len(cap[key]) == 3
    if "tanh" not in key:
        second = key.replace("lin", "lin#2", 1)
        assert len(cap[second]) == 3 and not any(k.count("#3") for k in cap.outputs)
    assert hook_count(net) == 0


def test_unknown_names_raise_before_the_model_runs_listing_the_nearest() -> None:
    net = Encoder()
    with pytest.raises(UnknownLayerError,
                       match=re.escape("no layer named 'layer.1.atention'; nearest: 'layer.1.attention'")):
        capture(net, ["head", "layer.1.atention"])
    with pytest.raises(UnknownLayerError, match=re.escape("no layer matches the pattern 'decoder.*'")):
        capture(net, "decoder.*")
    assert hook_count(net) == 0
    with capture(net, "head") as cap:
        net(torch.randn(1, 4))
    with pytest.raises(KeyError, match=re.escape("'haed' is not a captured layer; nearest: 'head'")):
        cap["haed"]
    with pytest.raises(ValueError, match="keep must be"):
        capture(net, keep="everything")
    with pytest.raises(TypeError, match="edit must be callable"):
        capture(net, edit="zero")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"needs a torch\.nn\.Module"):
        capture("net")  # type: ignore[arg-type]
    for inputs in (torch.randn(1, 4), [torch.randn(1, 4)]):  # inputs given as if capture ran the model
        said = "got a tensor: the model's inputs go to the model, called inside the block: `with capture("
        with pytest.raises(TypeError, match=re.escape(said)):
            capture(net, inputs)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"names must be strings .* got 3$"):
        capture(net, ["head", 3])  # type: ignore[list-item]
    assert hook_count(net) == 0


def test_names_that_are_not_strings_say_what_was_meant() -> None:
    net = Encoder()
    for names, said in ((lambda n: n.endswith("out"), "got a function: to filter names with a function, "
                         "pass names=[p for p, _ in model.named_modules() if f(p)]"),
                        (nn.Linear, "got the class Linear: choose layers by class with types=Linear"),
                        (net.head, "got a module (Linear): name it by its dotted path"),
                        ([net.head], "name it by its dotted path"),
                        (0, "got 0")):
        with pytest.raises(TypeError, match=re.escape(said)):
            capture(net, names)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=re.escape("labels must be a string or a list of strings")):
        capture(net, labels=3)  # type: ignore[arg-type]
    assert hook_count(net) == 0


def test_no_hooks_remain_after_exit_and_after_a_forward_pass_that_raised() -> None:
    net = mlp()
    with capture(net, "**", inputs=True, grads=True, stats=True, timing=True) as cap:
        assert hook_count(net) > 0
        net(torch.randn(2, 4)).sum().backward()
    assert hook_count(net) == 0 and len(cap._tensor_hooks) == 0
    with pytest.raises(RuntimeError, match="mat1 and mat2"), capture(net, ["0", "2"]) as cap:
        net(torch.randn(2, 5))
    assert hook_count(net) == 0
    # the next capture counts passes from a clean state
    with capture(net, "0") as cap:
        net(torch.randn(2, 4))
    assert cap.passes == 1 and cap.keys() == ["0"]


def test_reduction_condition_keep_and_to() -> None:
    net = mlp()
    ref = copy.deepcopy(net)
    xs = [torch.randn(3, 4) for _ in range(5)]
    flag = {"on": True}
    with capture(net, "2", inputs=True, reduction=lambda a, b: a + b, condition=lambda: flag["on"],
                 to="cpu") as cap:
        for i, x in enumerate(xs):
            flag["on"] = i % 2 == 0
            net(x)
    with torch.no_grad():
        want = sum(ref[2](torch.relu(ref[0](x))) for x in xs[::2])
        want_in = sum(torch.relu(ref[0](x)) for x in xs[::2])
    torch.testing.assert_close(cap["2"], want)
    torch.testing.assert_close(cap.inputs["2"], want_in)
    with capture(net, "2", keep="all") as cap:
        for x in xs:
            net(x)
    assert len(cap["2"]) == 5 and all(torch.equal(a, ref[2](torch.relu(ref[0](x))).detach())
                                      for a, x in zip(cap["2"], xs, strict=True))
    with capture(net, "2") as cap:
        for x in xs:
            net(x)
    assert torch.equal(cap["2"], ref[2](torch.relu(ref[0](xs[-1]))).detach())  # the last pass


def test_keep_all_with_a_reduction_and_a_condition_that_raises_are_named() -> None:
    net = mlp()
    with pytest.raises(ValueError, match=r"keep='all' and reduction= do not go together"):
        capture(net, "2", keep="all", reduction=lambda a, b: a + b)

    def broken() -> bool:
        raise RuntimeError("no flag")

    for kw in ({"names": "2"}, {"ops": "2/linear"}):
        with pytest.raises(RuntimeError, match="no flag") as info:
            with capture(net, condition=broken, **kw):  # type: ignore[arg-type]
                net(torch.randn(2, 4))
        assert "torchrecorder: raised in condition(), asked whether to capture '2" in "".join(
            getattr(info.value, "__notes__", [])) or sys.version_info < (3, 11)
        assert hook_count(net) == 0


def test_statistics_and_timings() -> None:
    net = nn.Sequential(nn.Linear(4, 6), nn.ReLU())
    with torch.no_grad():
        net[0].weight.zero_()
        net[0].bias.copy_(torch.tensor([-1.0, -1.0, 1.0, 2.0, -3.0, 4.0]))  # units 0, 1, 4 dead
    xs = [torch.randn(8, 4) for _ in range(3)]
    with capture(net, stats=True, timing=True, record=False) as cap:
        for x in xs:
            net(x)
    assert cap.stats("zeros")["1"] == pytest.approx(0.5)
    assert cap.stats("dead")["1"] == pytest.approx(0.5)
    assert cap.stats("mean")["1"] == pytest.approx((1 + 2 + 4) / 6)
    assert cap.stats("absmax")["0"] == pytest.approx(4.0)
    bias = torch.tensor([-1.0, -1, 1, 2, -3, 4])
    assert cap.stats("std")["0"] == pytest.approx(bias.std(unbiased=False).item())
    times = cap.stats("time")
    assert set(times) == {"", "0", "1"} and all(t >= 0 for t in times.values())
    with pytest.raises(ValueError, match="unknown statistic 'median'"):
        cap.stats("median")
    with capture(net) as plain:
        net(xs[0])
    with pytest.raises(ValueError, match="stats=True"):
        plain.stats("mean")
    with pytest.raises(ValueError, match="timing=True"):
        plain.stats("time")


def test_memory_stays_flat_over_1000_passes_with_a_reduction() -> None:
    """Python allocations (tracemalloc) and the tensors alive (storage bytes) after 1,000 passes
    equal those after 100: a reduction keeps one tensor per layer, whatever the number of passes."""
    net = mlp()
    x = torch.randn(16, 4)

    def tensor_bytes() -> int:
        gc.collect()
        with warnings.catch_warnings():  # isinstance() wakes deprecated lazy attributes of torch
            warnings.simplefilter("ignore")
            return sum(o.untyped_storage().nbytes() for o in gc.get_objects()
                       if isinstance(o, torch.Tensor) and o.device.type == "cpu")

    with capture(net, "**", inputs=True, reduction=lambda a, b: a + b, stats=True, timing=True) as cap, \
            ForwardOutput(reduction=torch.maximum).modules(net, types=nn.Linear) as rec:
        for _ in range(100):
            net(x)
        # (tensor_bytes makes a storage object for every tensor alive in the process, as many as
        # earlier tests left: measured outside the traced window)
        bytes_before = tensor_bytes()
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        for _ in range(900):
            net(x)
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        bytes_after = tensor_bytes()
    growth = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert cap.passes == 1000 and rec.samples(0) == 1000
    # (no more than before: tensors that earlier tests left to the collector, dynamo's after a
    # compiled test among them, may be freed meanwhile)
    assert bytes_after <= bytes_before
    assert growth < 64 * 1024, f"Python memory grew by {growth} bytes over 900 passes"
    # without a reduction, keep="all" grows with the passes (the measurement can see growth)
    with capture(net, "0", keep="all") as growing:
        for _ in range(100):
            net(x)
        grown = tensor_bytes()
    assert len(growing["0"]) == 100 and grown - bytes_after >= 100 * 16 * 8 * 4


def _train(with_hooks: bool, steps: int = 5) -> tuple[list[float], list[torch.Tensor], list[torch.Tensor]]:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    data = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(steps)]
    recorders = []
    if with_hooks:
        recorders = [cls().modules(net) for cls in (ForwardPre, ForwardInput, ForwardOutput, BackwardInput,
                                                     BackwardOutput)]
    losses, grads = [], []
    with capture(net, inputs=True, grads=True, stats=True, timing=True) if with_hooks else \
            torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        for x, y in data:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(net(x), y)
            loss.backward()
            losses.append(loss.item())
            grads.extend(p.grad.clone() for p in net.parameters())
            opt.step()
    for r in recorders:
        r.remove()
    assert hook_count(net) == 0
    return losses, grads, [p.detach().clone() for p in net.parameters()]


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_training_with_recorders_and_capture_is_bit_identical() -> None:
    plain = _train(False)
    hooked = _train(True)
    assert plain[0] == hooked[0]
    assert all(torch.equal(a, b) for a, b in zip(plain[1], hooked[1], strict=True))
    assert all(torch.equal(a, b) for a, b in zip(plain[2], hooked[2], strict=True))


def test_capture_on_meta_records_shapes_only() -> None:
    with torch.device("meta"):
        net = nn.Sequential(nn.Linear(8192, 8192), nn.ReLU(), nn.Linear(8192, 10))
    with capture(net, ["0", "2"], inputs=True, stats=True, to="meta") as cap:
        net(torch.empty(4, 8192, device="meta"))
    assert cap["0"].device.type == "meta" and cap["0"].shape == (4, 8192)
    assert cap.inputs["2"].shape == (4, 8192) and cap["2"].shape == (4, 10)
    assert cap.stats("mean") == {}  # no values on meta
    assert hook_count(net) == 0
    # to="cpu" (bounded memory, the README's recipe) keeps meta tensors where they are: they
    # have no data to move (it raised "Cannot copy out of meta tensor" inside the pass)
    with capture(net, "0", inputs=True, to="cpu", reduction=lambda a, b: a + b) as cap:
        for _ in range(2):
            net(torch.empty(4, 8192, device="meta"))
    assert cap["0"].device.type == "meta" and cap.inputs["0"].shape == (4, 8192)
    recorder = torchrecorder.ForwardOutput(to="cpu")
    recorder.children(net, indices=(0,))
    net(torch.empty(2, 8192, device="meta"))
    recorder.remove()
    assert recorder[0][0].device.type == "meta" and recorder[0][0].shape == (2, 8192)
    assert hook_count(net) == 0


def test_stop_forward_is_exported_and_propagates_outside_a_capture() -> None:
    net = mlp()
    cap = capture(net, stop="0").__enter__()
    try:
        with pytest.raises(StopForward):
            net(torch.randn(1, 4))
    finally:
        cap.remove()
    assert hook_count(net) == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_capture_on_cuda_moves_to_cpu_and_times() -> None:
    net = mlp().cuda()
    with capture(net, "**", to="cpu", timing=True, stats=True) as cap:
        net(torch.randn(2, 4, device="cuda"))
    assert cap["0"].device.type == "cpu" and cap.stats("time") and cap.stats("zeros")


def test_an_edit_that_fails_on_its_own_gets_no_argument_order_hint() -> None:
    # a RuntimeError from the edit's tensor code is not a sign of baukit's argument order
    net = mlp()
    with pytest.raises(RuntimeError) as info:
        with capture(net, "1", edit=lambda name, out: out.view(7, 7)):
            net(torch.randn(3, 4))
    notes = info.value.__notes__
    assert any("raised in edit('1', output)" in n for n in notes)
    assert not any("baukit" in n for n in notes)
    assert hook_count(net) == 0
