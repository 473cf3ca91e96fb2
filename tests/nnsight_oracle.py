"""nnsight's results for the interventions ``tests/test_capture_interventions.py`` compares with
``capture(edit_inputs=..., skip=...)``, computed in a process of their own: importing nnsight
replaces ``torch.Tensor.backward`` for the whole process, which the other tests must not meet.

Run as ``python -m tests.nnsight_oracle WEIGHTS OUT``: it builds the tiny GPT-2 of
:func:`gpt2_config`, loads ``WEIGHTS`` (a state dict), and saves to ``OUT`` a dict of tensors:

- ``edited``: the logits with ``transformer.h.1``'s input (its first positional argument, the
  residual stream) plus :func:`steer`;
- ``skipped``: the logits with ``transformer.h.1`` skipped, its input as its output;
- ``generated``: the tokens ``generate`` makes from :data:`IDS` with the edit of ``edited`` at
  every step.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

IDS = [[1, 2, 3, 4]]
#: generate()'s options in both processes
OPTIONS: dict[str, Any] = {"max_new_tokens": 4, "do_sample": False, "pad_token_id": 0}


def gpt2_config() -> Any:
    """A two-block GPT-2 of width 32 with a vocabulary of 60."""
    import transformers

    return transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=60, n_positions=32,
                                   attn_implementation="eager", bos_token_id=0, eos_token_id=0)


def steer() -> torch.Tensor:
    """The vector added to the residual stream."""
    return torch.linspace(-1, 1, 32) * 4


def main(weights: str, out: str) -> None:
    """Compute nnsight's results (see the module's docstring) and save them to ``out``."""
    import warnings

    import nnsight
    import tokenizers
    import transformers
    from nnsight.modeling.transformers import TransformersModel

    transformers.logging.set_verbosity_error()
    model = transformers.GPT2LMHeadModel(gpt2_config()).eval()
    model.load_state_dict(torch.load(weights))
    ids, vector = torch.tensor(IDS), steer()
    traced = nnsight.NNsight(model)
    block = traced.transformer.h[1]
    with traced.trace(ids):
        block.input = block.input + vector  # nnsight's .input: the first positional argument
        edited = traced.output.logits.save()
    with traced.trace(ids):
        block.skip(block.input)
        skipped = traced.output.logits.save()

    words = tokenizers.Tokenizer(tokenizers.models.WordLevel({f"t{i}": i for i in range(60)}, unk_token="t0"))
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=words, pad_token="t0", eos_token="t0")
    fresh = transformers.GPT2LMHeadModel(gpt2_config()).eval()
    fresh.load_state_dict(torch.load(weights))
    lm = TransformersModel(fresh, tokenizer=tokenizer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # an open iter[:] loop ends with a warning
        with lm.generate(**OPTIONS) as tracer:
            with tracer.invoke(ids):
                for _ in tracer.iter[:]:  # every step of the decode loop
                    lm.transformer.h[1].input = lm.transformer.h[1].input + vector
            with tracer.invoke():
                generated = tracer.result.save()
    torch.save({"edited": edited, "skipped": skipped, "generated": generated}, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
