"""
The interactive view
====================

:func:`torchrecorder.make_html` writes one self-contained HTML page (Graphviz
compiled to WebAssembly inside it, no server, no network): click a module to
open or close it, search by name, hover for shapes, download the view you
arranged as SVG or PNG.  In a notebook the page shows inline; here the
scraper embeds it in the documentation page.
"""

from torch import nn

import torchrecorder

net = nn.Sequential(
    nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU()),
    nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU()),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
)
rec = torchrecorder.record(net, "cnn", (1, 3, 32, 32))
page = torchrecorder.make_html(rec, render_depth=1)
print(repr(page))
