"""The built books in headless Chromium, served from this machine: every page of both books loads
with nothing from another host and no error, passes axe-core's WCAG 2.0 and 2.1 A and AA rules
with no serious or critical violation, has one H1 and no skipped heading level, and has its
formulas typeset; the search finds a word in each language; the language switch, the navigation
and the search work from the keyboard alone.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
from test_book_headings import heading_problems

# browser as well: the unit tier's rule against starting a process (tests/conftest.py) stays off
pytestmark = [pytest.mark.book, pytest.mark.browser]


# -- every page (conftest.py gives each test with an argument page every page in turn) -------
def test_every_page_loads_alone_passes_axe_and_has_its_headings_in_order(page, book, visit):
    """One visit, every check: axe takes seconds on a notebook's page."""
    seen = visit(page)
    problems = [f"asked another host for {url}" for url in seen.outside] + seen.errors
    problems += [f"axe, {v['impact']}: {v['id']}, {v['help']} ({len(v['nodes'])}, such as {v['nodes'][:3]})"
                 for v in seen.violations if v["impact"] in ("serious", "critical")]
    problems += heading_problems([(level, text[:60]) for level, text in seen.headings])
    written = (book / page).read_text(encoding="utf-8").count('class="math')
    if seen.formulas != written:
        problems.append(f"{written} formulas written, {seen.formulas} typeset by MathJax")
    assert not problems, f"{page}:\n  " + "\n  ".join(problems)


# -- search ----------------------------------------------------------------------------------
@pytest.mark.parametrize("lang, words, target", [
    ("en", "induction head", "08_induction_circuit.html"),
    ("zh", "归纳头", "08_induction_circuit.html"),           # one word in the glossary, two in the index
    ("zh", "注意力汇聚点", "09_real_model.html"),
])
def test_the_search_finds_a_word_on_its_page(lang, words, target, tab, site):
    tab.goto(f"{site}{lang}/search.html?q={quote(words)}")
    tab.locator("#search-results .search-summary").wait_for()
    found = tab.locator("#search-results ul.search li a").evaluate_all(
        "as => as.map(a => a.getAttribute('href'))")
    assert target in found, f"{lang}: {words!r} found {found}"


# -- keyboard --------------------------------------------------------------------------------
def tab_to(tab, selector: str, presses: int = 40) -> bool:
    """Press Tab until the element that has the focus matches ``selector``."""
    for _ in range(presses):
        tab.keyboard.press("Tab")
        if tab.evaluate("s => document.activeElement.matches(s)", selector):
            return True
    return False


@pytest.mark.parametrize("lang, other", [("en", "zh"), ("zh", "en")])
def test_the_keyboard_reaches_the_language_switch_the_navigation_and_the_search(lang, other, tab, site):
    start = f"{site}{lang}/03_scaled_dot_product.html"

    tab.goto(start)
    assert tab_to(tab, ".language-switch a"), "Tab never reaches the language switch"
    tab.keyboard.press("Enter")
    tab.wait_for_url(f"{site}{other}/03_scaled_dot_product.html")

    tab.goto(start)
    assert tab_to(tab, "nav.bd-docs-nav a[href='04_multi_head_attention.html']"), "Tab never reaches the nav"
    tab.keyboard.press("Enter")
    tab.wait_for_url(f"{site}{lang}/04_multi_head_attention.html")

    tab.goto(start)
    assert tab_to(tab, "button.search-button-field"), "Tab never reaches the search"
    tab.keyboard.press("Enter")
    tab.wait_for_function("() => document.activeElement.matches('input[name=q]')")
    tab.keyboard.type("softmax")
    tab.keyboard.press("Enter")
    tab.wait_for_url(f"{site}{lang}/search.html?q=softmax*")
    tab.locator("#search-results ul.search li a").first.wait_for()
