"""
Attention maps of every layer, captured inside the modules
==========================================================

The attention probabilities of a transformer are the output of one ``softmax``
inside each attention module: no module returns them.  ``capture(model,
ops=...)`` reaches any operation by the key the recording gives it, here
``"transformer.h.*.attn/softmax"`` (the layer part is a pattern over module
names; ``"*/softmax"`` would take every softmax of the model).  Only the chosen
attention modules run under a function mode; the rest of the model runs as in
a plain call.

A two-layer GPT-2 with random weights (built from a config; nothing is
downloaded) reads twelve tokens; each panel is one head of one layer.
"""

import torch
import transformers
from matplotlib.figure import Figure

import torchrecorder

transformers.logging.set_verbosity_error()
torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=100, n_positions=32,
                                 attn_implementation="eager", bos_token_id=0, eos_token_id=0,
                                 initializer_range=0.4)  # larger random weights: sharper maps
model = transformers.GPT2LMHeadModel(config).eval()
ids = torch.randint(0, 100, (1, 12), generator=torch.Generator().manual_seed(1))

# %%
# The keys the graph shows for the operations inside the first attention module:
rec = torchrecorder.record(model, "gpt2", input_data=ids)
print([k for k in rec.nodes if isinstance(k, str) and k.startswith("transformer.h.0.attn/")])

# %%
# Capture the softmax of every layer, then draw each head's map:
# sphinx_gallery_thumbnail_number = 2
with torch.no_grad(), torchrecorder.capture(model, ops="transformer.h.*.attn/softmax", rec=rec) as cap:
    model(ids)
print(cap.keys())

maps = Figure(figsize=(8, 4.2), layout="constrained")
axes = maps.subplots(len(cap), config.n_head)
for row, key in enumerate(cap.keys()):
    probs = cap[key][0]  # (heads, queries, keys) of the one sequence
    for head in range(config.n_head):
        ax = axes[row, head]
        ax.imshow(probs[head], cmap="viridis", vmin=0, vmax=1)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(f"layer {row}, head {head}", fontsize=8)
maps.suptitle("attention probabilities (rows: queries, columns: keys)", fontsize=9)
