"""How long ``torchrecorder.diff`` takes, beside the time to record one of the two models.

Run ``python benchmarks/diff_bench.py`` (under a minute on 2 CPU cores).  Two pairs:

* ``gpt2-12`` vs its LoRA variant: GPT-2 with 12 layers (transformers when installed, else the
  hand-written GPT-2 of ``models.py``), width 768, 64 tokens; the variant wraps every attention
  input projection (``c_attn``, or the first linear of each attention) in a hand-written LoRA
  layer (``base_layer``, ``lora_A``, ``lora_B``) under peft's ``base_model.model.`` prefix;
* ``llama-70b-meta`` vs the same with one more block (81 layers), on the meta device;
* ``4000 Linear`` vs the same model in float64: 4,000 sibling modules, every one changed, so
  none pairs at the ends of the children's alignment (issue 33: this pair was quadratic).

For each it prints the median time of ``record`` (of the first model), of ``diff`` (the two
recordings made beforehand), their ratio and the peak memory that ``diff`` allocates (tracemalloc,
one extra run), with PASS/FAIL against the targets of issue 25
(under 2 s and under 3x one recording).  Times are medians of ``--repeats`` runs after a
warm-up.  The exit status is 0 whatever it measures.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
import tracemalloc
from typing import Any

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from models import build, llama  # noqa: E402

import torchrecorder  # noqa: E402


class LoraWrap(nn.Module):
    """A LoRA layer around ``base`` (any module mapping the last dimension ``d_in -> d_out``)."""

    def __init__(self, base: nn.Module, d_in: int, d_out: int, rank: int = 8) -> None:
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.Linear(d_in, rank, bias=False)
        self.lora_B = nn.Linear(rank, d_out, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base_layer(x) + self.lora_B(self.lora_A(x))


class _Inner(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *args: Any) -> Any:
        return self.model(*args)


class PeftStyle(nn.Module):
    """``base_model.model.`` around a model, as peft's PeftModel / LoraModel do."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.base_model = _Inner(model)

    def forward(self, *args: Any) -> Any:
        return self.base_model(*args)


def _gpt2() -> tuple[nn.Module, tuple[Any, ...]]:
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return build("gpt2-small")
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=128,
                     attn_implementation="eager")
    ids = torch.randint(0, 50257, (1, 64), generator=torch.Generator().manual_seed(0))
    return GPT2LMHeadModel(cfg).eval(), (ids,)


def _lora(model: nn.Module) -> nn.Module:
    model = copy.deepcopy(model)
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if child_name in ("c_attn", "qkv", "q_proj", "v_proj"):
                weight = getattr(child, "weight", None)
                if weight is None:
                    continue
                # Conv1D keeps (in, out); Linear (out, in)
                d_in, d_out = (weight.shape[0], weight.shape[1]) if type(child).__name__ == "Conv1D" \
                    else (weight.shape[1], weight.shape[0])
                setattr(module, child_name, LoraWrap(child, d_in, d_out))
        del name
    return PeftStyle(model)


def _is_double(model: nn.Module) -> bool:
    return any(p.dtype == torch.float64 for p in model.parameters())


def _median(fn: Any, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _record(model: nn.Module, args: tuple[Any, ...], name: str) -> torchrecorder.Recorder:
    with torch.no_grad():
        return torchrecorder.record(model, name, input_data=args[0] if len(args) == 1 else args)


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pairs", default="gpt2,llama,linear4000",
                        help="comma-separated: gpt2, llama, linear4000")
    args = parser.parse_args(argv)
    chosen = set(args.pairs.split(","))
    pairs = []
    if "gpt2" in chosen:
        net, inputs = _gpt2()
        pairs.append(("gpt2-12 vs LoRA", net, _lora(net), inputs))
    if "llama" in chosen:
        net, inputs = llama(layers=80)
        longer, _ = llama(layers=81)
        pairs.append(("llama-70b-meta vs 81 layers", net, longer, inputs))
    if "linear4000" in chosen:
        torch.manual_seed(0)
        net = nn.Sequential(*[nn.Linear(4, 4) for _ in range(4000)])
        pairs.append(("4000 Linear vs float64", net, copy.deepcopy(net).double(), (torch.randn(1, 4),)))
    rows = []
    for name, a_net, b_net, inputs in pairs:
        rec_a = _record(a_net, inputs, "a")
        b_inputs = tuple(x.double() if x.is_floating_point() and _is_double(b_net) else x for x in inputs)
        rec_b = _record(b_net, b_inputs, "b")
        t_rec = _median(lambda: _record(a_net, inputs, "a"), args.repeats)  # noqa: B023
        t_diff = _median(lambda: torchrecorder.diff(rec_a, rec_b), args.repeats)  # noqa: B023
        tracemalloc.start()
        d = torchrecorder.diff(rec_a, rec_b)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        counts = {k: v for k, v in d.counts("layer").items() if v and k != "same"}
        rows.append((name, len(rec_a.nodes), len(rec_b.nodes), t_rec, t_diff, peak, counts))
    print(f"{'pair':30} {'nodes a':>8} {'nodes b':>8} {'record':>8} {'diff':>8} {'diff/rec':>8} "
          f"{'diff MiB':>8}  modules")
    for name, na, nb, t_rec, t_diff, peak, counts in rows:
        print(f"{name:30} {na:8d} {nb:8d} {t_rec:7.3f}s {t_diff:7.3f}s {t_diff / t_rec:8.2f} {peak:8.1f}  "
              f"{counts}")
    print()
    for name, _, _, t_rec, t_diff, _, _ in rows:
        ok = t_diff < 2.0 and t_diff < 3 * t_rec
        print(f"{'PASS' if ok else 'FAIL'}  {name}: diff {t_diff:.3f} s (< 2 s), "
              f"{t_diff / t_rec:.2f}x one recording (< 3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
