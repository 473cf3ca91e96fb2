"""Drawing a diff (union / a / b views over the union's nodes) and the ``diff`` command line."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest
import torch

import torchrecorder
from torchrecorder._files import dot_source_of
from torchrecorder.backend import render_source
from torchrecorder.diff.draw import DIFF_STYLES
from torchrecorder.diff.files import render_diff

from .backends import needs_backend, needs_dot
from .diff_models import Decoder, Stack, lora_wrap
from .dot_parse import parse_dot as _parse


class _Parsed:
    def __init__(self, source: str) -> None:
        st = _parse(source)
        self.nodes = {k: {a: v.strip('"') for a, v in attrs.items()} for k, attrs in st.node_attrs.items()}


def parse_dot(source: str) -> _Parsed:
    return _Parsed(source)


@pytest.fixture(scope="module")
def lora_diff() -> torchrecorder.Diff:
    torch.manual_seed(0)
    m = Decoder(2)
    a = torchrecorder.record(m, "dec", (1, 3, 8))
    b = torchrecorder.record(lora_wrap(copy.deepcopy(m)), "dec", (1, 3, 8))
    return torchrecorder.diff(a, b)


@pytest.fixture(scope="module")
def insert_pair() -> tuple[torchrecorder.Recorder, torchrecorder.Recorder]:
    torch.manual_seed(0)
    return (torchrecorder.record(Stack((8, 8, 8)), "net", (1, 8)),
            torchrecorder.record(Stack((8, 16, 8, 8)), "net", (1, 8)))


def _positions(source: str) -> dict[str, tuple[str, str]]:
    out = subprocess.run(["dot", "-Tplain"], input=source.encode(), capture_output=True, check=True).stdout
    pos = {}
    for line in out.decode().splitlines():
        parts = line.split()
        if parts and parts[0] == "node":
            pos[parts[1]] = (parts[2], parts[3])
    return pos


@needs_dot
def test_views_share_one_layout(lora_diff: torchrecorder.Diff) -> None:
    sources = {v: torchrecorder.make_dot(lora_diff, view=v).source for v in ("union", "a", "b")}
    positions = {v: _positions(s) for v, s in sources.items()}
    assert len(positions["union"]) > 20
    # every view lays out the union's nodes (the other side's invisible), so the pictures line
    # up; a box may be a little wider or narrower where the view's own label differs
    assert set(positions["union"]) == set(positions["a"]) == set(positions["b"])
    assert sources["union"] != sources["a"] != sources["b"]
    # in view a the LoRA factors (only in b) are invisible; in view b nothing is (nothing removed)
    nodes_a = parse_dot(sources["a"]).nodes
    lora = [k for k in nodes_a if k.endswith("lora_A")]
    assert lora and all("invis" in nodes_a[k].get("style", "") for k in lora)
    nodes_b = parse_dot(sources["b"]).nodes
    assert not any("invis" in n.get("style", "") for k, n in nodes_b.items() if k.endswith("lora_A"))


def test_union_marks_and_colours(insert_pair: tuple[torchrecorder.Recorder, torchrecorder.Recorder]) -> None:
    d = torchrecorder.diff(*insert_pair)
    source = torchrecorder.make_dot(d, changes_only=False).source
    nodes = parse_dot(source).nodes
    added = nodes["layers.1.fc"]
    assert added["color"] == DIFF_STYLES["added"]["color"] and "<B>+</B>" in added["label"]
    assert nodes["layers.0.fc"]["color"] == DIFF_STYLES["same"]["color"]
    renamed = parse_dot(torchrecorder.make_dot(d).source).nodes["layers.2"]  # closed: nothing changed inside
    assert renamed["color"] == DIFF_STYLES["renamed"]["color"] and "↦" in renamed["label"]
    assert "renumbered +1" in renamed["label"]
    assert "diff legend" in nodes
    assert "diff legend" not in parse_dot(torchrecorder.make_dot(d, legend=False).source).nodes
    # by default only modules holding changes open: the unchanged blocks are single boxes
    default = parse_dot(torchrecorder.make_dot(d).source)
    assert "layers.0" in default.nodes and "layers.0.fc" not in default.nodes
    assert torchrecorder.make_dot(d).source == torchrecorder.make_dot(d).source
    # the old link from block 0 to the block now numbered 2 is drawn dashed, and only in the union/a
    st = _parse(torchrecorder.make_dot(d).source)
    old = [attrs for edge, attrs in zip(st.edges, st.edge_attrs, strict=True)
           if edge == ("layers.0", "layers.2")]
    assert len(old) == 1 and "dashed" in old[0]["style"]
    assert old[0]["color"].strip('"') == DIFF_STYLES["removed"]["color"]
    assert ("layers.0", "layers.2") in _parse(torchrecorder.make_dot(d, view="b").source).invisible


def test_removed_is_dashed(insert_pair: tuple[torchrecorder.Recorder, torchrecorder.Recorder]) -> None:
    a, b = insert_pair
    d = torchrecorder.diff(b, a)
    nodes = parse_dot(torchrecorder.make_dot(d, changes_only=False).source).nodes
    removed = nodes["a/layers.1.fc"]  # the first graph's key, marked: the second uses it too
    assert "dashed" in removed["style"] and removed["color"] == DIFF_STYLES["removed"]["color"]
    assert "−" in removed["label"]


@needs_backend
def test_render_diff_files(lora_diff: torchrecorder.Diff, tmp_path: object) -> None:
    base = str(tmp_path)
    png = render_diff(lora_diff, os.path.join(base, "d.png"))
    with open(png, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    source = dot_source_of(png)  # the gallery scraper's thumbnail source
    assert source is not None and source.startswith("digraph")
    js = render_diff(lora_diff, os.path.join(base, "d.json"))
    assert dot_source_of(js) is None
    with open(js, encoding="utf-8") as fh:
        assert json.load(fh)["summary"]["wrapped"] == 4  # the 4 layers (the root is paired, not wrapped)
    with pytest.raises(ValueError, match="cannot tell the format"):
        render_diff(lora_diff, os.path.join(base, "noext"))
    with pytest.raises(ValueError, match="view must be one of"):
        torchrecorder.make_dot(lora_diff, view="c")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    return subprocess.run([sys.executable, "-m", "torchrecorder", "diff", *args], capture_output=True,
                          text=True, env=env)


@needs_backend
def test_command_line(insert_pair: tuple[torchrecorder.Recorder, torchrecorder.Recorder],
                      tmp_path: object) -> None:
    base = str(tmp_path)
    a, b = insert_pair
    pa, pb = os.path.join(base, "a.json"), os.path.join(base, "b.json")
    a.to_json(pa)
    b.to_json(pb)
    same = _cli(pa, pa, "--exit-code")
    assert same.returncode == 0 and "no difference" in same.stdout
    differ = _cli(pa, pb, "--exit-code")
    assert differ.returncode == 1 and "renumbered +1" in differ.stdout
    assert _cli(pa, pb).returncode == 0
    svg = os.path.join(base, "d.svg")
    out = _cli(pa, pb, "-o", svg)
    assert out.returncode == 0 and out.stdout.strip() == svg
    with open(svg, encoding="utf-8") as fh:
        assert "<svg" in fh.read()
    page = os.path.join(base, "d.html")
    assert _cli(pa, pb, "-o", page).returncode == 0
    with open(page, encoding="utf-8") as fh:
        text = fh.read()
    assert text.startswith("<!DOCTYPE html>") and 'id="diff-data"' in text and "<svg" in text
    bad = os.path.join(base, "bad.json")
    with open(bad, "w", encoding="utf-8") as fh:
        fh.write("[1, 2")
    err = _cli(pa, bad)
    assert err.returncode == 2 and "diff: b:" in err.stderr and not err.stdout


@needs_backend
def test_command_line_to_standard_output_writes_the_drawing_alone(
        insert_pair: tuple[torchrecorder.Recorder, torchrecorder.Recorder], tmp_path: object) -> None:
    """``-o /dev/stdout -f dot | dot -Tpng`` (as the guide shows): the path written used to
    be printed after the DOT, into the pipe, and ``dot`` failed on it."""
    base = str(tmp_path)
    a, b = insert_pair
    pa, pb = os.path.join(base, "a.json"), os.path.join(base, "b.json")
    a.to_json(pa)
    b.to_json(pb)
    out = _cli(pa, pb, "-o", "/dev/stdout", "-f", "dot")
    assert out.returncode == 0, out.stderr
    assert out.stdout.lstrip().startswith("digraph") and out.stdout.rstrip().endswith("}")
    assert "/dev/stdout" not in out.stdout
    assert b"</svg>" in render_source(out.stdout, "svg")  # dot (or pygraphviz) reads it all


@needs_backend
def test_html_page_escapes_names(insert_pair: tuple[torchrecorder.Recorder, torchrecorder.Recorder]) -> None:
    from torchrecorder.diff.html import make_diff_html

    a, b = insert_pair
    evil = torchrecorder.load_json(a.to_json())
    evil.name = "</script><img src=x onerror=alert(1)>"
    page = make_diff_html(torchrecorder.diff(evil, b))
    assert "<img src=x" not in page
    assert page.count("</script>") == 2  # the data element and the script element close once each
    data = page.split('id="diff-data">')[1].split("</script>")[0]
    assert json.loads(data)["a"] == evil.name


def test_a_leaf_module_holding_changes_opens() -> None:
    """A pruned ``Linear`` (``torch.nn.utils.prune``: ``weight_orig`` times a mask) holds an added
    ``mul``: with ``changes_only`` it opens so the change shows; a leaf whose only change is its
    one operation (ReLU → GELU) stays one box, whose label already says so."""
    from torch import nn
    from torch.nn.utils import prune

    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    a = torchrecorder.record(base, "net", (2, 4))
    pruned = copy.deepcopy(base)
    prune.l1_unstructured(pruned[0], "weight", amount=0.5)
    pruned[1] = nn.GELU()
    d = torchrecorder.diff(a, torchrecorder.record(pruned, "net", (2, 4)))
    source = torchrecorder.make_dot(d).source
    assert "subgraph cluster_0 " in source and '"0/mul"' in source and "diff-added" in source
    assert "cluster_1 " not in source and "cluster_2 " not in source  # GELU: one box; 2: unchanged
    assert "cluster_0 " not in torchrecorder.make_dot(d, changes_only=False).source  # the default rule
