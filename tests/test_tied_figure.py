"""The figures count a tied parameter once, by the layer table's rule: a module whose weight is
counted on another module (an output projection tied to the embedding) says ``tied``, and the
modules around it count the weight only where they hold the module it is counted on."""

from __future__ import annotations

import re

import torch
from torch import nn

import torchrecorder
from torchrecorder.projection.params import ParamHolders
from torchrecorder.renderer import labels
from torchrecorder.renderer._html_info import boundary_tensors, panel_info
from torchrecorder.summary_rows import Stats, layer_rows


class _Decoder(nn.Module):
    def __init__(self, embed: nn.Embedding) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.embed.weight = embed.weight  # the encoder's table, held again here
        self.proj = nn.Linear(8, 8)
        self.head = nn.Linear(8, 50, bias=False)
        self.head.weight = embed.weight

    def forward(self, ids: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        return self.head(self.proj(self.embed(ids) + memory))


class _Tied(nn.Module):
    """An encoder's embedding, held again by the decoder and tied to the decoder's head."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Embedding(50, 8), nn.Linear(8, 8))
        self.decoder = _Decoder(self.encoder[0])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.decoder(ids, self.encoder(ids))


def _record() -> torchrecorder.Recorder:
    torch.manual_seed(0)
    return torchrecorder.record(_Tied(), "tied", input_data=torch.randint(0, 50, (2, 5)))


def test_the_figures_counts_are_the_layer_tables() -> None:
    rec = _record()
    layers = {n.path: n for n in rec.layers()}
    assert labels.param_total(rec, layers["decoder.head"]) == 0
    assert labels.param_total(rec, layers["decoder.embed"]) == 0
    assert labels.param_total(rec, layers["decoder"]) == 72  # proj only: the table is counted in encoder
    assert labels.param_total(rec, layers["encoder"]) == 400 + 72
    assert labels.param_total(rec, layers[""]) == 400 + 72 + 72
    # each module's figure count is the sum of the table's counts inside it
    stats = Stats(rec)
    holders = ParamHolders(rec)
    for path, layer in layers.items():
        inside = sum(stats.own.get(row.layer.key, 0) for row in layer_rows(rec) if row.layer is not None
                     and (not path or row.path == path or row.path.startswith(path + ".")))
        assert holders.counted_total(layer) == inside, path


def test_a_tied_modules_box_says_tied_and_its_clusters_count_it_once() -> None:
    source = torchrecorder.make_dot(_record(), render_depth=None).source
    type_lines = re.findall(r"(\w+) · ([\w.]+(?: params?)?)<", source)
    assert ("Linear", "tied") in type_lines and ("Embedding", "tied") in type_lines
    assert ("Embedding", "400 params") in type_lines
    assert ("_Decoder", "72 params") in type_lines and ("Sequential", "472 params") in type_lines
    # the tooltip names the parameter it is tied to, as the layer table's row does
    assert re.search(r'tooltip="decoder\.head \(Linear\)[^"]* tied: encoder\.0\.weight', source)


def test_the_pages_panel_counts_a_tied_module_as_the_table_does() -> None:
    rec = _record()
    layers = {n.path: n for n in rec.layers()}
    tensors = boundary_tensors(rec)
    assert panel_info(rec, layers["decoder"], tensors)["total_n"] == 72
    assert panel_info(rec, layers["decoder.head"], tensors)["total_n"] == 0
