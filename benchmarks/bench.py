"""Speed and scale benchmark of torchrecorder against the forward pass and its peers.

Run ``python benchmarks/bench.py`` (about 3 minutes on 2 CPU cores) or
``python benchmarks/bench.py --quick``.  For every model of the scale series
(see ``benchmarks/models.py``) it measures, in fresh subprocesses:

* the plain forward pass with gradients enabled (the floor);
* the *mechanism floor*: the forward pass under do-nothing versions of what
  ``record`` installs (a forward pre-hook on every module, one global forward
  hook, a ``TorchFunctionMode``): what a recorder built on torch's hooks and
  function modes pays before recording anything; shows how much of ``record``
  is torchrecorder's own work;
* ``record``, ``make_dot(...).source`` and the ``dot`` layout of that source;
* peak RSS growth of one forward pass and of one ``record``;
* torchviz, torchview and torchlens on the same model and inputs when they are
  installed (``pip install 'torchrecorder[bench]'``);
* the cold call on ``cnn-small``: in a fresh process, ``import torchrecorder``
  (timed apart, after ``import torch``) and the first ``record`` +
  ``make_dot(...).source``, beside ``import torchviz`` and its first forward +
  ``make_dot(...).source``, each fresh process repeated ``--cold-repeats`` times;

and prints a table, then each target of issues 38 and 4 with PASS/FAIL and the
ratio measured; a full run then adds ``layout_bench.py --largest 20`` (the layout
time of every default drawing, ``make_dot``'s, ``render_network``'s and the HTML
page's first view, of the 20 largest zoo models) and
``capture_bench.py``.  Times are medians of ``--repeats`` runs after one warm-up run (the
cold row: medians over its fresh processes).  The benchmark never fails a test
suite: its exit status is 0 whatever it measures.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import inspect
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # the checkout this script belongs to: its torchrecorder is the one measured
PEERS = ("torchviz", "torchview", "torchlens")
SERIES = ("gpt2-w32-L2", "gpt2-w32-L8", "gpt2-w32-L32")  # the linear-growth series
MARK = "BENCHJSON "

# ------------------------------------------------------------------ memory
def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class PeakRSS:
    """Peak resident memory growth of a block, in MiB.

    Uses the kernel's high-water mark (``VmHWM``, reset through
    ``/proc/self/clear_refs``) where Linux allows it, else samples the RSS
    every millisecond from a thread (psutil), which can miss short peaks.
    """

    def __enter__(self) -> PeakRSS:
        self.method = "VmHWM"
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            self.base = _status_kb("VmRSS")
            if self.base is None or _status_kb("VmHWM") is None:
                raise OSError
        except OSError:
            self._start_sampler()
        return self

    def _start_sampler(self) -> None:
        import threading

        import psutil

        self.method = "sampled"
        proc = psutil.Process()
        self.base = proc.memory_info().rss // 1024
        self._peak = self.base
        self._stop = threading.Event()

        def sample() -> None:
            while not self._stop.is_set():
                self._peak = max(self._peak, proc.memory_info().rss // 1024)
                time.sleep(0.001)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()

    def __exit__(self, *exc: Any) -> None:
        if self.method == "VmHWM":
            peak = _status_kb("VmHWM") or 0
        else:
            self._stop.set()
            self._thread.join()
            peak = self._peak
        self.mib = max(0, peak - self.base) / 1024


# ------------------------------------------------------------------ timing
def timed(fns: dict[str, Callable[[], Any]], repeats: int, slow: float = 10.0) -> dict[str, float]:
    """Median seconds of each function over ``repeats`` runs, after one warm-up run each.

    The functions take turns (round robin, each round starting one further),
    so that a machine busy with something else slows them alike and their
    ratios stay meaningful.  Garbage is collected once before the timed
    rounds, not before each run: a
    collection walks every object of the process and leaves the CPU caches cold,
    which adds about a millisecond to whatever runs next and would swamp the
    small models.  A function whose warm-up took more than ``slow`` seconds runs
    once more only.
    """
    times: dict[str, list[float]] = {k: [] for k in fns}
    first: dict[str, float] = {}
    for k, fn in fns.items():
        t0 = time.perf_counter()
        fn()
        first[k] = time.perf_counter() - t0
    gc.collect()
    order = list(fns.items())
    for i in range(repeats):
        # each round starts with the next function: none always runs right after the same other
        for k, fn in order[i % len(order):] + order[: i % len(order)]:
            if i and first[k] > slow:
                continue
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    out = {k: statistics.median(v) for k, v in times.items()}
    out.update({f"{k}_min": min(v) for k, v in times.items()})
    out.update({f"{k}_max": max(v) for k, v in times.items()})
    return out


def _first_tensor(out: Any) -> Any:
    import torch

    if isinstance(out, torch.Tensor):
        return out
    values = out.values() if isinstance(out, dict) else out
    for v in values:
        if isinstance(v, torch.Tensor):
            return v
    raise TypeError(f"no tensor in the output {type(out).__name__}")


# ------------------------------------------------------------------ workers
def _warm_up_torchrecorder() -> None:
    """Load everything a first recording loads, on a tiny model, outside any measurement."""
    import torch

    import torchrecorder

    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    torchrecorder.make_dot(torchrecorder.record(net, "warm", (1, 4))).source  # noqa: B018


def _mechanism_floor(model: Any, args: tuple[Any, ...]) -> None:
    """A forward pass under do-nothing versions of the hooks and mode that ``record`` uses:
    a forward pre-hook with keyword arguments on every module, one global forward hook
    (``always_call``) and a ``TorchFunctionMode``."""
    from torch.nn.modules.module import register_module_forward_hook
    from torch.overrides import TorchFunctionMode

    class Nothing(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    def pre(module: Any, a: Any, k: Any) -> None:
        return None

    def post(module: Any, a: Any, out: Any) -> None:
        return None

    handles = [module.register_forward_pre_hook(pre, with_kwargs=True) for module in model.modules()]
    handles.append(register_module_forward_hook(post, always_call=True))
    try:
        with Nothing():
            model(*args)
    finally:
        for h in handles:
            h.remove()


def worker_ours(name: str, repeats: int, hf: bool, outdir: str) -> dict[str, Any]:
    """Memory and times of torchrecorder on ``name`` (run in a fresh process)."""
    import torch
    from models import MODELS, build

    import torchrecorder

    spec = MODELS[name]
    model, args = build(name, hf)
    _warm_up_torchrecorder()
    res: dict[str, Any] = {"model": name, "kind": spec.kind}

    # cold memory first, in this fresh process: record (+ DOT source for the meta model)
    t0 = time.perf_counter()
    with PeakRSS() as mem:
        rec = torchrecorder.record(model, name, input_data=args)
        if spec.kind == "meta":
            torchrecorder.make_dot(rec).source  # noqa: B018
    res["cold_record_dot_s" if spec.kind == "meta" else "cold_record_s"] = time.perf_counter() - t0
    res["rss_record_mib"], res["rss_method"] = mem.mib, mem.method
    del rec
    gc.collect()

    rec = torchrecorder.record(model, name, input_data=args)
    res["nodes"], res["edges"] = len(rec.nodes) - 1, len(rec.links)
    fns: dict[str, Callable[[], Any]] = {
        "record_s": lambda: torchrecorder.record(model, name, input_data=args),
        "make_dot_s": lambda: torchrecorder.make_dot(rec).source,
    }
    fns["forward_s"] = lambda: model(*args)  # on meta too: issue 22 compares record + DOT with it
    if spec.kind != "meta":
        fns["mechanism_s"] = lambda: _mechanism_floor(model, args)
    # repeated blocks drawn once (fold_repeats="auto", the default) hide how DOT size grows
    nofold = {"fold_repeats": False} if "fold_repeats" in inspect.signature(
        torchrecorder.make_dot).parameters else {}
    if nofold:
        fns["make_dot_nofold_s"] = lambda: torchrecorder.make_dot(rec, **nofold).source
    res.update(timed(fns, repeats))
    depths: dict[str, tuple[int, dict[str, Any]]] = {"full": (256, {}), "d1": (1, {}), "d2": (2, {})}
    if nofold:
        depths["nofold"] = (1 if spec.kind == "meta" else 256, nofold)
    for label, (depth, extra) in depths.items():
        src = torchrecorder.make_dot(rec, render_depth=depth, **extra).source
        path = os.path.join(outdir, f"{name}-{label}.gv")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(src)
        res[f"dot_{label}"] = path
        res[f"dot_{label}_kb"] = len(src.encode()) / 1024
    del torch
    return res


def worker_fwdmem(name: str, repeats: int, hf: bool, outdir: str) -> dict[str, Any]:
    """Peak RSS growth of one plain forward pass with autograd (fresh process)."""
    del repeats, outdir
    import torch
    from models import build

    model, args = build(name, hf)
    tiny = torch.nn.Linear(4, 4)
    tiny(torch.randn(1, 4)).sum()  # load what a first forward loads
    with PeakRSS() as mem:
        out = model(*args)
        del out
    return {"model": name, "rss_forward_mib": mem.mib}


def _peer_fn(peer: str, model: Any, args: tuple[Any, ...]) -> Callable[[], Any]:
    if peer == "torchviz":
        import torchviz

        def run() -> Any:  # a grad-enabled forward and the autograd graph's DOT source
            out = _first_tensor(model(*args))
            return torchviz.make_dot(out, params=dict(model.named_parameters())).source

        return run
    if peer == "torchview":
        import torchview

        def run() -> Any:  # draw_graph with its defaults (depth 3, said here), to DOT source
            return torchview.draw_graph(model, input_data=list(args), device="cpu", depth=3,
                                        graph_name="bench").visual_graph.source

        return run
    if peer == "torchlens":
        import torchlens

        def run() -> Any:  # its cheapest capture: metadata only, no activations saved
            if hasattr(torchlens, "trace"):
                return torchlens.trace(model, list(args), save=None)
            return torchlens.log_forward_pass(model, list(args), layers_to_save=None, vis_opt="none")

        return run
    raise ValueError(peer)


def worker_peer(peer: str, name: str, repeats: int, hf: bool) -> dict[str, Any]:
    """Time and peak RSS of one peer tool on ``name``, and ours next to it (fresh process).

    torchviz and torchview take turns with torchrecorder's record + make_dot;
    torchlens wraps torch functions for the rest of the process, so ours is
    timed before its first call instead.
    """
    from models import build

    import torchrecorder

    model, args = build(name, hf)
    res: dict[str, Any] = {"model": name, "peer": peer}
    try:
        fn = _peer_fn(peer, model, args)
    except ImportError as exc:
        return {**res, "error": f"not installed ({exc.name})"}

    def ours() -> None:
        torchrecorder.make_dot(torchrecorder.record(model, name, input_data=args)).source  # noqa: B018

    _warm_up_torchrecorder()
    if peer == "torchlens":
        res["ours_s"] = timed({"ours": ours}, repeats)["ours"]
    try:
        with PeakRSS() as mem:
            t0 = time.perf_counter()
            fn()
            res["cold_s"] = time.perf_counter() - t0
        res["rss_mib"] = mem.mib
        fns = {"time_s": fn} if peer == "torchlens" else {"time_s": fn, "ours_s": ours}
        res.update(timed(fns, repeats, slow=2.0))
    except BaseException as exc:  # a peer failing on a model is a result, not a crash
        msg = str(exc).splitlines()[0] if str(exc) else ""
        res["error"] = f"{type(exc).__name__}: {msg}"[:90]
    return res


COLD_MODEL = "cnn-small"
COLD_TOOLS = ("torchrecorder", "torchviz")


def worker_cold(tool: str, name: str, hf: bool) -> dict[str, Any]:
    """The first call of ``tool`` in this fresh process: its import, then one drawing of ``name``.

    ``import torch`` and building the model come first and are not counted (timed
    apart, for reference); then the tool's import is timed, then its first call:
    ``record`` + ``make_dot(...).source`` for torchrecorder, a grad-enabled
    forward + ``torchviz.make_dot(...).source`` for torchviz.
    """
    res: dict[str, Any] = {"model": name, "tool": tool}
    t0 = time.perf_counter()
    import torch  # noqa: F401

    res["torch_import_s"] = time.perf_counter() - t0
    from models import build

    model, args = build(name, hf)
    if tool in sys.modules:
        return {**res, "error": f"{tool} was imported before the measurement"}
    t0 = time.perf_counter()
    try:
        mod: Any = importlib.import_module(tool)
    except ImportError as exc:
        return {**res, "error": f"not installed ({exc.name})"}
    res["import_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if tool == "torchrecorder":
        mod.make_dot(mod.record(model, name, input_data=args)).source  # noqa: B018
    else:
        out = _first_tensor(model(*args))
        mod.make_dot(out, params=dict(model.named_parameters())).source  # noqa: B018
    res["first_call_s"] = time.perf_counter() - t0
    return res


def cold_calls(repeats: int, hf: bool, tools: tuple[str, ...], tmp: str, timeout: float,
               bytecode: bool = False) -> dict[str, Any]:
    """Median import and first-call times of each tool over ``repeats`` fresh processes each.

    The tools take turns, one process at a time, so that a machine busy with
    something else slows them alike.  With ``bytecode``, every tool's modules (and
    torch's) are compiled once into a cache under ``tmp`` by one untimed process per
    tool, and each timed process reads them from there, as after ``pip install``
    (which compiles them); without it the processes run as the environment says
    (``PYTHONDONTWRITEBYTECODE=1`` and a checkout with no ``__pycache__`` compile
    the package's source in every process).
    """
    env: dict[str, str] | None = None
    if bytecode:
        env = {"PYTHONPYCACHEPREFIX": os.path.join(tmp, "pycache"), "PYTHONDONTWRITEBYTECODE": ""}
        for tool in tools:  # the cache filled, untimed
            spawn("cold-" + tool, COLD_MODEL, 1, hf, tmp, timeout, env)
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
    for _ in range(repeats):
        for tool in tools:
            runs[tool].append(spawn("cold-" + tool, COLD_MODEL, 1, hf, tmp, timeout, env))
    out: dict[str, Any] = {"model": COLD_MODEL, "repeats": repeats, "bytecode": bytecode,
                           "writes_bytecode": not sys.flags.dont_write_bytecode}
    torch_times = [r["torch_import_s"] for rs in runs.values() for r in rs if "torch_import_s" in r]
    out["torch_import_s"] = statistics.median(torch_times) if torch_times else None
    for tool, results in runs.items():
        errors = [r["error"] for r in results if "error" in r]
        if errors:
            out[tool] = {"error": errors[0]}
            continue
        out[tool] = {key: statistics.median(r[key] for r in results)
                     for key in ("import_s", "first_call_s")}
    return out


def run_worker(argv: list[str]) -> None:
    """Entry point of a ``--worker`` subprocess: print one JSON result line."""
    warnings.filterwarnings("ignore")
    sys.path[:0] = [HERE, ROOT]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    kind, name, repeats, hf, outdir = argv[0], argv[1], int(argv[2]), argv[3] == "1", argv[4]
    if kind == "ours":
        res = worker_ours(name, repeats, hf, outdir)
    elif kind == "fwdmem":
        res = worker_fwdmem(name, repeats, hf, outdir)
    elif kind.startswith("cold-"):
        res = worker_cold(kind[len("cold-"):], name, hf)
    else:
        res = worker_peer(kind, name, repeats, hf)
    print(MARK + json.dumps(res), flush=True)


def spawn(kind: str, name: str, repeats: int, hf: bool, outdir: str, timeout: float,
          extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a worker in a fresh interpreter (its environment updated with ``extra_env``; an
    empty value removes a variable); its result, or an ``error`` saying what went wrong."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, name, str(repeats),
           "1" if hf else "0", outdir]
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error",
           "PYTHONWARNINGS": "ignore", "PYTHONPATH": path}
    for key, value in (extra_env or {}).items():
        if value:
            env[key] = value
        else:
            env.pop(key, None)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"model": name, "error": f"timeout > {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"model": name, "error": f"worker failed: {tail}"[:120]}


def dot_layout(path: str, timeout: float) -> float | str:
    """Seconds ``dot -Tsvg`` takes to lay out the DOT file ``path`` (or why not)."""
    exe = shutil.which("dot")
    if exe is None:
        return "no dot"
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([exe, "-Tsvg", "-o", os.devnull, path], capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return f">{timeout:.0f}s"
    if proc.returncode != 0:
        return "dot failed"
    return time.perf_counter() - t0


# ------------------------------------------------------------------ report
def _fmt(x: Any, scale: float = 1.0, digits: int = 1) -> str:
    if isinstance(x, (int, float)):
        return f"{x * scale:.{digits}f}"
    return "-" if x is None else str(x)


def _secs(x: Any) -> str:
    return f"{x:.2f} s" if isinstance(x, float) else str(x)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    """Columns padded to their widest cell; the first left-aligned, the rest right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    line = fmt(headers)
    return "\n".join([line, "-" * len(line), *(fmt(r) for r in rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="3 repeats, shorter time limits, peers on the graph-bound models only")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per measurement (default 9)")
    parser.add_argument("--models", default=None, help="comma-separated subset of the model names")
    parser.add_argument("--no-peers", action="store_true",
                        help="do not time torchviz/torchview/torchlens (the cold-call row keeps torchviz)")
    parser.add_argument("--cold-repeats", type=int, default=None,
                        help=f"fresh processes per tool for the cold-call row on {COLD_MODEL}, torchrecorder "
                             "beside torchviz (default 5, 3 with --quick; 0: no cold row)")
    parser.add_argument("--cold-bytecode", action="store_true",
                        help="time the cold calls with every tool's bytecode compiled beforehand into a "
                             "temporary cache (as after pip install), whatever PYTHONDONTWRITEBYTECODE says")
    parser.add_argument("--hf", action="store_true",
                        help="GPT-2 and Llama from transformers configs instead of the hand-written ones")
    parser.add_argument("--json", default=None, help="also write all results to this JSON file")
    parser.add_argument("--capture", action=argparse.BooleanOptionalAction, default=None,
                        help="also run capture_bench.py (operation capture vs the forward pass and "
                             "TorchLens on gpt2-small); default: on for a full run, off with "
                             "--quick or --models")
    parser.add_argument("--layout", action=argparse.BooleanOptionalAction, default=None,
                        help="also run layout_bench.py --largest 20 (the layout time of every default "
                             "drawing of the 20 largest zoo models); default: on for a full run, "
                             "off with --quick or --models")
    parser.add_argument("--stat", choices=("median", "min"), default="median",
                        help="statistic of the repeats in tables and targets (min resists a busy machine)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch's intra-op threads in every process (OMP_NUM_THREADS; default: torch's "
                             "choice).  On a machine busy with other work, 1 keeps tiny operations from "
                             "waiting on a descheduled second thread")
    opts = parser.parse_args(argv)
    if opts.threads is not None:
        if opts.threads < 1:
            parser.error(f"--threads must be at least 1, got {opts.threads}")
        os.environ["OMP_NUM_THREADS"] = str(opts.threads)  # inherited by every worker

    sys.path[:0] = [HERE, ROOT]
    from models import MODELS

    repeats = opts.repeats or (3 if opts.quick else 9)
    cold_repeats = opts.cold_repeats if opts.cold_repeats is not None else (3 if opts.quick else 5)
    names = opts.models.split(",") if opts.models else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; choose from {list(MODELS)}")
    worker_timeout = 240 if opts.quick else 480
    peer_timeout = 60 if opts.quick else 180
    layout_timeout = 20 if opts.quick else 60

    import platform

    import torch

    import torchrecorder

    print(f"torchrecorder {torchrecorder.__version__} ({os.path.dirname(torchrecorder.__file__)}), "
          f"torch {torch.__version__}, Python "
          f"{platform.python_version()}, {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, "
          f"{'transformers' if opts.hf else 'hand-written'} models, median of {repeats} runs")
    versions = {}
    for peer in PEERS:
        try:
            from importlib.metadata import version

            versions[peer] = version(peer)
        except Exception:
            versions[peer] = None
    print("peers: " + ", ".join(f"{p} {v or 'not installed'}" for p, v in versions.items()))
    print(f"load average at the start: {', '.join(f'{x:.2f}' for x in os.getloadavg())} "
          "(above 0.5 or so, another process competes for the CPUs and times scatter)")
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    peers: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="trbench-") as tmp:
        for name in names:
            spec = MODELS[name]
            print(f"  {name} ...", end="", flush=True)
            res = spawn("ours", name, repeats, opts.hf, tmp, worker_timeout)
            if spec.kind != "meta" and "error" not in res:
                res.update({k: v for k, v in spawn("fwdmem", name, repeats, opts.hf, tmp,
                                                   worker_timeout).items() if k != "model"})
            if "error" not in res:
                labels = ["d1", "d2"] if spec.kind == "meta" else ["full", "d1", "d2"]
                for label in labels + (["nofold"] if "dot_nofold" in res else []):
                    res[f"layout_{label}_s"] = dot_layout(res[f"dot_{label}"], layout_timeout)
            results[name] = res
            peers[name] = {}
            run_peers = not opts.no_peers and spec.kind != "meta" and (
                not opts.quick or spec.kind == "graph")
            for peer in PEERS if run_peers else ():
                if versions[peer] is None:
                    peers[name][peer] = {"error": "not installed"}
                    continue
                print(f" {peer}", end="", flush=True)
                peers[name][peer] = spawn(peer, name, repeats, opts.hf, tmp, peer_timeout)
            print(f" done ({time.perf_counter() - started:.0f} s)", flush=True)
        cold: dict[str, Any] | None = None
        if cold_repeats > 0:
            tools = tuple(t for t in COLD_TOOLS if t == "torchrecorder" or versions[t] is not None)
            print(f"  cold calls on {COLD_MODEL}: {cold_repeats} fresh processes per tool ...", end="",
                  flush=True)
            cold = cold_calls(cold_repeats, opts.hf, tools, tmp, worker_timeout, opts.cold_bytecode)
            for tool in COLD_TOOLS:
                if tool not in tools:
                    cold[tool] = {"error": "not installed"}
            print(f" done ({time.perf_counter() - started:.0f} s)", flush=True)
    _choose_stat(results, peers, opts.stat)
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    report(results, peers, opts, repeats, cold)
    capture = opts.capture if opts.capture is not None else not (opts.quick or opts.models)
    if capture:  # issue 26's ratios, in a process of their own
        print("\n## Operation capture (benchmarks/capture_bench.py)", flush=True)
        subprocess.run([sys.executable, os.path.join(HERE, "capture_bench.py"), "--repeats", str(repeats)]
                       + (["--no-peers"] if opts.no_peers else []), check=False)
    layout = opts.layout if opts.layout is not None else not (opts.quick or opts.models)
    if layout:  # issue 38's layout times of every default drawing, in a process of their own
        print("\n## Layout of every default drawing, the 20 largest zoo models (benchmarks/layout_bench.py)",
              flush=True)
        subprocess.run([sys.executable, os.path.join(HERE, "layout_bench.py"), "--largest", "20"],
                       check=False)
    print(f"\ntotal benchmark time {time.perf_counter() - started:.0f} s")
    if opts.json:
        with open(opts.json, "w", encoding="utf-8") as fh:
            json.dump({"results": results, "peers": peers, "cold": cold}, fh, indent=1, default=str)
    return 0


def _choose_stat(results: dict[str, dict[str, Any]], peers: dict[str, dict[str, dict[str, Any]]],
                 stat: str) -> None:
    """Use the chosen statistic; warn about measurements whose repeats scattered widely."""
    noisy = []
    dicts = [(name, r) for name, r in results.items()]
    dicts += [(f"{name}/{peer}", p) for name, by in peers.items() for peer, p in by.items()]
    for label, d in dicts:
        for key in [k for k in d if k.endswith("_min")]:
            base = key[: -len("_min")]
            lo, hi = d[key], d.get(base + "_max", d[key])
            if lo > 0 and hi / lo > 1.5 and hi - lo > 0.002:
                noisy.append(f"{label} {base[:-2]} {lo * 1e3:.1f}-{hi * 1e3:.1f} ms")
            if stat == "min":
                d[base] = lo
    if noisy:
        print("\nwide scatter between repeats (max/min > 1.5): " + "; ".join(noisy))


def report(results: dict[str, dict[str, Any]], peers: dict[str, dict[str, dict[str, Any]]],
           opts: argparse.Namespace, repeats: int, cold: dict[str, Any] | None = None) -> None:
    """Print the tables, the cold-call row (when measured) and the targets."""
    del repeats
    headers = ["model", "kind", "nodes", "edges", "forward", "hooks+mode floor", "record", "make_dot",
               "dot full", "dot d1", "dot d2", "make_dot unfolded", "dot unfolded", "rec/fwd",
               "rec/floor", "(rec+dot)/node us", "RSS fwd", "RSS rec"]
    rows = []
    for name, r in results.items():
        if "error" in r:
            rows.append([name, r.get("kind", "?"), r["error"]] + [""] * (len(headers) - 3))
            continue
        fwd = r.get("forward_s")
        rec_dot = r["record_s"] + r["make_dot_s"]
        r["rec_dot_s"] = rec_dot
        r["us_per_node"] = rec_dot / max(r["nodes"], 1) * 1e6
        r["rec_over_fwd"] = r["record_s"] / fwd if fwd else None
        floor = r.get("mechanism_s")
        rows.append([
            name, r["kind"], str(r["nodes"]), str(r["edges"]),
            _fmt(fwd, 1e3), _fmt(floor, 1e3), _fmt(r["record_s"], 1e3), _fmt(r["make_dot_s"], 1e3),
            _fmt(r.get("layout_full_s", "skip"), 1, 2), _fmt(r.get("layout_d1_s"), 1, 2),
            _fmt(r.get("layout_d2_s"), 1, 2), _fmt(r.get("make_dot_nofold_s"), 1e3),
            _fmt(r.get("layout_nofold_s"), 1, 2),
            _fmt(r["rec_over_fwd"], 1, 2), _fmt(r["record_s"] / floor if floor else None, 1, 2),
            _fmt(r["us_per_node"], 1, 0),
            _fmt(r.get("rss_forward_mib")), _fmt(r.get("rss_record_mib")),
        ])
    print(f"\nTimes in ms ({opts.stat}), dot layout in s, memory = peak RSS growth in MiB "
          "(record row of the meta model: record + DOT source).  'unfolded': make_dot with "
          "fold_repeats=False at render_depth 256 (1 for the meta model).  'hooks+mode floor': the "
          "forward pass under do-nothing versions of the hooks and TorchFunctionMode that record uses")
    print(_table(headers, rows))

    prow = []
    for name, by_peer in peers.items():
        r = results[name]
        if not by_peer or "rec_dot_s" not in r:
            continue
        cells = [name, _fmt(r["rec_dot_s"], 1e3)]
        for peer in PEERS:
            p = by_peer.get(peer, {})
            if "time_s" in p:
                cells += [_fmt(p["time_s"], 1e3), _fmt(p["ours_s"] / p["time_s"], 1, 3),
                          _fmt(p.get("rss_mib"))]
            else:
                cells += [p.get("error", "-").split(":")[0][:24], "", ""]
        prow.append(cells)
    if prow:
        print("\nPeers on the same models and inputs (ms; ratio = our record+make_dot / their time, timed "
              "in the same process, < 1 means torchrecorder is faster; RSS = peak growth of their first "
              "run, MiB)")
        heads = ["model", "ours rec+dot"]
        for peer in PEERS:
            heads += [peer, "ratio", "RSS"]
        print(_table(heads, prow))
    if cold is not None:
        print_cold(cold)
    print_targets(results, peers, cold)


def print_cold(cold: dict[str, Any]) -> None:
    """The cold-call row: imports and first calls in fresh processes, torchrecorder beside torchviz."""
    ours, theirs = cold["torchrecorder"], cold["torchviz"]
    headers = ["model", "import torchrecorder", "record+make_dot", "import torchviz", "forward+make_dot",
               "ratio first call", "ratio import+first"]

    def cells(r: dict[str, Any]) -> list[str]:
        if "error" in r:
            return [r["error"], ""]
        return [_fmt(r["import_s"], 1e3), _fmt(r["first_call_s"], 1e3)]

    row = [cold["model"], *cells(ours), *cells(theirs)]
    if "error" in ours or "error" in theirs:
        row += ["-", "-"]
    else:
        first = ours["first_call_s"] / theirs["first_call_s"]
        total = (ours["import_s"] + ours["first_call_s"]) / (theirs["import_s"] + theirs["first_call_s"])
        row += [_fmt(first, 1, 2), _fmt(total, 1, 2)]
    print(f"\nCold call (ms, median of {cold['repeats']} fresh processes per tool, taking turns): "
          "the import, timed apart, then the first call; ratio = torchrecorder / torchviz, < 1 means "
          "torchrecorder is faster")
    print(_table(headers, [row]))
    if cold.get("bytecode"):
        print("(--cold-bytecode: each tool's bytecode compiled beforehand into a temporary cache)")
    elif not cold.get("writes_bytecode", True):
        print("note: PYTHONDONTWRITEBYTECODE is set: a checkout without __pycache__ compiles "
              "torchrecorder's source in every process (an installed torchviz has its bytecode); "
              "--cold-bytecode times both from compiled bytecode, as after pip install")
    if cold.get("torch_import_s") is not None:
        print(f"`import torch` and building the model come first in each process and are not counted "
              f"(import torch: median {_fmt(cold['torch_import_s'], 1e3, 0)} ms)")


# the speed targets of issue 38 (which replaced issue 22's 1.0 x torchviz and 5 x torchview by
# what the hook floor allows): (model, what, bound)
ISSUE38 = (
    ("gpt2-small", "record / plain forward <= 1.10", 1.10),
    ("gpt2-w32-L32", "record + make_dot <= 1.15 x torchviz (forward + make_dot)", 1.15),
    ("gpt2-w32-L32", "record + make_dot >= 4.5 x faster than torchview (draw_graph, depth 3)", 4.5),
    (COLD_MODEL, "cold first call (import + record + DOT) <= 1.5 x torchviz's (import + forward + DOT)",
     1.5),
    ("llama-70b-meta", "record + DOT source <= 1.5 x its meta forward", 1.5),
)


def issue38_targets(results: dict[str, dict[str, Any]], peers: dict[str, dict[str, dict[str, Any]]],
                     cold: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """Issue 38's five speed targets: (PASS/FAIL/N/A, what, the ratio measured)."""
    lines: list[tuple[str, str, str]] = []
    for name, what, bound in ISSUE38:
        label = f"{name}: {what}"
        r = results.get(name, {})
        ratio: float | None = None
        why = "not measured"
        if "torchviz" in what and "cold" not in what:
            p = peers.get(name, {}).get("torchviz", {})
            ratio = p["ours_s"] / p["time_s"] if "time_s" in p else None
            why = p.get("error", "not run")
        elif "torchview" in what:
            p = peers.get(name, {}).get("torchview", {})
            ratio = p["time_s"] / p["ours_s"] if "time_s" in p else None
            why = p.get("error", "not run")
        elif "cold" in what:
            ours, theirs = (cold or {}).get("torchrecorder", {}), (cold or {}).get("torchviz", {})
            if "import_s" in ours and "import_s" in theirs:
                mine = ours["import_s"] + ours["first_call_s"]
                ratio = mine / (theirs["import_s"] + theirs["first_call_s"])
            else:
                why = ours.get("error") or theirs.get("error") or "not run"
        elif "meta forward" in what:
            if r.get("forward_s") and "record_s" in r:
                ratio = (r["record_s"] + r["make_dot_s"]) / r["forward_s"]
        elif r.get("rec_over_fwd") is not None:
            ratio = r["rec_over_fwd"]
        if ratio is None:
            lines.append(("N/A ", label, why))
        elif "faster" in what:
            lines.append(("PASS" if ratio >= bound else "FAIL", label, f"{ratio:.2f} x faster"))
        else:
            lines.append(("PASS" if ratio <= bound else "FAIL", label, f"{ratio:.2f} x"))
        if "torchview" in what and ratio is not None:
            lines.append(_floor_line(name, results.get(name, {}), peers.get(name, {})))
    return lines


def _floor_line(name: str, r: dict[str, Any], peers: dict[str, dict[str, Any]]) -> tuple[str, str, str]:
    """How fast record + make_dot could be beside the peers if torchrecorder's own work took no
    time: the do-nothing hooks and mode alone (the mechanism floor), scaled into the peers'
    process by the share it takes of record + make_dot in the workers' own process."""
    label = f"{name}: the hooks+mode floor alone, beside torchviz / torchview"
    ours = r.get("record_s", 0.0) + r.get("make_dot_s", 0.0)
    viz, view = peers.get("torchviz", {}), peers.get("torchview", {})
    if not r.get("mechanism_s") or not ours or "time_s" not in view or "time_s" not in viz:
        return ("info", label, "not measured")
    share = r["mechanism_s"] / ours
    return ("info", label, f"{share * viz['ours_s'] / viz['time_s']:.2f} x torchviz, "
            f"{view['time_s'] / (share * view['ours_s']):.2f} x faster than torchview "
            f"(the floor is {share:.0%} of record + make_dot)")


def print_targets(results: dict[str, dict[str, Any]], peers: dict[str, dict[str, dict[str, Any]]],
                  cold: dict[str, Any] | None = None) -> None:
    """One line per target of issues 38 and 4: PASS, FAIL or N/A, and the measured value."""
    lines: list[tuple[str, str, str]] = []

    def add(ok: bool | None, what: str, value: str) -> None:
        lines.append(("N/A " if ok is None else "PASS" if ok else "FAIL", what, value))

    for name in ("gpt2-small", "resnet50"):
        r = results.get(name)
        if r and r.get("rec_over_fwd") is not None:
            add(r["rec_over_fwd"] <= 1.3, f"{name}: record <= 1.3 x forward", f"{r['rec_over_fwd']:.2f} x")
        else:
            add(None, f"{name}: record <= 1.3 x forward", "not measured")
    for name in ("gpt2-w32-L2", "gpt2-w32-L8", "gpt2-w32-L32", "mlp-1000"):
        r = results.get(name)
        if not r or "rec_dot_s" not in r:
            continue
        for peer, bound, what in (("torchviz", 1.5, "record+make_dot <= 1.5 x torchviz (forward+make_dot)"),
                                  ("torchview", 5, "record+make_dot >= 5 x faster than torchview"),
                                  ("torchlens", 50, "record+make_dot >= 50 x faster than torchlens")):
            p = peers.get(name, {}).get(peer, {})
            if "time_s" not in p:
                add(None, f"{name}: {what}", p.get("error", "not run"))
            elif peer == "torchviz":
                ratio = p["ours_s"] / p["time_s"]
                add(ratio <= bound, f"{name}: {what}", f"{ratio:.2f} x")
            else:
                speedup = p["time_s"] / p["ours_s"]
                add(speedup >= bound, f"{name}: {what}", f"{speedup:.1f} x faster")
    series = [results.get(n, {}).get("us_per_node") for n in SERIES]
    if all(isinstance(v, float) for v in series):
        mid = statistics.median(series)
        worst = max(abs(v / mid - 1) for v in series)
        add(worst <= 0.2, "(record+DOT)/node from 2 to 32 layers within +-20 % (of the median)",
            " / ".join(f"{v:.0f}" for v in series) + f" us/node, worst {worst * 100:+.0f} %")
        rs = [results[n] for n in SERIES]
        steps = [(b["rec_dot_s"] - a["rec_dot_s"]) / max(b["nodes"] - a["nodes"], 1) * 1e6
                 for a, b in itertools.pairwise(rs)]
        lines.append(("info", "(record+DOT) per added node, 2->8 and 8->32 layers (no fixed costs)",
                      " / ".join(f"{v:.0f}" for v in steps) + " us/node"))
    unfolded = [results.get(n, {}) for n in SERIES]
    if all("make_dot_nofold_s" in r and "nodes" in r for r in unfolded):
        per = [(r["record_s"] + r["make_dot_nofold_s"]) / r["nodes"] * 1e6 for r in unfolded]
        rest = [(r["record_s"] - r["forward_s"]) / r["nodes"] * 1e6 for r in unfolded]
        lines.append(("info", "(record + make_dot unfolded)/node, 2/8/32 layers",
                      " / ".join(f"{v:.0f}" for v in per) + " us/node"))
        lines.append(("info", "(record - forward)/node, 2/8/32 layers",
                      " / ".join(f"{v:.0f}" for v in rest) + " us/node"))
    r = results.get("llama-70b-meta")
    if r and "error" not in r:
        t = r["record_s"] + r["make_dot_s"]
        add(t < 1.5, "llama-70b-meta: record + DOT source < 1.5 s",
            f"{t:.2f} s warm (cold first call {r['cold_record_dot_s']:.2f} s)")
        add(r["rss_record_mib"] < 200, "llama-70b-meta: peak RSS growth < 200 MB",
            f"{r['rss_record_mib']:.0f} MiB ({r['rss_method']})")
        if "layout_nofold_s" in r:
            lines.append(("info", "llama-70b-meta: dot layout at render_depth=1 with fold_repeats=False",
                          _secs(r["layout_nofold_s"])))
        lay = r.get("layout_d1_s")
        add(isinstance(lay, float) and lay < 10, "llama-70b-meta: dot layout of render_network picture "
            "(render_depth=1) < 10 s", _secs(lay) + " (render_depth=2: " + _secs(r.get("layout_d2_s")) + ")")
    elif r:
        add(False, "llama-70b-meta", r["error"])
    for name, r in results.items():
        if r.get("rss_forward_mib") and r.get("rss_record_mib") is not None:
            ratio = r["rss_record_mib"] / max(r["rss_forward_mib"], 1.0)
            lines.append(("info", f"{name}: peak RSS of record / of the forward pass", f"{ratio:.2f} x"))
    new = issue38_targets(results, peers, cold)
    width = max(len(w) for _, w, _ in lines + new)
    for title, block in (("issue 38", new), ("issue 4", lines)):
        print(f"\nTargets ({title})")
        for status, what, value in block:
            print(f"  {status}  {what.ljust(width)}  {value}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        run_worker(sys.argv[2:])
    else:
        sys.exit(main())
