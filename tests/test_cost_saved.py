"""torchrecorder.cost: ``saved_bytes``, what autograd saved for the backward pass, equal to what
torch's own saved-tensor hooks see; the column, the colouring and the page panel."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder

from .test_cost import _gpt2, _ids


def _model_storages(net: nn.Module) -> set[int]:
    return {t.untyped_storage()._cdata for t in (*net.parameters(), *net.buffers())}


def _reference(net: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, dict[str, int]]:
    """Bytes of the distinct storages torch packs for backward during a plain forward pass (the
    model's parameters and buffers left out), in all and by module path: a storage counts in
    every module whose forward was running when it was packed."""
    model = _model_storages(net)
    sizes: dict[int, int] = {}
    by_path: dict[str, set[int]] = {}
    running: list[str] = []
    names = {m: n for n, m in net.named_modules()}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage._cdata not in model:
            sizes[storage._cdata] = storage.nbytes()
            for path in running:
                by_path.setdefault(path, set()).add(storage._cdata)
        return t

    def enter(module: nn.Module, args: Any) -> None:
        running.append(names[module])

    def leave(module: nn.Module, args: Any, out: Any) -> None:
        running.pop()

    handles = [m.register_forward_pre_hook(enter) for m in names]
    handles += [m.register_forward_hook(leave) for m in names]
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = net(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    del out
    return sum(sizes.values()), {p: sum(sizes[s] for s in found) for p, found in by_path.items()}


def _check(net: nn.Module, args: tuple[Any, ...] = (), kwargs: Any = None) -> torchrecorder.Cost:
    kwargs = kwargs or {}
    rec = torchrecorder.record(net, "net", input_data=args or None, input_kwargs=kwargs or None,
                               backward=True)
    c = torchrecorder.cost(rec)
    total, by_path = _reference(net, args, kwargs)
    assert total > 0 and c.total.saved_bytes == total
    got = {layer.path: c[str(layer.key)].saved_bytes for layer in rec.layers()}
    assert {p: v for p, v in got.items() if v} == {p: v for p, v in by_path.items() if v}
    assert c["net"].saved_bytes == total  # everything ran inside the network's forward
    return c


def test_an_mlp_saves_each_activation_once_and_no_parameter() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    c = _check(net, (torch.randn(2, 8),))
    # the input (2 x 8 floats, saved by the first addmm) and the ReLU's output (2 x 16 floats,
    # saved by the ReLU and by the second addmm: once); the weights the addmms saved are not counted
    assert c.total.saved_bytes == (2 * 8 + 2 * 16) * 4
    assert c["1"].saved_bytes == c["2"].saved_bytes == 2 * 16 * 4
    assert c["0"].saved_bytes == 2 * 8 * 4


class _Block(nn.Module):
    """Training-mode batch norm (its buffers saved too), a pooling that saves its indices, a
    residual, and an indexing that saves a list of index tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1, groups=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2, return_indices=False)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pool(torch.relu(self.bn(self.conv(x))))
        y = y + self.dw(y) * torch.sigmoid(y)
        y = y.mean((2, 3))
        return self.head(y[torch.tensor([0, 1, 1])])


def test_a_cnn_in_training_mode_equals_torchs_saved_tensor_hooks() -> None:
    torch.manual_seed(0)
    _check(_Block().train(), (torch.randn(2, 3, 16, 16, requires_grad=True),))


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_gpt2_equals_torchs_saved_tensor_hooks_for_every_module(impl: str) -> None:
    c = _check(_gpt2(impl), (), {"input_ids": _ids(2, 7)})
    assert c["transformer.h.0"].saved_bytes < c["transformer"].saved_bytes


def test_no_saved_bytes_without_the_backward_graph_and_none_under_no_grad() -> None:
    net = nn.Linear(4, 4)
    c = torchrecorder.cost(torchrecorder.record(net, "lin", (2, 4)))
    assert c.total.saved_bytes is None and c["lin"]["saved_bytes"] is None
    with torch.no_grad():
        rec = torchrecorder.record(net, "lin", (2, 4), backward=True)
    assert torchrecorder.cost(rec).total.saved_bytes == 0


def test_a_tensor_a_saved_tensor_hook_packed_is_not_read_nor_counted() -> None:
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
    unpacked: list[int] = []

    def unpack(t: torch.Tensor) -> torch.Tensor:
        unpacked.append(1)
        return t

    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        rec = torchrecorder.record(net, "net", (2, 4), backward=True)
    assert not unpacked
    assert torchrecorder.cost(rec).total.saved_bytes == 0
    relu = next(n for n in rec.backward.nodes if n.name == "ReluBackward0")
    assert relu.unread == ["result"] and not relu.stored


def test_saved_shapes_keep_their_dtype_and_storage() -> None:
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(torch.float64)
    rec = torchrecorder.record(net, "net", input_data=torch.randn(3, 4, dtype=torch.float64), backward=True)
    bw = rec.backward
    assert bw is not None and bw.storages is not None
    relu = next(n for n in bw.nodes if n.name == "ReluBackward0")
    last = [n for n in bw.nodes if n.name == "AddmmBackward0"][-1]
    assert relu.saved == [("result", (3, 8))] and relu.stored[0][0] == "float64"
    stored = dict(zip([name for name, _ in last.saved], last.stored, strict=True))
    assert stored["mat1"] == relu.stored[0]  # the ReLU's output, one storage
    assert bw.storages[stored["mat2"][1]] == (8 * 2 * 8, "model")  # the weight: the model's


def test_the_table_the_drawing_and_the_page_show_saved_bytes() -> None:
    from torchrecorder.renderer.html import HtmlRenderer
    from torchrecorder.summary import summary_table

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 512), nn.ReLU(), nn.Linear(512, 8))
    rec = torchrecorder.record(net, "net", (4, 8), backward=True)
    text = summary_table(rec, columns=["saved_bytes"])
    rows = {line.split()[0].lstrip("├└─"): line.split() for line in text.splitlines() if "(" in line}
    assert text.splitlines()[1].split()[-2:] == ["Saved", "size"]
    assert rows["1"][-2:] == ["8.2", "KB"] and rows["0"][-2:] == ["128", "B"]  # 4 x 512, 4 x 8 floats
    assert rows["net"][-2:] == ["8.3", "KB"]
    source = torchrecorder.make_dot(rec, stat="saved_bytes").source
    assert "saved for backward per call (log scale)" in source and "saved 8.2 KB" in source
    data = HtmlRenderer(rec).page_data()
    infos = [json.loads(data["strings"][row[6]]) for row in data["nodes"]]
    relu = next(i for i in infos if i["kind"] == "module" and i["path"] == "1")
    assert relu["cost"].endswith("· saved 8.2 KB")
    assert "saved_bytes" in torchrecorder.make_html(rec).text
    plain = torchrecorder.record(net, "net", (4, 8))
    assert "saved" not in summary_table(plain, columns=["flops"])


# ------------------------------------------------------------------ saved as JSON
class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2)
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x)).mean((2, 3))
        return self.mlp(y) @ torch.ones(4, 2)


def test_a_recording_saved_as_json_gives_the_same_cost_backward_saved_and_time() -> None:
    torch.manual_seed(0)
    rec = torchrecorder.record(_Net(), "net", (2, 3, 9, 9), backward=True, timing=True)
    want = torchrecorder.cost(rec)
    assert want.total.backward_flops and want.total.saved_bytes and want.total.time is not None
    doc = json.loads(rec.to_json())
    assert doc["version"] == 1  # optional fields: the schema is the same
    loaded = torchrecorder.loads_json(json.dumps(doc))
    got = torchrecorder.cost(loaded)
    assert {k: got[k] for k in got} == {k: want[k] for k in want}
    assert got.total == want.total and got.ops == want.ops and got.uncounted == want.uncounted
    assert loaded.timing_subtracted == rec.timing_subtracted
    # saved again from the loaded graph: the same document
    assert json.loads(loaded.to_json()) == doc
    # a document written before these fields existed loads, without what it lacks
    for field in ("op_backward_flops", "call_times", "timing_subtracted"):
        doc.pop(field)
    doc["backward"].pop("storages")
    for node in doc["backward"]["nodes"]:
        node.pop("stored")
    old = torchrecorder.cost(torchrecorder.loads_json(json.dumps(doc)))
    assert old.total.flops == want.total.flops
    assert old.total.backward_flops is None and old.total.saved_bytes is None and old.total.time is None


@pytest.mark.parametrize(("change", "match"), [
    (lambda d: d.update(call_times={"conv": -1.0}), "call_times"),
    (lambda d: d.update(call_times={"nowhere": 1.0}), "call_times"),
    (lambda d: d.update(timing_subtracted="1"), "timing_subtracted"),
    (lambda d: d.update(op_backward_flops=[["conv/conv2d", "conv", -5]]), "op_backward_flops"),
    (lambda d: d["backward"].update(storages=[[12, "elsewhere"]]), "storages"),
    (lambda d: d["backward"].update(storages=[]), r"nodes\[\d+\]\.stored"),
])
def test_bad_cost_fields_are_refused_by_name(change: Any, match: str) -> None:
    rec = torchrecorder.record(_Net(), "net", (2, 3, 9, 9), backward=True, timing=True)
    doc = json.loads(rec.to_json())
    change(doc)
    with pytest.raises(ValueError, match=match):
        torchrecorder.loads_json(json.dumps(doc))
