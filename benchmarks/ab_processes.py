"""A/B timing of ``record``, this checkout against a git revision, each in processes of its own.

``ab_record.py`` times both in one process, taking turns: right for most engine changes, but
the two share the garbage collector's generations there, so each side's allocations trigger
collections in the other's recordings (a young-generation collection every 700 tracked
objects, an older one every ten of those).  A change to what the collector sees (see
``recording/pool.py``) is measured here instead: each process imports one side only (the
revision's ``torchrecorder`` from a ``git archive`` of it, or this checkout's), records the model
``--records`` times after a few warm-up recordings and prints the median thread CPU time;
``--processes`` such processes per side run in turn, and the median of their medians is
compared.

    python benchmarks/ab_processes.py --base main --models gpt2-w32-L32,mlp-1000 --processes 5

Like every script here it asserts nothing and exits 0 whatever it measures.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]

from ab_render import ab_parser  # noqa: E402

#: what each process runs: argv model, records, threads; prints the median in milliseconds
WORKER = """
import statistics, sys, time
import torch
torch.set_num_threads(int(sys.argv[3]))
import torchrecorder
from models import build
model, args = build(sys.argv[1])
for _ in range(3):
    torchrecorder.record(model, sys.argv[1], input_data=args)
times = []
for _ in range(int(sys.argv[2])):
    start = time.thread_time()
    torchrecorder.record(model, sys.argv[1], input_data=args)
    times.append(time.thread_time() - start)
print(statistics.median(times) * 1e3)
"""


def run(package_root: str, model: str, records: int, threads: int) -> float:
    """The median ``record`` time (ms) of one process that imports ``torchrecorder`` from
    ``package_root``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root, HERE]))
    out = subprocess.run([sys.executable, "-c", WORKER, model, str(records), str(threads)], env=env,
                         check=True, capture_output=True, text=True, cwd=HERE).stdout
    return float(out.split()[-1])


def main() -> None:
    parser = ab_parser(__doc__ or "", "gpt2-w32-L32,mlp-1000", 41, base=True)
    parser.add_argument("--processes", type=int, default=5, help="processes per side (default 5)")
    parser.set_defaults(rounds=41)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", ROOT, "archive", opts.base, "torchrecorder"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        print(f"record, thread CPU time: median of {opts.processes} processes per side, each the median "
              f"of {opts.rounds} recordings; ratio = this checkout / {opts.base}")
        print(f"{'model':14} {opts.base + ' ms':>16} {'this ms':>10} {'ratio':>6}   per process")
        for model in opts.models.split(","):
            sides: dict[str, list[float]] = {"base": [], "this": []}
            for _ in range(opts.processes):
                sides["base"].append(run(tmp, model, opts.rounds, opts.threads))
                sides["this"].append(run(ROOT, model, opts.rounds, opts.threads))
            base, this = (statistics.median(sides[k]) for k in ("base", "this"))
            each = " ".join(f"{b:.1f}/{t:.1f}" for b, t in zip(sides["base"], sides["this"], strict=True))
            print(f"{model:14} {base:16.2f} {this:10.2f} {this / base:6.3f}   {each}")


if __name__ == "__main__":
    main()
