"""Files and input (issue 10): every write is atomic and safe, every input is checked before the
model runs, and ``load_json`` refuses what it cannot draw."""

from __future__ import annotations

import json
import os
import random
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder import api, export
from torchrecorder.backend import GRAPHVIZ_ATTRIBUTES, REFUSED_FORMATS, render_source
from torchrecorder.nodes import LayerNode

from .backends import HAS_DOT, HAS_PYGRAPHVIZ, needs_backend, needs_dot

ROOT = Path(__file__).resolve().parent.parent


class Counted(nn.Module):
    """A small network that counts its forward calls."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.act = nn.ReLU()
        self.runs: list[int] = []  # (a list: a rebound attribute is put back after a recording)

    @property
    def calls(self) -> int:
        return len(self.runs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.runs.append(1)
        return self.act(self.fc(x))


def _files(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


# ----------------------------------------------------------------------------- temporary files
def test_a_link_planted_at_the_old_temporary_name_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    # the name the writer used to open with O_CREAT|O_TRUNC, following links
    planted = out / f".net-1.dot.{os.getpid()}.tmp"
    planted.symlink_to(victim)
    path = torchrecorder.render_network(Counted(), "net", (1, 3), out, fmt="dot")
    assert victim.read_text() == "precious"
    assert planted.is_symlink()
    assert Path(path).read_text().startswith("digraph")
    assert _files(out) == sorted(["net-1.dot", planted.name])


def test_a_245_character_file_name_is_written_and_a_longer_one_refused_before_the_model_runs(
        tmp_path: Path) -> None:
    net = Counted()
    path = torchrecorder.render_network(net, "net", (1, 3), tmp_path, filename="f" * 245, fmt="dot")
    assert os.path.basename(path) == "f" * 245 + ".dot"
    assert _files(tmp_path) == ["f" * 245 + ".dot"]  # no temporary file left
    with pytest.raises(ValueError, match="256 bytes long"):
        torchrecorder.render_network(net, "net", (1, 3), tmp_path, filename="f" * 252, fmt="dot")
    assert net.calls == 1


def test_two_threads_writing_one_path_never_collide(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    texts = [f"{i}".encode() * (20_000 + i) for i in range(4)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(texts))

    def work(data: bytes) -> None:
        barrier.wait()
        try:
            for _ in range(150):
                api._write_atomically(str(path), data)
        except BaseException as exc:  # collected for the assert below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert path.read_bytes() in texts
    assert _files(tmp_path) == ["g.json"]


# ----------------------------------------------------------------------------- atomic writes
_FULL_DISK = r"""
import json, os, resource, signal, sys
import torch
import torchrecorder
from torchrecorder import export
from torchrecorder.__main__ import main

out = sys.argv[1]
net = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(12)])
rec = torchrecorder.record(net, "deep", (1, 4))
assert len(rec.to_json()) > 4096
for name in ("to_json.json", "save.json", "render.json", "cli.dot"):
    with open(os.path.join(out, name), "w") as fh:
        fh.write("old")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.RLIM_INFINITY))  # a full disk at 2 KiB
raised = {}
for name, write in [
    ("to_json.json", lambda p: rec.to_json(p)),
    ("save.json", lambda p: export.save(rec, p)),
    ("render.json", lambda p: torchrecorder.render_network(net, "render", (1, 4), out, fmt="json")),
    ("cli.dot", lambda p: main(["tests.core_models:Nested", "-s", "1,6", "-o", p, "-d", "3"])),
]:
    try:
        raised[name] = repr(write(os.path.join(out, name)))
    except OSError as exc:
        raised[name] = type(exc).__name__
print(json.dumps(raised))
"""


def test_a_full_disk_leaves_every_existing_file_as_it_was(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _FULL_DISK, str(tmp_path)], cwd=ROOT, text=True,
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    raised = json.loads(proc.stdout.strip().splitlines()[-1])
    assert raised["to_json.json"] == "OSError" and raised["save.json"] == "OSError"
    assert raised["render.json"] == "OSError" and raised["cli.dot"] == "1"  # the CLI reports it
    for name in ("to_json.json", "save.json", "render.json", "cli.dot"):
        assert (tmp_path / name).read_text() == "old", name
    assert _files(tmp_path) == ["cli.dot", "render.json", "save.json", "to_json.json"]


def test_a_failed_serialisation_leaves_the_existing_file(tmp_path: Path) -> None:
    class Widget(LayerNode):
        kind = "widget"

    rec = torchrecorder.record(Counted(), "net", (1, 3))
    rec.nodes["w"] = Widget("w", key="w", depth=1, parent="net")
    path = tmp_path / "g.json"
    path.write_text("old")
    with pytest.raises(TypeError, match="cannot export node 'w'"):
        export.save(rec, path)
    with pytest.raises(TypeError, match="cannot export node 'w'"):
        rec.to_json(path)
    assert path.read_text() == "old"
    assert _files(tmp_path) == ["g.json"]


def test_a_lone_surrogate_in_a_module_name_is_written_and_read_back(tmp_path: Path) -> None:
    net = nn.Sequential()
    net.add_module("odd\ud800name", nn.Linear(2, 2))
    rec = torchrecorder.record(net, "net", (1, 2))
    path = tmp_path / "g.json"
    path.write_text("old")
    rec.to_json(path)
    export.save(rec, tmp_path / "h.json")
    loaded = torchrecorder.load_json(path)
    assert [layer.name for layer in loaded.layers()] == ["net", "odd\ud800name"]
    assert torchrecorder.make_dot(loaded).source == torchrecorder.make_dot(rec).source
    assert (tmp_path / "h.json").read_bytes() == path.read_bytes()


def test_an_overwritten_private_file_stays_private_and_a_new_file_follows_the_umask(tmp_path: Path) -> None:
    net = Counted()
    private = tmp_path / "net-1.dot"  # 1.0.3's name: the network and the depth
    private.write_text("old")
    private.chmod(0o600)
    torchrecorder.render_network(net, "net", (1, 3), tmp_path, fmt="dot")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_text().startswith("digraph")
    rec = torchrecorder.record(net, "net", (1, 3))
    (tmp_path / "g.json").write_text("")
    (tmp_path / "g.json").chmod(0o640)
    rec.to_json(tmp_path / "g.json")
    assert stat.S_IMODE((tmp_path / "g.json").stat().st_mode) == 0o640
    old = os.umask(0o022)
    try:
        rec.to_json(tmp_path / "new.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644


def test_a_symbolic_link_at_the_target_is_kept_and_its_file_replaced(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    torchrecorder.record(Counted(), "net", (1, 3)).to_json(link)
    assert link.is_symlink()
    assert torchrecorder.load_json(real).name == "net"


def test_a_missing_directory_is_reported_with_the_path_asked_for(tmp_path: Path) -> None:
    rec = torchrecorder.record(Counted(), "net", (1, 3))
    with pytest.raises(FileNotFoundError, match="nowhere"):
        rec.to_json(tmp_path / "nowhere" / "g.json")


# ----------------------------------------------------------------------------- load_json
def _doc() -> dict[str, Any]:
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU())
    return export.to_dict(torchrecorder.record(net, "net", (2, 3)))


def _node(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(n for n in doc["nodes"] if n["kind"] == kind and n["key"] != "net")


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda d: d["context"].append(None), "context"),
    (lambda d: d["context"].append(["net"]), "context"),
    (lambda d: d["context"].append("nowhere"), "context"),
    (lambda d: d["nodes"][0].update(num_params_total="lots"), "num_params_total"),
    (lambda d: d["nodes"][0].update(num_params=-1), "num_params"),
    (lambda d: d["nodes"][0].update(error=7), "error"),
    (lambda d: d["nodes"][0].update(subnets=[["0"]]), "subnets"),
    (lambda d: d["nodes"][0].update(input_shapes=[[1, "3"]]), "input_shapes"),
    (lambda d: d["nodes"][0].update(call_index=0), "call_index"),
    (lambda d: d["nodes"][0].update(key=["net"]), "key"),
    (lambda d: d["nodes"][1].update(parent=["net"]), "parent"),
    (lambda d: d["nodes"][1].update(depth=1.0), "depth"),
    (lambda d: _node(d, "param").update(numel="x"), "numel"),
    (lambda d: _node(d, "param").update(requires_grad="yes"), "requires_grad"),
    (lambda d: _node(d, "param").update(shape=[3, -2]), "shape"),
    (lambda d: _node(d, "tensor").update(role=3), "role"),
    (lambda d: _node(d, "tensor").update(dtype=None), "dtype"),
    (lambda d: _node(d, "op").update(op={"name": "relu"}), "op"),
    (lambda d: _node(d, "op").update(output_shapes=[[2], 4]), "output_shapes"),
    (lambda d: d.update(name=5), "name"),
    (lambda d: d.update(error=["x"]), "error"),
    (lambda d: d.update(failed_key=["net"]), "failed_key"),
    (lambda d: d.update(failed_key="nowhere"), "failed_key"),
    (lambda d: d.update(edges={"a": "b"}), "edges"),
    (lambda d: d["edges"].append([["net"], "net"]), r"edges\[\d+\]"),
])
def test_load_json_names_the_bad_field(mutate: Callable[[dict[str, Any]], None], field: str) -> None:
    doc = _doc()
    mutate(doc)
    with pytest.raises(ValueError, match=field):
        torchrecorder.loads_json(json.dumps(doc))


def test_load_json_refuses_deep_nesting_with_a_value_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    text = json.dumps(_doc())[:-1] + f', "extra": {deep}}}'
    with pytest.raises(ValueError, match="too deeply"):
        torchrecorder.loads_json(text)
    # the same depth inside a field of an already-decoded document
    doc = _doc()
    nested: Any = []
    for _ in range(100_000):
        nested = [nested]
    _node(doc, "param")["shape"] = nested
    with pytest.raises(ValueError, match="'shape'"):
        export.from_dict(doc)


_WRONG = [None, "x", -1, 1.5, True, [], [None], [["a"]], {"a": 1}, "nowhere"]


def test_every_field_of_every_node_either_loads_and_draws_or_is_refused_by_name() -> None:
    doc = _doc()
    tried = refused = 0
    for i, node in enumerate(doc["nodes"]):
        for field in node:
            for wrong in _WRONG:
                bad = json.loads(json.dumps(doc))
                bad["nodes"][i][field] = wrong
                tried += 1
                try:
                    rec = torchrecorder.loads_json(json.dumps(bad))
                except ValueError as exc:
                    refused += 1
                    # the field itself, or the field whose reference it broke
                    assert re.search(r"field '|edges\[|inconsistent graph|duplicate node key|unknown kind",
                                     str(exc)), (field, wrong, exc)
                    continue
                # what loads draws, prints and exports like any recording
                torchrecorder.make_dot(rec)
                torchrecorder.make_mermaid(rec)
                str(rec)
                torchrecorder.loads_json(rec.to_json())
    assert tried > 300 and refused > tried // 2


def test_any_edges_between_nodes_of_a_loaded_graph_draw_without_looping() -> None:
    net = nn.Sequential(*[nn.Sequential(nn.Linear(3, 3), nn.ReLU()) for _ in range(9)])
    doc = export.to_dict(torchrecorder.record(net, "n", (1, 3)))
    keys = [n["key"] for n in doc["nodes"]]
    rng = random.Random(0)
    for _ in range(40):  # cycles, edges into ancestors and out of parameters
        bad = json.loads(json.dumps(doc))
        bad["edges"].extend(rng.sample(keys, 2) for _ in range(rng.randint(1, 20)))
        rec = torchrecorder.loads_json(json.dumps(bad))
        for depth in (0, 1, 2, 256):
            torchrecorder.make_dot(rec, depth)
            torchrecorder.make_mermaid(rec, depth)
        str(rec)


# ----------------------------------------------------------------------------- formats
def test_formats_that_write_side_files_are_refused_before_the_model_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    net = Counted()
    for fmt in ("vrml", "x11"):
        with pytest.raises(ValueError, match=f"format '{fmt}' is not supported"):
            torchrecorder.render_network(net, "net", (1, 3), tmp_path / "out", fmt=fmt)
    assert net.calls == 0
    assert _files(tmp_path) == []
    if HAS_DOT or HAS_PYGRAPHVIZ:
        assert not set(REFUSED_FORMATS) & torchrecorder.backend.available_formats()


@needs_dot
def test_render_source_refuses_vrml_and_writes_nothing_where_it_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="vrml"):
        render_source('digraph { a [label="x"]; a -> b }', "vrml")
    assert render_source("digraph { a -> b }", "svg").rstrip().endswith(b"</svg>")
    assert _files(tmp_path) == []


@needs_dot
def test_a_format_not_known_to_write_only_its_output_runs_in_a_scratch_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # vrml stands for a Graphviz format this torchrecorder has not heard of
    monkeypatch.setattr(torchrecorder.backend, "REFUSED_FORMATS", {})
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"wrote files beside its output \(node1.png"):
        render_source('digraph { a [label="x"]; a -> b }', "vrml")
    assert _files(tmp_path) == []


# ----------------------------------------------------------------------------- long names
@needs_backend
def test_names_past_graphvizs_string_limit_are_shortened_in_labels_and_kept_elsewhere() -> None:
    long = "L" * 20_000
    net = nn.Sequential()
    net.add_module(long, nn.Linear(3, 3))
    net.add_module("amp" + "&" * 17_000, nn.ReLU())
    odd_type = type("T" * 17_000, (nn.Module,), {"forward": lambda self, x: x * 2})
    net.add_module("t", odd_type())
    rec = torchrecorder.record(net, "n" * 17_000, (1, 3))
    for depth in (0, 1, 2):
        source = torchrecorder.make_dot(rec, depth).source
        svg = render_source(source, "svg").decode()
        assert svg.rstrip().endswith("</svg>")
    # the label shows 200 characters of the name; the tooltip thousands; the JSON all of them
    labels = [line for line in source.splitlines() if "LLLL" in line]
    assert labels and all(len(line) < 17_000 for line in labels)
    assert "L" * 5_000 in svg and long not in svg
    assert long in rec.to_json()
    assert torchrecorder.make_dot(torchrecorder.loads_json(rec.to_json()), 2).source == source


# ----------------------------------------------------------------------------- arguments
@pytest.mark.parametrize("name", [None, 123, b"net"])
def test_a_name_that_is_not_a_string_is_refused_before_the_model_runs(name: Any, tmp_path: Path) -> None:
    net = Counted()
    with pytest.raises(TypeError, match="name must be a str"):
        torchrecorder.record(net, name, (1, 3))
    with pytest.raises(TypeError, match="name must be a str"):
        torchrecorder.render_network(net, name, (1, 3), tmp_path)
    with pytest.raises(TypeError, match="name must be a str"), torchrecorder.recording(net, name):
        net(torch.randn(1, 3))
    assert net.calls == 0 and _files(tmp_path) == []
    assert not net._forward_hooks and not net.fc._forward_pre_hooks


def test_an_empty_name_records_but_is_no_file_name(tmp_path: Path) -> None:
    net = Counted()
    rec = torchrecorder.record(net, "", (1, 3))
    assert "" in rec.nodes and torchrecorder.make_mermaid(rec)
    with pytest.raises(ValueError, match=r"hidden file '\.svg'"):
        torchrecorder.render_network(net, "", (1, 3), tmp_path)
    assert net.calls == 1 and _files(tmp_path) == []
    path = torchrecorder.render_network(net, "", (1, 3), tmp_path, filename="net", fmt="dot")
    assert os.path.basename(path) == "net.dot"


@pytest.mark.parametrize("filename", ["../../x", "../x", "a/../../x", "/tmp/x", ""])
def test_a_filename_outside_the_directory_is_refused_before_the_model_runs(
        filename: str, tmp_path: Path) -> None:
    net = Counted()
    out = tmp_path / "a" / "b"
    with pytest.raises(ValueError, match=r"outside directory|absolute path|no file name"):
        torchrecorder.render_network(net, "net", (1, 3), out, filename=filename, fmt="dot")
    assert net.calls == 0
    assert _files(tmp_path) == []


def test_a_filename_may_name_a_subdirectory_inside_the_directory(tmp_path: Path) -> None:
    path = torchrecorder.render_network(Counted(), "net", (1, 3), tmp_path, filename="plots/net", fmt="dot")
    assert Path(path) == tmp_path / "plots" / "net.dot" and Path(path).is_file()


def test_a_misspelt_keyword_raises_and_says_what_was_meant(tmp_path: Path) -> None:
    rec = torchrecorder.record(Counted(), "net", (1, 3))
    with pytest.raises(TypeError, match=r"'render_dept'.*did you mean 'render_depth'"):
        torchrecorder.make_dot(rec, render_dept=3)
    with pytest.raises(TypeError, match="edge_attrs"):
        torchrecorder.make_dot(rec, arrowhead="none")  # an attribute of edges only
    assert "rankdir=LR" in torchrecorder.make_dot(rec, rankdir="LR").source  # graphs only: the graph's
    net = Counted()
    with pytest.raises(TypeError, match="render_dept"):
        torchrecorder.render_network(net, "net", (1, 3), tmp_path, render_dept=3)
    assert net.calls == 0 and _files(tmp_path) == []


def test_keywords_of_other_tools_name_the_option_of_that_meaning(tmp_path: Path) -> None:
    """graphviz's ``format=``, torchview's ``depth=`` and ``show_shapes=``: the error names ours."""
    net = Counted()
    with pytest.raises(TypeError, match=r"'format'.*render_network's fmt=, or the format= of make_dot"):
        torchrecorder.render_network(net, "net", (1, 3), tmp_path, format="png")
    assert net.calls == 0 and _files(tmp_path) == []
    rec = torchrecorder.record(net, "net", (1, 3))
    with pytest.raises(TypeError, match=r"'depth'.*did you mean 'render_depth'"):
        torchrecorder.make_dot(rec, depth=2)
    with pytest.raises(TypeError, match=r"'show_shapes'.*did you mean 'edge_shapes'"):
        torchrecorder.make_dot(rec, show_shapes=True)


@pytest.mark.parametrize(("keyword", "ours"), [
    ("input_size", "input_shapes="), ("dtypes", "dtype="), ("graph_dir", "direction="),
    ("roll", "fold_repeats="), ("hide_inner_tensors", "tensor_nodes=True"),
    ("hide_module_functions", "expand_leaves=True"), ("params", "names every parameter"),
    ("show_attrs", "show_saved=True"), ("col_names", "columns="), ("save_graph", "render_network"),
])
def test_keywords_of_torchview_torchviz_torchinfo_name_ours(tmp_path: Path, keyword: str, ours: str) -> None:
    """A peer's keyword (``render_network(net, input_size=...)`` once suggested 'fontsize') names
    the option of that meaning here, in both drawing functions, before the model runs."""
    net = Counted()
    with pytest.raises(TypeError, match=rf"'{keyword}'.*{re.escape(ours)}"):
        torchrecorder.render_network(net, "net", (1, 3), tmp_path, **{keyword: 1})
    assert net.calls == 0 and _files(tmp_path) == []
    rec = torchrecorder.record(net, "net", (1, 3))
    with pytest.raises(TypeError, match=rf"'{keyword}'.*{re.escape(ours)}"):
        torchrecorder.make_dot(rec, **{keyword: 1})


def test_a_model_or_a_tensor_given_instead_of_a_recording_says_how_to_record() -> None:
    """torchview's draw_graph takes the model, torchviz's make_dot the output tensor: given
    these, the drawing and export functions say how to make the recording."""
    net = nn.Linear(3, 2)
    y = net(torch.randn(1, 3))
    for draw in (torchrecorder.make_dot, torchrecorder.make_html, torchrecorder.make_mermaid,
                 lambda r: export.dumps(r)):
        with pytest.raises(TypeError, match=r"got Linear: record the model first.*torchrecorder\.record"):
            draw(net)
        with pytest.raises(TypeError, match=r"got Tensor: .*torchviz's make_dot\(y\).*backward=True"):
            draw(y)
    with pytest.raises(TypeError, match=r"got str$"):
        torchrecorder.make_dot("net")


def test_every_graphviz_node_attribute_is_still_a_keyword() -> None:
    rec = torchrecorder.record(Counted(), "net", (1, 3))
    node_attrs = sorted(a for a, users in GRAPHVIZ_ATTRIBUTES.items() if "N" in users)
    assert {"fontname", "fontsize", "penwidth", "shape", "style", "width", "xlabel"} <= set(node_attrs)
    source = torchrecorder.make_dot(rec, fontname="Times", penwidth="2", peripheries="2").source
    assert "fontname=Times" in source and "peripheries=2" in source
    for attr in node_attrs:
        torchrecorder.make_dot(rec, **{attr: "1"})


@pytest.mark.parametrize("option", [
    {"preset": "fancy"}, {"render_depth": -1}, {"render_depth": "2"}, {"fold_repeats": "often"},
    {"fold_repeats": -2}, {"layer_attrs": "red"}, {"lyer_attrs": {}},
])
def test_bad_drawing_options_are_reported_before_the_model_runs(option: dict[str, Any],
                                                                tmp_path: Path) -> None:
    net = Counted()
    with pytest.raises((TypeError, ValueError)):
        torchrecorder.render_network(net, "net", (1, 3), tmp_path, **option)
    assert net.calls == 0 and _files(tmp_path) == []


_MARKED_MODEL = """
import torch

class Marked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x):
        open(MARKER, "w").close()
        return self.fc(x)
"""


def test_the_command_line_reports_a_bad_depth_before_the_model_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from torchrecorder.__main__ import main

    marker = tmp_path / "forward-ran"
    model = tmp_path / "marked.py"
    model.write_text(f"MARKER = {str(marker)!r}\n" + _MARKED_MODEL)
    out = tmp_path / "pictures" / "x.dot"
    assert main([f"{model}:Marked", "-s", "1,3", "-o", str(out), "-d", "-1"]) == 1
    assert "render_depth" in capsys.readouterr().err
    assert not marker.exists() and not out.parent.exists()
    assert main([f"{model}:Marked", "-s", "1,3", "-o", str(out)]) == 0
    assert marker.exists() and out.is_file()
