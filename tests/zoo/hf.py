"""``transformers`` architectures built from tiny configs with random weights.

Nothing is downloaded (``HF_HUB_OFFLINE=1``).  ``CASES`` is empty when
``transformers`` is not installed.  Each model runs in ``eval()`` under
``torch.no_grad()``, as users run them for inference.

Written for transformers 5 (tested with 5.23).  transformers 4.x builds the
causal attention mask of decoder models inside ``torch.vmap``, whose results
come out of functorch with no producer the recorder can see, so there the
oracle finds the attention-mask -> attention edge missing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from . import Case, Inputs

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

try:
    import transformers
except ImportError:  # pragma: no cover - the zoo then has only hand-written models
    transformers = None  # type: ignore[assignment]

__all__ = ["CASES", "LLAMA_70B_SKIP", "llama_70b_meta"]

# transformers 4.x enters torch.autocast(device_type=x.device.type) in its rotary
# embeddings, and torch has no autocast for "meta": such a model cannot run on meta
# at all, recorded or not
LLAMA_70B_SKIP = (
    "transformers is not installed" if transformers is None
    else "transformers < 5 cannot run Llama on the meta device (autocast on 'meta')"
    if int(transformers.__version__.split(".")[0]) < 5 else "")

_NO_FX = ("torch.fx cannot trace it: transformers models branch on shapes, masks and config at run "
          "time, and transformers {} ships no fx tracer of its own")

_TEXT = dict(vocab_size=99, max_position_embeddings=64)


def _ids(batch: int = 2, length: int = 7, high: int = 99) -> torch.Tensor:
    return torch.randint(3, high, (batch, length), generator=torch.Generator().manual_seed(0))


def _text_inputs(with_mask: bool = True, length: int = 7) -> Callable[[], Inputs]:
    def make() -> Inputs:
        ids = _ids(length=length)
        kwargs: dict[str, Any] = {"input_ids": ids}
        if with_mask:
            kwargs["attention_mask"] = _padding_mask(ids)
        return (), kwargs

    return make


def _padding_mask(ids: torch.Tensor) -> torch.Tensor:
    """All ones but the last two tokens of the second sequence.

    A mask of all ones would let transformers drop it (it checks the values), and
    then no dataflow from it exists to be recorded.
    """
    mask = torch.ones_like(ids)
    mask[-1, -2:] = 0
    return mask


def _seq2seq_inputs() -> Inputs:
    ids = _ids()
    return (), {"input_ids": ids, "attention_mask": _padding_mask(ids),
                "decoder_input_ids": _ids(length=5)}


def _pixels(size: int = 32, channels: int = 3) -> Callable[[], Inputs]:
    def make() -> Inputs:
        x = torch.randn(1, channels, size, size, generator=torch.Generator().manual_seed(0))
        return (), {"pixel_values": x}

    return make


def _audio() -> Inputs:
    return (), {"input_values": torch.randn(1, 400, generator=torch.Generator().manual_seed(0))}


def _whisper() -> Inputs:
    feats = torch.randn(1, 8, 64, generator=torch.Generator().manual_seed(0))
    return (), {"input_features": feats, "decoder_input_ids": _ids(batch=1, length=4)}


def _clip() -> Inputs:
    ids = _ids(length=6)
    return (), {"input_ids": ids, "attention_mask": _padding_mask(ids),
                "pixel_values": torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))}


def _build(model_cls: str, config_cls: str, **config: Any) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        assert transformers is not None
        cfg = getattr(transformers, config_cls)(**config)
        torch.manual_seed(0)
        return getattr(transformers, model_cls)(cfg).eval()

    return build


def llama_70b_config() -> Any:
    """A LlamaConfig with the dimensions of Llama-2/3 70B."""
    assert transformers is not None
    return transformers.LlamaConfig(  # type: ignore[call-arg]
        vocab_size=32000, hidden_size=8192, num_hidden_layers=80, num_attention_heads=64,
        num_key_value_heads=8, intermediate_size=28672, max_position_embeddings=4096,
        attn_implementation="eager",  # sdpa's mask shortcut calls .item(), impossible on meta
    )


def llama_70b_meta() -> nn.Module:
    """``LlamaForCausalLM`` with 70B dimensions on the meta device (no real memory)."""
    assert transformers is not None
    with torch.device("meta"):
        return transformers.LlamaForCausalLM(llama_70b_config()).eval()


def _llama_70b_inputs() -> Inputs:
    ids = torch.zeros(1, 16, dtype=torch.long, device="meta")
    return (), {"input_ids": ids, "attention_mask": torch.ones_like(ids), "use_cache": False}


def _cases() -> list[Case]:
    if transformers is None:
        return []
    no_fx = _NO_FX.format(transformers.__version__)
    small = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=24)
    decoder = dict(**_TEXT, **small, num_key_value_heads=1, use_cache=False)
    specs: list[tuple[str, Callable[[], nn.Module], Callable[[], Inputs]]] = [
        ("hf-bert", _build("BertModel", "BertConfig", **_TEXT, **small), _text_inputs()),
        ("hf-distilbert", _build("DistilBertForSequenceClassification", "DistilBertConfig", **_TEXT,
                                 dim=16, n_layers=2, n_heads=2, hidden_dim=24), _text_inputs()),
        ("hf-gpt2", _build("GPT2LMHeadModel", "GPT2Config", vocab_size=99, n_positions=64, n_embd=16,
                           n_layer=2, n_head=2, use_cache=True, bos_token_id=1,
                           eos_token_id=2), _text_inputs()),
        ("hf-llama", _build("LlamaForCausalLM", "LlamaConfig", **decoder), _text_inputs()),
        ("hf-mistral", _build("MistralForCausalLM", "MistralConfig", **decoder), _text_inputs()),
        ("hf-qwen2", _build("Qwen2ForCausalLM", "Qwen2Config", **decoder), _text_inputs()),
        ("hf-t5", _build("T5ForConditionalGeneration", "T5Config", vocab_size=99, d_model=16, d_kv=8,
                         d_ff=24, num_layers=2, num_decoder_layers=2, num_heads=2, use_cache=False),
         _seq2seq_inputs),
        ("hf-bart", _build("BartForConditionalGeneration", "BartConfig", **_TEXT, d_model=16,
                           encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                           decoder_attention_heads=2, encoder_ffn_dim=24, decoder_ffn_dim=24,
                           use_cache=False), _seq2seq_inputs),
        ("hf-vit", _build("ViTForImageClassification", "ViTConfig", image_size=32, patch_size=8,
                          **small, num_labels=3), _pixels()),
        ("hf-swin", _build("SwinModel", "SwinConfig", image_size=32, patch_size=4, embed_dim=8,
                           depths=[1, 1], num_heads=[1, 2], window_size=4), _pixels()),
        ("hf-resnet", _build("ResNetForImageClassification", "ResNetConfig", embedding_size=8,
                             hidden_sizes=[8, 16], depths=[1, 1], num_labels=3), _pixels()),
        ("hf-convnext", _build("ConvNextModel", "ConvNextConfig", hidden_sizes=[8, 16], depths=[1, 1],
                               num_stages=2), _pixels()),
        ("hf-wav2vec2", _build("Wav2Vec2Model", "Wav2Vec2Config", hidden_size=16, num_hidden_layers=1,
                               num_attention_heads=2, intermediate_size=24, conv_dim=(8, 8),
                               conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=4,
                               num_conv_pos_embedding_groups=2), _audio),
        ("hf-whisper", _build("WhisperForConditionalGeneration", "WhisperConfig", vocab_size=99,
                              num_mel_bins=8, d_model=16, encoder_layers=1, decoder_layers=1,
                              encoder_attention_heads=2, decoder_attention_heads=2,
                              encoder_ffn_dim=24, decoder_ffn_dim=24, max_source_positions=32,
                              max_target_positions=16, use_cache=False, pad_token_id=1,
                              bos_token_id=2, eos_token_id=2, decoder_start_token_id=2), _whisper),
        ("hf-clip", _build("CLIPModel", "CLIPConfig",
                           text_config=dict(vocab_size=99, hidden_size=16, num_hidden_layers=1,
                                            num_attention_heads=2, intermediate_size=24,
                                            max_position_embeddings=16),
                           vision_config=dict(image_size=32, patch_size=8, hidden_size=16,
                                              num_hidden_layers=1, num_attention_heads=2,
                                              intermediate_size=24),
                           projection_dim=8), _clip),
    ]
    cases = [Case(name=name, build=build, inputs=inputs, grad_mode="no_grad", oracle=no_fx)
             for name, build, inputs in specs]
    if LLAMA_70B_SKIP:
        return cases
    cases.append(Case(name="hf-llama-70b-meta", build=llama_70b_meta, inputs=_llama_70b_inputs,
                      grad_mode="no_grad", oracle=no_fx, meta=True,
                      no_export="its 80 layers make export slow; hf-llama is the same code, checked by "
                                "export"))
    return cases


CASES: list[Case] = _cases()
