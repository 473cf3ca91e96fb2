"""Which module a parameter is counted on, shared by the layer table and the figures.

A parameter is recorded once, in the first call that reads it.  It is counted on the module
that holds it, where that module was called (:attr:`ParamHolders.owners`); a module whose own
parameter was counted on another, earlier module (an output projection tied to the embedding)
holds it *tied* (:attr:`ParamHolders.tied`) and does not count it again.  The layer table
(:mod:`torchrecorder.summary_rows`) shows such a module's count as ``--``; the figures count
a module's parameters by the same rule (:meth:`ParamHolders.counted_total`), so that the
boxes inside a cluster add up to the cluster's count.
"""

from __future__ import annotations

from typing import Optional

from ..graph import Graph
from ..nodes import Key, LayerNode, OpNode, ParamNode

__all__ = ["ParamHolders"]


def _inside(path: str, outer: str) -> bool:
    """Whether the module at dotted ``path`` is ``outer`` or inside it (``""``: the network)."""
    return not outer or path == outer or path.startswith(outer + ".")


class ParamHolders:
    """The module each parameter of a recording is counted on, and the parameters tied.

    Reads node metadata only, so a graph loaded from JSON gives the same answer.

    Attributes:
        owners: parameter key -> the first call of the module that holds it, where that is
            not the call that recorded it.
        local: parameter key -> its name in that module (``weight``).
        own: first call's key -> parameter elements counted on that call.
        first: ``"path\\0name"`` -> the module's first call.
        tied: first call's key -> its parameters counted on an earlier module.
    """

    def __init__(self, rec: Graph) -> None:
        nodes = rec.nodes
        layers: list[LayerNode] = []  # (one pass over the nodes: a drawing of a new recording pays it)
        params: list[ParamNode] = []
        for node in nodes.values():
            if isinstance(node, LayerNode):
                layers.append(node)
            elif isinstance(node, ParamNode):
                params.append(node)
        self.owners: dict[Key, Key] = {}
        self.local: dict[Key, str] = {}
        self._find_owners(layers, params)
        self.own: dict[Key, int] = {}
        owners, own = self.owners, self.own
        for param in params:
            owner = owners.get(param.key, param.parent_key)
            own[owner] = own.get(owner, 0) + param.numel
        self.first: dict[str, LayerNode] = {}
        self.tied: dict[Key, list[ParamNode]] = {}
        # module path -> the parameters it holds under another module's name, where the graph
        # knows the names (ParamNode.held_as); else call key -> parameters its own ops read,
        # of which those filling the count of its parameters not recorded on it are taken
        named = any(p.held_as is not None for p in params)
        held: dict[str, list[ParamNode]] = {}
        users: dict[Key, list[ParamNode]] = {}
        if named:
            for param in params:
                for other in param.held_as or ():
                    held.setdefault(other.rpartition(".")[0], []).append(param)
        else:
            for src, dst in rec.links:
                read, op = nodes.get(src), nodes.get(dst)
                if isinstance(read, ParamNode) and isinstance(op, OpNode):
                    users.setdefault(op.parent_key, []).append(read)
        for layer in layers:
            ident = f"{layer.path}\0{layer.name}"  # (self.ident, inlined)
            if ident in self.first:
                continue
            self.first[ident] = layer
            missing = layer.num_params - self.own.get(layer.key, 0)
            if missing <= 0:
                continue
            # parameters of this module that were recorded earlier, on another module
            mine = self.tied.setdefault(layer.key, [])
            for param in held.get(layer.path, ()) if named else users.get(layer.key, ()):
                if missing <= 0:
                    break
                if param.parent_key != layer.key and all(p.path != param.path for p in mine):
                    mine.append(param)
                    missing -= param.numel
            if not mine:
                del self.tied[layer.key]
        self._nodes = nodes
        self._outside: Optional[dict[str, int]] = None

    def _find_owners(self, layers: list[LayerNode], params: list[ParamNode]) -> None:
        """Fill :attr:`owners` and :attr:`local`.

        A parameter is recorded in the first call that reads it, which is not always a call
        of its own module: ``ConvBn2d`` of quantization-aware training reads ``bn.weight`` in
        its own ``forward`` before it calls ``bn``, a momentum encoder's parameters are
        updated in the network's ``forward`` before the encoder runs.  A parameter is counted
        on the module that holds it, as torchinfo does, where that module was called; a
        parameter of a module never called (DeBERTa's ``rel_embeddings``) stays on the call
        that read it, and a tied one (named after the module that recorded it) on that module.
        """
        first: dict[str, Key] = {}
        for layer in layers:
            first.setdefault(layer.path, layer.key)
        for node in params:
            if node.path:
                holder, _, name = node.path.rpartition(".")
                owner = first.get(holder)
                if owner is not None and owner != node.parent_key:
                    self.owners[node.key] = owner
                    self.local[node.key] = name

    def owner(self, param: ParamNode) -> Key:
        """The call ``param`` is counted on."""
        return self.owners.get(param.key, param.parent_key)

    @staticmethod
    def ident(layer: LayerNode) -> str:
        """What tells a module's calls from another module's: its path and its name."""
        return f"{layer.path}\0{layer.name}"

    def counted_total(self, layer: LayerNode) -> int:
        """Parameter elements of ``layer``'s module and the modules inside it, less those it or a
        module inside holds tied to a parameter counted outside it: what the layer table counts
        in that subtree.  ``layer.num_params_total`` where nothing inside is tied outside."""
        if not layer.num_params_total:
            return 0
        if self._outside is None:
            self._outside = self._tied_outside()
        return max(0, layer.num_params_total - self._outside.get(layer.path, 0))

    def _tied_outside(self) -> dict[str, int]:
        """Module path -> elements of the tied parameters held inside it whose owner is outside
        (each parameter once per path, however many modules inside hold it)."""
        seen: dict[str, set[Key]] = {}
        out: dict[str, int] = {}
        for key, params in self.tied.items():
            holder = self._nodes.get(key)
            if not isinstance(holder, LayerNode):
                continue
            for param in params:
                owner = self._nodes.get(self.owner(param))
                owner_path = owner.path if isinstance(owner, LayerNode) else ""
                path: Optional[str] = holder.path
                while path is not None:
                    if _inside(owner_path, path):
                        break  # this module and those around it hold the owner too
                    if param.key not in seen.setdefault(path, set()):
                        seen[path].add(param.key)
                        out[path] = out.get(path, 0) + param.numel
                    path = path.rpartition(".")[0] if path else None
        return out
