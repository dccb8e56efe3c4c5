"""zh and en are one course: the same cells in the same order, the same code, the same tags."""

import pytest

from notebook_tools import (
    LANGS,
    NOTEBOOK_DIR,
    code_skeleton,
    load,
    nbgrader_meta,
    notebook_names,
    source,
    tags,
)

NAMES = notebook_names()


def test_every_notebook_has_its_twin():
    for lang in LANGS:
        other = "en" if lang == "zh" else "zh"
        for p in (NOTEBOOK_DIR / lang).glob("[0-9][0-9]_*.ipynb"):
            assert (NOTEBOOK_DIR / other / p.name).exists(), f"{p} has no twin in notebooks/{other}/"


@pytest.mark.parametrize("name", NAMES)
def test_same_cells_same_order(name):
    zh, en = load("zh", name), load("en", name)
    kinds_zh = [c["cell_type"] for c in zh["cells"]]
    kinds_en = [c["cell_type"] for c in en["cells"]]
    assert kinds_zh == kinds_en, f"{name}: cell types differ between zh and en"
    for i, (a, b) in enumerate(zip(zh["cells"], en["cells"], strict=True)):
        assert tags(a) == tags(b), f"{name} cell {i}: tags differ ({tags(a)} vs {tags(b)})"
        assert nbgrader_meta(a) == nbgrader_meta(b), f"{name} cell {i}: nbgrader metadata differs"
        if a["cell_type"] == "code":
            assert code_skeleton(source(a)) == code_skeleton(source(b)), (
                f"{name} cell {i}: code differs beyond strings and comments:\n"
                f"--- zh\n{source(a)}\n--- en\n{source(b)}"
            )


def test_skeleton_sees_code_changes_but_not_strings():
    # The parity test is only as good as this function: it must ignore words, not code.
    a = 'print("猫", x)  # 注释\ny = f"{x} 个"'
    b = 'print("cat", x)  # comment\ny = f"{x} items"'
    assert code_skeleton(a) == code_skeleton(b)
    assert code_skeleton("y = x + 1") != code_skeleton("y = x + 2")
    assert code_skeleton("f(a, b)") != code_skeleton("f(b, a)")


def test_skeleton_is_the_same_on_every_python():
    # From 3.12 on an f-string is several tokens (PEP 701); a sentence that puts its fields in
    # another order, or formats them otherwise, is still only words.
    zh = 'print(f"第 {i} 个头：{w[i]:.2f}，{name!r}", f"{f\'{x}\'}")\nz = 1'
    en = 'print(f"{name!r}: head {i}, {w[i]:.3f}", f"{x}")\nz = 1'
    assert code_skeleton(zh) == code_skeleton(en)
    assert code_skeleton(zh) != code_skeleton(zh.replace("z = 1", "z = 2"))
    assert code_skeleton('print(f"{a}", b)') != code_skeleton('print(f"{a}", c)')
