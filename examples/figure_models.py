"""Six networks of different kinds, for the figure comparison in ``docs/figures.md``.

Each entry of :data:`MODELS` builds a model with random weights and its example input
(the transformers models are built from config classes: nothing is downloaded).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn


class SmallCNN(nn.Module):
    """Two conv-BN-ReLU stages with pooling, then a linear classifier."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(32, classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class LSTMTagger(nn.Module):
    """Word embeddings, a two-layer LSTM, a tag projection and a log-softmax."""

    def __init__(self, vocab: int = 100, embed: int = 32, hidden: int = 64, tags: int = 9) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=2, batch_first=True)
        self.tagger = nn.Linear(hidden, tags)

    def forward(self, tokens: Tensor) -> Tensor:
        out, _ = self.lstm(self.embedding(tokens))
        return torch.log_softmax(self.tagger(out), dim=-1)


class DoubleConv(nn.Module):
    """conv-BN-ReLU twice: the unit of a U-Net."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
            nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.block(x)


class UNet(nn.Module):
    """A two-level U-Net: down, bottom, up with skip connections concatenated."""

    def __init__(self, cin: int = 3, classes: int = 2, width: int = 8) -> None:
        super().__init__()
        self.enc1 = DoubleConv(cin, width)
        self.enc2 = DoubleConv(width, 2 * width)
        self.bottom = DoubleConv(2 * width, 4 * width)
        self.pool = nn.MaxPool2d(2)
        self.up2 = nn.ConvTranspose2d(4 * width, 2 * width, 2, stride=2)
        self.dec2 = DoubleConv(4 * width, 2 * width)
        self.up1 = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.dec1 = DoubleConv(2 * width, width)
        self.head = nn.Conv2d(width, classes, 1)

    def forward(self, x: Tensor) -> Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        b = self.bottom(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up2(b), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
        return self.head(d1)


def _tokens(vocab: int, length: int = 8) -> Tensor:
    return torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(0))


def cnn() -> tuple[nn.Module, tuple[Tensor, ...]]:
    """:class:`SmallCNN` on a 32x32 RGB image."""
    return SmallCNN().eval(), (torch.randn(1, 3, 32, 32),)


def gpt2() -> tuple[nn.Module, tuple[Tensor, ...]]:
    """A two-layer GPT-2 language model (transformers, random weights)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=64,
                        bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config).eval(), (_tokens(1000),)


def bert() -> tuple[nn.Module, tuple[Tensor, ...]]:
    """A two-layer BERT encoder (transformers, random weights)."""
    from transformers import BertConfig, BertModel

    config = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                        intermediate_size=128, vocab_size=1000, max_position_embeddings=64)
    return BertModel(config).eval(), (_tokens(1000),)


def transformer_encoder() -> tuple[nn.Module, tuple[Tensor, ...]]:
    """``nn.TransformerEncoder`` of two layers (d_model 64, 4 heads) in training mode, so
    that it runs its Python path (the fused inference path is one kernel)."""
    layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), (torch.randn(1, 8, 64),)


def lstm() -> tuple[nn.Module, tuple[Tensor, ...]]:
    """:class:`LSTMTagger` on a sentence of 8 token ids."""
    return LSTMTagger().eval(), (_tokens(100),)


def unet() -> tuple[nn.Module, tuple[Tensor, ...]]:
    """:class:`UNet` on a 32x32 RGB image."""
    return UNet().eval(), (torch.randn(1, 3, 32, 32),)


#: name -> builder of (model, inputs)
MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[Tensor, ...]]]] = {
    "cnn": cnn, "gpt2": gpt2, "bert": bert, "transformer_encoder": transformer_encoder,
    "lstm": lstm, "unet": unet,
}
