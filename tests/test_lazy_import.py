"""``import torchrecorder`` loads only what ``record`` and ``make_dot`` need; the rest of the
public API (diff, capture, hooks, the page, Mermaid, the layer table) is imported on first use
and stays what it was: the same objects under the same names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

import torchrecorder

#: modules ``import torchrecorder`` must not load (imported on first use)
LAZY_MODULES = (
    "torchrecorder.capture",
    "torchrecorder.diff",
    "torchrecorder.hooks.recorders",
    "torchrecorder.hooks.saved",
    "torchrecorder.hooks.select",
    "torchrecorder.layer_recorder",
    "torchrecorder.renderer.html",
    "torchrecorder.renderer.html_page",
    "torchrecorder.renderer.mermaid",
    "torchrecorder.summary",
    "torchrecorder.graph_breaks",
)


def _fresh(code: str) -> str:
    """``code``'s standard output, run in a fresh interpreter that imports this checkout."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_and_a_drawing_load_none_of_the_lazy_modules() -> None:
    out = _fresh(
        "import sys, json, torch, torchrecorder\n"
        "print(json.dumps(sorted(sys.modules)))\n"
        "rec = torchrecorder.record(torch.nn.Linear(3, 2), 'lin', (1, 3))\n"
        "torchrecorder.make_dot(rec).source\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    after_import, after_drawing = (set(json.loads(line)) for line in out.splitlines())
    assert "torchrecorder.api" in after_import and "torchrecorder.recording.engine" in after_import
    assert [m for m in LAZY_MODULES if m in after_import] == []
    assert [m for m in LAZY_MODULES if m in after_drawing] == []


def test_every_public_name_is_there_and_listed() -> None:
    for name in torchrecorder.__all__:
        assert getattr(torchrecorder, name) is not None
        assert name in dir(torchrecorder)
    assert torchrecorder.LayerRecorder is torchrecorder.hooks.LayerRecorder
    assert "ForwardInput" in dir(torchrecorder.hooks) and "LayerRecorder" in dir(torchrecorder.hooks)
    assert "make_html" in dir(torchrecorder.renderer)


def test_functions_named_like_their_modules_stay_functions() -> None:
    """``torchrecorder.diff`` and ``torchrecorder.capture`` are the functions, whether or not
    (and in whichever order) their modules were imported first."""
    out = _fresh(
        "import types, torchrecorder\n"
        "import torchrecorder.diff, torchrecorder.capture\n"
        "from torchrecorder.diff import Diff\n"
        "from torchrecorder import capture, diff\n"
        "print(isinstance(torchrecorder.diff, types.FunctionType),"
        " isinstance(torchrecorder.capture, types.FunctionType),"
        " diff is torchrecorder.diff.__globals__['diff'], capture.__module__, Diff.__module__)"
    )
    assert out.split() == ["True", "True", "True", "torchrecorder.capture", "torchrecorder.diff.model"]
    assert isinstance(torchrecorder.diff, types.FunctionType)
    assert isinstance(torchrecorder.capture, types.FunctionType)


def test_unknown_names_are_attribute_errors() -> None:
    for module in (torchrecorder, torchrecorder.hooks, torchrecorder.renderer):
        with pytest.raises(AttributeError, match="no_such_name"):
            module.no_such_name  # noqa: B018
