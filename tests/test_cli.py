"""The command line: python -m torchrecorder MODULE:FACTORY -s SHAPE -o FILE."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from torchrecorder.__main__ import main

from .backends import needs_backend

ROOT = Path(__file__).resolve().parent.parent


def test_module_factory_to_dot_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nest.dot"
    assert main(["tests.core_models:Nested", "-s", "1,6", "-o", str(out), "-d", "2", "--summary"]) == 0
    text = out.read_text()
    assert text.startswith("digraph Nested") and "cluster_mid" in text
    printed = capsys.readouterr().out
    assert str(out) in printed and "Total params" in printed


def test_two_inputs_and_a_file_path(tmp_path: Path) -> None:
    out = tmp_path / "two.dot"
    code = main([str(ROOT / "tests" / "core_models.py") + ":TwoInputs", "-s", "2,3", "-s", "2x5",
                 "-o", str(out)])
    assert code == 0 and "input@b" in out.read_text()


@needs_backend
def test_python_dash_m_writes_svg(tmp_path: Path) -> None:
    out = tmp_path / "mlp.svg"
    proc = subprocess.run([sys.executable, "-m", "torchrecorder", "tests.core_models:TinyMLP", "-s", "1,4",
                           "-o", str(out)], capture_output=True, text=True, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tests.core_models", "-s", "1,4"], "must look like"),
        (["tests.core_models:Nope", "-s", "1,4"], "no attribute 'Nope'"),
        (["tests.core_models:TinyMLP", "-s", "1,5", "-f", "dot"], "'fc1' (Linear)"),
    ],
)
def test_errors_are_reported_not_traced(argv: list[str], message: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "-o", str(tmp_path / "x.dot")]) == 1
    assert message in capsys.readouterr().err


def test_bad_shape_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["tests.core_models:TinyMLP", "-s", "one,four"])
    assert "not a shape" in capsys.readouterr().err
