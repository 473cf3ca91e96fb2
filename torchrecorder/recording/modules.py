"""What the recording engine knows of each module of the recorded model, read in one walk.

The index of a model recorded again is not read again: the last index of each model is
kept on its memo (:class:`ModuleIndex` on :class:`~.memo.ModelMemo`, by positions in the
model's walk: it keeps no model, module or tensor alive) and reused while the model is,
module for module and tensor for tensor, what it was: the same module objects under the
same paths, of the same classes, holding the same parameter and buffer objects under the
same names, of the same shapes.  That is checked on every recording, once for all users of
the memo, on the stamp that :func:`~.meta.check_model` reads in the walk the recording
makes anyway (:class:`~.meta.ModelWalk`); any difference (a module, parameter or buffer
added, removed or replaced, a ``.data`` of another shape) builds the index anew.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import starmap
from typing import Any, Optional

from torch import Tensor, nn
from torch.nn.parameter import is_lazy

from .meta import ModelWalk, ModuleInfo, ParamFacts, lazy_error, own_tensors, picker, shape_tuple, type_name

__all__ = ["ModuleIndex", "ModuleInfo", "index_modules", "outside_path"]


def index_modules(net: nn.Module, root_name: str, prefix: str, modules: dict[int, ModuleInfo],
                  params: dict[int, tuple[nn.Parameter, str]], buffers: dict[int, Tensor],
                  walk: Optional[list[tuple[str, nn.Module]]] = None) -> list[nn.Module]:
    """One walk of ``net``: each module's path, name, own parameters and the parameter and
    buffer counts of :class:`~torchrecorder.nodes.LayerNode` (into ``modules``, by ``id``),
    every parameter's first path (into ``params``, for parameters used outside their
    module) and every buffer, by ``id`` (into ``buffers``).

    The counts equal ``module.parameters(recurse=False)``, ``module.parameters()``
    and ``module.buffers(recurse=False)`` summed (a shared tensor counts once per
    module), without three generator walks per module call.

    ``walk``, when given, is ``list(net.named_modules(prefix=prefix, remove_duplicate=False))``
    made just before (by :func:`~torchrecorder.recording.meta.check_model`, which has refused
    uninitialized tensors already).

    Returns:
        the modules met for the first time, in walk order.

    Raises:
        TypeError: a parameter or buffer is uninitialized (a lazy module not called yet).
    """
    memo = None
    if isinstance(walk, ModelWalk) and not prefix and not modules and not params and not buffers:
        memo = walk.memo
        got = memo.index if memo is not None else None
        if got is not None and got.root_name == root_name:
            return got.fill(walk.objects, modules, params, buffers)
    first_path: list[tuple[str, ModuleInfo]] = []
    new: list[nn.Module] = []
    checked = walk is not None
    if walk is None:
        walk = list(net.named_modules(prefix=prefix, remove_duplicate=False))
    # each module's own parameters, by path: (path, [(id(parameter), numel)])
    owned: list[tuple[str, list[tuple[int, int]]]] = []
    occurrences = 0  # parameters met in this walk, and the distinct ones among them
    distinct: set[int] = set()
    for path, module in walk:
        mparams = module._parameters
        fresh: Optional[ModuleInfo] = None  # the module's info, when it is met for the first time
        if id(module) not in modules:
            info = fresh = ModuleInfo(path, path.rpartition(".")[2] if path else root_name, type_name(module))
            modules[id(module)] = info
            if module._buffers:
                info.buffers = own_tensors(module._buffers, module, path, checked)[1]
                buffers.update((id(b), b) for b in module._buffers.values() if b is not None)
            first_path.append((path, info))
            new.append(module)
        if not mparams:
            continue
        mine: list[tuple[int, int]] = []  # (id, numel) of each parameter slot of the module
        own: list[tuple[str, nn.Parameter, ParamFacts]] = []  # (dotted path, parameter, facts)
        for pname, param in mparams.items():
            if param is None or (prefix and not isinstance(param, nn.Parameter)):
                continue  # (a module met mid-pass, inside torch.func.functional_call: what it was given)
            ppath = f"{path}.{pname}" if path else pname
            if not checked and is_lazy(param):
                raise lazy_error(module, path, pname)
            pid = id(param)
            if pid not in params:
                params[pid] = (param, ppath)
            numel = param.numel()
            mine.append((pid, numel))
            own.append((ppath, param, (pname, shape_tuple(param), numel)))
            distinct.add(pid)
        if fresh is not None:
            fresh.params = tuple(own)
            fresh.num_params = sum(dict(mine).values())  # a tensor under two names counts once
        occurrences += len(mine)
        owned.append((path, mine))
    totals = _added_totals(owned, walk)
    if len(distinct) != occurrences:  # a parameter reachable by two paths (tied weights)
        _count_shared_once(totals, owned)
    for path, info in first_path:
        info.total = totals.get(path, 0)
    if memo is not None and isinstance(walk, ModelWalk):
        memo.index = ModuleIndex(root_name, walk.objects, new, modules, params, buffers)
    return new


class ModuleIndex:
    """The index of one model, as :func:`index_modules` made it, by positions in the
    objects of the model's stamp (:class:`~.meta.ModelWalk`): it keeps nothing of the model
    alive, and is valid for any walk of the same stamp."""

    __slots__ = ("buffers", "ids", "infos", "new", "owners", "params", "root_name")

    def __init__(self, root_name: str, objects: list[Any], new: list[nn.Module],
                 modules: dict[int, ModuleInfo], params: dict[int, tuple[nn.Parameter, str]],
                 buffers: dict[int, Tensor]) -> None:
        self.root_name = root_name
        at = {id(o): i for i, o in reversed(list(enumerate(objects)))}  # first position of each
        self.new = picker([at[id(m)] for m in new])
        # the ids are those of the objects at these positions in any walk of the same stamp
        # (the same objects, alive while the walk holds them): kept, not asked for again
        self.ids = [id(m) for m in new]
        # each module's ModuleInfo arguments, its parameters left out (``None``), and apart the
        # positions of the modules that own parameters with (dotted path, position, facts) each
        self.infos: list[tuple[Any, ...]] = []
        self.owners: list[tuple[int, tuple[tuple[str, int, ParamFacts], ...]]] = []
        for k, m in enumerate(new):
            info = modules[id(m)]
            if info.params:
                self.owners.append((k, tuple((ppath, at[id(p)], facts) for ppath, p, facts in info.params)))
            self.infos.append((info.path, info.name, info.type_name, (), info.num_params, info.total,
                               info.buffers))
        self.params = (list(params), picker([at[pid] for pid in params]),
                       [ppath for _, ppath in params.values()])
        kept = [b for b in buffers if b in at]
        self.buffers = (kept, picker([at[b] for b in kept]))

    def fill(self, objects: list[Any], modules: dict[int, ModuleInfo],
             params: dict[int, tuple[nn.Parameter, str]], buffers: dict[int, Tensor]) -> list[nn.Module]:
        """Fill the engine's dicts as :func:`index_modules` would, from the objects of the
        current walk (of the stamp the index was made from); fresh ``ModuleInfo``\\ s."""
        infos = list(starmap(ModuleInfo, self.infos))  # (one C loop)
        for k, own in self.owners:
            infos[k].params = tuple([(ppath, objects[j], facts) for ppath, j, facts in own])
        modules.update(zip(self.ids, infos, strict=True))
        pids, pget, ppaths = self.params
        params.update(zip(pids, zip(pget(objects), ppaths, strict=True), strict=True))
        bids, bget = self.buffers
        buffers.update(zip(bids, bget(objects), strict=True))
        return self.new(objects)


def _added_totals(owned: list[tuple[str, list[tuple[int, int]]]],
                  walk: list[tuple[str, nn.Module]]) -> dict[str, int]:
    """Parameter elements below each module path, every occurrence of a parameter counted:
    each module's own count added to every ancestor's, children before parents."""
    totals = {path: sum(n for _, n in mine) for path, mine in owned}
    for path, _ in reversed(walk):
        if path:
            n = totals.get(path)
            if n:
                parent = path.rpartition(".")[0]
                totals[parent] = totals.get(parent, 0) + n
    return totals


def _count_shared_once(totals: dict[str, int], owned: list[tuple[str, list[tuple[int, int]]]]) -> None:
    """Correct :func:`_added_totals` where a parameter occurs more than once below a module
    (registered under two names, in a module reachable by two paths, tied between modules):
    it counts once per module."""
    where: dict[int, list[str]] = {}  # id(parameter) -> the paths of the modules holding it
    numel: dict[int, int] = {}
    for path, mine in owned:
        for pid, n in mine:
            where.setdefault(pid, []).append(path)
            numel[pid] = n
    for pid, paths in where.items():
        if len(paths) < 2:
            continue
        seen: dict[str, int] = {}  # module path -> occurrences of this parameter below it
        for path in paths:
            owner = path
            while True:
                seen[owner] = seen.get(owner, 0) + 1
                if not owner:
                    break
                owner = owner.rpartition(".")[0]
        for owner, count in seen.items():
            if count > 1 and owner in totals:  # (paths above a prefixed walk's root have none)
                totals[owner] -= (count - 1) * numel[pid]


def outside_path(module: nn.Module, infos: Iterable[ModuleInfo]) -> str:
    """A path for a module called outside the model that came with none (a copy of one of its
    modules that ``forward`` made, see :func:`~.prehooks.hooked_copy`): its type's name,
    numbered from the second (``Linear``, ``Linear_2``), so that its calls and parameters are
    neither the root's (path ``""``) nor another module's."""
    taken = {info.path.partition(".")[0] for info in infos}
    base = type(module).__name__
    path, n = base, 1
    while path in taken:
        n += 1
        path = f"{base}_{n}"
    return path
