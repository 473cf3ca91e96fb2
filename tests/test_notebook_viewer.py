"""One copy of the HTML viewer per notebook: the first view of a kernel session carries it, the
views of other cells carry their data only (sizes, pages, the session's bookkeeping, IPython)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import torchrecorder
from torchrecorder.renderer import html as html_module
from torchrecorder.renderer.html import HtmlPage
from torchrecorder.renderer.html_page import MISSING, viewer_version
from torchrecorder.renderer.notebook_viewer import ViewerSession

from .test_html import EVIL, Evil, _parse

ROOT = Path(__file__).resolve().parents[1]
VIZ = (ROOT / "torchrecorder" / "renderer" / "_vendor" / "viz-global.js").read_text(encoding="utf-8")


class Cells:
    """The notebook cell that is running, as IPython's ``pre_run_cell`` would report it."""

    def __init__(self, session: ViewerSession) -> None:
        self.session = session
        self.now: str | None = None

    def run(self, cell: str | None) -> None:
        self.now = cell
        self.session.cell_started(cell)


@pytest.fixture
def cells(monkeypatch: pytest.MonkeyPatch) -> Cells:
    session = ViewerSession()
    got = Cells(session)
    monkeypatch.setattr(html_module, "SESSION", session)
    monkeypatch.setattr(html_module, "current_cell", lambda: got.now)
    return got


def _srcdoc(shown: str) -> str:
    return str(_parse(shown).tags[0][1]["srcdoc"])


def test_second_view_carries_only_its_data(cells: Cells, pages: tuple[HtmlPage, HtmlPage]) -> None:
    cells.run("cell-1")
    first = pages[0]._repr_html_()
    cells.run("cell-2")
    second = pages[1]._repr_html_()
    n1, n2 = len(first.encode("utf-8")), len(second.encode("utf-8"))
    assert n1 > 1_000_000 and n2 < 0.05 * n1, (n1, n2)
    assert VIZ in _srcdoc(first) and 'id="tr-share"' in _srcdoc(first)
    doc = _srcdoc(second)
    assert "Viz.js" not in doc and "@font-face" not in doc and 'id="tr-need"' in doc
    # the data is all there: the later view draws its own graph
    data = json.loads(doc.split('id="tr-data">', 1)[1].split("</script>", 1)[0])
    assert data == pages[1]._data and data["name"] == "cnn"
    # a third view, in the first cell's session, shares too; the standalone page is unchanged
    cells.run("cell-3")
    assert len(pages[0]._repr_html_()) < 0.05 * n1
    assert pages[0].text.count("Viz.js") == 1 and 'id="tr-share"' not in pages[0].text


def test_client_policy_runs_only_the_viewer(cells: Cells, pages: tuple[HtmlPage, HtmlPage]) -> None:
    doc = pages[1].notebook_page(False)
    tags = _parse(doc)
    csp = next(a["content"] for t, a in tags.tags if t == "meta" and a.get("http-equiv")) or ""
    assert "default-src 'none'" in csp and "connect-src 'none'" in csp and "font-src data:" in csp
    script_src = csp.split("script-src", 1)[1].split(";", 1)[0].split()
    assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src
    assert sum(s.startswith("'sha256-") for s in script_src) == 3  # the loader, viz.js, the view
    for tag, attrs in tags.tags:
        assert tag not in ("link", "iframe", "img", "object", "embed"), tag
        assert "src" not in attrs and "href" not in attrs, (tag, attrs)
    need = json.loads(doc.split('id="tr-need">', 1)[1].split("</script>", 1)[0])
    assert need["version"] == viewer_version() and need["missing"] == MISSING


def test_names_stay_text_in_the_later_view(cells: Cells) -> None:
    page = torchrecorder.make_html(torchrecorder.record(Evil(), "</script><!-- net", (1, 3)), render_depth=2)
    tags = _parse(page.notebook_page(False))
    assert [t for t, _ in tags.tags if t == "script"] == ["script"] * 3  # data, need, loader
    data = json.loads(tags.scripts[0])
    names = {json.loads(data["strings"][row[6]]).get("name") for row in data["nodes"]}
    assert EVIL in names and data["name"] == "</script><!-- net"


def test_rerun_of_the_carrying_cell_carries_again(cells: Cells, pages: tuple[HtmlPage, HtmlPage]) -> None:
    big = 1_000_000
    cells.run("a")
    assert len(pages[0]._repr_html_()) > big
    assert len(pages[0]._repr_html_()) < big  # a second view in the same output shares it
    cells.run("b")
    assert len(pages[1]._repr_html_()) < big
    cells.run("a")  # its output (and the viewer in it) is replaced
    assert len(pages[0]._repr_html_()) > big
    cells.run("b")
    assert len(pages[1]._repr_html_()) < big


def test_unknown_cells_carry_their_own(cells: Cells, pages: tuple[HtmlPage, HtmlPage],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    big = 1_000_000
    cells.run(None)  # no cell id: any output may be replaced, none is counted on
    assert len(pages[0]._repr_html_()) > big and len(pages[1]._repr_html_()) > big
    cells.run("a")
    assert len(pages[0]._repr_html_()) > big
    cells.run(None)  # perhaps cell "a" again
    assert len(pages[1]._repr_html_()) > big
    cells.run("b")
    monkeypatch.setattr(HtmlPage, "share_viewer", False)
    assert len(pages[0]._repr_html_()) > big and len(pages[1]._repr_html_()) > big
    text_only = HtmlPage(pages[0].text, "mlp")  # a page made from its text alone: shown whole
    monkeypatch.setattr(HtmlPage, "share_viewer", True)
    assert _srcdoc(text_only._repr_html_()) == pages[0].text


_IPYTHON_SCRIPT = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_cell("import torch, torchrecorder\\n"
               "rec = torchrecorder.record(torch.nn.Linear(2, 2), 'fc', (1, 2))\\n"
               "sizes = []", cell_id="setup")
for cell in ["one", "two", "one", "two", "three"]:
    result = shell.run_cell("sizes.append(len(rec.show()._repr_html_()))", cell_id=cell)
    result.raise_error()
shell.run_cell("sizes.append(len(rec.show()._repr_html_()))")  # no cell id
print(json.dumps(shell.user_ns["sizes"]))
"""


def test_ipython_cells(tmp_path: Path) -> None:
    pytest.importorskip("IPython")
    env = dict(os.environ, PYTHONPATH=str(ROOT), IPYTHONDIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", _IPYTHON_SCRIPT], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300, check=True)
    sizes = json.loads(out.stdout.strip().splitlines()[-1])
    whole = [s > 1_000_000 for s in sizes]
    # (torchrecorder's import in the first cell starts following the cells) "one" carries it;
    # "two" shares it; "one" again replaces the output that held it and carries it; "two" and
    # "three" share it; a cell without id may be any cell: it carries its own
    assert whole == [True, False, True, False, False, True], sizes
