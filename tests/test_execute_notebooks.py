"""``maintainer/execute_notebooks.py`` answers ``--help`` and refuses a path that is not a notebook
before it starts a kernel."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

# nbclient comes with the dev group; the unit tier on other Pythons has only the test group
pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "maintainer" / "execute_notebooks.py"
spec = importlib.util.spec_from_file_location("execute_notebooks", SCRIPT)
execute_notebooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(execute_notebooks)


def test_help_describes_the_arguments_and_exits_0(capsys):
    with pytest.raises(SystemExit) as stop:
        execute_notebooks.main(["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "NOTEBOOK.ipynb" in out and "--timeout" in out


@pytest.mark.parametrize("argv", [[], ["--help-me"], ["no_such_notebook.ipynb"]])
def test_no_notebook_or_a_missing_one_is_refused_with_status_2(argv, capsys, monkeypatch):
    started = []
    monkeypatch.setattr(execute_notebooks, "execute", lambda *a, **k: started.append(a))
    with pytest.raises(SystemExit) as stop:
        execute_notebooks.main(argv)
    assert stop.value.code == 2 and not started
    assert "usage: maintainer/execute_notebooks.py" in capsys.readouterr().err
