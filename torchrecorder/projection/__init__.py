"""The drawn graph: what every renderer shows of a graph, computed once and shared.

* :mod:`~torchrecorder.projection.drawn`: :class:`Projection` (expanded layers,
  drawn children, re-attached edges, edge tensors, out-degrees) and the kind
  vocabulary of nodes;
* :mod:`~torchrecorder.projection.fold`: runs of structurally identical blocks
  drawn once (:class:`FoldPlan`);
* :mod:`~torchrecorder.projection.loops`: repeated operation patterns (the
  iterations of a Python loop) drawn once, as a :class:`LoopNode` group.
"""

from .drawn import (
    AUTO_FOLD_MIN,
    DATA_MOVEMENT_OPS,
    NODE_KINDS,
    FoldRepeats,
    Projection,
    default_expanded,
    fold_min,
    is_passed_tensor,
    kind_of,
)
from .fold import FoldPlan
from .loops import LoopNode, iterations_text
from .structures import BlockStructures, structure_ids

__all__ = [
    "AUTO_FOLD_MIN",
    "DATA_MOVEMENT_OPS",
    "BlockStructures",
    "NODE_KINDS",
    "FoldPlan",
    "FoldRepeats",
    "LoopNode",
    "Projection",
    "default_expanded",
    "fold_min",
    "is_passed_tensor",
    "iterations_text",
    "kind_of",
    "structure_ids",
]
