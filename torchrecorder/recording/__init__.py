"""Recording: the only layer that touches live modules, tensors, hooks and torch's function mode.

* :mod:`~torchrecorder.recording.engine`: :class:`Engine`, which fills a
  :class:`~torchrecorder.graph.Graph` during a forward pass;
* :mod:`~torchrecorder.recording.ops`: the torch function mode that sees every
  operation;
* :mod:`~torchrecorder.recording.hooks`: the original torchrecorder's hook-level
  functions (``prehook``, ``posthook``, ``op_acc``, ...);
* :mod:`~torchrecorder.recording.inputs`: the call's arguments, made from shapes or data;
* :mod:`~torchrecorder.recording.state`: the model's state put back after the pass;
* :mod:`~torchrecorder.recording.fastpath`: calls that run without the recorder
  inside (PyTorch's fused fast paths, TorchScript), drawn as closed boxes;
* :mod:`~torchrecorder.recording.tokens`: integer inputs made from shapes (valid
  token ids) and boolean masks.
"""

from .engine import Engine
from .hooks import leaf_dummy, op_acc, param_acc, posthook, prehook, tensor_acc
from .inputs import (
    InputShapes,
    inputs_listed,
    keyword_data,
    keyword_inputs,
    list_argument_hint,
    make_inputs,
    normalise_shapes,
)
from .state import gc_paused, model_state_kept
from .tokens import integer_inputs, is_integer_dtype, mixed_inputs

__all__ = [
    "Engine",
    "InputShapes",
    "gc_paused",
    "inputs_listed",
    "integer_inputs",
    "is_integer_dtype",
    "keyword_data",
    "keyword_inputs",
    "leaf_dummy",
    "list_argument_hint",
    "make_inputs",
    "mixed_inputs",
    "model_state_kept",
    "normalise_shapes",
    "op_acc",
    "param_acc",
    "posthook",
    "prehook",
    "tensor_acc",
]
