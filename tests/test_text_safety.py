"""Text that leaves the program in every writer (issue 24, items 7 and 15): lone surrogates,
names of thousands of backslashes, deep nesting in the layer table."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import graphviz
import pytest
from graphviz.quoting import quote as graphviz_quote
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import torchrecorder
from torchrecorder._text import dot_quote, string_quote, utf8_safe

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- 7: lone surrogates
@pytest.fixture(scope="module")
def surrogate_rec() -> torchrecorder.Recorder:
    net = nn.Sequential()
    net.add_module("a\ud800", nn.Linear(2, 2))
    net.add_module("b\udfff\ud83d", nn.ReLU())
    return torchrecorder.record(net, "n\udc80", (1, 2))


def test_utf8_safe_escapes_only_lone_surrogates() -> None:
    assert utf8_safe("plain ü 日本 🎉") == "plain ü 日本 🎉"
    assert utf8_safe("a\ud800b") == "a\\ud800b"
    assert utf8_safe("\udfff\ud83d") == "\\udfff\\ud83d"
    # in a JSON string the escape reads back as the character it replaces
    assert json.loads(utf8_safe(json.dumps("x\ud800", ensure_ascii=False))) == "x\ud800"


def test_the_layer_table_prints_a_lone_surrogate(surrogate_rec: torchrecorder.Recorder) -> None:
    text = str(surrogate_rec)
    text.encode("utf-8")  # print(rec) writes it
    assert "a\\ud800 (Linear)" in text and "b\\udfff\\ud83d (ReLU)" in text


def test_the_html_page_holds_a_lone_surrogate(surrogate_rec: torchrecorder.Recorder,
                                              tmp_path: Path) -> None:
    page = torchrecorder.make_html(surrogate_rec)
    page.text.encode("utf-8")
    page._repr_html_().encode("utf-8")
    assert "bytes" in repr(page)
    assert page.save(tmp_path / "p.html")
    raw = page.text.split('id="tr-data">', 1)[1].split("</script>", 1)[0]
    data = json.loads(raw)  # the page's data reads back with the very names
    assert "a\ud800" in json.dumps(data, ensure_ascii=False)
    assert "<title>n\\udc80 · torchrecorder</title>" in page.text
    shown = surrogate_rec.show()
    shown.text.encode("utf-8")


def test_every_other_writer_copes(surrogate_rec: torchrecorder.Recorder, tmp_path: Path) -> None:
    torchrecorder.make_dot(surrogate_rec, 2).source.encode("utf-8")
    torchrecorder.make_mermaid(surrogate_rec, 2).encode("utf-8")
    surrogate_rec.to_json(tmp_path / "s.json")
    back = torchrecorder.load_json(tmp_path / "s.json")
    assert [layer.name for layer in back.layers()][1:] == ["a\ud800", "b\udfff\ud83d"]
    for fmt in ("html", "json", "dot", "mmd"):
        path = torchrecorder.render_network(
            nn.Sequential(nn.Linear(2, 2)), "x\ud800", (1, 2), tmp_path, filename=f"f{fmt}", fmt=fmt)
        Path(path).read_bytes().decode("utf-8")


# ---------------------------------------------------------------- 15: quoting in linear time
_QUOTE_CASES = ["fc", "a b", "node", 'say "hi"', '\\"', '\\\\"', '\\\\\\"', '"', '""', 'a\\', "a\\\\",
                "<b>x</b>", "<x>\n", "abc\n", "-1.5", ".5", "x\\\\\\", '\\"\\\\"\\\\\\"',
                "\\" * 3000 + '"' + "\\" * 2999 + '"' + "\\" * 10]


def _reference(text: str) -> tuple[str, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        return graphviz_quote(text), [str(w.message) for w in caught]


def _ours(fn, text: str) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        return fn(text), [str(w.message) for w in caught]


@pytest.mark.parametrize("text", _QUOTE_CASES, ids=range(len(_QUOTE_CASES)))
def test_dot_quote_writes_what_the_graphviz_package_writes(text: str) -> None:
    assert _ours(dot_quote, text) == _reference(text)
    assert _ours(string_quote, text) == _reference(graphviz.nohtml(text) if text.startswith("<")
                                                   and text.rstrip("\n").endswith(">") else text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(['\\', '"', "a", " ", "<", ">", "\n", "&", "1", "."]),
               max_size=30))
def test_dot_quote_agrees_with_the_graphviz_package_on_any_text(text: str) -> None:
    assert _ours(dot_quote, text) == _reference(text)


def test_a_drawing_of_names_of_many_backslashes_finishes(tmp_path: Path) -> None:
    """Quadratic quoting took 10.8 s for 8,000 backslashes and hours for 200,000: the child
    process must finish well inside its limit (a hang guard, not a timing assertion)."""
    script = tmp_path / "draw.py"
    script.write_text(
        "import torch, torchrecorder\n"
        "net = torch.nn.Sequential()\n"
        "net.add_module('\\\\' * 200_000, torch.nn.Linear(2, 2))\n"
        "net.add_module('\\\\' * 199_999 + '\"', torch.nn.ReLU())\n"
        "rec = torchrecorder.record(net, '\\\\' * 50_000, (1, 2))\n"
        "print(len(torchrecorder.make_dot(rec, 3).source), len(torchrecorder.make_html(rec).text))\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sizes = [int(v) for v in proc.stdout.split()]
    assert len(sizes) == 2 and all(s > 0 for s in sizes)


# ---------------------------------------------------------------- 15: the layer table stays linear
def _chain_doc(depth: int) -> str:
    """A recording of ``depth`` nested modules (built as JSON: recording that deep needs a deep
    Python stack)."""
    nodes = []
    parent = None
    for d in range(depth):
        key = "net" if d == 0 else ".".join(["0"] * d)
        kids = [".".join(["0"] * (d + 1))] if d + 1 < depth else []
        nodes.append({"key": key, "kind": "layer", "name": "net" if d == 0 else "0", "depth": d,
                      "parent": parent, "type": "Sequential" if kids else "Linear",
                      "path": key if d else "", "subnets": kids, "input_shapes": [[1, 2]],
                      "output_shapes": [[1, 2]], "num_params_total": 6})
        parent = key
    return json.dumps({"format": "torchrecorder.graph", "version": 1, "name": "net", "context": ["net"],
                       "nodes": nodes, "edges": []})


def test_the_layer_table_grows_linearly_with_nesting_depth() -> None:
    small = str(torchrecorder.loads_json(_chain_doc(400)))
    large = str(torchrecorder.loads_json(_chain_doc(800)))
    assert large.count("\n") > 800 and "(Linear)" in large
    assert len(large) < 2.5 * len(small), (len(small), len(large))
    # the depth of a row below the drawn margin is still written, as a number
    assert "800" not in small and any("799" in line for line in large.splitlines())
