"""Run code blocks the way sphinx-gallery does, and save their figures through its own
``save_figures`` with ``'image_scrapers': ('torchrecorder',)`` (resolved by sphinx-gallery)."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any, Optional

import pytest

sg_scrapers = pytest.importorskip("sphinx_gallery.scrapers")
sg_gen_gallery = pytest.importorskip("sphinx_gallery.gen_gallery")
sg_parser = pytest.importorskip("sphinx_gallery.py_source_parser")
sg_gen_rst = pytest.importorskip("sphinx_gallery.gen_rst")


class Example:
    """One example's run: its globals, the image paths and the reST of each block."""

    def __init__(self, src_dir: Path, name: str = "example", src_file: Optional[Path] = None,
                 file_conf: Optional[dict[str, Any]] = None) -> None:
        self.src_dir = src_dir
        images = src_dir / "auto_examples" / "images"
        images.mkdir(parents=True, exist_ok=True)
        self.conf = sg_gen_gallery._fill_gallery_conf_defaults({"image_scrapers": ("torchrecorder",)})
        self.conf["src_dir"] = str(src_dir)
        self.paths = sg_scrapers.ImagePathIterator(images / f"sphx_glr_{name}_{{0:03}}.png")
        self.globals: dict[str, Any] = {"__name__": "__main__"}
        self.block_vars: dict[str, Any] = {
            "image_path_iterator": self.paths, "example_globals": self.globals,
            "src_file": str(src_file or src_dir / f"{name}.py"), "file_conf": file_conf or {},
        }
        self.rst: list[str] = []
        # sphinx-gallery runs reset_modules before each example: here, the shared scraper's reset,
        # so that files other tests wrote are not taken for this example's
        conf = dict(self.conf, reset_modules=("torchrecorder.scraper.reset_scraper",))
        for reset in sg_gen_rst._get_callables(conf, "reset_modules"):
            reset(conf, str(self.block_vars["src_file"]))

    def run(self, code: str, lineno: int = 1) -> str:
        """Execute ``code`` as sphinx-gallery does (its last expression bound to ``___``), then
        collect its figures with :func:`sphinx_gallery.scrapers.save_figures`."""
        tree = ast.parse(code)
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = tree.body[-1]
            tree.body[-1] = ast.Assign(targets=[ast.Name(id="___", ctx=ast.Store())], value=last.value)
            ast.fix_missing_locations(tree)
        exec(compile(tree, self.block_vars["src_file"], "exec"), self.globals)
        block = sg_parser.Block("code", code, lineno)
        rst = sg_scrapers.save_figures(block, self.block_vars, self.conf)
        self.rst.append(rst)
        return rst

    def images(self, ext: str = "svg") -> list[str]:
        """The images written so far with extension ``ext``, in order."""
        folder = os.path.dirname(self.paths.image_path)
        return sorted(f for f in os.listdir(folder) if f.endswith("." + ext))


def run_script(path: Path, src_dir: Path) -> Example:
    """Run a gallery script block by block, as sphinx-gallery's build does."""
    file_conf, blocks = sg_parser.split_code_and_text_blocks(str(path))[:2]
    example = Example(src_dir, path.stem, src_file=path, file_conf=file_conf)
    for block in blocks:
        if block.type == "code":
            example.run(block.content, block.lineno)
    return example
