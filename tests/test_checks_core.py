import numpy as np
import pytest

from attention_course import softmax
from attention_course.checks import Case, CheckFailed, check_function, check_value, set_language

CASES = [Case({"zh": "小分数", "en": "small scores"}, (np.array([1.0, 2.0]),)),
         Case({"zh": "大分数 ±1e4", "en": "large scores ±1e4"}, (np.array([1e4, 0.0]),))]


def naive(x):
    e = np.exp(x)
    return e / e.sum()


def test_passes_with_one_line(capsys):
    check_function(softmax, softmax, CASES, name="softmax", lang="en")
    assert capsys.readouterr().out == "✓ softmax: all 2 cases pass\n"


@pytest.mark.parametrize("lang, fragments", [
    ("en", ["failed on input: large scores ±1e4", "contains NaN", "Hint: subtract"]),
    ("zh", ["输入：大分数 ±1e4", "结果里有 NaN", "提示：先减"]),
])
def test_failure_names_the_case_in_the_notebooks_language(lang, fragments):
    with pytest.raises(CheckFailed) as info:
        check_function(naive, softmax, CASES, name="softmax", lang=lang,
                       hint={"zh": "先减去最大值", "en": "subtract the maximum"})
    for f in fragments:
        assert f in str(info.value)


def test_shape_and_exception_reasons():
    with pytest.raises(CheckFailed, match=r"shape \(1,\), expected \(2,\)"):
        check_function(lambda x: x[:1], softmax, CASES, name="f", lang="en")
    with pytest.raises(CheckFailed, match="抛出了 ZeroDivisionError"):
        check_function(lambda x: 1 / 0, softmax, CASES, name="f", lang="zh")
    with pytest.raises(CheckFailed, match="expected a function"):
        check_function(3, softmax, CASES, name="f", lang="en")


def test_stub_error_is_not_swallowed():
    def stub(x):
        raise NotImplementedError()
    with pytest.raises(NotImplementedError):
        check_function(stub, softmax, CASES, name="f")


def test_check_value_and_language_setting(capsys):
    set_language("zh")
    try:
        check_value(4, 4, name="答案")
        assert capsys.readouterr().out == "✓ 答案：正确\n"
        with pytest.raises(CheckFailed, match="得到 5，应为 4"):
            check_value(5, 4, name="答案")
    finally:
        set_language("en")
    with pytest.raises(ValueError, match="lang must be one of"):
        set_language("fr")
