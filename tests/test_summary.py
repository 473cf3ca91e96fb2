"""The layer summary: rows, depth-idx labels, shares, totals, folding of repeated blocks, options."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.summary import COLUMNS, label_paths, layer_labels, summary_table
from torchrecorder.summary_rows import Stats, layer_rows

from .zoo.hf import LLAMA_70B_SKIP
from .zoo.session import restored


def _toynet() -> nn.Module:
    """scio's example network: Linear(5, 4), ReLU, Linear(4, 3), ReLU."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3), nn.ReLU())


def test_summary_of_scios_toy_network_matches_its_rows_labels_and_totals() -> None:
    rec = torchrecorder.record(_toynet(), "toynet", (1, 5))
    want = """\
=======================================================================
Layer (type)         Label  Input shape  Output shape  Param #  Param %
=======================================================================
toynet (Sequential)  0-1    1×5          1×3                --       --
├─0 (Linear)         1-1    1×5          1×4                24   61.54%
├─1 (ReLU)           1-2    1×4          1×4                --       --
├─2 (Linear)         1-3    1×4          1×3                15   38.46%
└─3 (ReLU)           1-4    1×3          1×3                --       --
=======================================================================
Total params: 39
Trainable params: 39
Non-trainable params: 0
Params size (MB): 0.00
Activations size (MB): 0.00
======================================================================="""
    assert str(rec) == want
    assert rec.summary() == want
    assert layer_labels(rec) == {"toynet": "0-1", "0": "1-1", "1": "1-2", "2": "1-3", "3": "1-4"}


class _Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.act(self.fc(x))


class _Tower(nn.Module):
    """An embedding tied to the head, a stack of identical blocks, a frozen norm."""

    def __init__(self, n: int = 10, width: int = 8, vocab: int = 20) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(_Block(width) for _ in range(n))
        self.norm = nn.LayerNorm(width)
        self.norm.requires_grad_(False)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied: counted once

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def test_totals_count_shared_weights_once_and_split_trainable() -> None:
    net = _Tower()
    rec = torchrecorder.record(net, "tower", input_data=torch.zeros(2, 3, dtype=torch.long))
    text = rec.summary(fold=False)
    unique = {id(p): p for p in net.parameters()}.values()
    total = sum(p.numel() for p in unique)
    frozen = net.norm.weight.numel() + net.norm.bias.numel()
    assert f"Total params: {total:,}" in text
    assert f"Trainable params: {total - frozen:,}" in text
    assert f"Non-trainable params: {frozen:,}" in text
    # the tied head shows no parameters of its own (they were counted on the embedding) and says so
    head_row = next(line for line in text.splitlines() if "─head (Linear)" in line)
    assert head_row.split()[-2:] == ["--", "--"] and "tied: embed.weight" in head_row
    assert sum("tied:" in line for line in text.splitlines()) == 1
    embed_row = next(line for line in text.splitlines() if "─embed (Embedding)" in line)
    assert embed_row.split()[-2] == "160" and embed_row.split()[-1] == f"{100 * 160 / total:.2f}%"
    # the shares of the rows add up to the whole
    shares = [float(line.split()[-1][:-1]) for line in text.splitlines()[3:] if line.endswith("%")]
    assert sum(shares) == pytest.approx(100, abs=0.05)
    # parameter memory: float32 elements; activations: every tensor a module returned
    assert f"Params size (MB): {4 * total / 10**6:,.2f}" in text


def test_repeated_blocks_fold_into_one_group_marked_times_n() -> None:
    rec = torchrecorder.record(_Tower(n=10), "tower", input_data=torch.zeros(2, 3, dtype=torch.long))
    folded = rec.summary()
    unfolded = rec.summary(fold=False)
    assert "│ └─blocks.0 … blocks.9 (_Block) ×10  2-1…2-10" in folded
    rows = [line for line in folded.splitlines() if "(" in line and "(MB)" not in line][1:]
    # network, embed, the ModuleList, the group with the first block's two children, norm, head
    assert [r.split("(")[1].split(")")[0] for r in rows] == [
        "_Tower", "Embedding", "ModuleList", "_Block", "Linear", "GELU", "LayerNorm", "Linear"]
    assert "blocks.0.fc (Linear)" in folded and "blocks.1.fc" not in folded
    assert "blocks.9.fc (Linear)" in unfolded and ") ×" not in unfolded
    assert len(unfolded.splitlines()) - len(folded.splitlines()) == 9 * 3
    # labels keep counting after the group
    assert re.search(r"─norm \(LayerNorm\) +1-3 ", folded)
    assert re.search(r"blocks\.0\.fc \(Linear\) +3-1 ", folded)
    assert re.search(r"blocks\.9\.act \(GELU\) +3-20 ", unfolded)
    # runs shorter than "auto"'s 8 are not folded unless asked
    short = torchrecorder.record(_Tower(n=3), "tower", input_data=torch.zeros(2, 3, dtype=torch.long))
    assert ") ×3" not in short.summary() and ") ×3" in short.summary(fold=True)
    assert short.summary(fold=2) == short.summary(fold=True)


def test_columns_and_depth_options() -> None:
    rec = torchrecorder.record(_Tower(n=2), "tower", input_data=torch.zeros(2, 3, dtype=torch.long))
    text = rec.summary(columns=["params", "label"], depth=2)
    header = text.splitlines()[1]
    assert header.split() == ["Layer", "(type)", "Label", "Param", "#"]
    assert "Input shape" not in text and "blocks.0.fc" not in text
    # a row whose children are hidden counts their parameters as its own
    block_row = next(line for line in text.splitlines() if "─blocks.0 (_Block)" in line)
    assert block_row.split()[-1] == "72"
    # depth counts the module tree, as torchinfo: the never-called ModuleList is depth 1
    shallow = rec.summary(columns=["params"], depth=1)
    assert "blocks.0" not in shallow
    assert next(line for line in shallow.splitlines() if "─blocks (ModuleList)" in line).split()[-1] == "144"
    assert rec.summary(depth=0).count("\n├─") == 0
    with pytest.raises(ValueError, match="unknown summary column"):
        rec.summary(columns=["gflops"])
    # torchinfo's col_names choose the same columns as ours
    assert rec.summary(columns=["input_size", "output_size", "num_params", "params_percent"]) == rec.summary(
        columns=["input", "output", "params", "share"])
    with pytest.raises(ValueError, match=r"unknown summary column\(s\) \['kernel_size'\]"):
        rec.summary(columns=["input_size", "kernel_size"])
    # ... and torchinfo's keyword for them is taken too: summary(col_names=..., depth=...)
    assert rec.summary(col_names=("num_params", "mult_adds"), depth=1) == rec.summary(
        columns=["params", "mult_adds"], depth=1)
    with pytest.raises(TypeError, match="not both"):
        rec.summary(columns=["params"], col_names=["num_params"])
    with pytest.raises(ValueError, match="depth"):
        rec.summary(depth=-1)
    with pytest.raises(ValueError, match="fold_repeats"):
        summary_table(rec, fold="sometimes")


def test_each_call_of_a_module_has_its_own_label_and_later_ones_show_no_parameters_again() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.fc(x))

    rec = torchrecorder.record(Twice(), "twice", (1, 3))
    assert layer_labels(rec) == {"twice": "0-1", "fc": "1-1", "fc#2": "1-2"}  # as torchinfo
    text = rec.summary(fold=False)
    assert "├─fc (Linear)" in text and "└─fc #2 (Linear)" in text
    assert "Total params: 12" in text


@pytest.mark.skipif(bool(LLAMA_70B_SKIP), reason=LLAMA_70B_SKIP or "runs")
def test_the_70b_llamas_table_is_short(zoo) -> None:  # type: ignore[no-untyped-def]
    rec = zoo.recorded("hf-llama-70b-meta").rec
    folded = rec.summary()
    assert len(rec.summary(fold=False).splitlines()) > 1000
    assert len(folded.splitlines()) < 40
    assert "model.layers.0 … model.layers.79 (LlamaDecoderLayer) ×80" in folded
    assert "Total params: 6" in folded  # about 69-70 billion with the zoo's vocabulary


def test_parameters_of_modules_never_called_are_named_under_the_totals() -> None:
    """torchinfo's total counts every parameter of the model; the table counts the recorded
    ones and says how many more the model has (a head the pass never called), also after JSON."""
    torchinfo = pytest.importorskip("torchinfo")

    class Unused(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.used, self.head = nn.Linear(3, 4), nn.Linear(4, 5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.used(x)

    model = Unused()
    rec = torchrecorder.record(model, "net", (1, 3))
    theirs = torchinfo.summary(model, input_size=(1, 3), verbose=0).total_params
    for text in (rec.summary(), torchrecorder.load_json(rec.to_json()).summary()):
        assert "Total params: 16" in text
        assert f"Params not recorded: 25 (modules the pass never called; all the model's: {theirs})" in text
    assert "not recorded" not in torchrecorder.record(nn.Linear(3, 4), "fc", (1, 3)).summary()


def test_memory_totals_count_parameters_and_the_tensors_modules_return() -> None:
    with torch.device("meta"):  # shapes only: the sizes come from metadata
        net = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 512)).to(torch.bfloat16)
    x = torch.empty(256, 1024, device="meta", dtype=torch.bfloat16)
    text = torchrecorder.record(net, "net", input_data=x).summary()
    params = 2 * (1024 * 1024 + 1024 + 1024 * 512 + 512)  # two bytes an element
    acts = 2 * (256 * 1024 + 256 * 1024 + 256 * 512)  # the outputs of the three modules, not the input
    # MB of 10^6 bytes, as torchinfo (not MiB)
    assert f"Params size (MB): {params / 10**6:,.2f}" in text and f"{params / 10**6:,.2f}" == "3.15"
    assert f"Activations size (MB): {acts / 10**6:,.2f}" in text and f"{acts / 10**6:,.2f}" == "1.31"
    one = torchrecorder.record(nn.Linear(1024, 1024), "fc", (1, 1024)).summary()
    assert "Params size (MB): 4.20" in one  # 4,198,400 bytes


# --------------------------------------------------------------- torchinfo's own numbers
#: zoo models whose labels, mult-adds and row order are compared with torchinfo's: a ModuleList
#: iterated (ModuleListModel: the lists take labels again each time the other list ran between),
#: a ModuleDict with a branch never called, modules called several times (WeightSharing, Siamese),
#: a tied output projection, RNNs, convolutions, an attention, transformers models (not
#: TorchTransformer: under torchinfo's hooks nn.TransformerEncoder leaves its fused fast path,
#: which a plain call, and so the recording, takes)
TORCHINFO_MODELS = [
    "MLP", "ResidualCNN", "TinyUNet", "LSTMTagger", "GRUCellLoop", "ModuleListModel", "ModuleDictModel",
    "NeverCalled", "WeightSharing", "Siamese", "TiedWeights", "FrozenBackbone", "AttentionBlock",
    "hf-gpt2", "hf-bert", "hf-t5",
]


def _torchinfo_rows(r) -> list:  # type: ignore[no-untyped-def]
    torchinfo = pytest.importorskip("torchinfo")
    with restored(r.net):
        stats = torchinfo.summary(r.net, input_data=list(r.args), verbose=0, **r.kwargs)
    paths: dict[int, str] = {}
    for path, module in r.net.named_modules():
        paths.setdefault(id(module), path)
    return [(paths[id(info.module)], f"{info.depth}-{info.depth_index}", info) for info in stats.summary_list]


@pytest.mark.parametrize("name", TORCHINFO_MODELS)
def test_labels_and_mult_adds_are_torchinfos(zoo, name: str) -> None:  # type: ignore[no-untyped-def]
    case = zoo.case(name)  # a missing transformers model raises KeyError: skip those
    r = zoo.recorded(case.name)
    theirs = _torchinfo_rows(r)
    rows = layer_rows(r.rec)
    assert [(row.path, row.label) for row in rows] == [(path, label) for path, label, _ in theirs]
    stats = Stats(r.rec)
    # mult-adds of each leaf call, as torchinfo counts them (a non-leaf row counts nothing itself)
    assert [stats.mult_adds(row) for row in rows] == [
        info.macs if info.is_leaf_layer else 0 for _, _, info in theirs]
    # the labels of the table are these, and every label names the module torchinfo's row names
    assert set(layer_labels(r.rec).values()) == {label for _, label, _ in theirs}
    assert label_paths(r.rec) == {label: path for path, label, _ in theirs}


def test_the_models_cover_what_the_comparison_must_cover(zoo) -> None:  # type: ignore[no-untyped-def]
    covered = [name for name in TORCHINFO_MODELS if name in {c.name for c in zoo.cases()}]
    assert len(covered) >= 10
    net = zoo.case("ModuleDictModel").build()
    assert isinstance(net.heads, nn.ModuleDict)
    assert isinstance(zoo.case("ModuleListModel").build().blocks, nn.ModuleList)
    assert [layer.call_index for layer in zoo.recorded("WeightSharing").rec.layers()].count(3) == 1


def test_a_module_list_that_is_never_called_takes_a_label_and_numbers_its_children() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Linear(3, 3)
            self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(3, 3), nn.ReLU()) for _ in range(2))
            self.head = nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for block in self.blocks:
                x = block(self.emb(x))
            return self.head(x)

    rec = torchrecorder.record(Net(), "net", (1, 3))
    labels = label_paths(rec)
    # the example: blocks (never called) 1-2, blocks.0 2-1, blocks.0.0 3-1, head 1-5 after the
    # second emb call (1-3) re-inserted blocks (1-4: a container keeps its last label)
    assert labels["1-1"] == "emb" and labels["2-1"] == "blocks.0" and labels["3-1"] == "blocks.0.0"
    assert layer_labels(rec)["blocks"] == "1-4" and labels["1-5"] == "head" and labels["1-3"] == "emb"
    text = rec.summary(columns=["label"], fold=False)
    assert re.search(r"├─blocks \(ModuleList\) +1-4\n│ └─blocks\.0 \(Sequential\) +2-1\n", text)
    assert "blocks" not in rec.nodes  # the container is a row of the table, not a node
    # a graph loaded from JSON numbers the same and names the container by its path
    loaded = torchrecorder.load_json(rec.to_json())
    assert label_paths(loaded) == labels
    assert re.search(r"├─blocks \(container\) +1-4\n", loaded.summary(columns=["label"], fold=False))
    torchinfo = pytest.importorskip("torchinfo")
    theirs = torchinfo.summary(rec.layers().__next__().fn, input_size=(1, 3), verbose=0).summary_list
    assert [f"{info.depth}-{info.depth_index}" for info in theirs] == [row.label for row in layer_rows(rec)]


def test_gpt2s_lm_head_says_its_weight_is_tied_and_is_counted_once(zoo) -> None:  # type: ignore[no-untyped-def]
    case = zoo.case("hf-gpt2")
    r = zoo.recorded(case.name)
    text = r.rec.summary(fold=False)
    head = next(line for line in text.splitlines() if "─lm_head (Linear)" in line)
    assert "tied: transformer.wte.weight" in head and head.split()[-2:] == ["--", "--"]
    assert sum("tied:" in line for line in text.splitlines()) == 1
    unique = sum(p.numel() for p in r.net.parameters())  # parameters() yields a shared one once
    assert f"Total params: {unique:,}" in text
    # all of it (the new columns too) reads metadata: a graph loaded from JSON prints the same table,
    # but for the class of a never-called container, which only the live model knows
    every = list(COLUMNS)
    loaded = torchrecorder.load_json(r.rec.to_json()).summary(columns=every)
    assert "h (container)" in loaded and "h (ModuleList)" in r.rec.summary(columns=every)

    def cells(text: str) -> list[list[str]]:
        return [line.replace("(ModuleList)", "(container)").split() for line in text.splitlines()
                if not line.startswith("=")]

    assert cells(loaded) == cells(r.rec.summary(columns=every))


def test_optional_columns_mult_adds_and_trainable() -> None:
    torchinfo = pytest.importorskip("torchinfo")
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5),
                        nn.Sequential(nn.Linear(5, 5), nn.Linear(5, 2)))
    net[0].requires_grad_(False)
    net[4][1].bias.requires_grad_(False)
    x = torch.randn(2, 3, 8, 8)
    rec = torchrecorder.record(net, "net", input_data=x)
    assert "Mult-Adds" not in str(rec) and "  Trainable" not in str(rec)  # not in the default table
    text = rec.summary(columns=["mult_adds", "trainable"])
    theirs = torchinfo.summary(net, input_data=[x], verbose=0)
    assert f"Total mult-adds: {theirs.total_mult_adds:,}" in text
    cells = {line.split()[0].lstrip("├└│─ "): line.split()[-2:] for line in text.splitlines()[3:]
             if "(" in line and "(MB)" not in line}
    assert cells["0"] == [f"{2 * 4 * 27 * 36 + 2 * 4 * 36:,}", "False"]  # weight and bias × 2 × 6×6
    assert cells["1"] == ["--", "--"]
    assert cells["3"] == [f"{2 * (144 * 5 + 5):,}", "True"]
    assert cells["4"] == ["--", "Partial"] and cells["4.1"][1] == "Partial"
    by_path = {info.var_name: info for info in theirs.summary_list}
    assert cells["4.1"][0] == f"{by_path['1'].macs:,}"
    # at a depth cut, a row counts the mult-adds of the leaves inside it, as torchinfo
    cut = rec.summary(columns=["mult_adds"], depth=1)
    row = next(line for line in cut.splitlines() if "─4 (Sequential)" in line)
    assert row.split()[-1] == f"{2 * 30 + 2 * 12:,}"


class _MomentumEncoder(nn.Module):
    """MoCo/BYOL: the key encoder's parameters are updated (EMA) in the network's own
    ``forward`` before the key encoder runs, so they are first read outside it."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 4))
        self.k = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 4))
        self.k.requires_grad_(False)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        q = self.q(a)
        with torch.no_grad():
            for pq, pk in zip(self.q.parameters(), self.k.parameters(), strict=True):
                pk.data.mul_(0.9).add_(pq.data, alpha=0.1)
            k = self.k(b)
        return q @ k.T


def _qat_conv_bn() -> nn.Module:
    """``ConvBnReLU2d`` of quantization-aware training reads ``bn.weight`` in its own ``forward``
    (to fold it into the convolution's weight) before it calls ``bn``."""
    from torch.ao.quantization import fuse_modules_qat, get_default_qat_qconfig, prepare_qat

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 5))
    net.train()
    net.qconfig = get_default_qat_qconfig("x86")  # type: ignore[assignment]
    fuse_modules_qat(net, [["0", "1", "2"]], inplace=True)
    return prepare_qat(net, inplace=True)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.ao.quantization
@pytest.mark.parametrize("build", [_MomentumEncoder, _qat_conv_bn], ids=["momentum-encoder", "qat-convbn"])
def test_parameters_read_before_their_module_runs_count_on_their_module(build) -> None:  # type: ignore[no-untyped-def]
    """A parameter first read outside its module (recorded in that call) counts on the module
    that holds it, as in torchinfo: the row of ``k.0`` showed ``--`` and the network the key
    encoder's parameters; ``0.bn`` said ``tied: 0.bn.weight`` (its own) and counted half of them,
    its mult-adds counted ``bn.weight`` as an RNN's weight.  Rows and totals equal torchinfo's."""
    torchinfo = pytest.importorskip("torchinfo")
    net = build()
    torch.manual_seed(0)
    two = isinstance(net, _MomentumEncoder)
    args = [torch.randn(4, 6), torch.randn(4, 6)] if two else [torch.randn(2, 3, 6, 6)]
    with restored(net):
        theirs = torchinfo.summary(net, input_data=args, verbose=0, depth=99)
    rec = torchrecorder.record(net, "net", input_data=tuple(args))
    stats = Stats(rec)
    rows = layer_rows(rec)
    infos = theirs.summary_list
    assert [row.label for row in rows] == [f"{info.depth}-{info.depth_index}" for info in infos]
    assert [stats.mult_adds(row) for row in rows] == [
        info.macs if info.is_leaf_layer else 0 for info in infos]
    assert sum(stats.mult_adds(row) for row in rows) == theirs.total_mult_adds > 0
    assert [stats.subtree(row) for row, info in zip(rows, infos, strict=True) if info.is_leaf_layer] == [
        info.num_params for info in infos if info.is_leaf_layer]
    text = rec.summary(columns=["params", "mult_adds"], fold=False)
    assert "tied:" not in text
    root = text.splitlines()[3]
    assert root.startswith("net (") and root.split()[-2:] == ["--", "--"]  # the network holds none
    assert f"Total params: {sum(p.numel() for p in net.parameters()):,}" in text


def test_tied_names_the_parameter_the_module_holds_not_one_it_reads() -> None:
    """``dec`` holds ``enc.table`` (tied, never read by it) and reads ``enc.fc.weight`` (not
    its own): counting the elements its call did not record named the weight it reads."""
    from .test_param_lift import Borrowing

    rec = torchrecorder.record(Borrowing(), "b", input_data=torch.randn(2, 4))
    for graph in (rec, torchrecorder.loads_json(rec.to_json())):
        line = next(row for row in graph.summary().splitlines() if "dec (Borrower)" in row)
        assert "tied: enc.table " in line and "enc.fc.weight" not in line
