"""The convenience functions end to end: files, formats, backends, bad input, model state."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder import GraphvizNotFoundError
from torchrecorder.recorder import leaf_dummy, op_acc, param_acc, posthook, prehook, tensor_acc

from .backends import needs_backend, needs_dot, needs_pygraphviz
from .graph_checks import global_hook_counts
from .zoo.handwritten import ConvBN, ResNetish, TinyMLP

SVG = "{http://www.w3.org/2000/svg}"


def svg_texts(path: str) -> list[str]:
    root = ET.parse(path).getroot()
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def no_hooks(net: nn.Module) -> bool:
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in net.modules()) and not any(
        global_hook_counts())


def state(net: nn.Module) -> dict[str, object]:
    return {
        "params": {k: v.detach().clone() for k, v in net.named_parameters()},
        "buffers": {k: v.detach().clone() for k, v in net.named_buffers()},
        "flags": {k: v.requires_grad for k, v in net.named_parameters()},
        "training": [m.training for m in net.modules()],
        "grads": [p.grad for p in net.parameters()],
    }


def same_state(a: dict[str, object], b: dict[str, object]) -> bool:
    def eq(x: object, y: object) -> bool:
        if isinstance(x, dict):
            return isinstance(y, dict) and x.keys() == y.keys() and all(eq(x[k], y[k]) for k in x)
        if isinstance(x, torch.Tensor):
            return isinstance(y, torch.Tensor) and torch.equal(x, y)
        return x == y
    return all(eq(a[k], b[k]) for k in a)


@needs_backend
def test_seed_call_writes_svg_named_after_the_network(tmp_path: Path) -> None:
    out = torchrecorder.render_network(ResNetish(), "resnet", (1, 3, 16, 16), str(tmp_path / "figures"))
    assert out == str(tmp_path / "figures" / "resnet-1.svg")  # as 1.0.3 named it
    texts = svg_texts(out)
    assert {"stem", "block", "head"} <= set(texts)
    assert "Conv2d · 112 params" in texts and "ResidualBlock · 296 params" in texts
    assert os.listdir(tmp_path / "figures") == ["resnet-1.svg"]
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(out).st_mode & 0o777 == 0o666 & ~umask


@needs_backend
@pytest.mark.parametrize("fmt", ["png", "pdf", "dot"])
def test_filename_and_format(tmp_path: Path, fmt: str) -> None:
    out = torchrecorder.render_network(TinyMLP(), "mlp", (1, 4), tmp_path, filename="pic", fmt=fmt)
    assert out == str(tmp_path / f"pic.{fmt}")
    data = Path(out).read_bytes()
    magic = {"png": b"\x89PNG", "pdf": b"%PDF", "dot": b"digraph"}[fmt]
    assert data.startswith(magic)


def test_dot_source_needs_no_graphviz(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` here
    monkeypatch.setitem(sys.modules, "pygraphviz", None)  # and pygraphviz cannot be imported
    rec = torchrecorder.record(TinyMLP(), "mlp", (1, 4))
    assert "fc1" in torchrecorder.make_dot(rec).source
    out = torchrecorder.render_network(TinyMLP(), "mlp", (1, 4), tmp_path, fmt="dot")
    assert Path(out).read_text().startswith("digraph")
    with pytest.raises(GraphvizNotFoundError, match="apt-get install graphviz") as info:
        torchrecorder.render_network(TinyMLP(), "mlp", (1, 4), tmp_path / "x")
    assert "pygraphviz" in str(info.value) and "torchrecorder[render]" in str(info.value)
    assert not (tmp_path / "x").exists()


@needs_dot
@needs_pygraphviz
@pytest.mark.parametrize("backend", ["dot", "pygraphviz"])
def test_both_backends_render_the_same_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             backend: str) -> None:
    monkeypatch.setenv("TORCHRECORDER_BACKEND", backend)
    assert torchrecorder.backend.backend_name() == backend
    out = torchrecorder.render_network(ConvBN().eval(), "cnn", (1, 3, 8, 8), tmp_path)
    root = ET.parse(out).getroot()
    titles = {t.text for t in root.iter(f"{SVG}title")}
    assert {"conv", "bn", "relu", "head", "input@x", "head@out"} <= titles
    assert "cnn/flatten" not in titles  # a data-movement op: named on its edge


def test_forced_backend_missing_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("TORCHRECORDER_BACKEND", "dot")
    with pytest.raises(GraphvizNotFoundError, match="no `dot` program is on PATH"):
        torchrecorder.render_network(TinyMLP(), "mlp", (1, 4), tmp_path)
    monkeypatch.setenv("TORCHRECORDER_BACKEND", "graphviz-please")
    with pytest.raises(ValueError, match="TORCHRECORDER_BACKEND"):
        torchrecorder.render_network(TinyMLP(), "mlp", (1, 4), tmp_path)


# ----------------------------------------------------------------------------- bad input
def test_not_a_module() -> None:
    with pytest.raises(TypeError, match=r"torch\.nn\.Module.*got function"):
        torchrecorder.record(lambda x: x, "f", (1,))  # type: ignore[arg-type]


def test_no_inputs_at_all() -> None:
    with pytest.raises(ValueError, match=r"input_shapes.*input_data"):
        torchrecorder.record(TinyMLP(), "mlp", None)


@pytest.mark.parametrize("shapes", ["1x4", (1, "4"), [(1, 4), "b"], 3, (1, -4)])
def test_malformed_shapes(shapes: object) -> None:
    with pytest.raises((TypeError, ValueError), match=r"input shape|input_shapes"):
        torchrecorder.record(TinyMLP(), "mlp", shapes)  # type: ignore[arg-type]


def test_shapes_that_do_not_fit_name_the_module_and_leave_no_hooks() -> None:
    net = TinyMLP()
    before = state(net)
    with pytest.raises(RuntimeError) as info:
        torchrecorder.record(net, "mlp", (2, 5))
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "'fc1' (Linear)" in notes and "2×5" in notes
    assert no_hooks(net) and same_state(before, state(net))
    partial = info.value.recording  # type: ignore[attr-defined]
    assert partial.failed_key == "fc1" and partial.nodes["fc1"].error.startswith("RuntimeError")
    assert "raised RuntimeError" in torchrecorder.make_dot(partial).source


@needs_backend
def test_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown format .svgg.*svg"):
        torchrecorder.render_network(TinyMLP(), "mlp", (1, 4), tmp_path, fmt="svgg")
    assert list(tmp_path.iterdir()) == []


def test_directory_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a directory")
    with pytest.raises(NotADirectoryError, match=r"file\.txt"):
        torchrecorder.render_network(TinyMLP(), "mlp", (1, 4), blocker / "figures", fmt="dot")


def test_failing_model_leaves_no_file_or_directory(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        torchrecorder.render_network(TinyMLP(), "mlp", (1, 7), tmp_path / "out", fmt="dot")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- model state
def test_model_state_is_left_exactly_as_it_was() -> None:
    net = ConvBN()  # training mode: a plain forward would update the BatchNorm statistics
    net.conv.weight.requires_grad_(False)
    before = state(net)
    rng = torch.get_rng_state()
    torchrecorder.record(net, "cnn", (2, 3, 8, 8))
    assert no_hooks(net) and same_state(before, state(net))
    assert net.training and torch.equal(rng, torch.get_rng_state())


def test_meta_model_stays_on_meta() -> None:
    with torch.device("meta"):
        net = ConvBN()
    rec = torchrecorder.record(net, "cnn", (1, 3, 8, 8))
    assert rec.nodes["input:x"].device == "meta" and rec.nodes["head:out"].shape == (1, 5)
    assert all(p.device.type == "meta" for p in net.parameters())


def test_dot_is_byte_identical_across_runs_and_processes() -> None:
    code = ("import torchrecorder, torch; from tests.zoo.handwritten import ResNetish; torch.manual_seed(0);"
            "print(torchrecorder.make_dot(torchrecorder.record(ResNetish(), 'r', (1, 3, 6, 6))).source)")
    root = Path(__file__).resolve().parent.parent
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           cwd=root).stdout for _ in range(2)]
    torch.manual_seed(0)
    here = torchrecorder.make_dot(torchrecorder.record(ResNetish(), "r", (1, 3, 6, 6))).source
    assert runs[0] == runs[1] == here + "\n"


# --------------------------------------------------------------- the original hook functions
def test_hook_functions_stay_importable_and_op_acc_walks_long_autograd_chains() -> None:
    assert all(callable(f) for f in (prehook, posthook, tensor_acc, param_acc, leaf_dummy))
    rec = torchrecorder.Recorder("manual")
    net = nn.Linear(2, 2)
    root = rec.add_node(net, depth=0, parent=None, name="lin")
    x = torch.randn(1, 2, requires_grad=True)
    y = net(x)
    for _ in range(5000):
        y = y * 1.0
    op_acc(y.grad_fn, rec, root)
    ops = [n for n in rec.nodes.values() if isinstance(n, torchrecorder.OpNode)]
    assert ops[0].op == "mul" and {o.op for o in ops} >= {"mul", "addmm"} and len(ops) > 5000
    assert any(isinstance(n, torchrecorder.ParamNode) for n in rec.nodes.values())
    rec.lint()
    t = tensor_acc(x, rec, root)
    assert isinstance(rec.nodes[t], torchrecorder.TensorNode) and rec.nodes[t].shape == (1, 2)
    dummy = leaf_dummy(x, rec)
    assert dummy is not x and torch.equal(dummy, x)
    assert rec.engine.lookup(dummy) == t


def test_prehook_and_posthook_record_a_module_outside_the_root() -> None:
    """A module the root does not hold, hooked by hand with the public hook functions."""
    from torchrecorder.nodes import LayerNode
    from torchrecorder.recorder import recording

    extra = nn.Linear(2, 2)
    net = nn.Linear(3, 2)
    template = LayerNode(name="head", path="head")
    with recording(net, "net") as rec:
        handles = [
            extra.register_forward_pre_hook(lambda m, a, k: prehook(m, a, rec, template, k),
                                            with_kwargs=True),
            extra.register_forward_hook(lambda m, a, k, o: posthook(m, a, o, rec, template, k),
                                        with_kwargs=True),
        ]
        extra(net(torch.randn(1, 3)))
    for h in handles:
        h.remove()
    assert [layer.key for layer in rec.layers()] == ["net", "head"]
    head = rec.calls_of(extra)[0]
    assert (head.name, head.type_name, head.num_params, head.input_shapes) == ("head", "Linear", 6, [(1, 2)])
    assert {"head.weight", "head.bias"} <= set(head.subnet_keys)
    assert ("net:out", "head/linear") in rec.links and ("head.weight", "head/linear") in rec.links
    rec.lint()


@pytest.mark.parametrize("enabled", [True, False])
def test_record_leaves_the_garbage_collector_on_and_make_dot_pauses_it(enabled: bool) -> None:
    import gc

    in_forward: list[bool] = []
    in_styler: list[bool] = []

    class Probe(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            in_forward.append(gc.isenabled())
            if x.shape[0] == 2:
                raise ValueError("two rows")
            return x + 1

    class ProbeStyler(torchrecorder.GraphvizStyler):
        def style_node(self, node: torchrecorder.BaseNode) -> dict[str, str]:
            in_styler.append(gc.isenabled())
            return super().style_node(node)

    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        rec = torchrecorder.record(Probe(), "p", (1, 3))
        assert gc.isenabled() is enabled
        with pytest.raises(ValueError, match="two rows"):
            torchrecorder.record(Probe(), "p", (2, 3))
        assert gc.isenabled() is enabled
        torchrecorder.make_dot(rec, styler_cls=ProbeStyler)
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
    # the user's forward runs with the collector as the user left it; drawing pauses it
    assert in_forward == [enabled, enabled]
    assert len(in_styler) > 2 and not any(in_styler)


def test_keyword_inputs_only() -> None:
    from .zoo.handwritten import TwoInputs

    kwargs = {"a": torch.randn(1, 3), "b": torch.randn(1, 5)}
    rec = torchrecorder.record(TwoInputs(), "two", input_kwargs=kwargs)
    assert rec.nodes["input:a"].shape == (1, 3) and rec.nodes["input:b"].shape == (1, 5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_cuda_model_records_on_its_device() -> None:
    net = ConvBN().cuda().eval()
    before = state(net)
    rec = torchrecorder.record(net, "cnn", (1, 3, 8, 8))
    assert rec.nodes["input:x"].device.startswith("cuda") and rec.nodes["head:out"].shape == (1, 5)
    assert no_hooks(net) and same_state(before, state(net))
