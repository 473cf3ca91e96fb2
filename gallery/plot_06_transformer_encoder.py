"""
nn.TransformerEncoder: a figure for a paper
===========================================

``preset="paper"`` draws in black and grey with a serif font and tight
spacing, for a paper's column; ``size="3.5,8"`` bounds the figure in inches.
Written with :func:`torchrecorder.render_network`, which records and writes
the file in one call; the scraper embeds files a block wrote.
"""

import tempfile

from torch import nn

import torchrecorder

layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
out_dir = tempfile.mkdtemp()

path = torchrecorder.render_network(encoder, "encoder", (2, 10, 64), out_dir, render_depth=2,
                                    preset="paper", size="3.5,8")
print(path)
