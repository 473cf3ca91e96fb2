"""Draw a 12-layer GPT-2 (tiny widths, random weights) with its repeated blocks folded.

Needs ``transformers``; nothing is downloaded.  Writes figures/gpt2.svg.
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

import torchrecorder

config = GPT2Config(n_layer=12, n_embd=64, n_head=4, vocab_size=1000, n_positions=128)
model = GPT2LMHeadModel(config).eval()
tokens = torch.randint(0, 1000, (1, 16))

if __name__ == "__main__":
    path = torchrecorder.render_network(model, "gpt2", None, "figures", input_data=tokens,
                                        render_depth=3)
    print(f"wrote {path}")
