"""What the engine keeps of each operation torch counts FLOPs for: one flat tuple per operation,
nothing made per parameter or data tensor, read back by opargs.unpack as spec_of would give it."""

from __future__ import annotations

import pickle

import torch
from torch import nn

import torchrecorder
from torchrecorder.opargs import TENSOR, TensorSpec, spec_of, unpack


def test_a_linear_layer_is_kept_flat_its_parameters_as_themselves() -> None:
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    rec = torchrecorder.record(net, "net", (3, 4))
    assert rec.op_args is not None and set(rec.op_args) == {"0/linear", "2/linear"}
    kept = rec.op_args["0/linear"]
    # (call, callable, kwargs, TENSOR, shape, dtype, requires_grad, weight, bias)
    assert kept[0] == "0" and kept[2] is None
    assert kept[3] is TENSOR and kept[4] == (3, 4) and kept[5] is torch.float32
    assert kept[7] is net[0].weight and kept[8] is net[0].bias
    assert not any(isinstance(v, TensorSpec) for v in kept)
    # the input's shape is the graph's own shared tuple, not one made for it
    assert kept[4] is rec.nodes[next(a for a, b in rec.links if b == "0/linear")].shape


def test_unpack_gives_what_spec_of_gives() -> None:
    net = nn.Conv2d(3, 4, 3, stride=2, groups=1)
    x = torch.randn(1, 3, 9, 9, requires_grad=True)
    rec = torchrecorder.record(net, "conv", input_data=x, backward=True)
    assert rec.op_args is not None
    (kept,) = rec.op_args.values()
    scope, _, args, kwargs = unpack(kept)
    assert scope == "conv" and kwargs is None
    assert args == spec_of((x, net.weight, net.bias, *kept[-4:]))
    assert args[0].requires_grad and args[1].requires_grad  # kept with the backward graph
    # without it, no tensor is asked whether it requires gradients
    (plain,) = torchrecorder.record(net, "conv", input_data=x).op_args.values()  # type: ignore[union-attr]
    assert plain[6] is False
    assert pickle.loads(pickle.dumps(kept[:7]))[3] is TENSOR


def test_integer_tensors_and_lists_of_tensors_keep_their_specs() -> None:
    class Net(nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.einsum("ij,jk->ik", [a, b]) + torch.mm(a.long(), b.long()).float()

    a, b = torch.ones(2, 3), torch.ones(3, 2)
    rec = torchrecorder.record(Net(), "net", input_data=(a, b))
    assert rec.op_args is not None
    ein = unpack(rec.op_args["net/einsum"])[2]
    assert ein == ("ij,jk->ik", [TensorSpec((2, 3), torch.float32), TensorSpec((3, 2), torch.float32)])
    mm = unpack(rec.op_args["net/mm"])[2]
    assert mm[0].values == (1,) * 6  # an integer tensor keeps its values, as spec_of does
    assert torchrecorder.cost(rec).ops == {"net/einsum": 2 * 2 * 3 * 2, "net/mm": 2 * 2 * 3 * 2}
