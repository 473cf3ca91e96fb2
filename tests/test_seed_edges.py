"""``rec.edges`` read as 1.0.3 code reads it (issue 32, item 8): ``(from, to, timestamp)``
triples sorted by ``e[2]``, each end looked up in ``rec.nodes``.

The recording order stands in for 1.0.3's timestamp; today's code reads the pairs in
``rec.links``.  What the program gets is compared with what the same program got from
torchrecorder 1.0.3 (``tests/data/seed103.json``, whose edges per depth 1.0.3's own program
also gives), by 1.0.3's node names (:func:`torchrecorder.seed.seed_names`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import torchrecorder
from torchrecorder.seed import seed_names

from .seed_models import MODELS
from .test_seed_view import AUTOGRAD_PIECES

SEED = json.loads((Path(__file__).parent / "data" / "seed103.json").read_text())


@pytest.fixture(scope="module")
def rec() -> torchrecorder.Recorder:
    factory, shape = MODELS["mlp"]
    torch.manual_seed(0)
    return torchrecorder.record(factory(), "mlp", shape)


def edges_by_depth(rec, depth):
    """A 1.0.3 user's program: the edges in the order they were recorded, each end lifted to
    its enclosing node of depth <= ``depth`` through ``node.parent``."""

    def lift(node):
        while node.depth > depth:
            node = rec.nodes[node.parent]
        return node

    out = []
    for a, b, t in sorted(rec.edges, key=lambda e: e[2]):
        fnode, tnode = lift(rec.nodes[a]), lift(rec.nodes[b])
        if fnode is not tnode:
            out.append((fnode, tnode, t))
    return out


def _without_pieces(edges):
    """1.0.3's edges with autograd's pieces of one operation (``weight -> TBackward0 ->
    AddmmBackward0``) joined into one edge (``weight -> AddmmBackward0``), as recorded here."""
    edges = {tuple(e) for e in edges}
    pieces = {n for e in edges for n in e if n.split("-")[0] in AUTOGRAD_PIECES - {"AddmmBackward0"}}
    for piece in pieces:
        into = {a for a, b in edges if b == piece}
        out = {b for a, b in edges if a == piece}
        edges = {e for e in edges if piece not in e} | {(a, b) for a in into for b in out}
    return edges


def test_edges_unpack_as_triples_in_recording_order(rec):
    triples = list(rec.edges)
    assert len(rec.edges) == len(rec.links) == len(triples) > 10
    assert [(a, b) for a, b, _ in triples] == list(rec.links)
    assert [t for _, _, t in triples] == list(range(len(triples)))
    assert rec.edges[0] == triples[0] and triples[-1] in rec.edges
    # 1.0.3's timestamps grew as the recording went: an edge into a node comes before its edges out
    first_out = {}
    for a, _, t in triples:
        first_out.setdefault(a, t)
    assert all(t < first_out.get(b, len(triples)) for _, b, t in triples)


@pytest.mark.parametrize("depth", [1, 2])
def test_a_1_0_3_program_gets_1_0_3s_edges(rec, depth):
    names = seed_names(rec)
    got = [(names[f.key], names[t.key]) for f, t, _ in edges_by_depth(rec, depth)]
    want = SEED["mlp"]["depths"][str(depth)]["edges"]
    if depth == 1:  # layers and the tensors between them: exactly 1.0.3's
        assert sorted(set(got)) == sorted(map(tuple, want))
    else:  # operations and parameters: 1.0.3's less autograd's pieces of one operation
        assert set(got) == _without_pieces(want)
        assert len(set(got)) == len(want) - 3 == 16  # the three weight transposes of 1.0.3


def test_edges_are_read_only_and_follow_add_edge():
    factory, shape = MODELS["mlp"]
    rec = torchrecorder.record(factory(), "mlp", shape)
    with pytest.raises(AttributeError):
        rec.edges = []
    assert not hasattr(rec.edges, "add")
    n = len(rec.edges)
    rec.add_edge("input:input", "4/linear")  # 1.0.3's API, by key
    assert rec.edges[-1] == ("input:input", "4/linear", n) and ("input:input", "4/linear") in rec.links
