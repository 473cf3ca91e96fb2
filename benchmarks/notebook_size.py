"""Bytes a notebook view of the HTML page adds: the first of a kernel session and a later one.

    python benchmarks/notebook_size.py

Runs an IPython shell in this process (torchrecorder imported in its first cell) and, for each
model, shows its page (``rec.show()``) from one cell and then from another (cell ids as
JupyterLab sends them), and prints the size of each ``_repr_html_`` and the ratio of the second
to the first (the issue's target: well under 10 %).
The "before" column is the size every view had before the viewer was shared: the whole page,
escaped into a double-quoted ``srcdoc`` as ``_repr_html_`` did then.
"""

from __future__ import annotations

import html
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from models import build  # noqa: E402


def main() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    # imported in a cell, as in a notebook (from then on torchrecorder follows the cells)
    shell.run_cell("import torchrecorder", cell_id="imports").raise_error()
    torchrecorder = shell.user_ns["torchrecorder"]
    print(f"{'model':<16} {'1st view':>12} {'2nd view':>10} {'2nd / 1st':>10} {'before (each)':>14}")
    for n, name in enumerate(("cnn-small", "gpt2-w32-L8", "gpt2-small")):
        torch.manual_seed(0)
        model, args = build(name)
        rec = torchrecorder.record(model, name, input_data=args[0] if len(args) == 1 else args)
        shell.user_ns.update(rec=rec, sizes=[])
        # a cell of its own first: the view of this model's first cell carries the viewer
        shell.run_cell("pass", cell_id=f"reset-{n}")
        for cell in (f"a-{n}", f"b-{n}"):
            shell.run_cell("sizes.append(len(rec.show()._repr_html_().encode('utf-8')))",
                           cell_id=cell).raise_error()
        first, second = shell.user_ns["sizes"]
        whole = len(html.escape(rec.show().text, quote=True).encode("utf-8")) + 150  # + the <iframe> tag
        print(f"{name:<16} {first:>12,} {second:>10,} {second / first:>9.1%} {whole:>14,}")
        shell.run_cell("pass", cell_id=f"a-{n}")  # cell a runs again: its viewer is gone
        shell.run_cell("pass", cell_id=f"b-{n}")


if __name__ == "__main__":
    main()
