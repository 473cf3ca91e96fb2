"""No name can break the output: module names, class names and the network's name, in DOT, SVG and Mermaid.

A property test builds modules whose ``nn.ModuleDict`` keys and class names
are generated strings, renders them with Graphviz (``dot`` or pygraphviz), parses the SVG as
XML and reads every name back from it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import torchrecorder
from torchrecorder._text import dot_id, html_text, visible
from torchrecorder.export import dumps, loads
from torchrecorder.nodes import TensorNode
from torchrecorder.renderer.mermaid import mermaid_id, mermaid_text

from .backends import needs_backend

pytestmark = needs_backend

SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"

NASTY = ['say "hi"', "back\\slash", "trailing\\", "<b>bold</b>", "a & b", "{brace}", "new\nline",
         "tab\there", "ünïcödé", "日本語", "emoji 🎉", "]]>", "&amp;", "\\N \\G \\L", "x:y", "#1;",
         "%%comment", "`code`", "]", "]]", "[", "end", "cluster_x", "a|b", "semi;colon", "'single'", "\u200b",
         "\u202eRTL", "\x07bell", "\ud7ff", "\U0010fffd"]


class Block(nn.Module):
    """Linear then ReLU: two ops, so that the block is drawn as a cluster when expanded."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


class Net(nn.Module):
    """Runs every block of a ModuleDict whose keys are the names under test; returns a dict."""

    def __init__(self, names: list[str], class_names: list[str], out_key: str = "out") -> None:
        super().__init__()
        self.out_key = out_key
        pairs = zip(names, class_names, strict=True)
        self.blocks = nn.ModuleDict({n: type(c, (Block,), {})() for n, c in pairs})

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        for block in self.blocks.values():
            x = block(x)
        return {self.out_key: x}


def _usable(name: str) -> bool:
    return bool(name) and "." not in name and "\x00" not in name and not hasattr(nn.ModuleDict(), name)


def _same_spaces(text: str) -> str:
    """Graphviz writes the second of two spaces as a no-break space, so that SVG keeps both."""
    return text.replace("\xa0", " ")


def _svg_texts(svg: bytes) -> tuple[list[str], list[str]]:
    root = ET.fromstring(svg)
    texts = [_same_spaces("".join(t.itertext())) for t in root.iter(f"{SVG}text")]
    titles = [_same_spaces(a.get(f"{XLINK}title", "")) for a in root.iter(f"{SVG}a")]
    return texts, titles


def shown(text: str) -> str:
    """What a name looks like in the SVG: control characters made visible, spaces as spaces."""
    return _same_spaces(visible(text))


_LABEL = re.compile(r'^\s*(?:subgraph )?(n_[A-Za-z0-9_]+)(?:\[\[|\[/|\[\(|\(\[|\[|\()"([^"\n]*)"')
_ENTITY = re.compile(r"#(\d+);")


def _mermaid_labels(text: str) -> dict[str, list[str]]:
    """Node id -> decoded label lines, checking that every line is well formed."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith(("direction ", "classDef ", "class ")) or stripped == "end":
            continue
        if " --> " in stripped or " -.-> " in stripped:
            ends = re.split(r" -\.?->(?:\|\"[^\"]*\"\|)? ", stripped)
            assert len(ends) == 2 and all(re.fullmatch(r"n_[A-Za-z0-9_]+", e) for e in ends), line
            continue
        match = _LABEL.match(line)
        assert match, f"malformed Mermaid line {line!r}"
        out[match.group(1)] = [_ENTITY.sub(lambda m: chr(int(m.group(1))), part)
                               for part in match.group(2).split("<br>")]
    return out


def check_names(names: list[str], class_names: list[str], net_name: str) -> None:
    net = Net(names, class_names, out_key=net_name)
    rec = torchrecorder.record(net, net_name, (1, 3))
    rec.lint()
    outputs = [n for n in rec.nodes.values() if isinstance(n, TensorNode) and n.role == "output"]
    assert len(outputs) == 1 and net_name in outputs[0].name
    for depth in (1, 2):
        dot = torchrecorder.make_dot(rec, render_depth=depth)
        svg = torchrecorder.backend.render_source(dot.source, "svg")  # raises if dot rejects it
        texts, titles = _svg_texts(svg)
        for name, cls in zip(names, class_names, strict=True):
            if depth == 1:  # modules drawn as boxes: name, then type
                assert shown(name) in texts, (name, texts)
            else:  # clusters titled with the dotted path and the type
                assert any(shown(f"blocks.{name}") in t for t in texts), (name, texts)
            assert any(shown(cls) in t for t in texts), (cls, texts)
            assert any(shown(f"blocks.{name} ({cls})") in t for t in titles), (name, titles)
        assert shown(net_name) in texts or any(shown(net_name) in t for t in texts)
        assert shown(outputs[0].name) in texts  # the output, named after the dict key
        # Mermaid: ids are plain, labels quoted and escaped, and decode back to the names
        chart = torchrecorder.make_mermaid(rec, render_depth=depth)
        labels = _mermaid_labels(chart)
        flat = [line for lines in labels.values() for line in lines]
        for name, cls in zip(names, class_names, strict=True):
            if depth == 1:
                assert name in flat and cls in flat, (name, cls, flat)
            else:
                assert any(line.startswith(f"blocks.{name} : {cls}") for line in flat), (name, flat)
    # JSON keeps every string and draws the same
    again = loads(dumps(rec))
    assert torchrecorder.make_dot(again, render_depth=2).source == torchrecorder.make_dot(rec, 2).source


names_st = st.text(st.characters(blacklist_characters=".\x00", blacklist_categories=("Cs",)),
                   min_size=1, max_size=10).filter(_usable)
tricky_st = st.sampled_from([n for n in NASTY if _usable(n)])


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(st.one_of(names_st, tricky_st), min_size=1, max_size=3, unique=True),
    class_names=st.lists(st.one_of(names_st, tricky_st), min_size=3, max_size=3),
    net_name=st.one_of(names_st, tricky_st),
)
def test_generated_names_survive_every_output(names: list[str], class_names: list[str],
                                              net_name: str) -> None:
    check_names(names, class_names[: len(names)], net_name)


@pytest.mark.parametrize("name", [n for n in NASTY if _usable(n)])
def test_nasty_name(name: str) -> None:
    check_names([name, name + "2"], [name, "Plain"], name)


def test_html_text_escapes_markup() -> None:
    assert html_text('<a href="x">&</a>') == "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
    assert html_text("a\nb\x01") == "a\\\\nb\\\\x01"  # shown as a\nb\x01


def test_dot_id_is_plain() -> None:
    for name in NASTY:
        assert re.fullmatch(r"[A-Za-z0-9_./#@\-]+", dot_id(name))


def test_mermaid_escaping_covers_syntax_characters() -> None:
    for ch in '"<>&`%|\\\n\t':
        assert ch not in mermaid_text(f"a{ch}b")
        assert mermaid_text(f"a{ch}b") == f"a#{ord(ch)};b"
    assert mermaid_text("#1;") == "#35;1#59;"
    assert mermaid_id("end") == "n_end"
    assert re.fullmatch(r"n_[A-Za-z0-9_]+", mermaid_id('日本 "x"'))


def test_tooltips_that_look_like_html_strings_stay_plain_strings() -> None:
    """A tooltip starting with '<' and ending with '>' (a module named '<c' whose error ends
    in '>') is quoted: Graphviz would read it as an HTML string and reject the DOT."""

    class Boom(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise ValueError("expected <int>")

    inner = nn.Sequential()
    inner.add_module("<b", Boom())
    net = nn.Sequential()
    net.add_module("<c", inner)
    with pytest.raises(ValueError, match="expected <int>") as info:
        torchrecorder.record(net, "net", (1, 3))
    rec = info.value.recording  # type: ignore[attr-defined]
    for depth in (1, 2, 3):  # '<c' a box, a cluster around the box '<b', a cluster of a cluster
        source = torchrecorder.make_dot(rec, render_depth=depth).source
        svg = torchrecorder.backend.render_source(source, "svg")  # raises if dot rejects it
        _, titles = _svg_texts(svg)
        assert any(shown("<c (Sequential)") in t and shown("expected <int>") in t for t in titles), titles
