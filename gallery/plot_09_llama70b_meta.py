"""
A 70-billion-parameter Llama on the meta device, folded
=======================================================

On ``torch.device("meta")`` parameters and activations have shapes and dtypes
but no storage, so the architecture of a model far larger than the machine can
be recorded and drawn: this one takes well under a second and a few tens of
megabytes.  Its 80 identical decoder layers fold into one block marked ``×80``,
in the picture and in the table.
"""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import torchrecorder

config = LlamaConfig(hidden_size=8192, num_hidden_layers=80, num_attention_heads=64,
                     num_key_value_heads=8, intermediate_size=28672, vocab_size=128256)
with torch.device("meta"):
    model = LlamaForCausalLM(config)
print(f"{sum(p.numel() for p in model.parameters()) / 1e9:.1f} billion parameters")

ids = torch.zeros(1, 128, dtype=torch.long, device="meta")
rec = torchrecorder.record(model, "llama-70b", input_data=ids)
print(rec.summary(depth=3))

# %%
# At depth 3 the folded decoder layer opens into attention and MLP:
torchrecorder.make_dot(rec, render_depth=3)
