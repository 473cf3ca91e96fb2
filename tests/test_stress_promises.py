"""The promises under stress: long autograd chains, forwards that rebuild their containers,
concurrent recordings of one model, renderers given the wrong destination."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_releasing_the_grad_fns_of_a_long_chain_does_not_crash() -> None:
    """A Python loop of 60,000 operations: the recording holds each output's ``grad_fn`` and
    lets them go when it ends; oldest first, the newest freed the whole chain at once and torch
    overflowed the C stack (a segfault, so the check runs in a child process)."""
    code = textwrap.dedent("""
        import torch
        from torchrecorder.recording.untraced import Untraced
        held = Untraced(None)
        x = torch.zeros(2, requires_grad=True) * 1
        for i in range(60_000):
            x = x * 1.0 if i % 2 else x + 1.0
            held.grad_fns[id(x.grad_fn)] = (x.grad_fn, i)
        del x
        held.clear()
        print("released")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0 and proc.stdout.strip() == "released", (proc.returncode, proc.stderr[-500:])
