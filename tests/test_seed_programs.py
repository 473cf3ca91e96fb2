"""Post-processing programs written for torchrecorder 1.0.3 (``tests/seed_programs.py``) give
1.0.3's answers: ``node.subnets`` and ``node.parent`` hold the recorded objects (a module
tree built with ``isinstance(s, nn.Module)``, ``ParamNode.parent`` the owning module), and
``isinstance(n, LayerNode)`` counts the layers, not the context.  The answers of the original
package are in ``tests/data/seed103.json`` (``tests/data/record_seed103.py``)."""

from __future__ import annotations

import gc
import json
import weakref
from collections import Counter
from pathlib import Path

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.export import from_dict, to_dict
from torchrecorder.nodes import LayerNode, ScopeNode

from . import seed_programs
from .seed_models import MODELS

SEED = json.loads((Path(__file__).parent / "data" / "seed103.json").read_text())


@pytest.fixture(scope="module")
def recorded() -> dict[str, tuple[torchrecorder.Recorder, nn.Module]]:
    out = {}
    for name, (factory, shape) in MODELS.items():
        torch.manual_seed(0)
        net = factory()
        out[name] = (torchrecorder.record(net, name, shape), net)
    return out


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("program", ["module_tree", "parameter_owners", "ancestors"])
def test_subnets_and_parent_hold_objects_as_in_103(recorded, model: str, program: str) -> None:
    rec, net = recorded[model]
    got = json.loads(json.dumps(getattr(seed_programs, program)(rec, net)))
    assert got == SEED[model]["programs"][program]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_layer_loops_count_what_103_counted(recorded, model: str) -> None:
    rec, _ = recorded[model]
    # the one deliberate difference: a module called twice is a layer per call (1.0.3: one);
    # the CNN's residual block calls its ReLU twice
    later = Counter(n.type_name for n in rec.layers() if n.call_index > 1)
    assert seed_programs.layer_count(rec) == SEED[model]["programs"]["layer_count"] + sum(later.values())
    assert Counter(seed_programs.layer_types(rec)) == Counter(SEED[model]["programs"]["layer_types"]) + later
    assert (model == "cnn") == bool(later)
    assert "NoneType" not in seed_programs.layer_types(rec)  # the context is no layer


def test_every_entry_of_subnets_and_every_parent_finds_its_node(recorded) -> None:
    for rec, _ in recorded.values():
        for node in rec.nodes.values():
            if node.parent_key is not None:
                assert rec.nodes[node.parent] is rec.nodes[node.parent_key]
            else:
                assert node.parent is None
            subnets = getattr(node, "subnets", None)
            if subnets is not None:
                assert [rec.nodes[s].key for s in subnets] == list(node.subnet_keys)
                assert all(s in subnets for s in subnets) and len(subnets) == len(node.subnet_keys)


def test_the_objects_are_what_fn_reads(recorded) -> None:
    rec, net = recorded["cnn"]
    kinds = {type(s).__name__ for s in rec.nodes[net.block].subnets}
    assert kinds >= {"Conv2d", "ReLU", "Parameter", "Tensor", "AddBackward0"} - {"Parameter"}
    for s in rec.nodes[net.stem].subnets:
        assert rec.nodes[s].fn is s  # the parameter, as in 1.0.3
    for s in rec.nodes[net].subnets:
        assert rec.nodes[s].fn is s  # modules, tensors (meta), operations: the same objects


def test_a_module_called_twice_keeps_both_calls_apart() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.shared = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.shared(self.shared(x))

    net = Twice()
    rec = torchrecorder.record(net, "twice", (1, 4))
    first, second = rec.calls_of(net.shared)
    subnets = list(rec.nodes[net].subnets)
    # the module stands for its first call (rec.nodes[module] is the first call); later calls by key
    assert net.shared in subnets and second.key in subnets
    assert rec.nodes[net.shared] is first and rec.nodes[second.key] is second
    inner = [rec.nodes[k] for k in second.subnet_keys if rec.nodes[k].kind == "layer"]
    assert inner and all(n.parent == second.key and rec.nodes[n.parent] is second for n in inner)
    assert all(rec.nodes[n.parent] is first for k in first.subnet_keys
               if (n := rec.nodes[k]).kind == "layer")


def test_objects_made_for_103_keep_nothing_alive() -> None:
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    x = torch.randn(2, 4)
    with torchrecorder.recording(net, "net") as rec:
        y = net(x)
    ref = weakref.ref(y)
    metas = [s for s in rec.nodes[net].subnets if isinstance(s, torch.Tensor)]
    assert metas and all(m.device.type == "meta" for m in metas)
    del y
    gc.collect()
    assert ref() is None  # the activation went; the view holds shapes only


def test_loaded_graph_falls_back_to_keys() -> None:
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    rec = torchrecorder.record(net, "net", (1, 4))
    loaded = from_dict(json.loads(json.dumps(to_dict(rec))))
    layer = loaded.nodes["0"]
    assert layer.parent == "net"  # no module: the key, which finds the node
    assert [loaded.nodes[s].key for s in loaded.nodes["net"].subnets] == list(loaded.nodes["net"].subnet_keys)
    weight = loaded.nodes["0.weight"]
    assert weight.parent == "0" and loaded.nodes[weight.parent] is layer


def test_setting_parent_takes_a_key_a_node_or_an_object() -> None:
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    rec = torchrecorder.record(net, "net", (1, 4))
    relu = rec.nodes["1"]
    relu.parent = net
    assert relu.parent_key == "net"
    relu.parent = rec.nodes["net"]
    assert relu.parent_key == "net"
    with pytest.raises(KeyError, match="not part of this recording"):
        relu.parent = nn.Linear(1, 1)
    assert relu.parent_key == "net"


def test_the_context_is_a_scope_not_a_layer(recorded) -> None:
    rec, net = recorded["mlp"]
    context = rec.nodes[None]
    assert isinstance(context, ScopeNode) and not isinstance(context, LayerNode)
    assert all(isinstance(n, ScopeNode) for n in rec.layers())
    assert context.parent is None and net in context.subnets  # the root module's call, by its module
    assert [n.key for n in rec.nodes.values() if isinstance(n, LayerNode)] == [n.key for n in rec.layers()]
