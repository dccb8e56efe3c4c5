"""The course book's Sphinx extension: what a notebook's page shows, and its twin in the other
language.

- An explorer is an ipywidgets box, stored in the notebook as its text repr ("VBox(children=...")
  since the notebooks keep no widget state. A page gets a line saying that it is live in
  JupyterLab instead; its static figure is the image of the cell after it, as in the notebook.
- Alt text: a code cell's metadata "alt" is a list of strings, one per image output of the cell,
  in order, in the notebook's language. Each becomes its image's alt. (JupyterLab has no place
  for an output's alt text yet; there each figure's title names what it shows.)
- Every page links to the same page in the other book (_templates/language-switch.html).
- The Chinese book's search splits a query into the words of its index (chinese_query.js): the
  search box has no jieba to split "因果掩码" into the words Sphinx indexed.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import jieba
from docutils import nodes
from sphinx.search.zh import SearchChinese
from sphinx.transforms.post_transforms import SphinxPostTransform

OTHER = {"en": "zh", "zh": "en"}
# what the switch says, in the language it leads to; lang and hreflang take BCP 47 tags
NAME = {"en": "English", "zh": "中文"}
TAG = {"en": "en", "zh": "zh-CN"}
# ipywidgets' repr of a box: the class name, then its children
WIDGET_REPR = re.compile(r"^[A-Z]\w*\(children=\(")
LIVE = {
    "en": ("Live in JupyterLab: run this notebook there (", ") to move this explorer's controls. "
           "This page shows its static figure at the default setting."),
    "zh": ("在 JupyterLab 里运行这本 notebook（", "），就能拨动这个交互控件；网页上是它默认设置下的静态图。"),
}


def book_language(config) -> str:
    """The book's folder name, en or zh, from Sphinx's language (en, zh_CN)."""
    return "zh" if config.language.startswith("zh") else "en"


def is_cell(node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == "cell_code"


class ExplorersAndAltTexts(SphinxPostTransform):
    """Runs after MyST-NB's SelectMimeType (priority 4) has kept one form of each output."""

    default_priority = 5

    def run(self, **kwargs) -> None:
        before, after = LIVE[book_language(self.config)]
        for cell in list(self.document.findall(is_cell)):
            # an image without its alt text keeps Sphinx's default, its file name, which the
            # alt-text test (tests/book/) reports
            images = list(cell.findall(nodes.image))
            for image, alt in zip(images, cell["cell_metadata"].get("alt", []), strict=False):
                image["alt"] = alt
            for block in list(cell.findall(nodes.literal_block)):
                if "text_plain" in block["classes"] and WIDGET_REPR.match(block.astext()):
                    note = nodes.paragraph("", "", nodes.Text(before), nodes.literal(text="make lab"),
                                           nodes.Text(after), classes=["explorer-note"])
                    block.parent.replace(block, note)   # not replace_self: it would keep the block's classes


def add_twin(app, pagename, templatename, context, doctree) -> None:
    """The same page in the other book: both books have the same page names, side by side."""
    other = OTHER[book_language(app.config)]
    up = "../" * (pagename.count("/") + 1)
    context["twin"] = {"url": f"{up}{other}/{pagename}.html", "name": NAME[other], "lang": TAG[other]}


class ChineseSearch(SearchChinese):
    """Sphinx's Chinese search (jieba), with a query splitter for the search box."""

    js_splitter_code = Path(__file__).with_name("chinese_query.js").read_text(encoding="utf-8")


def setup(app):
    # jieba (the Chinese search's word splitter) logs each load of its dictionary: not a warning
    jieba.setLogLevel(logging.WARNING)
    app.add_search_language(ChineseSearch)
    app.add_post_transform(ExplorersAndAltTexts)
    app.connect("html-page-context", add_twin)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
