"""FLOPs of GPT-2 and ViT-B/16 (from configs, random weights) as four tools count them.

Run ``python benchmarks/cost_compare.py`` (about a minute on 2 CPU cores).  For each model it
prints, in GFLOPs of one forward pass:

* ``torchrecorder.cost(rec).total.flops`` of a recording of the pass;
* torch's ``FlopCounterMode`` run on the CPU, as it is, and with torch's attention formula
  given to the CPU kernel of ``scaled_dot_product_attention`` (which has none);
* torchinfo's ``total_mult_adds`` times 2 (one multiply-add is two FLOPs), when installed;
* fvcore's ``FlopCountAnalysis(...).total()`` times 2 (it counts one per multiply-add),
  when installed (``pip install fvcore``, or the ``bench`` extra);

and the time ``record`` and ``cost`` took; then the same two times for Llama with 70B
dimensions (80 layers) on the ``meta`` device.  docs/guide/cost.md quotes its output.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

import torchrecorder

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _models() -> list[tuple[str, nn.Module, dict[str, Any]]]:
    import transformers

    out = []
    for impl in ("eager", "sdpa"):
        # GPT-2 small: 12 layers, 768 wide
        cfg = transformers.GPT2Config(attn_implementation=impl, use_cache=False)
        torch.manual_seed(0)
        ids = torch.randint(0, cfg.vocab_size, (1, 128), generator=torch.Generator().manual_seed(0))
        out.append((f"GPT-2 small, 128 tokens, {impl} attention", transformers.GPT2Model(cfg).eval(),
                    {"input_ids": ids}))
    cfg = transformers.ViTConfig(attn_implementation="sdpa")  # ViT-B/16 at 224×224
    torch.manual_seed(0)
    pixels = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    vit = transformers.ViTModel(cfg, add_pooling_layer=False).eval()
    out.append(("ViT-B/16, 224×224, sdpa attention", vit, {"pixel_values": pixels}))
    return out


# torch registers no FLOP formula for the CPU kernel of scaled_dot_product_attention: this
# mapping gives it torch's own attention formula (the one of the CUDA kernels)
_CPU_SDPA = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu:
             lambda q, k, v, *args, out_shape=None, **kwargs: sdpa_flop_count(q, k, v)}


def _flop_counter(net: nn.Module, kwargs: dict[str, Any], mapping: Any = None) -> int:
    with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        net(**kwargs)
    return counter.get_total_flops()


def _torchinfo(net: nn.Module, kwargs: dict[str, Any]) -> Any:
    try:
        import torchinfo
    except ImportError:
        return "not installed"
    stats = torchinfo.summary(net, input_data=kwargs, verbose=0)
    return 2 * stats.total_mult_adds


def _fvcore(net: nn.Module, kwargs: dict[str, Any]) -> Any:
    try:
        from fvcore.nn import FlopCountAnalysis
    except ImportError:
        return "not installed"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analysis = FlopCountAnalysis(net, tuple(kwargs.values()))
        analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
        try:
            return 2 * analysis.total()
        except Exception as exc:  # its torch.jit.trace cannot follow the model
            return f"fails ({type(exc).__name__})"


def _g(value: Any) -> str:
    return f"{value / 1e9:.2f}" if isinstance(value, int) else str(value)


def main() -> None:
    print(f"torch {torch.__version__}, torchrecorder {torchrecorder.__version__}")
    print("| model | torchrecorder.cost | FlopCounterMode (CPU) | FlopCounterMode + CPU sdpa formula "
          "| torchinfo 2×mult-adds | fvcore 2×count | record s | cost s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, net, kwargs in _models():
        with torch.no_grad():
            t0 = time.perf_counter()
            rec = torchrecorder.record(net, "net", input_kwargs=kwargs)
            t1 = time.perf_counter()
            got = torchrecorder.cost(rec).total.flops
            t2 = time.perf_counter()
        row = [name, _g(got), _g(_flop_counter(net, kwargs)), _g(_flop_counter(net, kwargs, _CPU_SDPA)),
               _g(_torchinfo(net, kwargs)), _g(_fvcore(net, kwargs)), f"{t1 - t0:.2f}", f"{t2 - t1:.3f}"]
        print("| " + " | ".join(row) + " |", flush=True)
    _llama_70b()


def _llama_70b() -> None:
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=8192, num_hidden_layers=80,
                                   num_attention_heads=64, num_key_value_heads=8, intermediate_size=28672,
                                   attn_implementation="eager")  # sdpa's mask shortcut calls .item()
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.zeros(1, 128, dtype=torch.long, device="meta")
    with torch.no_grad():
        t0 = time.perf_counter()
        rec = torchrecorder.record(model, "llama", input_kwargs={"input_ids": ids, "use_cache": False,
                                                                 "attention_mask": torch.ones_like(ids)})
        t1 = time.perf_counter()
        total = torchrecorder.cost(rec).total
        t2 = time.perf_counter()
    print(f"Llama 70B dimensions, 80 layers, meta, 128 tokens: {total.flops / 1e12:.2f} TFLOPs, "
          f"{total.param_bytes / 1e9:.1f} GB of parameters; record {t1 - t0:.2f} s, cost {t2 - t1:.3f} s")


if __name__ == "__main__":
    main()
