"""What the recording engine knows of each module of the recorded model, read in one walk."""

from __future__ import annotations

from typing import Optional

from torch import nn

from .meta import ModuleInfo, own_tensors, type_name

__all__ = ["ModuleInfo", "index_modules"]


def index_modules(net: nn.Module, root_name: str, prefix: str, modules: dict[int, ModuleInfo],
                  params: dict[int, tuple[nn.Parameter, str]], buffers: set[int],
                  walk: Optional[list[tuple[str, nn.Module]]] = None) -> list[nn.Module]:
    """One walk of ``net``: each module's path, name, own parameters and the parameter and
    buffer counts of :class:`~torchrecorder.nodes.LayerNode` (into ``modules``, by ``id``),
    every parameter's first path (into ``params``, for parameters used outside their
    module) and the ``id`` of every buffer (into ``buffers``).

    The counts equal ``module.parameters(recurse=False)``, ``module.parameters()``
    and ``module.buffers(recurse=False)`` summed (a shared tensor counts once per
    module), without three generator walks per module call.

    ``walk``, when given, is ``list(net.named_modules(prefix=prefix, remove_duplicate=False))``
    made just before (by :func:`~torchrecorder.recording.meta.check_model`).

    Returns:
        the modules met for the first time, in walk order.
    """
    first_path: list[tuple[str, ModuleInfo]] = []
    new: list[nn.Module] = []
    if walk is None:
        walk = list(net.named_modules(prefix=prefix, remove_duplicate=False))
    # each module's own parameters, by path: (path, {id(parameter): numel})
    owned: list[tuple[str, dict[int, int]]] = []
    occurrences = 0  # parameters met in this walk, and the distinct ones among them
    distinct: set[int] = set()
    for path, module in walk:
        info = modules.get(id(module))
        if info is None:
            info = ModuleInfo(path, path.rpartition(".")[2] if path else root_name, type_name(module))
            modules[id(module)] = info
            if module._parameters:
                own, info.num_params = own_tensors(module._parameters, module, path)
                info.params = tuple((f"{path}.{pname}" if path else pname, p) for pname, p in own)
            if module._buffers:
                info.buffers = own_tensors(module._buffers, module, path)[1]
                buffers.update(id(b) for b in module._buffers.values() if b is not None)
            first_path.append((path, info))
            new.append(module)
        if not module._parameters:
            continue
        mine: dict[int, int] = {}
        for pname, param in module._parameters.items():
            if param is None:
                continue
            if id(param) not in params:
                params[id(param)] = (param, f"{path}.{pname}" if path else pname)
            mine[id(param)] = param.numel()
            distinct.add(id(param))
            occurrences += 1
        owned.append((path, mine))
    if len(distinct) == occurrences and len({id(m) for _, m in walk}) == len(walk):
        totals = _added_totals(owned, walk)  # nothing shared: a subtree's total is a sum
    else:
        totals = _distinct_totals(owned)
    for path, info in first_path:
        info.total = totals.get(path, 0)
    return new


def _added_totals(owned: list[tuple[str, dict[int, int]]],
                  walk: list[tuple[str, nn.Module]]) -> dict[str, int]:
    """Parameter elements below each module path, when no parameter or module is reachable by
    two paths: each module's own count added to every ancestor's, children before parents."""
    totals = {path: sum(mine.values()) for path, mine in owned}
    for path, _ in reversed(walk):
        if path:
            n = totals.get(path)
            if n:
                parent = path.rpartition(".")[0]
                totals[parent] = totals.get(parent, 0) + n
    return totals


def _distinct_totals(owned: list[tuple[str, dict[int, int]]]) -> dict[str, int]:
    """Parameter elements below each module path, each parameter counted once per module."""
    # dotted module path -> {id(parameter): numel} of the subtree below it
    subtree: dict[str, dict[int, int]] = {}
    for path, mine in owned:
        owner = path
        while True:
            ids = subtree.get(owner)
            if ids is None:
                ids = subtree[owner] = {}
            ids.update(mine)
            if not owner:
                break
            owner = owner.rpartition(".")[0]
    return {path: sum(ids.values()) for path, ids in subtree.items()}
