"""The backward graph in the JSON export: a loaded recording draws it as the original does."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder import export
from torchrecorder.projection.backward import backward_view
from torchrecorder.renderer.html import BackwardHtmlRenderer, HtmlRenderer

from .test_backward import net


@pytest.fixture(scope="module")
def rec() -> torchrecorder.Recorder:
    return torchrecorder.record(net(), "net", (2, 4), backward=True)


@pytest.mark.parametrize("options", [{}, {"show_saved": True}, {"render_depth": 1}, {"fold_repeats": False}])
def test_loaded_recording_draws_the_backward_graph_as_the_original(rec: torchrecorder.Recorder,
                                                                   options: dict[str, object]) -> None:
    loaded = torchrecorder.loads_json(rec.to_json())
    assert loaded.backward is not None
    want = torchrecorder.make_dot(rec, backward=True, **options).source  # type: ignore[arg-type]
    assert torchrecorder.make_dot(loaded, backward=True, **options).source == want  # type: ignore[arg-type]
    assert export.dumps(loaded) == export.dumps(rec)  # and writes the same document again


def test_backward_field_holds_the_autograd_graph(rec: torchrecorder.Recorder) -> None:
    doc = json.loads(rec.to_json())
    bw = doc["backward"]
    assert bw["grad_enabled"] is True
    assert [n["name"] for n in bw["nodes"]] == [n.name for n in rec.backward.nodes]
    assert [tuple(e) for e in bw["edges"]] == rec.backward.edges
    assert [tuple(o) for o in bw["outputs"]] == rec.backward.outputs
    weight = next(n for n in bw["nodes"] if n["param"] == "0.weight")
    assert weight["name"] == "AccumulateGrad" and weight["shape"] == [6, 4] and weight["scope"] == "0"
    assert any(n["saved"] for n in bw["nodes"])


def test_recordings_without_a_backward_graph_write_none_and_say_so_when_asked() -> None:
    plain = torchrecorder.record(net(), "net", (2, 4))
    assert "backward" not in export.to_dict(plain)
    loaded = torchrecorder.loads_json(plain.to_json())
    assert loaded.backward is None
    with pytest.raises(ValueError, match="record it with"):
        torchrecorder.make_dot(loaded, backward=True)
    with torch.no_grad():  # recorded without gradients: kept as such, and the error says why
        off = torchrecorder.record(net(), "net", (2, 4), backward=True)
    again = torchrecorder.loads_json(off.to_json())
    assert again.backward is not None and again.backward.grad_enabled is False
    with pytest.raises(ValueError, match="without gradients"):
        torchrecorder.make_dot(again, backward=True)


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda b: b.update(nodes="x"), "nodes has the wrong type"),
    (lambda b: b.update(grad_enabled=1), "grad_enabled"),
    (lambda b: b["nodes"][0].update(name=3), r"nodes\[0\]\.name"),
    (lambda b: b["nodes"][0].update(scope=3), r"nodes\[0\]\.scope"),
    (lambda b: b["nodes"][0].update(shape="6x4"), r"nodes\[0\]\.shape"),
    (lambda b: b["nodes"][1].update(saved=[["self"]]), r"nodes\[1\]\.saved"),
    (lambda b: b["edges"].append([0, 999]), r"edges\[\d+\]"),
    (lambda b: b["edges"].append([1, 0]), r"edges\[\d+\]"),
    (lambda b: b["outputs"].append([0, "nowhere"]), "not a tensor node"),
    (lambda b: b["outputs"].append([0, "0"]), "not a tensor node"),
])
def test_loader_rejects_bad_backward_fields(rec: torchrecorder.Recorder, mutate: object,
                                            message: str) -> None:
    data = export.to_dict(rec)
    mutate(data["backward"])  # type: ignore[operator]
    with pytest.raises(ValueError, match=message):
        export.from_dict(data)


def test_the_forward_part_reads_without_the_backward_field(rec: torchrecorder.Recorder) -> None:
    data = export.to_dict(rec)
    data.pop("backward")
    plain = export.from_dict(data)  # the rest of the document is the forward recording alone
    assert torchrecorder.make_dot(plain).source == torchrecorder.make_dot(rec).source


def test_a_module_the_model_calls_twice_round_trips() -> None:
    fc = nn.Linear(3, 3)
    rec = torchrecorder.record(nn.Sequential(fc, nn.Tanh(), fc), "twice", (1, 3), backward=True)
    loaded = torchrecorder.loads_json(rec.to_json())
    assert (torchrecorder.make_dot(loaded, backward=True, show_saved=True).source
            == torchrecorder.make_dot(rec, backward=True, show_saved=True).source)



def _page_data(rec: torchrecorder.Recorder, renderer: type) -> tuple[str, set[str]]:
    """The page's strings (joined) and the DOT ids of the layers its first view opens."""
    data = renderer(rec).page_data()
    strings = data["strings"]
    return "\n".join(strings), {strings[row[2]].strip('"') for row in data["nodes"] if row[5]}


def test_the_page_shows_the_backward_graph_of_a_recording_and_of_its_json(
        rec: torchrecorder.Recorder) -> None:
    page = torchrecorder.make_html(rec, backward=True)
    assert page.text == BackwardHtmlRenderer(backward_view(rec)).render().text
    text, opened = _page_data(backward_view(rec), BackwardHtmlRenderer)
    forward_text, forward_opened = _page_data(rec, HtmlRenderer)
    assert "AddmmBackward0" in text and "GeluBackward0" in text and "AddmmBackward0" not in forward_text
    # the leaf modules holding grad_fn nodes can open, as make_dot(backward=True) draws them
    assert opened == forward_opened == {"net"}  # the first view: depth 1
    assert BackwardHtmlRenderer(backward_view(rec)).expandable()["0"]
    assert not HtmlRenderer(rec).expandable()["0"]
    loaded = torchrecorder.loads_json(rec.to_json())
    assert torchrecorder.make_html(loaded, backward=True).text == page.text
    saved, _ = _page_data(backward_view(rec, saved=True), BackwardHtmlRenderer)
    assert "mat1" in saved and "mat1" not in text
    assert torchrecorder.make_html(rec, backward=True, show_saved=True).text != page.text
    with pytest.raises(ValueError, match="record it with"):
        torchrecorder.make_html(torchrecorder.record(net(), "net", (2, 4)), backward=True)
    with pytest.raises(ValueError, match="backward=True too"):
        torchrecorder.make_html(rec, show_saved=True)
