"""The zoo's models recorded once per test session, and their oracle comparison.

A :class:`Zoo` holds the caches; ``tests/conftest.py`` makes one per session
and hands it to tests as the ``zoo`` fixture, so that which tests run and in
what order (``-k``, ``--lf``, ``-p randomly``) changes nothing: whichever test
asks first for a model records it, and every later test gets that recording.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import nn

import torchrecorder

from ..graph_checks import snapshot
from ..oracle import compare, export_relation, fx_relation, recorded_relation
from . import Case, all_cases, stress_cases

__all__ = ["MODES", "OracleRow", "Recorded", "Zoo", "restored"]

#: how a case's forward pass is run, by ``Case.grad_mode``
MODES: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "grad": contextlib.nullcontext, "no_grad": torch.no_grad, "inference": torch.inference_mode}


@dataclass
class Recorded:
    """A zoo model, recorded once, with what the checks need."""

    case: Case
    net: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    rec: torchrecorder.Recorder
    out: Any
    before: dict[str, Any]


@dataclass
class OracleRow:
    """One model's comparison with the oracle: precision and recall of the leaf-call dataflow pairs."""

    name: str
    oracle: str
    pairs: int = 0
    precision: Optional[float] = None
    recall: Optional[float] = None
    note: str = ""
    diff: str = ""


class Zoo:
    """Caches of one test session: each zoo model built and recorded once, compared with the oracle once."""

    def __init__(self) -> None:
        self._cases: dict[str, Case] = {}
        self._recorded: dict[str, Recorded] = {}
        self._oracle: dict[str, OracleRow] = {}

    def cases(self) -> list[Case]:
        """Every zoo case, hand-written first, in the zoo's order."""
        if not self._cases:
            self._cases = {c.name: c for c in all_cases()}
        return list(self._cases.values())

    def case(self, name: str) -> Case:
        """The case called ``name`` (a stress case too)."""
        if not self._cases:
            self.cases()
        got = self._cases.get(name)
        if got is None:
            got = {c.name: c for c in stress_cases()}[name]
        return got

    def recorded(self, name: str) -> Recorded:
        """The model ``name``, built, snapshotted and recorded (on the first request only)."""
        if name not in self._recorded:
            self._recorded[name] = _record(self.case(name))
        return self._recorded[name]

    def oracle(self, name: str) -> OracleRow:
        """The recording of ``name`` compared with the oracle (on the first request only).

        The oracles run the model (a train-mode BatchNorm updates its statistics);
        its state is put back afterwards, for the tests that check it is unchanged.
        """
        if name not in self._oracle:
            r = self.recorded(name)
            with restored(r.net):
                self._oracle[name] = _compare_with_oracle(r)
        return self._oracle[name]


@contextlib.contextmanager
def restored(net: nn.Module) -> Iterator[None]:
    """Put back the parameters and buffers of ``net`` (except meta tensors) when the block ends.

    A test that runs a shared zoo model again wraps the call in this, so that no
    other test sees what the call changed.
    """
    saved = {k: v.clone() for k, v in net.state_dict().items() if v.device.type != "meta"}
    try:
        yield
    finally:
        net.load_state_dict(saved, strict=False)


def _record(case: Case) -> Recorded:
    net = case.build()
    args, kwargs = case.inputs()
    before = snapshot(net)
    if case.train:
        # record() puts back what a training-mode pass changes (BatchNorm statistics)
        rec = torchrecorder.record(net, case.name, input_data=args, input_kwargs=kwargs)
        return Recorded(case, net, args, kwargs, rec, None, before)
    with MODES[case.grad_mode](), torchrecorder.recording(net, case.name) as rec:
        out = net(*args, **kwargs)
    return Recorded(case, net, args, kwargs, rec, out, before)


def _compare_with_oracle(r: Recorded) -> OracleRow:
    case = r.case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case.oracle is None:
            expected = fx_relation(r.net, r.args, r.kwargs, case.fx_concrete)
            got = recorded_relation(r.rec)
            source = "fx"
        elif case.no_export:
            return OracleRow(case.name, "none", note=f"{case.oracle}; no export: {case.no_export}")
        else:
            kwargs = r.kwargs
            if "use_cache" in inspect.signature(r.net.forward).parameters:
                # export cannot return a transformers Cache object; the cache is
                # written, never read, in one pass, so the dataflow is the same
                kwargs = {**kwargs, "use_cache": False}
            expected, visible = export_relation(r.net, r.args, kwargs)
            got = recorded_relation(r.rec, visible)
            source = "export"
    precision, recall, missing, extra = compare(expected, got)
    note = case.oracle or ""
    if case.known_gap:
        note = (note + "; " if note else "") + "known gap: " + case.known_gap
    row = OracleRow(case.name, source, len(expected), precision, recall, note)
    row.diff = "".join(f" missing {m}" for m in sorted(missing)[:3])
    row.diff += "".join(f" extra {e}" for e in sorted(extra)[:3])
    return row
