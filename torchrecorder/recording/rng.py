"""The recorded pass's own random stream, and the caller's put back afterwards
(:class:`random_state_kept`, used by :class:`~.state.ModelState`)."""

from __future__ import annotations

import hashlib
import random
import sys
import threading
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

__all__ = ["random_state_kept"]


_RNG_LOCK = threading.Lock()
_rng_users = 0
_rng_saved: dict[int, Tensor] = {}  # -1 for the CPU generator, else the CUDA device index
_rng_private: dict[int, int] = {}  # the seed each generator was given for the recordings
# Python's and numpy's global generators (a model may draw from them in ``forward``: a random
# crop, numpy noise), saved when the first recording begins and put back when the last ends
_py_saved: list[Any] = []


def _other_states() -> list[Any]:
    """The states of Python's ``random`` and (when imported) numpy's global generator."""
    states: list[Any] = [random.getstate()]
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            states.append(np.random.get_state())
        except Exception:  # a numpy stub without the legacy global generator
            pass
    return states


def _set_other_states(states: list[Any]) -> None:
    """Put back what :func:`_other_states` read."""
    random.setstate(states[0])
    if len(states) > 1:
        np = sys.modules.get("numpy")
        if np is not None:
            np.random.set_state(states[1])


def _private_seed(state: Tensor) -> int:
    """A seed drawn from ``state``: the recording's own stream, reproducible, not the caller's."""
    try:
        data = state.numpy().tobytes()  # the same bytes as bytes(state.tolist()), 60x faster
    except Exception:  # torch without numpy
        data = bytes(state.tolist())
    digest = hashlib.blake2b(data, digest_size=8, person=b"torchrecorder")
    return int.from_bytes(digest.digest(), "little") >> 1


class random_state_kept:  # used like a function: ``with random_state_kept():``
    """Give the recorded pass its own random stream and put the caller's back afterwards.

    While any recording of the process runs, torch's default generators (CPU and the given
    CUDA devices) draw from a stream seeded from their state when the first recording
    began; when the last one ends, that state comes back.  So the caller's stream is where
    it was, two overlapping recordings (in two threads) leave it as it was, and another
    thread that draws meanwhile gets numbers of the other stream, never ones it will be
    given again.

    Python's ``random`` and numpy's global generator (``np.random.rand``) are put back where
    they were when the first recording began (the pass draws the caller's next numbers from
    them, and the caller draws them again afterwards).

    Only what the recording itself changed in torch's generators is put back: a generator that was seeded (or
    given a state) meanwhile, by another thread calling ``torch.manual_seed`` or by the
    model itself, no longer holds the recording's stream, and keeps what it was given.
    """

    def __init__(self, cuda_devices: Sequence[int] = ()) -> None:
        self.cuda_devices = tuple(cuda_devices)
        self.entered = False

    def __enter__(self) -> None:
        global _rng_users
        with _RNG_LOCK:
            if _rng_users == 0:
                _py_saved[:] = _other_states()
            fresh = [d for d in (-1, *self.cuda_devices) if d not in _rng_saved]
            for d in fresh:
                _rng_saved[d] = torch.get_rng_state() if d < 0 else torch.cuda.get_rng_state(d)
            for d in fresh:
                seed = _private_seed(_rng_saved[-1]) + max(d, 0)
                _rng_private[d] = seed
                if d < 0:
                    torch.default_generator.manual_seed(seed)
                else:
                    with torch.cuda.device(d):
                        torch.cuda.manual_seed(seed)
            _rng_users += 1
            self.entered = True

    def __exit__(self, *exc_info: Any) -> None:
        global _rng_users
        if not self.entered:
            return
        self.entered = False
        with _RNG_LOCK:
            _rng_users -= 1
            if _rng_users == 0:
                saved, private = dict(_rng_saved), dict(_rng_private)
                _rng_saved.clear()
                _rng_private.clear()
                if _py_saved:
                    _set_other_states(_py_saved)
                    _py_saved.clear()
                for d, st in saved.items():
                    # a generator seeded meanwhile (another thread's ``torch.manual_seed``)
                    # keeps that seed: only the recording's own stream is taken back
                    if _initial_seed(d) != private.get(d):
                        continue
                    if d < 0:
                        torch.set_rng_state(st)
                    else:
                        torch.cuda.set_rng_state(st, d)


def _initial_seed(device: int) -> int:
    """The seed that torch's default generator of ``device`` (-1: the CPU) was last given."""
    if device < 0:
        return torch.default_generator.initial_seed()
    return torch.cuda.default_generators[device].initial_seed()
