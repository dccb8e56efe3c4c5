"""Sphinx configuration of the course book, one for both languages.

book/build.py runs Sphinx once per language on a source folder it lays out under build/ (the
notebooks of that language and the pages it makes from the READMEs), with ``-D language=en`` or
``-D language=zh_CN``; course_book.py sets what depends on the language. Nothing here fetches
anything: the notebooks are read with their stored outputs, never run, and MathJax is copied
into the site.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

project = "attention_course"
author = "The attention_course authors"
copyright = "the attention_course authors (prose and figures CC BY-SA 4.0, code MIT)"

extensions = [
    "myst_nb",
    "sphinx-mathjax-offline",   # MathJax 3 from the package, copied into _static/mathjax
    "course_book",              # widgets, alt texts, the other language's twin (course_book.py)
]
templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["course_book.css"]

# The stored outputs are the book's: a notebook is never executed here.
nb_execution_mode = "off"
# ipywidgets' own script would come from a CDN; the explorers appear as their static figures.
nb_ipywidgets_js = {}
# $…$ and $$…$$ as in JupyterLab; a bare https:// link a link, as JupyterLab makes it (but not
# "plots.py": .py is a country's domain)
myst_enable_extensions = ["dollarmath", "linkify"]
myst_linkify_fuzzy_links = False

html_theme = "sphinx_book_theme"
html_theme_options = {
    "home_page_in_toc": True,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "show_toc_level": 2,
}
# the colours the accessibility test measures (with no mode given, the theme's script logs an
# error); a reader can still switch to dark
html_context = {"default_mode": "light"}
# An icon of its own: without one, a browser asks the server for /favicon.ico.
html_favicon = "_static/favicon.svg"
# The language switch under the title, before the course's pages (_templates/); the search
# button is the header's.
html_sidebars = {"**": ["navbar-logo.html", "language-switch.html", "sbt-sidebar-nav.html"]}
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
