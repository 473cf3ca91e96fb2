"""
Where the compute goes
======================

``torchrecorder.cost(rec)`` gives every module call its forward FLOPs, counted
exactly as torch's ``FlopCounterMode`` counts them (attention and the matrix
products between modules included), its parameter bytes and the bytes of its
outputs, from the recording alone: nothing of the model runs again.
``make_dot(rec, stat="flops")`` colours the graph by them on a log scale.

A GPT-2 from a small config (random weights, nothing downloaded), recorded once
(the first figure is its plain drawing).
"""

# sphinx_gallery_thumbnail_number = 2

import os

import torch

import torchrecorder

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import transformers

cfg = transformers.GPT2Config(vocab_size=2000, n_positions=256, n_embd=128, n_layer=2, n_head=4,
                              bos_token_id=1, eos_token_id=2)
torch.manual_seed(0)
model = transformers.GPT2LMHeadModel(cfg).eval()
ids = torch.randint(0, cfg.vocab_size, (1, 128))
with torch.no_grad():
    rec = torchrecorder.record(model, "gpt2", input_kwargs={"input_ids": ids})

costs = torchrecorder.cost(rec)
print(costs.total)
print("attention of block 0:", costs["transformer.h.0.attn"])

# %%
# The table, with the cost columns in human units:
print(rec.summary(columns=["label", "output", "flops", "activation_bytes", "param_bytes"], depth=3))

# %%
# The graph coloured by FLOPs: the language-model head over a 2000-word vocabulary costs
# about as much as the two blocks' MLPs, and each attention's own matmuls (``q @ k``,
# ``a @ v``) are in its number.
torchrecorder.make_dot(rec, render_depth=3, stat="flops")
