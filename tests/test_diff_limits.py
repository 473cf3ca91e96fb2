"""torchrecorder.diff at its limits: size, symmetry, hostile names, odd output files, mappings."""

from __future__ import annotations

import tracemalloc

import torch
from torch import nn

import torchrecorder


def _linear_stack(n: int) -> tuple[torchrecorder.Recorder, torchrecorder.Recorder]:
    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Linear(2, 2) for _ in range(n)])
    a = torchrecorder.record(net, "net", (1, 2))
    b = torchrecorder.record(net.double(), "net", (1, 2), dtype=torch.float64)
    return a, b


def _diff_peak(n: int) -> tuple[torchrecorder.Diff, int]:
    a, b = _linear_stack(n)
    tracemalloc.start()
    try:
        d = torchrecorder.diff(a, b)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return d, peak


def test_diff_memory_grows_linearly_with_many_changed_siblings() -> None:
    # every child changed (float64): nothing pairs at the ends, so the children are aligned;
    # an alignment over all pairs of them is quadratic (1,500 x 1,500 scores)
    _, peak_small = _diff_peak(300)
    big, peak_big = _diff_peak(1500)
    assert big.counts("layer")["changed"] == 1500 and big.counts("layer")["added"] == 0
    assert [e.b for e in big.entries if e.a == "1499"] == ["1499"]
    assert peak_big < 40 * 2**20, peak_big
    assert peak_big < 8 * peak_small, (peak_small, peak_big)  # 5 x the size
