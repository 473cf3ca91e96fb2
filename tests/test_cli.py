"""The command line: python -m torchrecorder MODULE:FACTORY -s SHAPE -o FILE."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import torchrecorder
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


def test_a_picture_written_by_the_command_line_keeps_its_dot_source(tmp_path: Path) -> None:
    """What the sphinx-gallery scraper draws a written SVG's thumbnail from."""
    from torchrecorder._files import dot_source_of

    out = tmp_path / "nest.dot"
    assert main(["tests.core_models:Nested", "-s", "1,6", "-o", str(out), "-d", "2"]) == 0
    assert dot_source_of(out) == out.read_text()


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


@pytest.mark.parametrize("shape", ["one,four", "4,x", "4,,16", "x4", "4x", ",4", "2,16,,"])
def test_bad_shape_is_a_usage_error(capsys: pytest.CaptureFixture[str], shape: str) -> None:
    """A dimension left empty is no dimension: ``-s 4,x`` was read as ``(4,)`` and ran the
    model on a shape the user never wrote."""
    with pytest.raises(SystemExit) as exc:
        main(["tests.core_models:TinyMLP", "-s", shape])
    assert exc.value.code == 2
    assert f"{shape!r} is not a shape" in capsys.readouterr().err


def test_shapes_take_one_separator_between_dimensions() -> None:
    from torchrecorder.factory import parse_shape

    texts = ("1,3,32,32", "1x3x32x32", "1 x 3", " 2 , 16 ", "(8,)", "[2, 16]", "2×16")
    assert [parse_shape(t) for t in texts] == [(1, 3, 32, 32), (1, 3, 32, 32), (1, 3), (2, 16), (8,),
                                               (2, 16), (2, 16)]


# ---- issue 14: the complete command line, end to end

FACTORY = '''
import torch


class LM(torch.nn.Module):
    """A token-id model: embedding, then a head."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(30, 8)
        self.head = torch.nn.Linear(8, 30)

    def forward(self, ids):
        return self.head(self.embed(ids))


def blocks():
    return torch.nn.Sequential(*(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
                                 for _ in range(3)))


def not_a_module():
    return "a string"
'''


def _factory_dir(tmp_path: Path, name: str = "facmodels") -> Path:
    folder = tmp_path / "work"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(FACTORY)
    return folder


def _run(args: list[str], cwd: Path, script: bool = False) -> subprocess.CompletedProcess[str]:
    """The command line in a fresh process: ``python -m torchrecorder`` or the installed script,
    with this checkout's torchrecorder first on the path (not the current directory)."""
    import os
    import shutil

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if script:
        exe = shutil.which("torchrecorder")
        if exe is None:
            pytest.skip("the torchrecorder console script is not installed")
        cmd = [exe, *args]
    else:
        cmd = [sys.executable, "-m", "torchrecorder", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, check=False, timeout=300)


def _clean_error(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The error lines: each once prefixed with the program name, no traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "torchrecorder: torchrecorder:" not in proc.stderr, proc.stderr
    return [line for line in proc.stderr.splitlines() if line.startswith("torchrecorder: error:")]


@pytest.mark.parametrize("output", ["-", "/dev/stdout"])
def test_output_to_standard_output_is_the_drawing_alone(tmp_path: Path, output: str) -> None:
    """``-o /dev/stdout`` is standard output as ``-o -`` is: the data and nothing after it
    (the path written was printed after the DOT, which ``| dot -Tpng`` then failed to read),
    the layer table on standard error."""
    folder = _factory_dir(tmp_path)
    proc = _run(["facmodels:blocks", "-s", "1,4", "-f", "dot", "-o", output, "--summary"], folder)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.lstrip().startswith("digraph") and proc.stdout.rstrip().endswith("}")
    assert "Layer (type)" in proc.stderr and "Layer (type)" not in proc.stdout


@needs_backend
def test_installed_script_imports_the_factory_from_the_current_directory(tmp_path: Path) -> None:
    """The console script's sys.path[0] is its own folder, not the current one: it used to fail
    with ModuleNotFoundError where ``python -m`` worked."""
    folder = _factory_dir(tmp_path)
    proc = _run(["facmodels:blocks", "-s", "2,4", "-o", "blocks.svg"], folder, script=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("blocks.svg")
    assert (folder / "blocks.svg").read_text().lstrip().startswith("<?xml")


def test_token_id_model_with_input_dtype_int64(tmp_path: Path) -> None:
    """``--input-dtype int64`` makes valid ids (it used to fail: normal_kernel_cpu for 'Long')."""
    folder = _factory_dir(tmp_path)
    proc = _run(["facmodels:LM", "-s", "2,12", "--input-dtype", "int64", "-f", "json", "-o", "lm.json",
                 "--summary"], folder)
    assert proc.returncode == 0, proc.stderr
    rec = torchrecorder.load_json(str(folder / "lm.json"))
    assert [layer.type_name for layer in rec.layers()] == ["LM", "Embedding", "Linear"]
    assert "Total params: 510" in proc.stdout and proc.stdout.strip().endswith("lm.json")
    # the old spelling stays, in-process too
    assert main(["facmodels.py:LM".replace("facmodels.py", str(folder / "facmodels.py")), "-s", "1,5",
                 "--dtype", "long", "-o", str(tmp_path / "lm.dot")]) == 0
    # torchinfo's name for the shape, in-process
    assert main([str(folder / "facmodels.py") + ":LM", "--input-size", "1,5", "--dtype", "long",
                 "-o", str(tmp_path / "lm2.json")]) == 0
    assert next(n for n in torchrecorder.load_json(str(tmp_path / "lm2.json")).nodes.values()
                if getattr(n, "role", "") == "input").shape == (1, 5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_a_floating_input_dtype_draws_the_model_in_that_dtype(tmp_path: Path, dtype: str) -> None:
    """``--input-dtype float16`` (the help's example) converts the model the command line built:
    a float32 model refused half inputs (``Input type (c10::Half) and bias type (float)``)."""
    out = tmp_path / "net.json"
    assert main(["tests.core_models:TinyMLP", "-s", "2,4", "--input-dtype", dtype, "-o", str(out)]) == 0
    rec = torchrecorder.load_json(str(out))
    dtypes = {n.dtype for n in rec.nodes.values() if getattr(n, "dtype", None) is not None}
    assert dtypes == {f"torch.{dtype}"} or dtypes == {dtype}, dtypes


def test_py_path_factory_and_the_text_formats(tmp_path: Path) -> None:
    folder = _factory_dir(tmp_path)
    other = tmp_path / "elsewhere"
    other.mkdir()
    spec = f"{folder / 'facmodels.py'}:blocks"
    for fmt, check in (("dot", lambda t: t.startswith("digraph")),
                       ("mmd", lambda t: t.startswith("flowchart")),
                       ("json", lambda t: '"nodes"' in t)):
        proc = _run([spec, "-s", "2,4", "-f", fmt, "-o", f"out.{fmt}"], other)
        assert proc.returncode == 0, proc.stderr
        assert check((other / f"out.{fmt}").read_text()), fmt
    # the format follows the extension of -o; NAME.FMT by default
    assert _run([spec, "-s", "2,4", "-o", "x.mmd"], other).returncode == 0
    assert (other / "x.mmd").read_text().startswith("flowchart")
    assert _run([spec, "-s", "2,4", "-f", "dot"], other).returncode == 0
    assert (other / "blocks.dot").exists()


def test_fold_option(tmp_path: Path) -> None:
    folder = _factory_dir(tmp_path)
    assert main([f"{folder / 'facmodels.py'}:blocks", "-s", "2,4", "-d", "1", "--fold", "yes",
                 "-o", str(tmp_path / "yes.dot")]) == 0
    assert main([f"{folder / 'facmodels.py'}:blocks", "-s", "2,4", "-d", "1", "--fold", "no",
                 "-o", str(tmp_path / "no.dot")]) == 0
    assert "×3" in (tmp_path / "yes.dot").read_text()
    assert "×3" not in (tmp_path / "no.dot").read_text()


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["nosuchmodule:Net", "-s", "1,4"], 1, "cannot import 'nosuchmodule'"),
        (["facmodels:Nope", "-s", "1,4"], 1, "facmodels has no attribute 'Nope'"),
        (["facmodels:not_a_module", "-s", "1,4"], 1, "gave str 'a string', not a torch.nn.Module"),
        (["facmodels:blocks", "-s", "1,5"], 1, "RuntimeError: mat1 and mat2 shapes cannot be multiplied"),
        (["facmodels:blocks", "-s", "1,4", "-f", "bogus"], 1, "unknown format 'bogus'"),
        (["facmodels:blocks", "-s", "1,4", "--input-dtype", "floaty"], 1, "'floaty' is not a torch dtype"),
        (["facmodels:blocks", "-s", "one,four"], 2, "'one,four' is not a shape"),
        (["facmodels:blocks", "-s", "1,4", "--fold", "maybe"], 2, "'maybe' is not auto, yes, no"),
        (["facmodels", "-s", "1,4"], 1, "must look like 'package.module:factory'"),
    ],
)
def test_errors_are_one_line_without_traceback(tmp_path: Path, args: list[str], status: int,
                                               message: str) -> None:
    folder = _factory_dir(tmp_path)
    proc = _run([*args, "-o", "x.dot"], folder)
    assert proc.returncode == status
    errors = _clean_error(proc)
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert not (folder / "x.dot").exists() and proc.stdout == ""


def test_unknown_format_is_refused_before_the_factory_is_imported(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "noisy.py").write_text("open('imported', 'w').close()\nimport torch\nNet = torch.nn.ReLU\n")
    proc = _run(["noisy:Net", "-s", "1,4", "-f", "bogus"], folder)
    assert proc.returncode == 1 and "unknown format" in proc.stderr
    assert not (folder / "imported").exists()
    assert _run(["noisy:Net", "-s", "1,4", "-f", "dot"], folder).returncode == 0
    assert (folder / "imported").exists()


def test_a_failing_forward_names_the_module_once_prefixed(tmp_path: Path) -> None:
    folder = _factory_dir(tmp_path)
    proc = _run(["facmodels:blocks", "-s", "1,5", "-f", "dot"], folder)
    assert proc.returncode == 1
    assert _clean_error(proc)
    assert "torchrecorder: raised in module '0.0' (Linear)" in proc.stderr
    # no exception object reaches a shell: the note does not point at its attribute
    assert "'recording' attribute" not in proc.stderr and "input shapes [1×5]" in proc.stderr


# ---- issue 21: a factory's lazy modules are initialized by one pass before recording

LAZY = '''
import torch


def build():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.LazyLinear(8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                               torch.nn.LazyLinear(3)).train()


def unreached():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.LazyLinear(2)
            self.spare = torch.nn.LazyLinear(2)

        def forward(self, x):
            return self.fc(x)

    return Net()
'''


def test_a_factory_with_lazy_modules_is_run_once_then_recorded(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "lazymod.py").write_text(LAZY)
    proc = _run(["lazymod:build", "-s", "2,4", "-f", "json", "-o", "lazy.json", "--summary"], folder)
    assert proc.returncode == 0, proc.stderr
    rec = torchrecorder.load_json(str(folder / "lazy.json"))
    params = {n.path: n.shape for n in rec.nodes.values() if isinstance(n, torchrecorder.ParamNode)}
    assert params["0.weight"] == (8, 4) and params["3.weight"] == (3, 8)
    assert [layer.output_shapes for layer in rec.layers()][1:] == [[(2, 8)], [(2, 8)], [(2, 8)], [(2, 3)]]
    assert f"Total params: {8 * 4 + 8 + 16 + 3 * 8 + 3}" in proc.stdout
    # a lazy module the inputs do not reach: a clear error, no traceback
    proc = _run(["lazymod:unreached", "-s", "2,4", "-o", "x.dot"], folder)
    assert proc.returncode == 1
    assert any("uninitialized" in line and "spare.weight" in line for line in _clean_error(proc)), proc.stderr


def test_initialize_lazy_changes_only_the_lazy_tensors() -> None:
    import torch
    from torch import nn

    from torchrecorder.factory import initialize_lazy

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.LazyLinear(3), nn.Dropout(0.5)).train()
    net[3].eval()
    before = {k: v.clone() for k, v in net.state_dict().items() if not isinstance(
        v, nn.parameter.UninitializedTensorMixin)}
    with pytest.raises(TypeError, match="uninitialized"):  # record() keeps refusing a user's lazy model
        torchrecorder.record(net, "net", (2, 4))
    assert initialize_lazy(net, (2, 4)) is True
    assert net[2].weight.shape == (3, 4) and net[2].weight.requires_grad and net[2].weight.grad is None
    after = net.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())  # BatchNorm statistics too
    assert [m.training for m in net.modules()] == [True, True, True, True, False]
    assert initialize_lazy(net, (2, 4)) is False  # nothing lazy left: it does not run again
    assert torchrecorder.record(net, "net", (2, 4)).summary().count("(Linear)") == 2


def test_the_help_names_the_diff_command_and_diff_names_html(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "torchrecorder diff " in capsys.readouterr().out
    from torchrecorder.diff_cli import build_diff_parser

    output = next(a for a in build_diff_parser()._actions if "--output" in a.option_strings)
    assert ".html" in str(output.help)


def test_the_comparison_page_says_the_backward_graph_is_drawn() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "comparison.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| backward (autograd) graph |"))
    assert row.split("|")[2].strip().startswith("yes") and "backward=True" in row


def test_the_guide_lists_every_column_of_columns() -> None:
    """docs/guide/cli.md names each column ``--columns`` accepts (the cost columns were missing)."""
    from torchrecorder.summary import COLUMNS

    row = next(line for line in (ROOT / "docs" / "guide" / "cli.md").read_text().splitlines()
               if line.startswith("| `--columns"))
    listed = row.split("(`", 1)[1].split("`", 1)[0].split(",")
    assert listed == list(COLUMNS)
