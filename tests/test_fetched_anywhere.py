"""Notebooks run wherever they are copied or fetched to (nbgrader puts them in ``~/06-en/``).

A notebook may read only what the installed library brings: no path that climbs out of the
notebook's folder (``../``). The unit tests scan the code cells; the integration test copies
notebook 06, which shows the stored benchmark run, alone into an empty folder and runs it.
"""

from __future__ import annotations

import re
import shutil

import nbformat
import pytest

from notebook_tools import ROOT, code_literals

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*/*.ipynb"))
CLIMBS = re.compile(r"\.\.[/\\]")


def climbing_paths(code: str) -> list[str]:
    """Strings in ``code`` that name a path above the current folder, and ``os.pardir``."""
    found = [text for _, text in code_literals(code) if CLIMBS.search(text)]
    if not found and CLIMBS.search(code) and not code_literals(code):
        found = CLIMBS.findall(code)          # code that does not parse: the raw text
    return found + (["os.pardir"] if "pardir" in code else [])


@pytest.mark.parametrize("code, found", [
    ('Path(f"../../figures/bench_attention_{LANG}.md").read_text()', ["../../figures/bench_attention_{}.md"]),
    ("open('..\\\\data\\\\x.csv')", ["..\\data\\x.csv"]),
    ("os.path.join(os.pardir, 'figures')", ["os.pardir"]),
    ("%matplotlib inline\nImage(filename='../x.png')", ["../x.png"]),
    ("x = 1 /\n Image('../x.png')", ["../"]),                       # does not parse
    ("stored = stored_bench(LANG)", []),
    ("x = a[..., 1:]; y = 3 / 2", []),
])
def test_the_scan_finds_paths_that_climb(code, found):
    assert climbing_paths(code) == found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_notebook_reads_a_path_above_its_folder(path):
    nb = nbformat.read(path, as_version=4)
    found = {i: climbing_paths(c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    found = {i: f for i, f in found.items() if f}
    assert not found, f"{path.relative_to(ROOT)}: cells that read outside the notebook's folder: {found}"


@pytest.mark.integration
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_notebook_06_runs_alone_in_another_folder(lang, tmp_path):
    """nbgrader's fetch gives a folder with the notebook and nothing else: the stored benchmark
    run must come from the library."""
    from nbclient import NotebookClient

    folder = tmp_path / f"06-{lang}"
    folder.mkdir()
    copy = folder / "06_quadratic_cost.ipynb"
    shutil.copy2(ROOT / "notebooks" / lang / "06_quadratic_cost.ipynb", copy)
    nb = nbformat.read(copy, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(folder)}}).execute()
    cell = next(c for c in nb.cells if c.get("id") == "nb06-52")
    printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    assert f"bench_attention_{lang}.md" in printed
    assert "| 2048 | fast_attention |" in printed
    assert any("image/png" in o.get("data", {}) for o in cell.outputs), "the stored figure is shown"
    assert sorted(p.name for p in folder.iterdir()) == [copy.name], "nothing else was needed or written"
    assert not any(o.output_type == "error" for c in nb.cells if c.cell_type == "code" for o in c.outputs)
