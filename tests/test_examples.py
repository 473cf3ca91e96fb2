"""Every example script runs and writes the figure it promises."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from .backends import needs_backend

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@needs_backend
@pytest.mark.parametrize(("script", "figure", "expected"), [
    ("render_example.py", "example-2.svg", "Residual"),
    ("render_transformer.py", "gpt2-3.svg", "GPT2Block"),
    ("activations_example.py", "activations.svg", "dead-unit fraction"),
])
def test_example_writes_its_figure(tmp_path: Path, script: str, figure: str, expected: str) -> None:
    if script == "render_transformer.py":
        pytest.importorskip("transformers")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(EXAMPLES / script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "figures" / figure
    texts = {t.text for t in ET.parse(out).getroot().iter("{http://www.w3.org/2000/svg}text")}
    assert any(t is not None and t.split(" · ")[0] == expected for t in texts), texts


def test_the_peer_facts_of_the_comparison_page_run() -> None:
    """examples/peer_facts.py measures the comparison page's "measured here" cells: one line per
    check, each with an answer (``not installed`` where the peer is missing)."""
    proc = subprocess.run([sys.executable, str(EXAMPLES / "peer_facts.py")], capture_output=True, text=True,
                          check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 9 and all(len(line.split(" | ")) == 3 and line.split(" | ")[2] for line in lines)
    no_grad = next(line for line in lines if "no_grad" in line)
    assert "nodes under no_grad" in no_grad or "not installed" in no_grad
