"""Where the time of ``record`` + ``make_dot`` goes, and what each speed target leaves for it.

Times, in one process and in alternating rounds (thread CPU time, medians), on one
model of ``models.py`` (``gpt2-w32-L32`` by default):

* the plain forward pass;
* the *mechanism floor* (``bench.py``'s): the forward pass under do-nothing versions of a
  forward pre-hook on every module, one global forward hook and a ``TorchFunctionMode``,
  registered and removed: what torch's hook and mode dispatch costs any recorder built
  on them (the SPEC's design card), before it records anything;
* the model check (``check_model``: one walk of the model, refusing lazy tensors, reading
  the model's stamp and comparing it with the stamp of its memo);
* keeping and restoring the model's state, without a forward pass (``model_state_kept``:
  the README's promise that the model is left as it was);
* the module index (``index_modules`` on the checked walk, as ``record`` calls it: taken
  from the model's memo when the model has not changed since its last recording);
* the engine's hooks put on every module and taken off again (less the index);
* ``record`` and ``make_dot(...).source``;
* torchviz (forward + ``make_dot``) and torchview (``draw_graph``, depth 3), when installed;
* the toy recorder of ``toy_recorder.py``: the least a recorder on the same hooks and mode
  does (a node per call, tensor, parameter and operation, edges by identity, lines of code),
  none of ``record``'s promises kept: a yardstick for what a target leaves room for.

It prints the parts of ``record`` + ``make_dot`` (the bookkeeping of module calls and
operations is what is left of ``record`` after the floor, the check, the state, the index
and the hooks), the
bookkeeping per module call and operation, and for each peer target of issue 38 the time
it allows, what of that the floor takes, and how much of torchrecorder's own work
(everything above the floor) would have to go to meet it.

    python benchmarks/breakdown.py [--model gpt2-w32-L32] [--rounds 25]

Like every script here it asserts nothing and exits 0 whatever it measures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]

import torch  # noqa: E402
from bench import _mechanism_floor, _peer_fn  # noqa: E402
from models import build  # noqa: E402
from toy_recorder import toy_record  # noqa: E402

import torchrecorder  # noqa: E402
from torchrecorder.graph import Graph  # noqa: E402
from torchrecorder.nodes import LayerNode, OpNode  # noqa: E402
from torchrecorder.recording.engine import Engine  # noqa: E402
from torchrecorder.recording.meta import check_model  # noqa: E402
from torchrecorder.recording.modules import index_modules  # noqa: E402
from torchrecorder.recording.state import model_state_kept  # noqa: E402

#: issue 38's peer targets: (peer, what, record + make_dot must take at most this share of its time)
TARGETS = (("torchviz", "record + make_dot <= 1.15 x torchviz", 1.15),
           ("torchview", "record + make_dot >= 4.5 x faster than torchview", 1 / 4.5))


def _peers(model: Any, args: tuple[Any, ...]) -> dict[str, Callable[[], Any]]:
    """torchviz's and torchview's runs as ``bench.py`` times them, for those installed."""
    fns: dict[str, Callable[[], Any]] = {}
    for peer in ("torchviz", "torchview"):
        try:
            fns[peer] = _peer_fn(peer, model, args)
        except ImportError:
            pass
    return fns


def measure(name: str, rounds: int) -> dict[str, Any]:
    """Median thread CPU seconds of each part on model ``name``, and the recording's counts."""
    model, args = build(name)
    rec = torchrecorder.record(model, name, input_data=args)

    walk = check_model(model)

    def state() -> None:
        with model_state_kept(model, walk):
            pass

    def hooks() -> None:
        engine = Engine(Graph(name))
        engine.walk = walk
        engine.register_hooks(model, name)
        engine.remove_hooks()

    fns: dict[str, Callable[[], Any]] = {
        "forward": lambda: model(*args),
        "floor": lambda: _mechanism_floor(model, args),
        "check": lambda: check_model(model),
        "state": state,
        "index": lambda: index_modules(model, name, "", {}, {}, {}, walk),
        "hooks": hooks,
        "record": lambda: torchrecorder.record(model, name, input_data=args),
        "make_dot": lambda: torchrecorder.make_dot(rec).source,
        "toy": lambda: toy_record(model, args),
        **_peers(model, args),
    }
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        fn()  # warm-up
    order = list(fns.items())
    for i in range(rounds):
        for k, fn in order[i % len(order):] + order[:i % len(order)]:
            start = time.thread_time()
            fn()
            times[k].append(time.thread_time() - start)
    out: dict[str, Any] = {k: statistics.median(v) for k, v in times.items()}
    out["calls"] = sum(isinstance(n, LayerNode) for n in rec.nodes.values()) - 1  # not the context
    out["ops"] = sum(isinstance(n, OpNode) for n in rec.nodes.values())
    return out


def report(name: str, m: dict[str, Any]) -> list[str]:
    """The printed lines for measurements ``m`` of model ``name``."""
    ms = 1e3
    total = m["record"] + m["make_dot"]
    hooks = max(m["hooks"] - m["index"], 0.0)  # (the hooks' timing includes the index)
    bookkeeping = m["record"] - m["floor"] - m["check"] - m["state"] - m["index"] - hooks
    parts = [
        ("plain forward pass", m["forward"]),
        ("torch's hook and mode dispatch (floor - forward)", m["floor"] - m["forward"]),
        ("model check (walk and stamp)", m["check"]),
        ("model state kept and restored", m["state"]),
        ("module index", m["index"]),
        ("the engine's hooks on and off", hooks),
        ("module calls and operations recorded (the rest of record)", bookkeeping),
        ("make_dot(...).source", m["make_dot"]),
    ]
    lines = [f"{name}: record + make_dot {total * ms:.1f} ms "
             f"({m['calls']} module calls, {m['ops']} operations)"]
    lines += [f"  {what:60} {t * ms:7.2f} ms  {t / total:6.1%}" for what, t in parts]
    events = m["calls"] + m["ops"]
    if events:
        lines.append(f"  bookkeeping per module call or operation: {bookkeeping / events * 1e6:.1f} us")
    own = total - m["floor"]
    lines.append(f"  torchrecorder's own work (above the floor): {own * ms:.1f} ms")
    toy = m.get("toy")
    if toy is not None:
        lines.append(f"  toy recorder (toy_recorder.py: no promise kept) {toy * ms:.2f} ms, "
                     f"{(toy - m['floor']) * ms:.1f} ms above the floor; "
                     f"record / toy {m['record'] / toy:.2f}; "
                     f"toy + make_dot {(toy + m['make_dot']) * ms:.1f} ms")
    for peer, what, share in TARGETS:
        if peer not in m:
            lines.append(f"  {what}: {peer} not installed")
            continue
        allowed = m[peer] * share
        room = allowed - m["floor"]
        cut = 1 - room / own if own > 0 else 0.0
        state = "met" if total <= allowed else f"needs {cut:.0%} of the own work to go"
        if toy is not None:
            fits = "within" if toy + m["make_dot"] <= allowed else "over"
            state += f" (the toy recorder + make_dot: {fits} it)"
        lines.append(f"  {what}: {peer} {m[peer] * ms:.1f} ms allows {allowed * ms:.1f} ms; after the floor "
                     f"{room * ms:.1f} ms are left for {own * ms:.1f} ms of own work: {state}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2-w32-L32", help="a name from benchmarks/models.py")
    parser.add_argument("--rounds", type=int, default=25, help="alternating timed rounds (default 25)")
    parser.add_argument("--threads", type=int, default=1, help="torch's intra-op threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"thread CPU time, median of {args.rounds} alternating rounds")
    print("\n".join(report(args.model, measure(args.model, args.rounds))))


if __name__ == "__main__":
    main()
