"""Every notebook is laid out the same way, under the same section names, in both languages."""

import re

import pytest

from notebook_tools import LANGS, load, nbgrader_meta, notebook_names, source

CASES = [(lang, name) for name in notebook_names() for lang in LANGS]

# The fixed sections, in the order they appear; numbered content sections go between the
# second and the third.
SECTIONS = {
    "en": ["What you will learn", "Before you start", "Summary", "Exercises", "Next"],
    "zh": ["学习目标", "需要的基础", "小结", "练习", "下一步"],
}
EXERCISE_HEADING = {
    "en": re.compile(r"^\*\*Exercise (\d+): [^*\n]+\*\*", re.M),
    "zh": re.compile(r"^\*\*练习 (\d+)：[^*\n]+\*\*", re.M),
}


def headings(nb) -> list[str]:
    found = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            found += re.findall(r"^## (.+?)\s*$", source(cell), re.M)
    return found


@pytest.mark.parametrize(("lang", "name"), CASES, ids=[f"{lang}/{name}" for lang, name in CASES])
def test_fixed_sections_in_order(lang, name):
    nb = load(lang, name)
    found = headings(nb)
    fixed = [h for h in found if h in SECTIONS[lang]]
    assert fixed == SECTIONS[lang], f"fixed sections {fixed}, expected {SECTIONS[lang]}; all: {found}"
    content = found[found.index(SECTIONS[lang][1]) + 1:found.index(SECTIONS[lang][2])]
    assert content, "no content sections between the introduction and the summary"
    for k, heading in enumerate(content, start=1):
        assert heading.startswith(f"{k}. "), f"content section {k} is headed {heading!r} (want '{k}. …')"


@pytest.mark.parametrize(("lang", "name"), CASES, ids=[f"{lang}/{name}" for lang, name in CASES])
def test_each_exercise_announced_by_a_numbered_bold_heading(lang, name):
    nb = load(lang, name)
    cells = nb["cells"]
    numbers = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code" and nbgrader_meta(cell).get("solution"):
            intro = next((source(c) for c in reversed(cells[:i]) if c["cell_type"] == "markdown"), "")
            match = EXERCISE_HEADING[lang].search(intro)
            assert match, (f"the exercise before cell {i} has no heading like "
                           f"{EXERCISE_HEADING[lang].pattern!r}")
            numbers.append(int(match.group(1)))
    assert numbers == list(range(1, len(numbers) + 1)), f"exercises numbered {numbers}"
