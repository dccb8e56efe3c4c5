"""The built books as files (make book): every notebook and page in both languages, each page
linked to its twin, nothing loaded from another host, each explorer shown as a note and never as
its repr or a widget script, and the pages made from the READMEs and the notebooks' references
holding what their sources hold.
"""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[2]
LANGS = ("en", "zh")
OTHER = {"en": "zh", "zh": "en"}
TAG = {"en": "en", "zh": "zh-CN"}
README = {"en": "README.md", "zh": "README.zh-CN.md"}
# the pages that are not notebooks: the README's sections, the references, Sphinx's own
SECTIONS = {"en": {"course-map": "Course map", "symbols": "Symbols", "glossary": "Glossary"},
            "zh": {"course-map": "课程地图", "symbols": "符号", "glossary": "术语表"}}
OTHER_PAGES = ["index", "course-map", "symbols", "glossary", "references", "search", "genindex"]
NOTEBOOKS = [(p.parent.name, p) for p in sorted((ROOT / "notebooks").glob("*/[0-9][0-9]_*.ipynb"))]


def cells(path: Path) -> list[dict]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return [{**c, "source": "".join(c["source"])} for c in notebook["cells"]]


def plain(text: str) -> str:
    """Quotes straight (Sphinx curls them on a page), spaces collapsed."""
    return " ".join(text.translate(str.maketrans("‘’“”", "''\"\"")).split())


def text_of(html: str) -> str:
    """A page's text: its tags left out (a code span is a tag in a word's middle), plain."""
    return plain(unescape(re.sub(r"<[^>]+>", "", html)))


def test_both_books_have_every_notebook_and_page(book):
    for lang in LANGS:
        expected = {p.stem for lang_, p in NOTEBOOKS if lang_ == lang} | set(OTHER_PAGES)
        built = {p.stem for p in (book / lang).glob("*.html")}
        assert built == expected, f"{lang}: missing {expected - built}, not expected {built - expected}"


def test_every_page_links_to_the_same_page_in_the_other_language(page, page_tags, book):
    links = {a.get("href"): a.get("hreflang") for tag, a in page_tags[page] if tag == "a"}
    if "/" not in page:                       # the page that picks a language
        assert links.get("en/index.html") == "en" and links.get("zh/index.html") == "zh-CN"
        return
    lang, name = page.split("/")
    twin = f"../{OTHER[lang]}/{name}"
    assert links.get(twin) == TAG[OTHER[lang]], f"{page}: no link to {twin} with hreflang={TAG[OTHER[lang]]}"
    assert (book / OTHER[lang] / name).exists()


# -- nothing from another host ---------------------------------------------------------------
# what a browser fetches while it loads a page: these attributes of these tags, url() and
# @import in styles, and a script that sets a src
FETCHED = {"script": ("src",), "link": ("href",), "img": ("src", "srcset"), "source": ("src", "srcset"),
           "iframe": ("src",), "embed": ("src",), "object": ("data",), "video": ("src", "poster"),
           "audio": ("src",), "track": ("src",), "input": ("src",)}
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""")
JS_SRC = re.compile(r"""\bsrc\s*[=:]\s*['"]((?:[a-z]+:)?//[^'"]*)""", re.I)


def from_elsewhere(url: str) -> bool:
    """A URL with a scheme other than data:, or one that starts with //: another host's."""
    url = url.strip()
    return url.startswith("//") or (re.match(r"[a-z][a-z0-9+.-]*:", url, re.I) is not None
                                    and not url.lower().startswith("data:"))


def test_the_check_tells_another_host_from_the_site():
    assert from_elsewhere("https://cdn.example.org/mathjax.js") and from_elsewhere("http://example.org/a.png")
    assert from_elsewhere("//fonts.example.org/x.css")
    assert not from_elsewhere("_static/mathjax/tex-chtml.js") and not from_elsewhere("../zh/index.html")
    assert not from_elsewhere("data:image/svg+xml;charset=utf-8,%3Csvg xmlns='http://www.w3.org/2000/svg'")
    assert [m[0] or m[1] for m in CSS_URL.findall("a{src:url(https://x.org/f.woff2)} @import 'b.css';")] == [
        "https://x.org/f.woff2", "b.css"]
    assert JS_SRC.findall('s.src="https://cdn.example.org/require.js"') == ["https://cdn.example.org/require.js"]


def test_no_page_style_or_script_loads_anything_from_another_host(book, page_tags):
    found = []
    for page, tags in page_tags.items():
        for tag, attrs in tags:
            for attr in FETCHED.get(tag, ()):
                urls = [u.split()[0] for u in attrs.get(attr, "").split(",") if u.strip()]
                found += [f"{page}: <{tag} {attr}={u}>" for u in urls if from_elsewhere(u)]
    for path in [*book.rglob("*.html"), *book.rglob("*.css")]:
        urls = [a or b for a, b in CSS_URL.findall(path.read_text(encoding="utf-8"))]
        found += [f"{path.relative_to(book)}: url({u})" for u in urls if from_elsewhere(u)]
    for path in book.rglob("*.js"):
        urls = JS_SRC.findall(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(book)}: src={u}" for u in urls]
    assert not found, "\n".join(found)


# -- explorers -------------------------------------------------------------------------------
WIDGET_REPR = re.compile(r"[A-Z]\w*\(children=\(")
NOTE = re.compile(r'<p class="explorer-note">(.*?)</p>', re.S)


def explorers(path: Path) -> int:
    """The notebook's stored explorers: outputs that are an ipywidgets box's repr alone."""
    return sum(1 for c in cells(path) if c["cell_type"] == "code" for o in c["outputs"]
               if list(o.get("data", {})) == ["text/plain"]
               and WIDGET_REPR.match("".join(o["data"]["text/plain"])))


@pytest.mark.parametrize("lang, path", NOTEBOOKS, ids=[f"{lang}/{p.stem}" for lang, p in NOTEBOOKS])
def test_each_explorer_is_a_note_never_its_repr_or_a_widget_script(book, lang, path):
    html = (book / lang / f"{path.stem}.html").read_text(encoding="utf-8")
    assert not WIDGET_REPR.search(html), "an explorer's repr reached the page"
    for script in ("application/vnd.jupyter.widget", "@jupyter-widgets", "require.js", "require.min.js"):
        assert script not in html, f"{script} on the page"
    notes = [text_of(n) for n in NOTE.findall(html)]
    assert len(notes) == explorers(path), f"{len(notes)} notes for {explorers(path)} explorers"
    assert all("JupyterLab" in n for n in notes)
    in_chinese = [re.search("[\u4e00-\u9fff]", n) is not None for n in notes]
    assert in_chinese == [lang == "zh"] * len(notes), f"notes not in the page's language: {notes}"


# -- the pages made from the READMEs and the references --------------------------------------
def section_rows(readme: str, title: str) -> list[list[str]]:
    """The table rows of a README section, as the text of their cells (code marks and link
    targets left out), the header row included."""
    body = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", readme, re.M | re.S)[1]
    rows = [line.strip().strip("|").split("|") for line in body.splitlines()
            if line.startswith("|") and not re.match(r"\|[-| ]+\|$", line)]
    link = re.compile(r"\[([^\]]*)\]\([^)]*\)")
    return [[link.sub(r"\1", cell).replace("`", "").strip() for cell in row] for row in rows]


@pytest.mark.parametrize("lang", LANGS)
def test_the_readme_pages_hold_every_row_of_their_sections(book, lang):
    readme = (ROOT / README[lang]).read_text(encoding="utf-8")
    for page, title in SECTIONS[lang].items():
        text = text_of((book / lang / f"{page}.html").read_text(encoding="utf-8"))
        rows = section_rows(readme, title)
        assert len(rows) > 3, f"{README[lang]}: no table under {title!r}"
        missing = [cell for row in rows for cell in row if cell and plain(cell) not in text]
        assert not missing, f"{lang}/{page}.html lacks: {missing}"


@pytest.mark.parametrize("lang", LANGS)
def test_the_references_page_gathers_every_notebooks_references(book, lang):
    gathered = (book / lang / "references.html").read_text(encoding="utf-8")
    for path in [path for lang_, path in NOTEBOOKS if lang_ == lang]:
        last = cells(path)[-1]["source"]
        links = re.findall(r"https://\S+", last) if last.startswith(("## References", "## 参考文献")) else []
        own = (book / lang / f"{path.stem}.html").read_text(encoding="utf-8")
        missing = [link for link in links if f'href="{link}"' not in gathered or f'href="{link}"' not in own]
        assert not missing, f"{lang}/{path.name}: links not on its page or the references page: {missing}"
