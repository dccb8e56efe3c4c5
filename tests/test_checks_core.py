import functools
import re
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import scaled_dot_product_attention, softmax
from attention_course.checks import (
    Case,
    CheckFailed,
    assert_no_loops,
    check_function,
    check_value,
    compare,
    describe,
    fail,
    run_learner,
    set_language,
    tolerance_for,
    watch_calls,
)

CASES = [Case({"zh": "小分数", "en": "small scores"}, (np.array([1.0, 2.0]),)),
         Case({"zh": "大分数 ±1e4", "en": "large scores ±1e4"}, (np.array([1e4, 0.0]),))]
ROWS = [Case({"zh": "随机分数", "en": "random scores"}, (np.random.default_rng(0).normal(size=(4, 6)),))]


def naive(x):
    e = np.exp(x)
    return e / e.sum()


def by_hand(x):
    """A correct softmax that calls neither the library nor anything forbidden below but np.exp."""
    z = np.exp(x - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def failure(learner, reference=softmax, cases=ROWS, lang="en", **options) -> str:
    with pytest.raises(CheckFailed) as info:
        check_function(learner, reference, cases, name="softmax", lang=lang, **options)
    return str(info.value)


# --- the frame: success line, failure message, language ------------------------------------

def test_passes_with_one_line(capsys):
    check_function(softmax, softmax, CASES, name="softmax", lang="en")
    assert capsys.readouterr().out == "✓ softmax: all 2 cases pass\n"
    check_function(by_hand, softmax, CASES, name="softmax", lang="zh")
    assert capsys.readouterr().out == "✓ softmax：2 个测试用例全部通过\n"


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
    with pytest.raises(CheckFailed, match="returned None"):
        check_function(lambda x: None, softmax, CASES, name="f", lang="en")


def test_stub_error_is_not_swallowed():
    def stub(x):
        raise NotImplementedError()
    with pytest.raises(NotImplementedError):
        check_function(stub, softmax, CASES, name="f")
    # not by the forbidden-call watch, the loop check or run_learner either
    with pytest.raises(NotImplementedError):
        check_function(stub, softmax, CASES, name="f", forbidden=[softmax, np.exp], no_loops=True)
    with pytest.raises(NotImplementedError):
        run_learner(stub, 1.0, name="f", label="x", forbidden=[softmax])
    with pytest.raises(NotImplementedError), watch_calls([softmax], name="f"):
        stub(1.0)


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


def test_fail_builds_the_frame_in_both_languages():
    with pytest.raises(CheckFailed) as info:
        fail("ex 1", {"zh": "一行", "en": "one row"}, {"zh": "和不是 1", "en": "sum is not 1"},
             hint={"zh": "看看哪一维", "en": "which axis?"}, lang="zh")
    assert str(info.value) == "ex 1 未通过。输入：一行。结果：和不是 1。\n提示：看看哪一维"
    with pytest.raises(CheckFailed) as info:
        fail("ex 1", {"zh": "一行", "en": "one row"}, {"zh": "和不是 1", "en": "sum is not 1"}, lang="en")
    assert str(info.value) == "ex 1 failed on input: one row. Result: sum is not 1."


# --- forbidden calls -------------------------------------------------------------------------

def helper_that_calls_softmax(x):
    return softmax(x)


other_name = softmax
exp_by_another_name = np.exp


def test_forbidden_function_bound_to_another_name():
    message = failure(lambda x: other_name(x), forbidden=[softmax])
    assert "calls softmax" in message and "not to use" in message


def test_forbidden_function_in_a_lambda_or_a_helper():
    assert "calls softmax" in failure(lambda x: softmax(x), forbidden=[softmax])
    assert "calls softmax" in failure(helper_that_calls_softmax, forbidden=[softmax])
    assert "calls softmax" in failure(lambda x: helper_that_calls_softmax(x) + 0, forbidden=[softmax])


def test_learner_that_is_a_forbidden_function_or_wraps_one():
    for learner in (softmax, functools.partial(softmax, axis=-1), functools.wraps(softmax)(
            lambda x: softmax(x)), np.exp, functools.partial(np.exp)):
        message = failure(learner, forbidden=[softmax, np.exp])
        assert re.search(r"(passed|calls) (softmax|np\.exp)", message), message


@pytest.mark.parametrize("forbidden, learner", [
    (np.exp, lambda x: by_hand_with(exp_by_another_name, x)),       # a ufunc under another name
    (np.exp, lambda x: by_hand(x)),                                  # a ufunc called by a helper
    (np.einsum, lambda x: np.einsum("ij->ij", by_hand(x))),          # NumPy function written in Python
    (np.dot, lambda x: np.dot(by_hand(x), np.eye(x.shape[-1]))),     # NumPy function written in C
    (np.matmul, lambda x: np.matmul(by_hand(x), np.eye(x.shape[-1]))),
    (np.add, lambda x: by_hand(x) / np.add.reduce(by_hand(x), axis=-1, keepdims=True)),
    (np.linalg.norm, lambda x: by_hand(x) * np.linalg.norm(np.ones(1))),
])
def test_forbidden_numpy_functions(forbidden, learner):
    message = failure(learner, forbidden=[forbidden])
    assert f"calls np.{forbidden.__name__}" in message or "calls np.linalg.norm" in message, message


def test_forbidden_method_of_an_array():
    message = failure(lambda x: by_hand(x)[:, np.arange(x.shape[1]).argsort()],
                      forbidden=[np.ndarray.argsort])
    assert "calls ndarray.argsort" in message, message


def by_hand_with(exp, x):
    z = exp(x - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def test_forbidden_message_in_chinese_names_the_function():
    message = failure(lambda x: other_name(x), forbidden=[softmax], lang="zh")
    assert "你的函数调用了 softmax" in message and "输入：随机分数" in message


def test_learner_that_calls_allowed_functions_passes(capsys):
    # np.exp and np.max are fine when only the library softmax is forbidden, and the library's
    # own use of np.exp does not count against the learner who may use the library
    check_function(by_hand, softmax, ROWS, name="softmax", forbidden=[softmax])
    check_function(lambda x: softmax(x), softmax, ROWS, name="softmax", forbidden=[np.exp, np.dot])
    assert capsys.readouterr().out.count("✓") == 2


def test_a_forbidden_function_named_but_never_called_does_not_count(capsys):
    def learner(x, fallback=softmax):          # softmax is within reach, but not called
        return by_hand(x) if fallback is not None else fallback(x)
    check_function(learner, softmax, ROWS, name="softmax", forbidden=[softmax])
    assert "✓" in capsys.readouterr().out


def test_previous_profiler_is_restored_after_pass_failure_and_stub():
    seen = []

    def profiler(frame, event, arg):
        seen.append(event)

    def stub(x):
        raise NotImplementedError

    learners = [by_hand, lambda x: softmax(x), lambda x: 1 / 0, stub]
    old = sys.getprofile()
    try:
        for learner in learners:
            sys.setprofile(profiler)
            try:
                check_function(learner, softmax, ROWS, name="f", forbidden=[softmax])
            except (CheckFailed, NotImplementedError):
                pass
            assert sys.getprofile() is profiler
    finally:
        sys.setprofile(old)
    assert sys.getprofile() is old


def test_watch_calls_as_a_context_manager():
    with watch_calls([softmax], name="f"):
        by_hand(np.ones(3))
    with pytest.raises(CheckFailed, match="calls softmax"), watch_calls([softmax], name="f"):
        other_name(np.ones(3))
    # another exception inside the block passes through when nothing forbidden was called
    with pytest.raises(KeyError), watch_calls([softmax], name="f"):
        raise KeyError("x")


def test_run_learner_returns_the_result_and_names_the_case():
    assert run_learner(lambda a, b=0: a + b, 1, b=2, name="f", label="one") == 3
    with pytest.raises(CheckFailed, match="on input: one. Result: raised ValueError: bad"):
        run_learner(lambda: (_ for _ in ()).throw(ValueError("bad")), name="f", label="one")


# --- loops ---------------------------------------------------------------------------------

def loop_for(x):
    out = np.empty_like(x)
    for i in range(len(x)):
        out[i] = softmax(x[i])
    return out


def loop_while(x):
    out, i = np.empty_like(x), 0
    while i < len(x):
        out[i] = softmax(x[i])
        i += 1
    return out


def loop_list(x):
    return np.array([softmax(r) for r in x])


def loop_set_dict(x):
    rows = {i: softmax(r) for i, r in enumerate(x)}
    return np.array([rows[i] for i in sorted(rows)])


def loop_generator(x):
    return np.stack(tuple(softmax(r) for r in x))


def loop_map(x):
    return np.array(list(map(softmax, x)))


def loop_vectorize(x):
    return softmax(np.vectorize(lambda v: v)(x))


def loop_frompyfunc(x):
    return softmax(np.frompyfunc(lambda v: v, 1, 1)(x).astype(float))


def loop_apply_along_axis(x):
    return np.apply_along_axis(softmax, -1, x)


def loop_in_helper(x):
    return loop_for(x)


def loop_in_nested_def(x):
    def inner(rows):
        return np.array([softmax(r) for r in rows])
    return inner(x)


@pytest.mark.parametrize("learner, word", [
    (loop_for, "a for loop"), (loop_while, "a while loop"), (loop_list, "a comprehension"),
    (loop_set_dict, "a comprehension"), (loop_generator, "a generator expression"),
    (loop_map, "map"), (loop_vectorize, "np.vectorize"), (loop_frompyfunc, "np.frompyfunc"),
    (loop_apply_along_axis, "np.apply_along_axis"), (loop_in_helper, "your helper loop_for uses a for"),
    (loop_in_nested_def, "a comprehension"),
    (lambda x: np.array([softmax(r) for r in x]), "a comprehension"),
])
def test_every_kind_of_loop_is_found(learner, word):
    message = failure(learner, no_loops=True)
    assert word in message and "without loops" in message, message


def test_loop_message_in_chinese():
    assert "你的函数用了推导式" in failure(loop_list, no_loops=True, lang="zh")
    assert "用了 for 循环" in failure(loop_for, no_loops=True, lang="zh")


def vectorised(x):
    # for each row, subtract the maximum: "for" and "while" in a comment or a string are fine
    label = "for every row, while stable"
    z = np.exp(x - np.max(x, axis=-1, keepdims=True))
    del label
    return z / np.add.reduce(z, axis=-1, keepdims=True)


def test_code_without_loops_passes(capsys):
    check_function(vectorised, softmax, ROWS, name="softmax", no_loops=True)
    check_function(lambda x: softmax(x), softmax, ROWS, name="softmax", no_loops=True)
    check_function(functools.partial(by_hand), softmax, ROWS, name="softmax", no_loops=True)
    assert capsys.readouterr().out.count("✓") == 3


class RowSoftmax:
    def __call__(self, x):
        return np.stack([softmax(r) for r in x])


def test_a_callable_object_is_checked_through_its_call_method():
    assert "a comprehension" in failure(RowSoftmax(), no_loops=True)


def test_two_lambdas_on_one_line_are_told_apart():
    pair = (lambda x: by_hand(x), lambda x: np.array([softmax(r) for r in x]))
    assert_no_loops(pair[0], name="f")
    with pytest.raises(CheckFailed, match="comprehension"):
        assert_no_loops(pair[1], name="f")


def test_unreadable_source_is_said_not_passed():
    namespace = {"np": np}
    exec(textwrap.dedent("""
        def hidden(x):
            return x
    """), namespace)
    with pytest.raises(CheckFailed, match="could not read the source"):
        assert_no_loops(namespace["hidden"], name="f")


# --- tolerances that follow the dtype -------------------------------------------------------

def attention_by_hand(q, k, v):
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1]).astype(q.dtype)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)) @ v


def qkv(seed, scale, dtype):
    rng = np.random.default_rng(seed)
    return tuple((scale * rng.normal(size=(4, 6, 8))).astype(dtype) for _ in range(3))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), scale=st.floats(0.1, 4.0))
def test_correct_float32_attention_computed_in_float32_passes(seed, scale):
    q, k, v = qkv(seed, scale, np.float32)
    assert attention_by_hand(q, k, v).dtype == np.float32
    check_function(attention_by_hand, scaled_dot_product_attention, [Case("qkv", (q, k, v))], name="sdpa")


def test_float32_off_by_1e_3_fails_and_float64_off_by_1e_6_fails():
    q, k, v = qkv(1, 1.0, np.float32)
    with pytest.raises(CheckFailed, match="dtype float32"):
        check_function(lambda *a: attention_by_hand(*a) + np.float32(1e-3),
                       scaled_dot_product_attention, [Case("qkv", (q, k, v))], name="sdpa")
    q, k, v = qkv(1, 1.0, np.float64)
    check_function(attention_by_hand, scaled_dot_product_attention, [Case("qkv", (q, k, v))], name="sdpa")
    with pytest.raises(CheckFailed, match="dtype float64"):
        check_function(lambda *a: attention_by_hand(*a) + 1e-6,
                       scaled_dot_product_attention, [Case("qkv", (q, k, v))], name="sdpa")
    # a float64 answer is float64-exact even though a float32 one would be allowed this error
    x = np.random.default_rng(2).normal(size=(3, 5))
    assert compare(softmax(x) * (1 + 1e-7), softmax(x)) is not None
    assert compare((softmax(x) * (1 + 1e-7)).astype(np.float32), softmax(x).astype(np.float32)) is None


def test_tolerance_follows_the_least_precise_floating_dtype():
    f16, f32, f64 = (np.ones(2, dtype=d) for d in (np.float16, np.float32, np.float64))
    assert tolerance_for(f64) == tolerance_for(1.0) == tolerance_for(np.arange(3)) == tolerance_for()
    assert tolerance_for(f64, f32) == tolerance_for(f32) == tolerance_for([f32, 2]) == tolerance_for(
        {"a": f32}) == tolerance_for(np.float32(1.0)) == tolerance_for(np.ones(2, np.complex64))
    assert tolerance_for(f16, f32, f64) == tolerance_for(f16)
    rtols = [tolerance_for(a)[0] for a in (f16, f32, f64)]
    assert rtols == sorted(rtols, reverse=True) and rtols[1] <= 1e-4 and rtols[2] <= 1e-8


def test_explicit_tolerances_are_used_as_given():
    assert compare(np.array([1.0]), np.array([1.0 + 1e-12]), rtol=0, atol=0) is not None
    assert compare(np.array([1.0]), np.array([1.1]), rtol=0.2, atol=0) is None


# --- messages ----------------------------------------------------------------------------------

def test_message_shows_the_worst_index_with_both_values_shape_and_dtype():
    expected = np.zeros((3, 20))
    got = expected.copy()
    got[2, 15] = 0.5                      # the first values of both arrays are all the same
    got[0, 1] = 0.01
    message = compare(got, expected, lang="en")
    assert "2 of 60 values differ" in message
    assert "index (2, 15): got 0.5, expected 0.0" in message
    assert "shape (3, 20), dtype float64" in message
    # the values around the worst one, not the first six, so got and expected do not look alike
    assert "around it, got [..., 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, ...]" in message


def test_close_values_are_printed_with_enough_digits_to_differ():
    message = compare(np.array([0.1234561]), np.array([0.1234567]), lang="en")
    got, expected = re.search(r"got (\S+), expected (\S+?) \(", message).groups()
    assert got != expected


@settings(max_examples=50, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data())
def test_worst_index_is_where_the_largest_error_is(shape, data):
    expected = np.random.default_rng(0).normal(size=shape)
    index = tuple(data.draw(st.integers(0, n - 1)) for n in shape)
    got = expected.copy()
    got[index] += 1.0
    message = compare(got, expected, lang="en")
    assert f"index ({', '.join(map(str, index))}{',' if len(index) == 1 else ''})" in message


def test_booleans_are_true_and_false():
    message = compare(np.array([[True, False, True]]), np.array([[True, True, True]]), lang="en")
    assert "index (0, 1): got False, expected True" in message and "dtype bool" in message
    assert "1." not in message and " 0," not in message
    zh = compare(np.array([True, False]), np.array([True, True]), lang="zh")
    assert "得到 False，应为 True" in zh
    assert compare(True, False, lang="en") == "got True, expected False"
    assert compare(np.array([True]), np.array([1.0]), lang="en") == "dtype bool, expected float64"


def test_nan_is_reported_as_nan():
    message = compare(np.array([1.0, np.nan, 2.0]), np.array([1.0, 0.5, 2.0]), lang="en")
    assert "contains NaN (1 of 3 values), first at index (1,) where 0.5 was expected" in message
    assert compare(float("nan"), 1.0, lang="zh") == "结果是 NaN，应为 1.0"
    assert compare(np.array([np.nan]), np.array([np.nan])) is None


def test_describe_and_lists():
    assert describe(np.array([True, False]), "en") == "array of shape (2,), dtype bool: [True, False]"
    assert describe(np.zeros((10, 10)), "zh") == "形状 (10, 10)、dtype float64 的数组"
    assert compare([0.5, 0.5], np.array([0.5, 0.5])) is None              # a list is an answer too
    assert compare([0.5, 0.6], [0.5, 0.5], lang="en").startswith("1 of 2 values differ")
    assert compare((np.ones(2), 3), (np.ones(2), 4), lang="en") == "item 1: got 3, expected 4"
    assert compare([4, 6], (4, 6)) is None and compare([4, 7], (4, 6)) is not None
    assert compare({"a": np.ones(2)}, {"a": np.ones(2)}) is None
    message = compare({"a": np.ones(2)}, {"a": np.zeros(2)}, lang="en")
    assert message.startswith("key 'a': 2 of 2 values differ")
    ragged = [np.ones(2), np.ones(3)]
    assert compare([np.ones(2), np.ones(3)], ragged) is None
    assert compare([np.ones(2), np.zeros(3)], ragged, lang="en").startswith("item 1: 3 of 3 values differ")


CJK = r"[\u4e00-\u9fff]"


def chinese_messages():
    x = np.random.default_rng(0).normal(size=(2, 3))
    yield compare(x + 1, x, lang="zh")
    yield compare(np.array([np.nan, 1.0]), np.array([0.0, 1.0]), lang="zh")
    for options in ({"forbidden": [softmax]}, {"no_loops": True}):
        with pytest.raises(CheckFailed) as info:
            check_function(loop_list if options.get("no_loops") else softmax, softmax, ROWS, name="练习 1",
                           lang="zh", hint="看看哪一维", **options)
        yield str(info.value)


def test_chinese_messages_use_full_width_punctuation():
    for message in chinese_messages():
        bad = re.findall(rf"{CJK}[,:;?!()]|[,:;?!()]{CJK}", message)
        assert not bad, (bad, message)
