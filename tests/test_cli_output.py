"""Where the command line writes and how it ends (issue 24, items 5, 10, 12 and 16): exactly
the path of ``-o``, names that never lead outside the current directory, standard output,
exits from the model's code, one error line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .backends import needs_backend

ROOT = Path(__file__).resolve().parent.parent

FACTORIES = '''
import torch


def net():
    return torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU())


def exits_zero():
    raise SystemExit(0)


def exits_bye():
    raise SystemExit("bye")


def two_lines():
    raise ValueError("first line\\nsecond line")


class ExitsInForward(torch.nn.Module):
    def forward(self, x):
        raise SystemExit(0)
'''


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "fac.py").write_text(FACTORIES)
    (folder / "byemod.py").write_text('raise SystemExit("bye")\n')
    return folder


def run(args: list[str], cwd: Path, stdout: object = subprocess.PIPE) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "torchrecorder", *args], stdout=stdout,
                          stderr=subprocess.PIPE, cwd=cwd, env=env, check=False, timeout=300)


def errors(proc: subprocess.CompletedProcess[bytes]) -> list[str]:
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    assert all(line.startswith("torchrecorder: ") for line in err.splitlines()), err
    return [line for line in err.splitlines() if line.startswith("torchrecorder: error:")]


def files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()} - {"fac.py", "byemod.py", "__pycache__"}


# ---------------------------------------------------------------- 5: names stay inside
@pytest.mark.parametrize(("name", "written"), [("../escape", "_escape.dot"), (".hidden", "hidden.dot"),
                                               ("/abs/name", "_abs_name.dot"), ("a/b", "a_b.dot")])
def test_a_name_never_leads_outside_the_current_directory(work: Path, name: str, written: str) -> None:
    proc = run(["fac:net", "-s", "1,2", "-f", "dot", "-n", name], work)
    assert proc.returncode == 0, proc.stderr
    assert files(work) == {written} and not (work.parent / "escape.dot").exists()
    assert proc.stdout.decode().strip() == written


def test_a_name_that_is_no_file_name_is_an_error(work: Path) -> None:
    proc = run(["fac:net", "-s", "1,2", "-f", "dot", "-n", ".."], work)
    assert proc.returncode == 1 and len(errors(proc)) == 1 and files(work) == set()


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="no /dev/null")
def test_dev_null_stays_dev_null(work: Path) -> None:
    before = os.stat("/dev/null")
    proc = run(["fac:net", "-s", "1,2", "-o", "/dev/null", "-f", "dot"], work)
    assert proc.returncode == 0, proc.stderr
    after = os.stat("/dev/null")
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert not os.path.exists("/dev/null.dot") and not os.path.exists("/dev/null.svg")


# ---------------------------------------------------------------- 12: exactly the path of -o
def test_the_path_keeps_its_case(work: Path) -> None:
    proc = run(["fac:net", "-s", "1,2", "-o", "Net.DOT"], work)
    assert proc.returncode == 0, proc.stderr
    assert files(work) == {"Net.DOT"} and (work / "Net.DOT").read_text().startswith("digraph")


def test_a_path_without_extension_is_written_as_given(work: Path) -> None:
    proc = run(["fac:net", "-s", "1,2", "-o", "graph", "-f", "mmd"], work)
    assert proc.returncode == 0, proc.stderr
    assert files(work) == {"graph"} and (work / "graph").read_text().startswith("flowchart")


def test_an_extension_that_is_no_format_takes_the_format_of_f(work: Path) -> None:
    proc = run(["fac:net", "-s", "1,2", "-o", "graph.txt", "-f", "dot"], work)
    assert proc.returncode == 0, proc.stderr
    assert files(work) == {"graph.txt"} and (work / "graph.txt").read_text().startswith("digraph")


@pytest.mark.parametrize(("output", "fmt"), [("net.svg", "png"), ("net.json", "dot"), ("n.DOT", "mmd")])
def test_an_extension_and_a_format_that_disagree_are_refused(work: Path, output: str, fmt: str) -> None:
    proc = run(["fac:net", "-s", "1,2", "-o", output, "-f", fmt], work)
    assert proc.returncode == 1
    lines = errors(proc)
    assert len(lines) == 1 and output in lines[0] and fmt in lines[0]
    assert files(work) == set()


@pytest.mark.parametrize(("output", "fmt"), [("net.gv", "dot"), ("net.dot", "gv"), ("net.JSON", "json")])
def test_two_names_of_one_format_agree(work: Path, output: str, fmt: str) -> None:
    assert run(["fac:net", "-s", "1,2", "-o", output, "-f", fmt], work).returncode == 0
    assert files(work) == {output}


@pytest.mark.parametrize(("folder", "fmt"), [("existing", ["-f", "dot"]), ("x.svg", []), ("x.dot", [])])
def test_a_directory_is_refused_without_naming_a_temporary_file(work: Path, folder: str,
                                                                 fmt: list[str]) -> None:
    (work / folder).mkdir()
    proc = run(["fac:net", "-s", "1,2", "-o", folder, *fmt], work)
    assert proc.returncode == 1
    lines = errors(proc)
    assert len(lines) == 1 and "is a directory" in lines[0] and ".tr-" not in lines[0]
    assert list((work / folder).iterdir()) == []


@pytest.mark.parametrize("output", ["-", "/dev/stdout"])
def test_standard_output(work: Path, output: str) -> None:
    if output != "-" and not os.path.exists(output):
        pytest.skip("no /dev/stdout")
    proc = run(["fac:net", "-s", "1,2", "-o", output, "-f", "dot", "--summary"], work)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().startswith("digraph") and proc.stdout.decode().rstrip().endswith("}")
    assert "Total params" in proc.stderr.decode()  # the table does not spoil the picture
    assert files(work) == set()


def test_standard_output_into_a_file_keeps_the_file(work: Path, tmp_path: Path) -> None:
    target = tmp_path / "captured.dot"
    with open(target, "wb") as out:
        proc = run(["fac:net", "-s", "1,2", "-o", "/dev/stdout", "-f", "dot"], work, stdout=out)
    assert proc.returncode == 0, proc.stderr
    assert target.read_text().startswith("digraph")


@needs_backend
def test_standard_output_takes_binary_pictures(work: Path) -> None:
    proc = run(["fac:net", "-s", "1,2", "-o", "-", "-f", "png"], work)
    assert proc.returncode == 0 and proc.stdout.startswith(b"\x89PNG\r\n\x1a\n")


# ---------------------------------------------------------------- 10: exits from the model's code
@pytest.mark.parametrize(("spec", "shown"), [("fac:exits_zero", "exit(0)"), ("builtins:exit", "exit(None)"),
                                             ("fac:exits_bye", "exit('bye')"), ("byemod:net", "exit('bye')"),
                                             ("fac:ExitsInForward", "exit(0)")])
def test_an_exit_from_the_models_code_is_an_error(work: Path, spec: str, shown: str) -> None:
    proc = run([spec, "-s", "1,2", "-f", "dot", "-o", "out.dot"], work)
    assert proc.returncode == 1
    lines = errors(proc)
    assert len(lines) == 1 and shown in lines[0] and "nothing was written" in lines[0], proc.stderr
    assert files(work) == set() and proc.stdout == b""


# ---------------------------------------------------------------- 16: one error line
def test_a_message_of_several_lines_is_one_error_line(work: Path) -> None:
    proc = run(["fac:two_lines", "-s", "1,2", "-f", "dot"], work)
    assert proc.returncode == 1
    lines = errors(proc)
    assert len(lines) == 1 and "first line" in lines[0] and "second line" in lines[0]
