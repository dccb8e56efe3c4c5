"""make book: the course as a website in both languages, build/book/en/ and build/book/zh/.

For each language this lays out a Sphinx source folder, build/book-src/<lang>/: the notebooks
(copied; Sphinx reads their stored outputs and never runs them), an index, pages made from the
README's sections (the course map, the symbols, the glossary) and a page gathering every
notebook's references (its last cell). They are made again at every build, so they never drift
from the READMEs and the notebooks. Then Sphinx builds both books at once, one process each
(book/conf.py), and build/book/index.html lets a reader pick a language.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES, OUT = ROOT / "build" / "book-src", ROOT / "build" / "book"

LANGS = {
    "en": {"readme": "README.md", "sphinx": "en", "references": "## References",
           "pages": {"course-map": "Course map", "symbols": "Symbols", "glossary": "Glossary"}},
    "zh": {"readme": "README.zh-CN.md", "sphinx": "zh_CN", "references": "## 参考文献",
           "pages": {"course-map": "课程地图", "symbols": "符号", "glossary": "术语表"}},
}
OTHER = {"en": "zh", "zh": "en"}
TAG = {"en": "en", "zh": "zh-CN"}   # BCP 47, for hreflang
REFERENCES_TITLE = {"en": "References", "zh": "参考文献"}
REFERENCES_INTRO = {"en": "Each notebook's references, from its last section.",
                    "zh": "每本 notebook 最后一节列出的参考文献。"}


def section(readme: str, title: str) -> str:
    """The body of the README's section ``title``, up to the next heading of any level."""
    m = re.search(rf"^#{{1,6}} {re.escape(title)}\n(.*?)(?=^#{{1,6}} |\Z)", readme, re.M | re.S)
    if m is None:
        raise SystemExit(f"book: no section {title!r} in the README")
    return m[1].strip()


def book_links(text: str, lang: str) -> str:
    """A README's links as the book's: a notebook is its page; the other README (or a section of
    it) is the same page in the other book; any other file of the repository is not in the book,
    so its link text stays, without the link."""
    other = OTHER[lang]
    anchors = {title.lower().replace(" ", "-"): page for page, title in LANGS[other]["pages"].items()}

    def link(m: re.Match) -> str:
        label, target = m[1], m[2]
        if target.startswith(f"notebooks/{lang}/"):
            return f"[{label}]({target.removeprefix(f'notebooks/{lang}/')})"
        if target.startswith("README"):
            page = anchors.get(target.partition("#")[2], "index")
            return f'<a href="../{other}/{page}.html" hreflang="{TAG[other]}">{label}</a>'
        return m[0] if re.match(r"https?://|#", target) else label

    return re.sub(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)", link, text)


def notebook_cells(path: Path) -> list[dict]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [{**c, "source": "".join(c["source"])} for c in cells]


def references_page(notebooks: list[Path], lang: str) -> str:
    """Every notebook's references section under the notebook's title, linked to its page."""
    parts = [f"# {REFERENCES_TITLE[lang]}", REFERENCES_INTRO[lang]]
    for path in notebooks:
        cells = notebook_cells(path)
        last = cells[-1]["source"] if cells[-1]["cell_type"] == "markdown" else ""
        if not last.startswith(LANGS[lang]["references"]):
            continue
        title = cells[0]["source"].splitlines()[0].lstrip("# ")
        parts += [f"## [{title}]({path.name})", last.partition("\n")[2].strip()]
    return "\n\n".join(parts) + "\n"


def index_page(readme: str, notebooks: list[Path], lang: str) -> str:
    """The README's title and opening paragraph, then every page of the book. (Not the line
    linking the other README: the language switch does that here.)"""
    title, _, rest = readme.partition("\n")
    opening = [p for p in rest.split("\n## ")[0].split("\n\n") if p.strip() and "README" not in p]
    pages = [p.stem for p in notebooks] + [*LANGS[lang]["pages"], "references"]
    toctree = "\n".join(["```{toctree}", ":maxdepth: 1", "", *pages, "```"])
    return "\n\n".join([title, *opening, toctree]) + "\n"


def lay_out(lang: str) -> tuple[Path, str]:
    """Write build/book-src/<lang>/; return it and the book's title."""
    src = SOURCES / lang
    src.mkdir(parents=True)
    notebooks = sorted((ROOT / "notebooks" / lang).glob("[0-9][0-9]_*.ipynb"))
    for path in notebooks:
        shutil.copy2(path, src / path.name)
    readme = (ROOT / LANGS[lang]["readme"]).read_text(encoding="utf-8")
    for page, title in LANGS[lang]["pages"].items():
        body = book_links(section(readme, title), lang)
        (src / f"{page}.md").write_text(f"# {title}\n\n{body}\n", encoding="utf-8")
    (src / "references.md").write_text(references_page(notebooks, lang), encoding="utf-8")
    (src / "index.md").write_text(index_page(readme, notebooks, lang), encoding="utf-8")
    return src, readme.partition("\n")[0].lstrip("# ")


CHOOSER = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{en_title} · {zh_title}</title>
<style>body {{ font-family: sans-serif; max-width: 40rem; margin: 3rem auto; line-height: 1.6; }}</style>
</head>
<body>
<main>
<h1>{en_title} · <span lang="zh-CN">{zh_title}</span></h1>
<ul>
<li><a href="en/index.html" hreflang="en">English</a></li>
<li><a href="zh/index.html" hreflang="zh-CN" lang="zh-CN">中文</a></li>
</ul>
</main>
</body>
</html>
"""


def main() -> int:
    start = time.perf_counter()
    shutil.rmtree(SOURCES, ignore_errors=True)
    shutil.rmtree(OUT, ignore_errors=True)
    titles, runs = {}, {}
    for lang in LANGS:
        src, titles[lang] = lay_out(lang)
        # -W: a warning (a broken link, an unreadable image) fails the build; --keep-going lists them all
        runs[lang] = subprocess.Popen(
            [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going",
             "-c", str(Path(__file__).parent), "-D", f"language={LANGS[lang]['sphinx']}",
             "-D", f"html_title={titles[lang]}", "-d", str(SOURCES / f"{lang}-doctrees"),
             str(src), str(OUT / lang)])
    failed = [lang for lang, run in runs.items() if run.wait() != 0]
    if failed:
        print(f"book: the {' and '.join(failed)} book failed (Sphinx's messages above)", file=sys.stderr)
        return 1
    (OUT / "index.html").write_text(CHOOSER.format(en_title=titles["en"], zh_title=titles["zh"]),
                                    encoding="utf-8")
    print(f"book: build/book/en/ and build/book/zh/ in {time.perf_counter() - start:.1f} s; "
          f"open build/book/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
