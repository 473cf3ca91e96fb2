"""
An LSTM tagger: token ids as input
==================================

Integer inputs have no gradient, and random normal numbers make no sense for
them.  Give real token ids with ``input_data=``, or ask for an integer dtype:
``dtype=torch.long`` makes random ids that are valid rows of every embedding
table of the model (the command line's ``--input-dtype int64`` does the same).
"""

import torch
from torch import nn

import torchrecorder


class LSTMTagger(nn.Module):
    def __init__(self, vocab: int = 1000, embed: int = 32, hidden: int = 64, tags: int = 9) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=2, batch_first=True)
        self.tagger = nn.Linear(hidden, tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embedding(tokens))
        return torch.log_softmax(self.tagger(out), dim=-1)


tagger = LSTMTagger()
rec = torchrecorder.record(tagger, "tagger", (1, 12), dtype=torch.long)
print(rec.summary(columns=["label", "input", "output", "params"]))

# %%
# The same with real ids, and the tensors drawn as boxes between the modules:
ids = torch.tensor([[5, 17, 256, 3, 999, 42]])
torchrecorder.make_dot(torchrecorder.record(tagger, "tagger", input_data=ids), tensor_nodes=True)
