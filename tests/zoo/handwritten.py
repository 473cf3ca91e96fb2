"""Hand-written zoo models, one or more per recording case of SPEC section 3.

Each model is a small ``nn.Module`` whose docstring names the case it covers;
``CASES`` pairs it with a function that makes its inputs.  The section "small
models of known structure" holds the models that the core tests build directly
(``TinyMLP``, ``ConvBN``, ``ResNetish``, ``TwoInputs``, ``Nested``, ...); they are
not cases.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import Case, Inputs

__all__ = ["CASES"]


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _x(*shape: int, seed: int = 0) -> Tensor:
    return torch.randn(*shape, generator=_gen(seed))


# ---------------------------------------------------------------- basic shapes
class MLP(nn.Module):
    """Plain Sequential of Linear and activation layers (the baseline)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class ResidualCNN(nn.Module):
    """Conv-BN-ReLU(inplace) blocks with skip additions outside any submodule; BN buffers."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        x = self.relu(x + y)
        return self.fc(torch.flatten(self.pool(x), 1))


class TinyUNet(nn.Module):
    """U-Net: down/up path with skip connections joined by torch.cat."""

    def __init__(self) -> None:
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(4, 8, 3, padding=1), nn.ReLU())
        self.bottom = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.up2 = nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.dec2 = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.ReLU())
        self.up1 = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.dec1 = nn.Sequential(nn.Conv2d(8, 4, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, x: Tensor) -> Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        b = self.bottom(e2)
        d2 = self.dec2(torch.cat([self.up2(b), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
        return self.head(d1)


class LSTMTagger(nn.Module):
    """RNN: an LSTM returning (output, (h, c)) feeding a Linear head; tuple output."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 6)
        self.lstm = nn.LSTM(6, 5, num_layers=2, batch_first=True)
        self.head = nn.Linear(5, 3)

    def forward(self, ids: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        out, (h, c) = self.lstm(self.emb(ids))
        return self.head(out), (h, c)


class GRUCellLoop(nn.Module):
    """A GRUCell called once per time step in a Python loop (one module, many calls)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(4, 6)
        self.out = nn.Linear(6, 2)

    def forward(self, x: Tensor) -> Tensor:
        h = torch.zeros(x.shape[0], 6)
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
        return self.out(h)


# ------------------------------------------------------------ pytree inputs/outputs
class DictInput(nn.Module):
    """Input given as a dict of tensors (pytree input)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 5)
        self.b = nn.Linear(3, 5)

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        return self.a(batch["image"]) + self.b(batch["meta"])


class NestedInput(nn.Module):
    """Nested containers in: a dict holding a list and a tuple of tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, inputs: dict[str, Any]) -> Tensor:
        first, second = inputs["pair"]
        stacked = torch.stack(list(inputs["seq"]), dim=0).sum(0)
        return self.proj(first * second + stacked)


class ListOutput(nn.Module):
    """Returns a tuple holding a tensor and a list of tensors (container types kept)."""

    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(4, 4)
        self.l2 = nn.Linear(4, 2)

    def forward(self, x: Tensor) -> tuple[Tensor, list[Tensor]]:
        h = self.l1(x)
        return h, [self.l2(h), torch.relu(h)]


class DictOutput(nn.Module):
    """Returns a plain dict of tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 6)
        self.cls = nn.Linear(6, 3)
        self.box = nn.Linear(6, 4)

    def forward(self, x: Tensor) -> dict[str, Tensor]:
        h = torch.relu(self.body(x))
        return {"logits": self.cls(h), "boxes": self.box(h)}


@dataclass
class DetOutput:
    """A dataclass output container."""

    logits: Tensor
    features: Tensor
    aux: Optional[Tensor] = None


class DataclassOutput(nn.Module):
    """Returns a dataclass whose optional field is None."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 6)
        self.cls = nn.Linear(6, 3)

    def forward(self, x: Tensor) -> DetOutput:
        f = self.body(x)
        return DetOutput(logits=self.cls(f), features=f)


class FakeModelOutput(OrderedDict):
    """An OrderedDict with attribute access, like transformers' ModelOutput."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


class ModelOutputLike(nn.Module):
    """Returns a ModelOutput-style OrderedDict subclass, from a child returning one too."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = DictOutputEncoder()
        self.head = nn.Linear(5, 2)

    def forward(self, x: Tensor) -> FakeModelOutput:
        enc = self.encoder(x)
        return FakeModelOutput(logits=self.head(enc.hidden), hidden=enc.hidden)


class DictOutputEncoder(nn.Module):
    """Child returning a ModelOutput-style container."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 5)

    def forward(self, x: Tensor) -> FakeModelOutput:
        return FakeModelOutput(hidden=torch.tanh(self.fc(x)))


class Pair(NamedTuple):
    """A namedtuple output container."""

    left: Tensor
    right: Tensor


class NamedTupleOutput(nn.Module):
    """Returns a namedtuple."""

    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Linear(4, 2)
        self.right = nn.Linear(4, 3)

    def forward(self, x: Tensor) -> Pair:
        return Pair(self.left(x), self.right(x))


class NonTensorPassThrough(nn.Module):
    """Returns None, an int and a string next to a tensor, untouched."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: Tensor, tag: str = "run", extra: Optional[Tensor] = None) -> tuple[Any, ...]:
        y = self.fc(x)
        if extra is not None:
            y = y + extra
        return y, None, tag, 3


class KeywordInputs(nn.Module):
    """forward takes keyword arguments: a mask tensor, a float and a flag."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: Tensor, *, mask: Tensor, scale: float = 1.0, use_mask: bool = True) -> Tensor:
        y = self.fc(x) * scale
        if use_mask:
            y = y.masked_fill(~mask, 0.0)
        return y


class Gate(nn.Module):
    """A child taking None, an int and a string positionally."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: Tensor, bias: Optional[Tensor], repeat: int, mode: str) -> Tensor:
        for _ in range(repeat):
            x = self.fc(x)
        if bias is not None:
            x = x + bias
        return torch.sigmoid(x) if mode == "sigmoid" else x


class PositionalNonTensors(nn.Module):
    """Submodules called with None, ints and strings as positional arguments."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = Gate()
        self.other = Gate()

    def forward(self, x: Tensor) -> Tensor:
        return self.other(self.gate(x, None, 2, "sigmoid"), x, 1, "plain")


# ------------------------------------------------------- tensors without gradients
class TokenMask(nn.Module):
    """Integer token ids and a boolean padding mask built from them (no autograd flow)."""

    pad = 0

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, 8, padding_idx=0)
        self.pos = nn.Embedding(16, 8)
        self.proj = nn.Linear(8, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, ids: Tensor) -> Tensor:
        mask = ids != self.pad
        positions = torch.cumsum(mask.long(), dim=1) * mask.long()
        h = self.proj(self.emb(ids) + self.pos(positions))
        h = h.masked_fill(~mask.unsqueeze(-1), 0.0)
        pooled = h.sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return self.out(pooled)


class IntegerIndexing(nn.Module):
    """gather/scatter/argmax on integer index tensors between layers."""

    def __init__(self) -> None:
        super().__init__()
        self.score = nn.Linear(6, 6)
        self.value = nn.Linear(6, 6)

    def forward(self, x: Tensor) -> Tensor:
        idx = self.score(x).argmax(dim=-1, keepdim=True)
        picked = torch.gather(self.value(x), -1, idx)
        onehot = torch.zeros_like(x).scatter_(-1, idx, 1.0)
        return picked * onehot


class FrozenBackbone(nn.Module):
    """A frozen (requires_grad=False) backbone under a trainable head."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(5, 7), nn.GELU(), nn.Linear(7, 7))
        for p in self.backbone.parameters():
            p.requires_grad_(False)
        self.head = nn.Linear(7, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.backbone(x))


class ConvClassifier(nn.Module):
    """Small CNN with dropout and BN; recorded in eval() under torch.no_grad()."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 6, 3), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.2),
        )
        self.fc = nn.Linear(6 * 3 * 3, 4)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.features(x).flatten(1))


# ---------------------------------------------------------------- in-place ops
class InplaceOps(nn.Module):
    """In-place: ReLU(inplace=True), ``x += y`` and ``x = x.mul_()``."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.act = nn.ReLU(inplace=True)
        self.c = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        h = self.act(self.a(x))
        h += self.b(x)
        h = h.mul_(2.0)
        return self.c(h)


class InplaceSetitem(nn.Module):
    """In-place assignment into a slice, ``h[:, :2] = y``, and ``torch.relu_``."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 2)
        self.c = nn.Linear(4, 3)

    def forward(self, x: Tensor) -> Tensor:
        h = self.a(x)
        h[:, :2] = self.b(x)
        torch.relu_(h)
        return self.c(h)


class InplaceMethod(nn.Module):
    """In-place ``x.add_(y)`` whose result is used through the mutated name."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.c = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        h = self.a(x)
        h.add_(self.b(x))
        return self.c(h)


# --------------------------------------------------------- modules called several times
class WeightSharing(nn.Module):
    """The same Linear applied three times in a loop: three calls, no false cycle."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 6)
        self.shared = nn.Linear(6, 6)
        self.out = nn.Linear(6, 2)

    def forward(self, x: Tensor) -> Tensor:
        h = self.inp(x)
        for _ in range(3):
            h = torch.relu(self.shared(h))
        return self.out(h)


class Siamese(nn.Module):
    """One encoder applied to two inputs, outputs compared (a module called twice)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 4))

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        return F.cosine_similarity(self.encoder(a), self.encoder(b))


class SharedChild(nn.Module):
    """A block holding a reference to a Linear owned elsewhere."""

    def __init__(self, shared: nn.Linear) -> None:
        super().__init__()
        self.shared = shared
        self.own = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        return self.own(self.shared(x))


class SharedByTwoParents(nn.Module):
    """One submodule registered under two parents; each parent calls it."""

    def __init__(self) -> None:
        super().__init__()
        shared = nn.Linear(4, 4)
        self.left = SharedChild(shared)
        self.right = SharedChild(shared)

    def forward(self, x: Tensor) -> Tensor:
        return self.right(self.left(x))


class TiedWeights(nn.Module):
    """Embedding and output projection share one weight (a parameter of two modules)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(12, 6)
        self.mix = nn.Linear(6, 6)
        self.lm_head = nn.Linear(6, 12, bias=False)
        self.lm_head.weight = self.emb.weight

    def forward(self, ids: Tensor) -> Tensor:
        return self.lm_head(torch.tanh(self.mix(self.emb(ids))))


# ------------------------------------------------------------ ops outside submodules
class OpsOutsideSubmodules(nn.Module):
    """cat, view, indexing, chunk and arithmetic at the root, between layers."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 6)
        self.b = nn.Linear(4, 6)
        self.c = nn.Linear(6, 3)

    def forward(self, x: Tensor) -> Tensor:
        h = torch.cat([self.a(x), self.b(x)], dim=-1)
        h = h.view(x.shape[0], 2, 6)[:, 0] * 0.5 + 1
        left, right = h.chunk(2, dim=-1)
        return self.c(torch.cat([right, left], dim=-1)).mean(-1, keepdim=True)


class FunctionalParams(nn.Module):
    """Parameters used directly with torch.nn.functional in a module with children."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(5, 4, generator=_gen(3)))
        self.scale = nn.Parameter(torch.ones(5))
        self.post = nn.Linear(5, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.post(F.linear(x, self.weight) * self.scale)


class CreatedTensors(nn.Module):
    """Tensors created inside forward (arange, ones, randn-free constants) mixed with data."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        pos = torch.arange(x.shape[-1], dtype=x.dtype) / x.shape[-1]
        return self.fc(x + pos) + torch.ones(1)


# ------------------------------------------------------------------ buffers
class Buffers(nn.Module):
    """A registered buffer (running mean) and a non-persistent buffer used in forward."""

    mean: Tensor
    table: Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.full((4,), 0.5))
        self.register_buffer("table", torch.arange(4.0), persistent=False)
        self.norm = nn.BatchNorm1d(4)
        self.fc = nn.Linear(4, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.norm(x - self.mean) + self.table)


class TrainModeBatchNorm(nn.Module):
    """BatchNorm in training mode: running stats change during the pass (state restored)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: Tensor) -> Tensor:
        return self.bn(self.fc(x))


# ---------------------------------------------------------- containers of modules
class ModuleListModel(nn.Module):
    """A ModuleList iterated in forward (the list itself is never called)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
        self.acts = nn.ModuleList([nn.ReLU(), nn.SiLU(), nn.Tanh()])

    def forward(self, x: Tensor) -> Tensor:
        for block, act in zip(self.blocks, self.acts, strict=True):
            x = act(block(x))
        return x


class ModuleDictModel(nn.Module):
    """A ModuleDict with branches chosen by key; one branch is never called."""

    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleDict(
            {"cls": nn.Linear(4, 3), "reg": nn.Linear(4, 1), "unused": nn.Linear(4, 9)})
        self.trunk = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> dict[str, Tensor]:
        h = self.trunk(x)
        return {k: self.heads[k](h) for k in ("cls", "reg")}


class NeverCalled(nn.Module):
    """Holds a module that is never called and a parameter-free module."""

    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Linear(4, 4)
        self.spare = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.flatten = nn.Flatten()

    def forward(self, x: Tensor) -> Tensor:
        return self.flatten(self.used(x))


# ------------------------------------------------------------------ attention
class AttentionBlock(nn.Module):
    """nn.MultiheadAttention returning (output, weights), with a key padding mask."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.norm = nn.LayerNorm(8)
        self.ff = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

    def forward(self, x: Tensor, pad: Tensor) -> tuple[Tensor, Tensor]:
        a, w = self.attn(x, x, x, key_padding_mask=pad)
        h = self.norm(x + a)
        return h + self.ff(h), w


class TorchTransformer(nn.Module):
    """nn.TransformerEncoder in eval under no_grad: each layer runs its fused kernel, drawn as a
    closed box, and the output is the plain call's bit for bit."""

    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.enc(x).mean(1))


# ---------------------------------------------------------------- pass-through
class PassThroughResidual(nn.Module):
    """Identity and eval-mode Dropout return their input object; it is also used afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.1)
        self.ident = nn.Identity()
        self.b = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        h = self.a(x)
        y = self.b(self.drop(h))
        return self.ident(h) * y + h


class NoOpConversions(nn.Module):
    """``.float()``, ``.contiguous()`` and ``.to(dtype)`` that return the same tensor object."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 4)
        self.norm = RMSNormLike()
        self.fc = nn.Linear(4, 4)
        self.out = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        x = self.inp(x)
        residual = x
        h = self.fc(self.norm(x))
        return self.out(residual + h)


class RMSNormLike(nn.Module):
    """RMS norm that upcasts with .to(float32) (a no-op on float32 input), like Llama's."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4))

    def forward(self, x: Tensor) -> Tensor:
        h = x.to(torch.float32).contiguous()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.float()


class RootPassThrough(nn.Module):
    """The root returns one of its inputs unchanged next to a computed tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        return self.fc(x), y


class WeightNormed(nn.Module):
    """A weight-normed Linear: its weight is computed by parametrization submodules."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.utils.parametrizations.weight_norm(nn.Linear(4, 4))
        self.out = nn.Linear(4, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.out(torch.relu(self.fc(x)))


class PackedGRU(nn.Module):
    """A GRU over a PackedSequence (a namedtuple of data and integer index tensors)."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(3, 5, batch_first=True)
        self.fc = nn.Linear(5, 2)

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, h = self.rnn(packed)
        padded, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        return self.fc(padded), h


# ------------------------------------------------------------------ deep graphs
class DeepChain(nn.Module):
    """Thousands of ops: 400 tiny blocks of 4 ops each (no recursion limit, no quadratic step)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Scale() for _ in range(400))

    def forward(self, x: Tensor) -> Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class Scale(nn.Module):
    """x * w + b, then tanh and a residual add: four ops."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.full((3,), 0.9))
        self.b = nn.Parameter(torch.zeros(3))

    def forward(self, x: Tensor) -> Tensor:
        return torch.tanh(x * self.w + self.b) + x


# ---------------------------------------------------------------- meta device
class MetaTransformerish(nn.Module):
    """Built on the meta device: embeddings, two MLP blocks and a head, no real memory."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50_000, 1024)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(1024), nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024))
            for _ in range(2)
        )
        self.head = nn.Linear(1024, 50_000, bias=False)

    def forward(self, ids: Tensor) -> Tensor:
        h = self.emb(ids)
        for block in self.blocks:
            h = h + block(h)
        return self.head(h)


def _meta_model() -> nn.Module:
    with torch.device("meta"):
        return MetaTransformerish()


def _meta_inputs() -> Inputs:
    return (torch.zeros(2, 64, dtype=torch.long, device="meta"),), {}


# ------------------------------------------- small models of known structure
# Not zoo cases: test_core, test_api, test_depth, test_mermaid and the command-line
# tests (through tests/core_models.py) build them directly and check their graphs
# node by node.
class TinyMLP(nn.Module):
    """Linear -> ReLU -> Linear, children named fc1, act, fc2 (4 -> 8 -> 3 features)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


class DoubledMLP(TinyMLP):
    """fc1 -> act -> fc2, with the act's output doubled outside any submodule."""

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)) * 2)


class ConvBN(nn.Module):
    """A CNN with BatchNorm (buffers) and a flatten outside any submodule."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.head = nn.Linear(4 * 8 * 8, 5)

    def forward(self, x: Tensor) -> Tensor:
        y = self.relu(self.bn(self.conv(x)))
        return self.head(torch.flatten(y, 1))


class ResidualBlock(nn.Module):
    """Two convolutions and a residual add that runs in the block itself."""

    def __init__(self, c: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv2(torch.relu(self.conv1(x))) + x


class ResNetish(nn.Module):
    """stem conv -> residual block -> pooled linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.block = ResidualBlock(4)
        self.head = nn.Linear(4, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.block(self.stem(x)).mean(dim=(2, 3)))


class TwoInputs(nn.Module):
    """Two inputs, each through its own linear, joined by torch.cat."""

    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Linear(3, 4)
        self.right = nn.Linear(5, 4)
        self.out = nn.Linear(8, 1)

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        return self.out(torch.cat([self.left(a), self.right(b)], dim=1))


class Inner(nn.Module):
    """Level 3: a linear and a tanh."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x: Tensor) -> Tensor:
        return torch.tanh(self.lin(x))


class Middle(nn.Module):
    """Level 2: two Inner blocks in a row."""

    def __init__(self) -> None:
        super().__init__()
        self.a = Inner()
        self.b = Inner()

    def forward(self, x: Tensor) -> Tensor:
        return self.b(self.a(x))


class Nested(nn.Module):
    """Level 1: Middle, then a head; three levels of modules in all."""

    def __init__(self) -> None:
        super().__init__()
        self.mid = Middle()
        self.head = nn.Linear(6, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.mid(x))


# ----------------------------------------------------------------- the cases
def _case(cls: Callable[[], nn.Module], inputs: Callable[[], Inputs], **kw: Any) -> Case:
    def build() -> nn.Module:
        torch.manual_seed(0)
        model = cls()
        return model if kw.get("train") else model.eval()

    return Case(name=cls.__name__, build=build, inputs=inputs, **kw)


def _ids(*shape: int, high: int = 20, seed: int = 0) -> Tensor:
    return torch.randint(1, high, shape, generator=_gen(seed))


_FUSED = ("torch.export traces the unfused Python path of nn.TransformerEncoderLayer (its "
          "submodules); a plain call, and so the recording, runs one fused kernel per layer")
_FX_CANNOT = "torch.fx cannot trace it: "
_FX_MUTATION = ("fx disagrees by design: torch.fx does not model mutation; after h.add_(y) it points "
                "later uses of h at the value before the add, so it misses the edge b -> c that the "
                "recording shows. torch.export functionalises the mutation and agrees")

CASES: list[Case] = [
    _case(MLP, lambda: ((_x(2, 6),), {})),
    _case(ResidualCNN, lambda: ((_x(1, 3, 8, 8),), {})),
    _case(TinyUNet, lambda: ((_x(1, 1, 16, 16),), {})),
    _case(LSTMTagger, lambda: ((_ids(2, 5),), {})),
    _case(GRUCellLoop, lambda: ((_x(2, 4, 4),), {}),
          oracle=_FX_CANNOT + "the loop runs over range(x.shape[1]), a Proxy"),
    _case(DictInput, lambda: (({"image": _x(2, 4), "meta": _x(2, 3, seed=1)},), {})),
    _case(NestedInput, lambda: (({"pair": (_x(1, 4), _x(1, 4, seed=1)),
                                  "seq": [_x(1, 4, seed=2), _x(1, 4, seed=3)]},), {}),
          oracle=_FX_CANNOT + "unpacking a Proxy (first, second = inputs['pair'])"),
    _case(ListOutput, lambda: ((_x(2, 4),), {})),
    _case(DictOutput, lambda: ((_x(2, 4),), {})),
    _case(DataclassOutput, lambda: ((_x(2, 4),), {})),
    _case(ModelOutputLike, lambda: ((_x(2, 4),), {})),
    _case(NamedTupleOutput, lambda: ((_x(2, 4),), {})),
    _case(NonTensorPassThrough, lambda: ((_x(2, 4), "eval", None), {}),
          fx_concrete={"tag": "eval", "extra": None}),
    _case(KeywordInputs, lambda: ((_x(2, 4),), {"mask": _x(2, 4, seed=1) > 0, "scale": 0.5}),
          oracle=_FX_CANNOT + "`if use_mask` on a keyword argument is traced as a Proxy"),
    _case(PositionalNonTensors, lambda: ((_x(2, 4),), {}), grad_mode="no_grad"),
    _case(TokenMask, lambda: ((torch.tensor([[3, 7, 9, 0, 0], [4, 0, 0, 0, 0]]),), {})),
    _case(IntegerIndexing, lambda: ((_x(2, 6),), {})),
    _case(FrozenBackbone, lambda: ((_x(2, 5),), {})),
    _case(ConvClassifier, lambda: ((_x(1, 3, 8, 8),), {}), grad_mode="no_grad"),
    _case(InplaceOps, lambda: ((_x(2, 4),), {})),
    _case(InplaceSetitem, lambda: ((_x(2, 4),), {}),
          oracle=_FX_CANNOT + "assignment into a Proxy slice (h[:, :2] = y) is not supported"),
    _case(InplaceMethod, lambda: ((_x(2, 4),), {}), oracle=_FX_MUTATION),
    _case(WeightSharing, lambda: ((_x(2, 4),), {})),
    _case(Siamese, lambda: ((_x(2, 5), _x(2, 5, seed=1)), {})),
    _case(SharedByTwoParents, lambda: ((_x(2, 4),), {})),
    _case(TiedWeights, lambda: ((_ids(2, 4, high=12),), {}), grad_mode="inference"),
    _case(OpsOutsideSubmodules, lambda: ((_x(2, 4),), {})),
    _case(FunctionalParams, lambda: ((_x(2, 4),), {})),
    _case(CreatedTensors, lambda: ((_x(2, 4),), {})),
    _case(Buffers, lambda: ((_x(3, 4),), {})),
    _case(TrainModeBatchNorm, lambda: ((_x(3, 4),), {}), train=True),
    _case(ModuleListModel, lambda: ((_x(2, 4),), {})),
    _case(ModuleDictModel, lambda: ((_x(2, 4),), {})),
    _case(NeverCalled, lambda: ((_x(2, 4),), {})),
    _case(AttentionBlock, lambda: ((_x(2, 5, 8), torch.tensor([[False] * 5, [False] * 3 + [True] * 2])), {}),
          oracle=_FX_CANNOT + "nn.MultiheadAttention branches on its inputs"),
    _case(TorchTransformer, lambda: ((_x(2, 5, 8),), {}), grad_mode="no_grad",
          oracle=_FX_CANNOT + "nn.TransformerEncoder branches on its inputs", known_gap=_FUSED),
    _case(PassThroughResidual, lambda: ((_x(2, 4),), {})),
    _case(NoOpConversions, lambda: ((_x(2, 4),), {})),
    _case(RootPassThrough, lambda: ((_x(2, 4), _x(3, seed=1)), {})),
    _case(WeightNormed, lambda: ((_x(2, 4),), {})),
    _case(PackedGRU, lambda: ((_x(2, 4, 3), torch.tensor([4, 2])), {}),
          oracle=_FX_CANNOT + "pack_padded_sequence needs real lengths",
          no_export="torch.export cannot trace pack_padded_sequence (the lengths become sizes)"),
    _case(DeepChain, lambda: ((_x(2, 3),), {})),
    Case(name="MetaTransformerish", build=lambda: _meta_model().eval(), inputs=_meta_inputs, meta=True),
]
