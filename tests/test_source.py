"""The way back to the code: every module call and operation knows its file and line."""

from __future__ import annotations

import copy
import json
import os
import pickle
import types
from pathlib import Path

import pytest
import torch

import torchrecorder
from torchrecorder import __main__, export
from torchrecorder.diff.sides import content_key
from torchrecorder.nodes import BaseNode, LayerNode, OpNode, Source
from torchrecorder.renderer.html import HtmlRenderer

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


def test_lines_are_resolved_when_read_and_keep_no_frame() -> None:
    rec = _record()
    ops = [n for n in rec.nodes.values() if isinstance(n, (LayerNode, OpNode))]
    # what the recording keeps: the code object and the instruction, never a frame
    for node in ops:
        raw = node._source
        assert type(raw) is tuple and isinstance(raw[0], types.CodeType) and isinstance(raw[1], int), node
        assert not any(isinstance(v, types.FrameType) for v in raw)
    cat = rec.nodes["joined/cat"]
    assert _line(cat) == (MODEL_FILE, line_of("cat"))
    assert isinstance(cat._source, Source)  # resolved once, then kept
    # a copy, a pickle and the diff's content digest see the resolved line
    copied = copy.deepcopy(_record())
    assert _line(copied.nodes["gate/sigmoid"]) == (MODEL_FILE, line_of("sigmoid"))
    node = _record().nodes["gate.fc/linear"]
    assert type(node._source) is tuple
    assert _line(pickle.loads(pickle.dumps(node))) == (MODEL_FILE, line_of("gate.fc"))
    rec = _record()
    content_key(rec)  # reads each line as node.source gives it, not the code object's text
    calls_and_ops = [n for n in rec.nodes.values() if isinstance(n, (LayerNode, OpNode))]
    assert all(isinstance(n._source, Source) for n in calls_and_ops)


# ------------------------------------------------------------------ where nodes are shown
def test_lines_survive_a_json_round_trip() -> None:
    rec = _record()
    again = export.loads(export.dumps(rec))
    for key, node in rec.nodes.items():
        assert again.nodes[key].source == node.source, key
    assert again.nodes["joined/cat"].source.lineno == line_of("cat")
    # one table entry per line, shared again after loading
    doc = export.to_dict(rec)
    assert len(doc["sources"]) == len({n.source for n in rec.nodes.values() if n.source})
    assert again.nodes["gate/sigmoid"].source is again.nodes["gate#2/sigmoid"].source


def test_a_document_without_lines_loads_with_none_and_bad_ones_are_refused() -> None:
    doc = export.to_dict(_record())
    old = {k: v for k, v in doc.items() if k != "sources"}
    old["nodes"] = [{k: v for k, v in n.items() if k != "source"} for n in doc["nodes"]]
    loaded = export.from_dict(old)
    assert all(n.source is None for n in loaded.nodes.values())
    assert "sources" not in export.to_dict(loaded)
    bad = dict(doc, nodes=[dict(doc["nodes"][0], source=len(doc["sources"])), *doc["nodes"][1:]])
    with pytest.raises(ValueError, match="'source' must be an index"):
        export.from_dict(bad)
    with pytest.raises(ValueError, match=r"sources\[0\]"):
        export.from_dict(dict(doc, sources=[["f.py", "12", "forward"], *doc["sources"][1:]]))


def test_tooltips_table_and_diff_say_file_and_line() -> None:
    rec = _record()
    dot = torchrecorder.make_dot(rec).source
    base = os.path.basename(MODEL_FILE)
    assert f"called at {base}:{line_of('gate')}" in dot
    assert f"cat -> 2×8 at {base}:{line_of('cat')}" in dot
    table = rec.summary(columns=["label", "source"])
    row = next(r for r in table.splitlines() if "head (Sequential)" in r)
    assert row.rstrip().endswith(f"{base}:{line_of('head')}")
    changed = source_models.Joined()
    changed.head[1] = torch.nn.GELU()
    text = torchrecorder.diff(rec, torchrecorder.record(changed, "joined", (2, 4))).summary()
    line = next(r for r in text.splitlines() if "head.1" in r and "GELU" in r)
    assert line.endswith(f"(called at {base}:{line_of('head')})")


def _panel_sources(rec: torchrecorder.Recorder, **options: object) -> dict[str, dict[str, object]]:
    """Node path or name -> what the page's detail panel gets of its line of code."""
    data = HtmlRenderer(rec, **options).page_data()  # type: ignore[arg-type]
    infos = [json.loads(data["strings"][row[6]]) for row in data["nodes"]]
    return {f"{i['kind']}:{i['path'] if i['kind'] == 'module' else i['name']}": i["source"]
            for i in infos if "source" in i}


def test_html_page_shows_the_line_and_an_editor_link() -> None:
    rec = _record()
    path = MODEL_FILE.replace(os.sep, "/")
    text = torchrecorder.make_html(rec).text
    assert os.path.basename(MODEL_FILE) in text and f"vscode://file{path}:{line_of('cat')}" in text
    panel = _panel_sources(rec)
    cat = panel["operation:cat"]
    assert cat["code"] == "z = torch.cat([g, h], dim=1)  # at:cat"  # read when the page is built
    assert cat["href"] == f"vscode://file{path}:{line_of('cat')}" and cat["line"] == line_of("cat")
    assert panel["module:head"]["where"] == f"{os.path.basename(MODEL_FILE)}:{line_of('head')}"
    other = _panel_sources(rec, editor_url="pycharm://open?file={path}&line={line}")
    assert other["module:head"]["href"] == f"pycharm://open?file={path}&line={line_of('head')}"
    assert all("href" not in v for v in _panel_sources(rec, editor_url=None).values())
    for bad, why in [("javascript:alert({path}{line})", "not run code"), ("vscode://{path}", "both"),
                     ("x://{path}:{line}:{col}", "only")]:
        with pytest.raises(ValueError, match=why):
            torchrecorder.make_html(rec, editor_url=bad)


def test_cli_columns_prints_the_source_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "j.json"
    code = __main__.main([f"{MODEL_FILE}:Joined", "-s", "2,4", "-o", str(out), "-n", "joined",
                          "--columns", "label,source"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "Source" in printed and f"{os.path.basename(MODEL_FILE)}:{line_of('head')}" in printed
    loaded = torchrecorder.load_json(out)
    assert loaded.nodes["joined/cat"].source.lineno == line_of("cat")


def test_drawings_leave_out_the_lines_of_the_recording_script() -> None:
    """A ``Sequential`` network's layers are called by torch from the line that recorded it: that
    line is their ``source``, but a drawing of the model does not depend on where it was recorded."""
    def draw(net: torch.nn.Module) -> tuple[torchrecorder.Recorder, str]:
        rec = torchrecorder.record(net, "seq", (1, 4))
        return rec, torchrecorder.make_dot(rec).source

    torch.manual_seed(0)
    rec, first = draw(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()))
    assert rec.nodes["0"].source == rec.nodes["seq"].source == rec.nodes["1/relu"].source
    assert os.path.abspath(rec.nodes["0"].source.filename) == HERE
    assert "called at" not in first and " at test_source.py" not in first
    torch.manual_seed(0)
    again = torchrecorder.make_dot(torchrecorder.record(  # recorded from another line
        torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), "seq", (1, 4))).source
    assert again == first
    assert "test_source.py" in rec.summary(columns=["source"])
    joined = torchrecorder.make_dot(_record()).source  # the model's own lines are drawn
    assert f"called at source_models.py:{line_of('gate')}" in joined
