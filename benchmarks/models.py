"""The scale series of the benchmark: hand-written models, built deterministically.

Every factory returns ``(model, args)``: a module and the positional arguments
of one forward pass.  Weights are random (``torch.manual_seed(0)``); nothing is
downloaded.  ``hf=True`` builds the transformers equivalent instead
(``GPT2LMHeadModel`` / ``LlamaForCausalLM`` from a config) when transformers is
installed.

=================  ==========================================================
``gpt2-w32-L2``    GPT-2-style decoder, width 32, 2 layers, 32 tokens (graph-bound)
``gpt2-w32-L8``    the same with 8 layers
``gpt2-w32-L32``   the same with 32 layers
``mlp-1000``       ``Sequential`` of 500 ``(Linear(16, 16), ReLU)`` pairs (graph-bound)
``gpt2-small``     GPT-2 small: 12 layers, width 768, 12 heads, 128 tokens (compute-bound)
``resnet50``       ResNet-50 built by hand, 1x3x224x224 (compute-bound)
``llama-70b-meta`` 70B-shaped Llama on the meta device: 80 layers, hidden 8192,
                   64 heads, 8 kv heads, intermediate 28672, 128 tokens
``cnn-small``      a small CNN (two conv/BN/ReLU stages, pooling, a linear head) on a
                   1x3x32x32 image: the cold first call's model
=================  ==========================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

__all__ = ["MODELS", "ModelSpec", "build"]


# --------------------------------------------------------------------- GPT-2
class GPT2Attention(nn.Module):
    """Causal self-attention written out op by op, as GPT-2's eager attention."""

    def __init__(self, width: int, heads: int, n_positions: int) -> None:
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)
        mask = torch.tril(torch.ones(n_positions, n_positions, dtype=torch.bool))
        self.register_buffer("bias", mask.view(1, 1, n_positions, n_positions), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(c // self.heads)
        att = att.masked_fill(~self.bias[:, :, :t, :t], torch.finfo(att.dtype).min)
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = torch.matmul(att, v).transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class GPT2MLP(nn.Module):
    """Linear, tanh-GELU, Linear, dropout."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.act = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * width, width)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class GPT2Block(nn.Module):
    """Pre-norm transformer block with residual adds."""

    def __init__(self, width: int, heads: int, n_positions: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = GPT2Attention(width, heads, n_positions)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = GPT2MLP(width)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Style(nn.Module):
    """A GPT-2 language model: embeddings, ``layers`` blocks, final norm, tied LM head."""

    def __init__(self, layers: int, width: int, heads: int, vocab: int = 50257,
                 n_positions: int = 1024) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(n_positions, width)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList(GPT2Block(width, heads, n_positions) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids: Tensor) -> Tensor:
        pos = torch.arange(input_ids.shape[-1], device=input_ids.device)
        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


# -------------------------------------------------------------------- Llama
class RMSNorm(nn.Module):
    """Root-mean-square norm with a learned scale, computed in float32."""

    def __init__(self, width: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class RotaryEmbedding(nn.Module):
    """cos/sin tables of rotary position embeddings for the given positions."""

    def __init__(self, head_dim: int, base: float = 500000.0) -> None:
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        freqs = positions[:, None].float() * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    """Grouped-query attention with rotary embeddings."""

    def __init__(self, width: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.q_proj = nn.Linear(width, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, width, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        groups = self.heads // self.kv_heads
        k = k.repeat_interleave(groups, dim=1)
        v = v.repeat_interleave(groups, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


class LlamaMLP(nn.Module):
    """SwiGLU feed-forward: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, width: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(width, intermediate, bias=False)
        self.up_proj = nn.Linear(width, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, width, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    """Pre-norm decoder layer: attention and MLP, each with a residual add."""

    def __init__(self, width: int, heads: int, kv_heads: int, intermediate: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(width)
        self.self_attn = LlamaAttention(width, heads, kv_heads)
        self.post_attention_layernorm = RMSNorm(width)
        self.mlp = LlamaMLP(width, intermediate)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaStyle(nn.Module):
    """A Llama causal language model."""

    def __init__(self, layers: int, width: int, heads: int, kv_heads: int, intermediate: int,
                 vocab: int = 32000) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, width)
        self.rotary_emb = RotaryEmbedding(width // heads)
        self.layers = nn.ModuleList(LlamaLayer(width, heads, kv_heads, intermediate)
                                    for _ in range(layers))
        self.norm = RMSNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)

    def forward(self, input_ids: Tensor) -> Tensor:
        x = self.embed_tokens(input_ids)
        positions = torch.arange(input_ids.shape[-1], device=input_ids.device)
        cos, sin = self.rotary_emb(x, positions)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


# ------------------------------------------------------------------- ResNet
class Bottleneck(nn.Module):
    """ResNet bottleneck: 1x1, 3x3, 1x1 convolutions, batch norms, residual add."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out))

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


class ResNet50(nn.Module):
    """ResNet-50 (blocks 3, 4, 6, 3; 25.6M parameters), written out by hand."""

    def __init__(self, num_classes: int = 1000, blocks: tuple[int, ...] = (3, 4, 6, 3)) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        inplanes, stages = 64, []
        for i, (planes, n) in enumerate(zip((64, 128, 256, 512), blocks, strict=True)):
            layers = []
            for j in range(n):
                layers.append(Bottleneck(inplanes, planes, stride=2 if i > 0 and j == 0 else 1))
                inplanes = planes * Bottleneck.expansion
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# ---------------------------------------------------------------- small CNN
class SmallCNN(nn.Module):
    """Two conv/BN/ReLU stages with max pooling and a linear head: a first picture's model."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(32 * 8 * 8, classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def _cnn(hf: bool) -> tuple[nn.Module, tuple[Any, ...]]:
    del hf
    torch.manual_seed(0)
    return SmallCNN().eval(), (torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0)),)


# ----------------------------------------------------------------- registry
@dataclass(frozen=True)
class ModelSpec:
    """One model of the series: how to build it and what bounds its recording time."""

    name: str
    kind: str  # "graph" (many tiny ops), "compute" (big tensors) or "meta"
    factory: Callable[[bool], tuple[nn.Module, tuple[Any, ...]]]
    layers: int = 0  # for the GPT-2 width-32 series: the number of blocks


def _ids(vocab: int, tokens: int, device: Any = None) -> Tensor:
    if device is not None and torch.device(device).type == "meta":
        return torch.zeros(1, tokens, dtype=torch.long, device=device)
    return torch.randint(0, vocab, (1, tokens), generator=torch.Generator().manual_seed(0))


def _gpt2(layers: int, width: int, heads: int, tokens: int, vocab: int) -> Callable[[bool], Any]:
    def make(hf: bool) -> tuple[nn.Module, tuple[Any, ...]]:
        torch.manual_seed(0)
        if hf:
            from transformers import GPT2Config, GPT2LMHeadModel

            cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, vocab_size=vocab,
                             n_positions=max(tokens, 128), attn_implementation="eager")
            model: nn.Module = GPT2LMHeadModel(cfg)
        else:
            model = GPT2Style(layers, width, heads, vocab, n_positions=max(tokens, 128))
        return model, (_ids(vocab, tokens),)

    return make


def _mlp(hf: bool) -> tuple[nn.Module, tuple[Any, ...]]:
    del hf
    torch.manual_seed(0)
    mods: list[nn.Module] = []
    for _ in range(500):
        mods += [nn.Linear(16, 16), nn.ReLU()]
    return nn.Sequential(*mods), (torch.randn(1, 16, generator=torch.Generator().manual_seed(0)),)


def _resnet50(hf: bool) -> tuple[nn.Module, tuple[Any, ...]]:
    del hf
    torch.manual_seed(0)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    return ResNet50(), (x,)


def llama(layers: int = 80, width: int = 8192, heads: int = 64, kv_heads: int = 8,
          intermediate: int = 28672, vocab: int = 32000, tokens: int = 128, hf: bool = False,
          device: Any = "meta") -> tuple[nn.Module, tuple[Any, ...]]:
    """A Llama-shaped model (default: 70B-shaped) built on ``device`` (default meta)."""
    with torch.device(device):
        if hf:
            from transformers import LlamaConfig, LlamaForCausalLM

            cfg = LlamaConfig(hidden_size=width, num_hidden_layers=layers, num_attention_heads=heads,
                              num_key_value_heads=kv_heads, intermediate_size=intermediate,
                              vocab_size=vocab)
            model: nn.Module = LlamaForCausalLM(cfg)
        else:
            model = LlamaStyle(layers, width, heads, kv_heads, intermediate, vocab)
    return model, (_ids(vocab, tokens, device),)


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec("gpt2-w32-L2", "graph", _gpt2(2, 32, 4, 32, 512), layers=2),
        ModelSpec("gpt2-w32-L8", "graph", _gpt2(8, 32, 4, 32, 512), layers=8),
        ModelSpec("gpt2-w32-L32", "graph", _gpt2(32, 32, 4, 32, 512), layers=32),
        ModelSpec("mlp-1000", "graph", _mlp),
        ModelSpec("gpt2-small", "compute", _gpt2(12, 768, 12, 128, 50257), layers=12),
        ModelSpec("resnet50", "compute", _resnet50),
        ModelSpec("llama-70b-meta", "meta", lambda hf: llama(hf=hf)),
        ModelSpec("cnn-small", "compute", _cnn),
    )
}


def build(name: str, hf: bool = False) -> tuple[nn.Module, tuple[Any, ...]]:
    """Build the model ``name`` of :data:`MODELS` and the arguments of its forward pass."""
    return MODELS[name].factory(hf)
