"""Render a small residual CNN to figures/example.svg (the README's first command)."""

import torch
from torch import nn

import torchrecorder


class Residual(nn.Module):
    """conv-bn-relu twice, plus the input (the add runs outside any submodule)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


net = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1),
    Residual(16),
    Residual(16),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(16, 10),
)

if __name__ == "__main__":
    path = torchrecorder.render_network(net, "example", (1, 3, 32, 32), "figures", render_depth=2)
    print(f"wrote {path}")
    print(torchrecorder.record(net, "example", (1, 3, 32, 32)))
