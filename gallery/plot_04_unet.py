"""
A U-Net: skip connections, drawn left to right
==============================================

The encoder's feature maps are concatenated into the decoder (``torch.cat``
outside any submodule).  ``direction="LR"`` lays the graph out left to right,
which suits a wide page.
"""

import torch
from torch import nn

import torchrecorder


def double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU())


class UNet(nn.Module):
    def __init__(self, channels: int = 3, classes: int = 2, width: int = 16) -> None:
        super().__init__()
        self.down1 = double_conv(channels, width)
        self.down2 = double_conv(width, 2 * width)
        self.pool = nn.MaxPool2d(2)
        self.bottom = double_conv(2 * width, 4 * width)
        self.up2 = nn.ConvTranspose2d(4 * width, 2 * width, 2, stride=2)
        self.dec2 = double_conv(4 * width, 2 * width)
        self.up1 = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.dec1 = double_conv(2 * width, width)
        self.head = nn.Conv2d(width, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(x)
        d2 = self.down2(self.pool(d1))
        b = self.bottom(self.pool(d2))
        u2 = self.dec2(torch.cat([self.up2(b), d2], dim=1))
        u1 = self.dec1(torch.cat([self.up1(u2), d1], dim=1))
        return self.head(u1)


rec = torchrecorder.record(UNet(), "unet", (1, 3, 64, 64))
torchrecorder.make_dot(rec, render_depth=1, direction="LR")
