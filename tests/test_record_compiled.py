"""Recording a compiled model leaves torch.compile's own bookkeeping as it was: the pass runs
eagerly, so dynamo traces nothing of it (no graph breaks at the recorder's hooks counted among
the user's, no frames compiled) and the model's next compiled call uses what was compiled
before, without recompiling."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchrecorder


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2)).eval()


@pytest.mark.parametrize("how", ["wrapper", "in_place"])
def test_recording_a_compiled_model_leaves_dynamos_counters_and_cache(how: str) -> None:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    net = _net()
    if how == "wrapper":
        model: nn.Module = torch.compile(net, backend="eager")
    else:
        model = net
        net.compile(backend="eager")
    x = torch.randn(3, 4)
    expected = model(x)
    counters.clear()
    rec = torchrecorder.record(model, input_data=x)
    assert sum(counters["graph_break"].values()) == 0
    assert not counters["frames"]  # dynamo did not even look at the recorded pass
    assert [n.key for n in rec.nodes.values() if (n.key or "").endswith("/linear")]  # ops recorded
    assert torch.equal(model(x), expected)
    assert not counters["recompiles"] and not counters["stats"].get("unique_graphs")
    torch._dynamo.reset()


@pytest.mark.parametrize("how", ["wrapper", "in_place"])
def test_capture_of_a_compiled_model_keeps_its_layers_and_leaves_it_compiled(how: str) -> None:
    """The wrapper ran no hook of the block before (nothing kept); a module compiled in place did."""
    torch._dynamo.reset()
    net = _net()
    if how == "wrapper":
        model: nn.Module = torch.compile(net, backend="eager")
        prefix = "_orig_mod."
    else:
        model, prefix = net, ""
        net.compile(backend="eager")
    x = torch.randn(3, 4)
    expected = model(x)
    with torchrecorder.capture(model, "**") as cap:
        got = model(x)
    assert torch.equal(got, expected)
    assert torch.equal(cap[prefix + "3"], expected)  # the last layer's output, kept
    assert torch.equal(cap[prefix + "2"], net[2](net[1](net[0](x))))
    from torch._dynamo.utils import counters

    counters.clear()
    assert torch.equal(model(x), expected)  # compiled again after the block, as before it
    assert not counters["recompiles"] and not counters["stats"].get("unique_graphs")
    torch._dynamo.reset()


def test_a_recording_block_around_a_compiled_call_runs_it_eagerly() -> None:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    net = _net()
    compiled = torch.compile(net, backend="eager")
    x = torch.randn(3, 4)
    expected = compiled(x)
    counters.clear()
    with torchrecorder.recording(compiled, "c") as rec:
        got = compiled(x)
    assert torch.equal(got, expected)
    assert sum(counters["graph_break"].values()) == 0 and not counters["frames"]
    assert [layer.path for layer in rec.layers()] == ["", "_orig_mod", *(f"_orig_mod.{i}" for i in range(4))]
    assert torch._dynamo.eval_frame._stance.stance == "default"  # the stance is put back
    torch._dynamo.reset()
