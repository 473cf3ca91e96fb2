"""A parameter of a collapsed module that something outside the module reads (a momentum
encoder's update, MAML's ``p - lr * g``, ``x @ self.emb.weight.T`` after ``self.emb(ids)``) is
drawn beside the module's box, with its edges, as one read before the module's call is; one read
only inside its module (or inside another call of it) stays hidden."""

from __future__ import annotations

import torch
from torch import Tensor, nn

import torchrecorder
from torchrecorder.renderer import GraphvizRenderer

from .dot_parse import parse_dot


class ReadAfter(nn.Module):
    """fc's weight read by operations outside fc, after fc ran."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        y = self.fc(x)
        w = self.fc.weight * 0.5 + 1.0
        return y + x @ w


class ReadBefore(ReadAfter):
    """The same, with the weight read before fc's call (drawn outside fc's box already)."""

    def forward(self, x: Tensor) -> Tensor:
        w = self.fc.weight * 0.5 + 1.0
        y = self.fc(x)
        return y + x @ w


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.Tanh()

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.fc(x))


class NestedRead(nn.Module):
    """A parameter two modules down read by the network after the encoder ran."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = Encoder()

    def forward(self, x: Tensor) -> Tensor:
        y = self.enc(x)
        return y + x @ (self.enc.fc.weight * 0.5 + 1.0)


class Blocks(nn.Module):
    """Three identical blocks, each reading its fc's weight after calling fc."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[ReadAfter() for _ in range(3)])

    def forward(self, x: Tensor) -> Tensor:
        return self.blocks(x)


class Shared(nn.Module):
    """One Linear called three times: its later calls read the parameters made in its first."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        for _ in range(3):
            x = torch.relu(self.shared(x))
        return x


def _rec(net: nn.Module) -> torchrecorder.Recorder:
    torch.manual_seed(0)
    return torchrecorder.record(net, type(net).__name__, input_data=torch.randn(2, 4))


def _drawn(rec: torchrecorder.Recorder, depth: int, **options: object) -> tuple[set[tuple[str, str]], dict]:
    dot = parse_dot(torchrecorder.make_dot(rec, depth, **options).source)  # type: ignore[arg-type]
    return set(dot.edges), dot.node_attrs


def test_a_parameter_read_after_its_module_is_drawn_beside_its_box() -> None:
    rec = _rec(ReadAfter())
    for depth in (1, 2):
        edges, nodes = _drawn(rec, depth)
        assert {("fc.weight", "fc"), ("fc.weight", "ReadAfter/mul"), ("ReadAfter/mul", "ReadAfter/add"),
                ("ReadAfter/add", "ReadAfter/matmul"), ("ReadAfter/matmul", "ReadAfter/add_1"),
                ("fc", "ReadAfter/add_1")} <= edges, depth
        assert ">fc.weight<" in nodes["fc.weight"]["label"]
        # in the network's group, just before the box it is a parameter of
        renderer = GraphvizRenderer(rec, depth)
        kids = [n.key for n in renderer.children(rec.nodes["ReadAfter"])]
        assert kids.index("fc.weight") == kids.index("fc") - 1
        assert renderer.projection.beside(rec.nodes["fc.weight"]) is rec.nodes["fc"]
    # every operation drawn: the parameter's edges are there too
    edges, _ = _drawn(rec, 1, all_ops=True)
    assert ("fc.weight", "ReadAfter/mul") in edges


def test_read_after_looks_as_read_before() -> None:
    """Both orders draw the same nodes, edges and labels (the ops' source lines aside)."""
    after, before = _rec(ReadAfter()), _rec(ReadBefore())
    for depth in (1, 2):
        a = parse_dot(torchrecorder.make_dot(after, depth).source)
        b = parse_dot(torchrecorder.make_dot(before, depth).source)
        assert set(a.edges) == {tuple(x.replace("ReadBefore", "ReadAfter") for x in e) for e in b.edges}
        assert a.node_attrs["fc.weight"]["label"] == b.node_attrs["fc.weight"]["label"]


def test_a_nested_parameter_is_named_from_the_box_it_is_drawn_beside() -> None:
    rec = _rec(NestedRead())
    edges, nodes = _drawn(rec, 1)  # enc a box: the parameter beside it, named enc.fc.weight
    assert {("enc.fc.weight", "enc"), ("enc.fc.weight", "NestedRead/mul")} <= edges
    assert ">enc.fc.weight<" in nodes["enc.fc.weight"]["label"]
    edges, nodes = _drawn(rec, 2)  # enc open, fc a box inside it: fc.weight beside fc
    assert {("enc.fc.weight", "enc.fc"), ("enc.fc.weight", "NestedRead/mul")} <= edges
    assert ">fc.weight<" in nodes["enc.fc.weight"]["label"]
    renderer = GraphvizRenderer(rec, 2)
    assert "enc.fc.weight" in [n.key for n in renderer.children(rec.nodes["enc"])]


def test_parameters_read_only_inside_their_module_stay_hidden() -> None:
    for net in (Shared(), Encoder(), nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))):
        rec = _rec(net)
        for depth in (1, 2):
            _, nodes = _drawn(rec, depth)
            assert not [k for k in nodes if k.endswith((".weight", ".bias"))], (type(net).__name__, depth)


def test_folded_blocks_each_reading_their_parameter() -> None:
    rec = _rec(Blocks())
    edges, nodes = _drawn(rec, 3, fold_repeats=True)  # one block drawn for three
    params = [k for k in nodes if k.endswith("fc.weight")]
    assert params == ["blocks.0.fc.weight"]
    assert {("blocks.0.fc.weight", "blocks.0.fc"), ("blocks.0.fc.weight", "blocks.0/mul"),
            ("blocks.0/mul", "blocks.0/add"), ("blocks.0/add", "blocks.0/matmul")} <= edges
    edges, nodes = _drawn(rec, 3, fold_repeats=False)
    for i in range(3):
        assert {(f"blocks.{i}.fc.weight", f"blocks.{i}.fc"),
                (f"blocks.{i}.fc.weight", f"blocks.{i}/mul")} <= edges
    edges, nodes = _drawn(rec, 1, fold_repeats=True)  # the blocks read it inside: hidden
    assert not [k for k in nodes if k.endswith("fc.weight")]


def test_mermaid_draws_it_too() -> None:
    text = torchrecorder.make_mermaid(_rec(NestedRead()), 1)
    assert 'n_enc_fc_weight[("enc.fc.weight<br>4×4")]' in text
    assert "n_enc_fc_weight -.-> n_enc\n" in text and "n_enc_fc_weight -.-> n_NestedRead_mul" in text


class TiedHead(nn.Module):
    """An output projection tied to the embedding (GPT-2's lm_head): the head holds the weight."""

    def __init__(self, functional: bool = False) -> None:
        super().__init__()
        self.functional = functional
        self.emb = nn.Embedding(10, 4)
        self.mix = nn.Linear(4, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids: Tensor) -> Tensor:
        h = self.mix(self.emb(ids))
        return h @ self.emb.weight.T if self.functional else self.head(h)


def test_a_tied_head_holds_its_weight_and_a_functional_read_draws_it() -> None:
    torch.manual_seed(0)
    ids = torch.randint(0, 10, (2, 3))
    tied = torchrecorder.record(TiedHead(), "tied", input_data=ids)
    for depth in (1, 2, None):
        _, nodes = _drawn(tied, depth)
        assert "emb.weight" not in nodes, depth
    assert "lift" not in torchrecorder.make_html(tied, 1)._data  # the page's data is as before
    read = torchrecorder.record(TiedHead(functional=True), "read", input_data=ids)
    edges, nodes = _drawn(read, 1)
    assert {("emb.weight", "emb"), ("emb.weight", "read/T"), ("read/T", "read/matmul")} <= edges
    assert ">emb.weight<" in nodes["emb.weight"]["label"]


class Borrower(nn.Module):
    """Holds a large table tied to the encoder's (recorded there, never read here) and reads
    the encoder's ``fc.weight``, which is not its own."""

    def __init__(self, enc: nn.Module) -> None:
        super().__init__()
        self.table = enc.table
        self.__dict__["src"] = enc  # not a child

    def forward(self, x: Tensor) -> Tensor:
        return torch.nn.functional.linear(x, self.src.fc.weight)


class TableEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.table = nn.Parameter(torch.zeros(1000))

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(x) + self.table[:4]


class Borrowing(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = TableEncoder()
        self.dec = Borrower(self.enc)

    def forward(self, x: Tensor) -> Tensor:
        return self.dec(self.enc(x))


def test_a_module_holds_as_its_own_only_the_parameters_named_its_own() -> None:
    """``dec`` owns 1000 elements its call did not record (tied to ``enc.table``): counting
    elements took ``enc.fc.weight``, which ``dec`` reads, for one of its own and hid the read.
    The names decide, in the recording and in a JSON round trip."""
    rec = _rec(Borrowing())
    assert rec.nodes["enc.table"].held_as == ("dec.table",)
    assert rec.nodes["enc.fc.weight"].held_as == ()
    again = torchrecorder.loads_json(rec.to_json())
    assert again.nodes["enc.table"].held_as == ("dec.table",)
    assert again.nodes["enc.fc.weight"].held_as == ()
    for graph in (rec, again):
        edges, nodes = _drawn(graph, 1)
        assert {("enc.fc.weight", "enc"), ("enc.fc.weight", "dec")} <= edges
        assert "enc.table" not in nodes  # read only inside enc
        assert "lift" in torchrecorder.make_html(graph, 1)._data
    # a tied head still holds its weight, in a JSON round trip too
    torch.manual_seed(0)
    tied = torchrecorder.record(TiedHead(), "tied", input_data=torch.randint(0, 10, (2, 3)))
    assert tied.nodes["emb.weight"].held_as == ("head.weight",)
    _, nodes = _drawn(torchrecorder.loads_json(tied.to_json()), 1)
    assert "emb.weight" not in nodes
