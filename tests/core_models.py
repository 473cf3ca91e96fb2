"""The zoo's small models of known structure, under a short path for the command-line tests.

``python -m torchrecorder`` names a model as ``package.module:factory`` or
``path/to/file.py:factory``; ``tests/test_cli.py`` points it here, at both
kinds of name.  The models themselves are defined once, in
``tests/zoo/handwritten.py``.  The import is absolute because the command line
also loads this file by its path, outside the ``tests`` package.
"""

from __future__ import annotations

from tests.zoo.handwritten import (
    ConvBN,
    DoubledMLP,
    Inner,
    Middle,
    Nested,
    ResidualBlock,
    ResNetish,
    TinyMLP,
    TwoInputs,
)

__all__ = ["ConvBN", "DoubledMLP", "Inner", "Middle", "Nested", "ResNetish", "ResidualBlock", "TinyMLP",
           "TwoInputs"]
