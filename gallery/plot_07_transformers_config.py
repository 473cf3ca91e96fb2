"""
A transformers model from its config: keyword inputs
====================================================

A Hugging Face model built from a config class has random weights and needs no
download.  ``forward`` takes keyword arguments (``attention_mask``), given with
``input_kwargs=``; the mask arithmetic on integer tensors is recorded too, so
the graph is connected from ``input_ids`` to the logits.
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

import torchrecorder

config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=64)
model = GPT2LMHeadModel(config).eval()
ids = torch.randint(0, config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(0))
mask = torch.ones_like(ids)

rec = torchrecorder.record(model, "gpt2", input_data=ids, input_kwargs={"attention_mask": mask})
torchrecorder.make_dot(rec, render_depth=3)

# %%
# The output is a ``ModelOutput``; its logits are the drawn output.  The summary
# folds nothing here (two layers), but shows each block's shapes:
print(rec.summary(depth=3))
