"""The browser test's own rules, checked without a browser (these run in ``make test``)."""

from __future__ import annotations

import pytest
from labdriver import in_ci, screenshot_name, stray_figure


@pytest.mark.parametrize("entry", [
    {"kinds": ["image/png"], "text": "9:20:22 AM"},
    {"kinds": ["text/plain"], "text": "9:52:50 AM\n<Figure size 900x360 with 0 Axes>"},
    {"kinds": ["image/png", "text/plain"], "text": "9:52:50 AM"},
])
def test_a_stray_figure_is_let_pass(entry):
    assert stray_figure(entry)


@pytest.mark.parametrize("entry", [
    {"kinds": ["application/vnd.jupyter.error"], "text": "ValueError: compute broke"},
    {"kinds": ["application/vnd.jupyter.stderr"], "text": "a warning"},
    {"kinds": ["application/vnd.jupyter.stdout"], "text": "printed in a callback"},
    {"kinds": ["text/plain"], "text": "9:52:50 AM\nsome other repr"},
    {"kinds": ["image/png", "application/vnd.jupyter.error"], "text": "KeyError"},
    {"kinds": [], "text": "9:10:46 AM"},
])
def test_anything_else_in_the_log_console_is_a_problem(entry):
    assert not stray_figure(entry)


def test_screenshot_names():
    assert screenshot_name("zh/03_scaled_dot_product.ipynb") == "screenshot_zh_03.png"
    assert screenshot_name("en/06_quadratic_cost.ipynb") == "screenshot_en_06.png"
    assert screenshot_name("zh/07_learned_attention.ipynb") == "screenshot_zh_07.png"


@pytest.mark.parametrize(("value", "expected"), [
    (None, False), ("", False), ("false", False), ("0", False), ("true", True), ("1", True),
])
def test_ci_is_recognised(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert in_ci() is expected
