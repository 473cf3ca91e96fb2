"""Progress of long recordings: shown once a recording runs long (a ``tqdm`` bar, or lines on
standard error), never for a short one, forced on or off by ``_progress.ENABLED`` or
``TORCHRECORDER_PROGRESS``, and gone when the recording ends, however it ends; where
standard error is a pipe or a file (CI logs), one line per stage and no bar frames."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder import _progress

ROOT = Path(__file__).resolve().parent.parent


def _shown() -> bool:
    return any(job.shown for job in list(_progress._jobs))


class Waits(nn.Module):
    """Holds the pass until the progress of the recording shows (at most 30 s), so that the
    test does not depend on how fast the machine is; then raises ``raises`` if given."""

    def __init__(self, raises: Optional[BaseException] = None) -> None:
        super().__init__()
        self.raises = raises
        self.seen = {"waited": False}  # (a dict: a rebound attribute is put back after a recording)

    @property
    def waited(self) -> bool:
        return self.seen["waited"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _progress.ENABLED is not False:
            deadline = time.monotonic() + 30
            while not _shown() and time.monotonic() < deadline:
                time.sleep(0.01)
            self.seen["waited"] = _shown()
            time.sleep(3 * _progress.POLL)  # the bar is updated meanwhile
        if self.raises is not None:
            raise self.raises
        return x.relu()


def slow_net(raises: Optional[BaseException] = None) -> nn.Sequential:
    """Thirty linear layers, the waiting module, thirty more: 62 modules with the root."""
    return nn.Sequential(*[nn.Linear(3, 3) for _ in range(30)], Waits(raises),
                         *[nn.Linear(3, 3) for _ in range(30)])


@pytest.fixture(autouse=True)
def on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests in this process see standard error as a terminal (pytest's capture is not
    one); those in subprocesses below see their real, piped standard error."""
    monkeypatch.setattr(_progress, "INTERACTIVE", True)
    monkeypatch.delenv(_progress.ENV, raising=False)


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A recording counts as long after 0.05 s; the progress thread ends once idle."""
    monkeypatch.setattr(_progress, "RECORD_AFTER", 0.05)
    monkeypatch.setattr(_progress, "IDLE_EXIT", 0.05)
    yield


@pytest.fixture
def lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """As where tqdm is not installed."""
    monkeypatch.setattr(_progress, "_tqdm", lambda: None)


def _no_progress_left(capsys: pytest.CaptureFixture[str]) -> None:
    """No job is watched, no bar is open, the progress thread ends, and nothing more is printed."""
    assert not _progress._jobs
    for thread in threading.enumerate():
        if thread.name == "torchrecorder-progress":
            thread.join(timeout=10)
    assert not any(t.name == "torchrecorder-progress" for t in threading.enumerate())
    assert capsys.readouterr().err == ""


def test_a_long_recording_shows_a_bar_of_modules_called(quick: None,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("tqdm")
    net = slow_net()
    rec = torchrecorder.record(net, "slow", (1, 3))
    assert net[30].waited
    err = capsys.readouterr().err
    assert "torchrecorder: recording 'slow'" in err
    assert "/62 [" in err  # modules called of the model's 62
    assert "module calls" in err and " nodes" in err
    assert len(list(rec.layers())) == 62
    _no_progress_left(capsys)


def test_without_tqdm_a_long_recording_prints_a_line_at_the_start_and_the_end(
        quick: None, lines: None, capsys: pytest.CaptureFixture[str]) -> None:
    torchrecorder.record(slow_net(), "slow", (1, 3))
    out = capsys.readouterr().err.splitlines()
    assert len(out) == 2, out
    assert out[0].startswith("torchrecorder: recording 'slow': ") and out[0].endswith(" ...")
    assert "/62 modules, " in out[0]
    assert out[1].startswith("torchrecorder: recording 'slow': done in ")
    assert ", 62/62 modules, 62 module calls, " in out[1]
    _no_progress_left(capsys)


def test_lines_come_every_line_every_seconds(quick: None, lines: None, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(_progress, "LINE_EVERY", 0.0)  # a line at every poll
    torchrecorder.record(slow_net(), "slow", (1, 3))
    out = capsys.readouterr().err.splitlines()
    assert len(out) >= 3 and all(line.endswith(" ...") for line in out[:-1])
    assert "done in" in out[-1]


def test_a_short_recording_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    net = nn.Sequential(*[nn.Linear(3, 3) for _ in range(50)])
    for _ in range(20):
        torchrecorder.record(net, "net", (1, 3))
    assert not _progress._jobs
    time.sleep(3 * _progress.POLL)
    assert capsys.readouterr().err == ""


def test_enabled_false_shows_nothing_however_long(quick: None, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(_progress, "ENABLED", False)
    seen: list[int] = []

    class Sleeps(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            time.sleep(0.5)  # ten times the threshold
            seen.append(len(_progress._jobs))
            return x + 1

    torchrecorder.record(Sleeps(), "net", (1, 3))
    assert seen == [0]  # not even watched
    _no_progress_left(capsys)


def test_enabled_true_shows_a_short_recording_from_its_start(lines: None, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(_progress, "ENABLED", True)
    rec = torchrecorder.record(nn.Sequential(nn.Linear(3, 3), nn.ReLU()), "tiny", (1, 3))
    out = capsys.readouterr().err.splitlines()
    assert out[0] == "torchrecorder: recording 'tiny': 0.0 s, 0 modules, 0 module calls, 0 nodes ..."
    assert out[1].startswith("torchrecorder: recording 'tiny': done in ")
    assert out[1].endswith(f" s, 3/3 modules, 3 module calls, {len(rec.nodes) - 1} nodes")


def test_the_recording_context_shows_progress_too(lines: None, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(_progress, "ENABLED", True)
    net = nn.Linear(3, 3)
    with torchrecorder.recording(net, "fc"):
        net(torch.randn(1, 3))
        net(torch.randn(1, 3))
    out = capsys.readouterr().err.splitlines()
    assert len(out) == 2 and ", 1/1 module, 2 module calls, " in out[1]


@pytest.mark.parametrize("raised", [RuntimeError("boom"), KeyboardInterrupt()], ids=["error", "interrupt"])
def test_progress_ends_with_the_recording_that_raises(quick: None, lines: None, raised: BaseException,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    net = slow_net(raised)
    with pytest.raises(type(raised)) as info:
        torchrecorder.record(net, "slow", (1, 3))
    assert info.value is raised and net[30].waited
    out = capsys.readouterr().err.splitlines()
    assert len(out) == 2, out
    assert out[1].startswith(f"torchrecorder: recording 'slow': stopped by {type(raised).__name__} after ")
    assert ", 32/62 modules, 32 module calls, " in out[1]
    time.sleep(3 * _progress.POLL)
    _no_progress_left(capsys)


def test_a_bar_closes_when_the_recording_raises(quick: None, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("tqdm")
    net = slow_net(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        torchrecorder.record(net, "slow", (1, 3))
    assert net[30].waited
    assert "torchrecorder: recording 'slow'" in capsys.readouterr().err
    from tqdm import tqdm

    assert not [bar for bar in list(tqdm._instances) if "recording 'slow'" in str(bar.desc)]
    time.sleep(3 * _progress.POLL)
    _no_progress_left(capsys)


def test_the_progress_thread_reads_counters_only(quick: None, lines: None, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Torch calls made by the progress thread would be recorded (or refused by the engine's
    thread check): a recording watched with its progress shown equals one made without."""
    net = slow_net()
    watched = torchrecorder.make_dot(torchrecorder.record(net, "net", (1, 3))).source
    assert net[30].waited and "done in" in capsys.readouterr().err
    monkeypatch.setattr(_progress, "ENABLED", False)
    assert torchrecorder.make_dot(torchrecorder.record(net, "net", (1, 3))).source == watched


def test_a_job_left_finished_by_an_interrupted_unwatch_is_cleared_silently(
        quick: None, lines: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(_progress, "ENABLED", True)
    job = _progress.watch("work", lambda: (1, 2, ""), "step")
    assert job is not None and job.shown
    assert capsys.readouterr().err == "torchrecorder: work: 0.0 s, 1/2 steps ...\n"
    job.finished = True  # as unwatch does before an interrupt keeps it from the lock
    deadline = time.monotonic() + 30
    while job in _progress._jobs and time.monotonic() < deadline:
        time.sleep(0.01)
    assert job not in _progress._jobs and not job.shown
    _progress.unwatch(job)  # (when it comes after all, it shows nothing either)
    _no_progress_left(capsys)


def test_no_thread_to_be_had_leaves_the_recording_unwatched(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    def refuse() -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(_progress, "_start_worker", refuse)
    rec = torchrecorder.record(nn.Linear(3, 3), "fc", (1, 3))
    assert [layer.key for layer in rec.layers()] == ["fc"]
    assert not _progress._jobs and capsys.readouterr().err == ""


@pytest.mark.parametrize("long", [False, True], ids=["short", "shown"])
def test_the_progress_thread_keeps_no_recording_alive(long: bool, quick: None, lines: None,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(_progress, "IDLE_EXIT", 60.0)  # the thread stays, waiting for the next job
    if long:
        net: nn.Module = slow_net()
    else:
        monkeypatch.setattr(_progress, "RECORD_AFTER", 60.0)
        net = nn.Linear(3, 3)
    rec = torchrecorder.record(net, "net", (1, 3))
    time.sleep(3 * _progress.POLL)  # the thread has looked at the job (and waits again)
    assert any(t.name == "torchrecorder-progress" for t in threading.enumerate())
    ref = weakref.ref(rec)
    del rec
    gc.collect()
    assert ref() is None
    assert ("done in" in capsys.readouterr().err) is long


def test_a_read_that_fails_shows_the_counts_read_before(quick: None, lines: None,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(_progress, "ENABLED", True)
    monkeypatch.setattr(_progress, "LINE_EVERY", 0.0)
    reads: list[int] = []

    def read() -> _progress.Counts:
        reads.append(1)
        if len(reads) > 1:
            raise RuntimeError("dictionary changed size during iteration")
        return 5, 9, "more"

    job = _progress.watch("work", read, "step")
    deadline = time.monotonic() + 30
    while len(reads) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    _progress.unwatch(job)
    out = capsys.readouterr().err.splitlines()
    assert len(reads) >= 3 and len(out) >= 3
    assert all(", 5/9 steps, more" in line for line in out), out
    assert out[-1].startswith("torchrecorder: work: done in ")


SLOW_MODULE = '''
import time

from torch import nn

from torchrecorder import _progress

_progress.RECORD_AFTER = 0.05


class Slow(nn.Module):
    """Holds its pass until the progress of the recording shows (at most 30 s)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        deadline = time.monotonic() + 30
        while not any(job.shown for job in list(_progress._jobs)) and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.fc(x)
'''


def test_the_command_line_shows_the_progress_of_a_long_recording(tmp_path: Path) -> None:
    (tmp_path / "slowmod.py").write_text(SLOW_MODULE)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "torchrecorder", "slowmod:Slow", "-s", "1,3", "-f", "dot",
                           "-o", str(tmp_path / "slow.dot")], capture_output=True, text=True, cwd=tmp_path,
                          env=env, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # standard error is a pipe: no bar frames, one line when the recording ends
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("torchrecorder: recording '")]
    assert len(lines) == 1 and "done in" in lines[0] and "2/2 modules" in lines[0], proc.stderr
    assert (tmp_path / "slow.dot").read_text().startswith("digraph")


PIPED = SLOW_MODULE + '''
import sys

import torch

import torchrecorder

net = torch.nn.Sequential(*[Slow() for _ in range(3)])
torchrecorder.record(net, "piped", (1, 3))
dot = torchrecorder.make_dot(torchrecorder.record(torch.nn.Linear(3, 3), "small", (1, 3)))
'''


@pytest.mark.parametrize("setting", [None, "1", "0"])
def test_a_piped_standard_error_gets_a_line_per_stage_and_no_bar(tmp_path: Path,
                                                                 setting: Optional[str]) -> None:
    """Where standard error is a pipe (CI, ``2>file``, ``| tee``) and ``tqdm`` is installed:
    no carriage returns nor bar frames; a long recording writes one line; the environment
    variable forces progress on (every stage, however short: one line each) or off."""
    pytest.importorskip("tqdm")
    script = tmp_path / "piped.py"
    script.write_text(PIPED)
    env = {k: v for k, v in os.environ.items() if k != _progress.ENV}
    env["PYTHONPATH"] = str(ROOT)
    if setting is not None:
        env[_progress.ENV] = setting
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "\r" not in err and "it/s" not in err and "%|" not in err, err
    lines = err.splitlines()
    assert all(line.startswith("torchrecorder: ") for line in lines), lines
    if setting == "0":
        assert lines == []
        return
    piped = [line for line in lines if "recording 'piped'" in line]
    assert len(piped) == 1 and "done in" in piped[0] and "7/7 modules" in piped[0], lines
    small = [line for line in lines if "'small'" in line]
    if setting == "1":  # forced: the short recording and its drawing show too, a line each
        assert len(small) == 2 and all("done in" in line for line in small), lines
        # each stage counts what it went through (its edges, not 0 where the drawing is small)
        assert not any("(0 items)" in line for line in lines), lines
    else:
        assert small == [], lines


def test_the_environment_variable_forces_progress(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(_progress.ENV, "1")
    assert _progress.forced() is True
    monkeypatch.setattr(_progress, "ENABLED", False)  # set in code: wins
    assert _progress.forced() is False
    monkeypatch.setattr(_progress, "ENABLED", None)
    monkeypatch.setenv(_progress.ENV, "off")
    assert _progress.forced() is False
    monkeypatch.setenv(_progress.ENV, "maybe")
    with pytest.warns(RuntimeWarning, match="TORCHRECORDER_PROGRESS='maybe'"):
        assert _progress.forced() is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")
def test_a_process_forked_while_recording_shows_nothing_of_its_parents_recording(tmp_path: Path) -> None:
    """The child of a fork made by the model (a data loader's worker, say) shows nothing of
    the recording it inherits, and its own recordings still show their progress."""
    script = tmp_path / "forks.py"
    script.write_text(SLOW_MODULE + '''

import os
import sys

import torchrecorder


class Forks(Slow):
    def forward(self, x):
        y = super().forward(x)  # the parent's progress shows
        pid = os.fork()
        if pid == 0:  # the child: its copy of the recording is not its own to show or end
            _progress.ENABLED = True
            torchrecorder.record(nn.Linear(3, 3), "childs", (1, 3))
            sys.stderr.flush()
            os._exit(0 if not any(job.what == "recording 'net'" for job in _progress._jobs) else 3)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError(f"child: {status}")
        return y


_progress._tqdm = lambda: None
_progress.INTERACTIVE = True  # lines while it runs, as on a terminal
torchrecorder.record(Forks(), "net", (1, 3))
''')
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert [line.split(":")[1] for line in lines] == [" recording 'net'", " recording 'childs'",
                                                      " recording 'childs'", " recording 'net'"], lines
    assert "done in" in lines[-1] and "done in" in lines[2]
