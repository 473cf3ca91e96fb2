"""Check that a drawing change left ``make_dot``'s output as it was: the DOT source of every
model of the test zoo (``tests/zoo``: the hand-written, pass-through, ``transformers`` and
stress models) and of the benchmark models, drawn by this checkout and by a git revision.

Both packages are loaded in one process (the revision as ``_torchrecorder_base``, see
``ab_render.load_base``); each model is built once per package from the same seed and
recorded by that package, then drawn at each setting of ``--drawings`` (by default the
default drawing, ``render_depth=2`` and ``fold_repeats=False``).  Prints the number of
drawings compared and each one that differs (or that raised in one package only), and exits
1 if any differs.  A speed branch of the renderer or the fold plan runs it before claiming
"output unchanged".

    python benchmarks/dot_same.py --base main
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]

import torch  # noqa: E402
from ab_render import load_base  # noqa: E402
from models import build  # noqa: E402

import torchrecorder  # noqa: E402
from tests.zoo import Case, all_cases, stress_cases  # noqa: E402
from tests.zoo.session import MODES  # noqa: E402

#: the drawings compared: a name and the keyword arguments of make_dot
DRAWINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "depth 2": {"render_depth": 2},
    "unfolded": {"fold_repeats": False},
}

#: the benchmark models drawn too (small enough to record in a second each)
BENCH_MODELS = ("gpt2-w32-L8", "gpt2-w32-L32", "mlp-1000")


def _zoo_recording(pkg: Any, case: Case) -> Any:
    """``case``'s model recorded by ``pkg``, as the zoo's tests record it."""
    torch.manual_seed(0)
    net = case.build()
    args, kwargs = case.inputs()
    if case.train:
        return pkg.record(net, case.name, input_data=args, input_kwargs=kwargs)
    # (TorchScript runs a scripted function optimized from its second call on: into one
    # ``differentiable_graph`` operation, which the second package would see)
    with torch.jit.optimized_execution(False), MODES[case.grad_mode](), \
            pkg.recording(net, case.name) as rec:
        net(*args, **kwargs)
    return rec


def _bench_recording(pkg: Any, name: str) -> Any:
    torch.manual_seed(0)
    model, inputs = build(name)
    return pkg.record(model, name, None, input_data=inputs)


def _source(pkg: Any, rec: Any, kwargs: dict[str, Any]) -> str:
    try:
        return str(pkg.make_dot(rec, **kwargs).source)
    except Exception as exc:  # compared as text: raising alike is the same
        return f"raised {type(exc).__name__}: {exc}"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", default="main", help="git revision to compare with (default main)")
    parser.add_argument("--no-bench", action="store_true", help="the zoo only, not the benchmark models")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the budget's notes on large drawings, said alike by both
    jobs: list[tuple[str, Any]] = [(case.name, case) for case in [*all_cases(), *stress_cases()]]
    if not args.no_bench:
        jobs.extend((name, name) for name in BENCH_MODELS)
    compared, differ = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        base = load_base(args.base, tmp)
        for name, job in jobs:
            sources: list[list[str]] = []
            for pkg in (base, torchrecorder):
                try:
                    rec = _zoo_recording(pkg, job) if isinstance(job, Case) else _bench_recording(pkg, job)
                except Exception as exc:  # compared as text
                    sources.append([f"record raised {type(exc).__name__}"] * len(DRAWINGS))
                    continue
                sources.append([_source(pkg, rec, kwargs) for kwargs in DRAWINGS.values()])
            for label, was, now in zip(DRAWINGS, *sources, strict=True):
                compared += 1
                if was != now:
                    differ.append(f"{name} ({label})")
    print(f"{compared} drawings compared ({len(jobs)} models x {len(DRAWINGS)} settings), "
          f"{len(differ)} differ from {args.base}")
    for line in differ:
        print(f"  differs: {line}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
