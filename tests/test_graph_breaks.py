"""torch.compile's graph breaks, placed on the module calls that cause them."""

from __future__ import annotations

import ast
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import torch

import torchrecorder
from torchrecorder import __main__
from torchrecorder.graph_breaks import GraphBreak, place_breaks

from . import source_models
from .source_models import line_of

MODEL_FILE = os.path.abspath(source_models.__file__)


@pytest.fixture(scope="module")
def found() -> Any:
    torch.manual_seed(0)
    net = source_models.Chatty()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    log = logging.getLogger("torch._dynamo.symbolic_convert.__graph_breaks")
    log_state = (log.level, log.propagate, list(log.handlers))
    breaks = torchrecorder.compile_breaks(net, input_data=torch.randn(2, 4), name="chatty")
    return net, before, log_state, breaks


def test_breaks_are_those_of_explain_placed_on_their_calls(found: Any) -> None:
    net, _, _, breaks = found
    import torch._dynamo

    expected = torch._dynamo.explain(net)(torch.randn(2, 4)).graph_break_count
    torch._dynamo.reset()
    assert len(breaks) == breaks.graph_break_count == expected == 2
    by_line = {b.lineno: b for b in breaks}
    item = by_line[line_of("item")]
    assert os.path.abspath(item.filename) == MODEL_FILE
    assert item.module == "gate" and "item()" in item.reason  # in the child, at its line
    shown = by_line[line_of("print")]
    assert shown.module == "chatty" and "print" in shown.detail
    assert isinstance(breaks.recording, torchrecorder.Recorder) and "gate" in breaks.recording.nodes


def test_model_dynamo_and_logging_are_left_as_they_were(found: Any) -> None:
    net, before, log_state, _ = found
    after = net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    log = logging.getLogger("torch._dynamo.symbolic_convert.__graph_breaks")
    assert (log.level, log.propagate, list(log.handlers)) == log_state
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    for cls in (source_models.Chatty, source_models.Thresholded):  # nothing compiled stays cached
        assert _debug_get_cache_entry_list(cls.forward.__code__) == []


def test_make_dot_and_the_page_mark_the_calls(found: Any, tmp_path: Path) -> None:
    _, _, _, breaks = found
    rec = breaks.recording
    dot = torchrecorder.make_dot(rec, breaks=breaks).source
    plain = torchrecorder.make_dot(rec).source
    assert "graph break" not in plain
    assert dot.count(">graph break<") == 2  # the child's cluster and the root's
    assert f"graph break at source_models.py:{line_of('item')}: Unsupported Tensor.item()" in dot
    boxes = torchrecorder.make_dot(rec, 1, breaks=breaks).source  # the child drawn as a box
    gate = next(line for line in boxes.splitlines() if line.strip().startswith("gate ["))
    assert "graph break" in gate and 'color="#d93025"' in gate
    page = torchrecorder.make_html(rec, breaks=breaks).text
    assert "graph break" in page and "torch.compile graph breaks" in page
    (tmp_path / "breaks.gv").write_text(dot)


def test_placing_without_dynamo() -> None:
    rec = torchrecorder.record(source_models.Chatty(), "chatty", (2, 4))
    at = [GraphBreak("r", MODEL_FILE, line_of("item")), GraphBreak("p", MODEL_FILE, line_of("print")),
          GraphBreak("elsewhere", "/nowhere.py", 3, stack=((MODEL_FILE, line_of("chatty.gate")),)),
          GraphBreak("lost", "/nowhere.py", 3)]
    placed = place_breaks(rec, at)
    assert [b.module for b in placed] == ["gate", "chatty", "chatty", None]
    with pytest.raises(TypeError, match="graph breaks"):
        torchrecorder.make_dot(rec, breaks=[("gate", "r")])


def test_reasons_name_no_memory_address() -> None:
    """Dynamo names a function it cannot trace by its address, different in every run: the
    texts a picture and the summary show leave it out, so the same model draws the same."""
    from torchrecorder.graph_breaks import _first_line

    fn = "<cyfunction default_rng at 0x7f203b437640>"
    b = GraphBreak("r", MODEL_FILE, 3, detail=f"Explanation: Can't find numpy function {fn} in torch._numpy.")
    assert b.explanation == "Can't find numpy function <cyfunction default_rng> in torch._numpy."
    assert _first_line(f"attempted to trace {fn}\nmore") == "attempted to trace <cyfunction default_rng>"


def test_cli_compile_breaks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "chatty.gv"
    assert __main__.main([f"{MODEL_FILE}:Chatty", "-s", "2,4", "-o", str(out), "--compile-breaks"]) == 0
    printed = capsys.readouterr().out
    assert "2 graph breaks" in printed and f"gate  source_models.py:{line_of('item')}" in printed
    assert ">graph break<" in out.read_text()


def test_not_imported_unless_asked() -> None:
    """No module imports the dynamo part, nor dynamo, when it is imported itself: only inside
    the functions that run it (and ``torchrecorder.__getattr__``)."""
    package = Path(torchrecorder.__file__).parent
    eager = []
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        todo = list(tree.body)
        while todo:  # module level, also inside if/try blocks, never inside a def or class
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.ImportFrom):
                names = [node.module or "", *(f"{node.module or ''}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                todo.extend(ast.iter_child_nodes(node))
                continue
            if any(n.endswith("graph_breaks") or n.startswith("torch._dynamo") for n in names):
                eager.append(f"{path.name}:{node.lineno}")
    assert eager == []


def test_bad_input_is_refused_before_dynamo_runs() -> None:
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        torchrecorder.compile_breaks(lambda x: x, (1, 4))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="input_shapes or input_data"):
        torchrecorder.compile_breaks(source_models.Chatty())


def test_a_line_two_calls_run_goes_to_the_first_call() -> None:
    """Two instances of one class, the first a child, the second deeper (in a Sequential):
    a break at a line of their class's ``forward`` goes to the first call, where dynamo meets
    it first, not to the deeper later one."""
    net = torch.nn.Sequential()
    net.add_module("first", source_models.Thresholded())
    net.add_module("deeper", torch.nn.Sequential(torch.nn.Identity(), source_models.Thresholded()))
    rec = torchrecorder.record(net, "net", (2, 4))
    placed = place_breaks(rec, [GraphBreak("r", MODEL_FILE, line_of("item"))])
    assert [b.module for b in placed] == ["first"]
    # two calls of one module: the first stands for the later ones
    twice = torch.nn.Sequential(torch.nn.Identity(), source_models.Thresholded())

    class Twice(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = twice

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(self.inner(x))

    rec = torchrecorder.record(Twice(), "twice", (2, 4))
    placed = place_breaks(rec, [GraphBreak("r", MODEL_FILE, line_of("item"))])
    assert [b.module for b in placed] == ["inner.1"]
