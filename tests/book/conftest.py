"""Fixtures of the book's tests: the built books, a local server, headless Chromium.

The tests of this folder run only when asked for with ``-m book`` (``make test-book``, after
``make book``): a plain ``pytest`` or ``make test`` deselects them. Without build/book/, without
/usr/bin/chromium or without the book's packages they skip with a message on a learner's
machine, and fail when the environment variable ``CI`` is set.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from dataclasses import dataclass
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from browser.labdriver import CHROMIUM, CHROMIUM_ARGS, in_ci

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "build" / "book"
LANGS = ("en", "zh")
VIEWPORT = {"width": 1280, "height": 900}


def skip_or_fail(reason: str):
    if in_ci():
        pytest.fail(f"book test cannot run: {reason} (CI is set: this fails, not skips)", pytrace=False)
    pytest.skip(f"book test skipped: {reason}")


def book_pages() -> list[str]:
    """Every HTML page of both books, as paths under build/book/ (``en/03_x.html``), and the
    page that picks a language. Empty before ``make book``."""
    pages = [p.relative_to(BOOK).as_posix() for lang in LANGS for p in sorted((BOOK / lang).glob("*.html"))]
    return (["index.html"] if pages else []) + pages


class Tags(HTMLParser):
    """A page's start tags, each as (tag, attributes), in order."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))


def start_tags(path: Path) -> list[tuple[str, dict]]:
    parser = Tags()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.tags


@pytest.fixture(scope="session")
def page_tags(book) -> dict[str, list[tuple[str, dict]]]:
    """Every page's start tags, by path, read once."""
    return {path: start_tags(book / path) for path in book_pages()}


def pytest_generate_tests(metafunc):
    """A test with an argument ``page`` runs once for each page of both books (none before
    ``make book``)."""
    if "page" in metafunc.fixturenames:
        metafunc.parametrize("page", book_pages())


# -- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def book() -> Path:
    if not (BOOK / "en" / "index.html").exists() or not (BOOK / "zh" / "index.html").exists():
        skip_or_fail(f"no book in {BOOK.relative_to(ROOT)}/: build it with `make book`")
    return BOOK


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def site(book) -> str:
    """build/book/ served on a loopback port of its own, as a reader's web server would: the
    base URL, ending in /."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(book)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def chromium():
    if not CHROMIUM.exists():
        skip_or_fail(f"no Chromium at {CHROMIUM}; install it with `sudo bash .ci/browser_setup.sh`")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("the playwright package is missing (dependency group dev: `make test-book` installs it)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def tab(chromium, site):
    """A tab of its own, for a test that clicks and types; it too reaches no other host."""
    context = chromium.new_context(viewport=VIEWPORT)
    context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(site) else r.abort())
    yield context.new_page()
    context.close()


@pytest.fixture(scope="session")
def axe_script() -> str:
    """axe-core's engine, as the PyPI package axe-playwright-python ships it (group book)."""
    from importlib.resources import files

    try:
        return (files("axe_playwright_python") / "axe.min.js").read_text(encoding="utf-8")
    except ModuleNotFoundError:
        skip_or_fail("axe-playwright-python is missing (dependency group book: `make test-book` installs it)")


# -- a visit of a page: everything measured on it --------------------------------------------
# WCAG 2.0 and 2.1, levels A and AA: every rule of axe-core with one of these tags, none disabled.
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
AXE_RUN = """tags => axe.run(document, {runOnly: {type: "tag", values: tags}, resultTypes: ["violations"]})
  .then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                       nodes: v.nodes.map(n => n.target.join(" "))})))"""
# What a screen reader lists as the page's headings (Playwright's role locator leaves out what
# is hidden, such as the theme's print-only title), with their levels.
HEADINGS = "hs => hs.map(h => [Number(h.getAttribute('aria-level') || h.tagName[1]), h.textContent.trim()])"


@dataclass
class Visit:
    """What loading one page did, and what was measured on it."""

    outside: list      # requests to any other host (blocked)
    errors: list       # console errors, uncaught exceptions, failed loads
    headings: list     # (level, text), in order
    formulas: int      # formulas MathJax typeset
    violations: list   # axe-core's, each with its impact


def load(context, site: str, path: str, axe_script: str) -> Visit:
    outside, errors, page = [], [], context.new_page()

    def only_the_site(route):
        if route.request.url.startswith(site):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_site)
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.goto(site + path, wait_until="networkidle")
    # MathJax typesets after the load event, then fetches its fonts: axe is to see the result
    formulas = page.evaluate("() => window.MathJax ? MathJax.startup.promise.then("
                             "() => document.querySelectorAll('mjx-container').length) : 0")
    page.wait_for_load_state("networkidle")
    headings = page.get_by_role("heading").evaluate_all(HEADINGS)
    # What the page itself asked for and logged, taken before axe runs: axe fetches the
    # stylesheets again to read them, which is its business, not the page's.
    visit = Visit(outside=list(outside), errors=list(errors), headings=headings, formulas=formulas,
                  violations=[])
    page.add_script_tag(content=axe_script)
    visit.violations = page.evaluate(AXE_RUN, AXE_TAGS)
    page.close()
    return visit


@pytest.fixture(scope="session")
def visit(chromium, site, axe_script):
    """``visit(path)``: the page loaded in a fresh tab, every request outside the site blocked,
    and measured. A page is worth one visit (axe takes seconds on a notebook's page): one test
    makes every check of it."""
    context = chromium.new_context(viewport=VIEWPORT)

    def visit(path: str) -> Visit:
        seen = load(context, site, path, axe_script)
        VIOLATIONS.update(v["impact"] for v in seen.violations)
        PAGES_CHECKED.add(path)
        return seen

    yield visit
    context.close()


# -- axe's results by impact, printed at the end ----------------------------------------------
VIOLATIONS: Counter = Counter()
PAGES_CHECKED: set = set()


def pytest_sessionfinish(session):
    """A pytest-xdist worker hands its counts to the controller, which prints them."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["axe"] = {"violations": dict(VIOLATIONS), "pages": sorted(PAGES_CHECKED)}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    axe = getattr(node, "workeroutput", {}).get("axe", {})
    VIOLATIONS.update(axe.get("violations", {}))
    PAGES_CHECKED.update(axe.get("pages", []))


def pytest_terminal_summary(terminalreporter):
    if PAGES_CHECKED:
        impacts = ", ".join(f"{VIOLATIONS[i]} {i}" for i in ("critical", "serious", "moderate", "minor"))
        terminalreporter.write_line(f"axe-core ({', '.join(AXE_TAGS)}) on {len(PAGES_CHECKED)} pages: "
                                    f"violations {impacts}")
