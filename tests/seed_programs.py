"""Programs written the way torchrecorder 1.0.3's users wrote them, post-processing
``rec.nodes``: a module tree built from ``node.subnets``, the owner of each parameter read
from ``ParamNode.parent``, layers counted with ``isinstance(n, LayerNode)``.

``tests/data/record_seed103.py`` runs them under the original torchrecorder 1.0.3 and keeps
their answers in ``tests/data/seed103.json``; ``tests/test_seed_programs.py`` runs them here
and compares.  Each returns plain data (names from the model itself, no node names), in an
order that does not depend on 1.0.3's sets.  Only torch and the node classes 1.0.3 had are
used.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from torch import nn

from torchrecorder.nodes import LayerNode, ParamNode


def _module_names(net: nn.Module) -> dict[int, str]:
    return {id(m): name or "<root>" for name, m in net.named_modules()}


def module_tree(rec: Any, net: nn.Module) -> dict[str, Any]:
    """The tree of modules, walked through ``subnets`` with ``isinstance(s, nn.Module)``."""
    names = _module_names(net)

    def walk(module: nn.Module) -> dict[str, Any]:
        return {names[id(s)]: walk(s) for s in rec.nodes[module].subnets if isinstance(s, nn.Module)}

    return {names[id(net)]: walk(net)}


def parameter_owners(rec: Any, net: nn.Module) -> list[list[str]]:
    """Each parameter with the module ``ParamNode.parent`` names and that module's node."""
    names = _module_names(net)
    params = {id(p): name for name, p in net.named_parameters()}
    out = set()
    for node in rec.nodes.values():
        if isinstance(node, ParamNode):
            owner = node.parent
            out.add((params[id(node.fn)], names[id(owner)], type(owner).__name__,
                     str(rec.nodes[owner].fn is owner)))
    return sorted(list(x) for x in out)


def ancestors(rec: Any, net: nn.Module) -> dict[str, list[str]]:
    """For each layer, the modules above it, climbing ``rec.nodes[node.parent]``."""
    names = _module_names(net)
    out = {}
    for node in rec.nodes.values():
        if isinstance(node, LayerNode):
            chain = []
            parent = node.parent
            while parent is not None:
                chain.append(names[id(parent)])
                parent = rec.nodes[parent].parent
            out[names[id(node.fn)]] = chain
    return out


def layer_count(rec: Any) -> int:
    """How many layers ``rec.nodes`` holds, counted with ``isinstance(n, LayerNode)``."""
    return len([n for n in rec.nodes.values() if isinstance(n, LayerNode)])


def layer_types(rec: Any) -> dict[str, int]:
    """The layers by the class of their ``fn``."""
    return dict(Counter(type(n.fn).__name__ for n in rec.nodes.values() if isinstance(n, LayerNode)))


def run_all(rec: Any, net: nn.Module) -> dict[str, Any]:
    """Every program's answer for the recording ``rec`` of ``net``."""
    return {"module_tree": module_tree(rec, net), "parameter_owners": parameter_owners(rec, net),
            "ancestors": ancestors(rec, net), "layer_count": layer_count(rec),
            "layer_types": layer_types(rec)}
