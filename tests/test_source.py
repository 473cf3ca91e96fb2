"""The way back to the code: every module call and operation knows its file and line."""

from __future__ import annotations

import os

import torch

import torchrecorder
from torchrecorder.nodes import BaseNode, LayerNode, OpNode, Source

from . import source_models
from .source_models import line_of

MODEL_FILE = os.path.abspath(source_models.__file__)
HERE = os.path.abspath(__file__)


def _record(**kw: object) -> torchrecorder.Recorder:
    return torchrecorder.record(source_models.Joined(), "joined", (2, 4), **kw)  # at-test:root


def _line(node: BaseNode) -> tuple[str, int]:
    src = node.source
    assert isinstance(src, Source), node
    return os.path.abspath(src.filename), src.lineno


def test_module_calls_carry_the_line_that_called_them() -> None:
    rec = _record()
    nodes = rec.nodes
    for key, marker in [("gate", "gate"), ("gate#2", "gate#2"), ("gate.fc", "gate.fc"),
                        ("gate.fc#2", "gate.fc"), ("head", "head"), ("head.0", "head"), ("head.1", "head")]:
        assert _line(nodes[key]) == (MODEL_FILE, line_of(marker)), key
    assert nodes["gate"].source.function == "forward"
    # the root: the line of the caller's code that called record()
    with open(HERE, encoding="utf-8") as f:
        root_line = next(i for i, t in enumerate(f, 1) if t.rstrip().endswith("# at-test:root"))
    assert _line(nodes["joined"]) == (HERE, root_line)
    assert nodes["joined"].source.function == "_record"


def test_operations_carry_the_first_line_outside_torch() -> None:
    rec = _record()
    ops = {n.key: n for n in rec.nodes.values() if isinstance(n, OpNode)}
    assert _line(ops["joined/cat"]) == (MODEL_FILE, line_of("cat"))
    assert _line(ops["gate/sigmoid"]) == (MODEL_FILE, line_of("sigmoid"))
    assert _line(ops["gate#2/sigmoid"]) == (MODEL_FILE, line_of("sigmoid"))
    # an op run inside torch's own module: the line that called that module
    assert _line(ops["gate.fc/linear"]) == (MODEL_FILE, line_of("gate.fc"))
    assert _line(ops["head.1/relu"]) == (MODEL_FILE, line_of("head"))
    # one shared Source per line
    assert ops["gate/sigmoid"].source is ops["gate#2/sigmoid"].source


def test_every_call_and_op_has_a_source_and_others_none() -> None:
    rec = _record()
    for node in rec.nodes.values():
        if node.key is None:
            continue
        if isinstance(node, (LayerNode, OpNode)):
            assert node.source is not None, node
        else:
            assert node.source is None, node


def test_a_module_whose_class_overrides_call() -> None:
    rec = torchrecorder.record(source_models.CallsWrapped(), "w", (1, 4))
    assert _line(rec.nodes["inner"]) == (MODEL_FILE, line_of("wrapped"))


def test_source_off() -> None:
    rec = _record(source=False)
    assert all(n.source is None for n in rec.nodes.values())


def test_recording_context_manager_and_ops_between_calls() -> None:
    net = source_models.Gate()
    with torchrecorder.recording(net, "g") as rec:
        net(torch.randn(1, 4))  # at-test:ctx
    with open(HERE, encoding="utf-8") as f:
        line = next(i for i, t in enumerate(f, 1) if t.rstrip().endswith("# at-test:ctx"))
    assert _line(rec.nodes["g"]) == (HERE, line)
