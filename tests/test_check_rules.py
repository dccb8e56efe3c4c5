"""Every rule an exercise states is enforced, each proved by a wrong or cheating answer of its kind.

- "do not change the inputs" (07 exercise 3): the arguments are compared after the call;
- a forbidden function called in a worker thread is seen (01, 03, 06);
- "no (t, t) matrix" (06 exercise 1): a peak-memory limit at t = 4096;
- one dtype rule: float64 in, float32 out fails everywhere (06 exercise 1, 07 exercise 1 too);
- data where shortcuts fail: X.T for the pseudo-inverse (02 exercise 2);
- every failure on numbers states its tolerance.
"""

import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from attention_course import scaled_dot_product_attention, softmax
from attention_course.checks import CheckFailed, check_function, nb01, nb02, nb03, nb06, nb07
from attention_course.checks.cases import Case
from attention_course.checks.comparison import input_precision, precision_reason
from notebook_tools import failure, load_solutions


def test_an_adam_step_that_updates_m_and_v_in_place_fails():
    def in_place(p, g, m, v, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        b1, b2 = betas
        m *= b1
        m += (1 - b1) * g                       # the caller's m is changed
        v *= b2
        v += (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        return p - lr * m_hat / (np.sqrt(v_hat) + eps), m, v

    msg = failure(nb07.check_adam_step, in_place)
    assert "changed its input m" in msg
    assert "改动了输入 m" in failure(nb07.check_adam_step, in_place, lang="zh")


def test_the_notebook_adam_step_leaves_its_inputs_alone(capsys):
    nb07.check_adam_step(load_solutions("07_learned_attention.ipynb", "en")["adam_step"])
    assert capsys.readouterr().out.startswith("✓")


def in_a_thread(fn, *args, **kwargs):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args, **kwargs).result()


@pytest.mark.parametrize(("check", "cheat", "shown"), [
    (nb01.check_stable_softmax, lambda x: in_a_thread(softmax, x, axis=-1), "softmax"),
    (nb03.check_attention,
     lambda q, k, v, mask=None: in_a_thread(scaled_dot_product_attention, q, k, v, attn_mask=mask),
     "scaled_dot_product_attention"),
    (nb06.check_attend_new_token,
     lambda q, K, V: in_a_thread(scaled_dot_product_attention, q[None], K, V)[0],
     "scaled_dot_product_attention"),
], ids=["01", "03", "06"])
def test_a_forbidden_function_called_in_a_worker_thread_is_seen(check, cheat, shown):
    assert shown in failure(check, cheat)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="threading.setprofile_all_threads is 3.12+")
def test_a_thread_started_before_the_check_is_seen_on_python_3_12_and_later():
    pool = ThreadPoolExecutor(1)
    try:
        pool.submit(lambda: None).result()                 # the worker thread is running already
        msg = failure(nb01.check_stable_softmax, lambda x: pool.submit(softmax, x, axis=-1).result())
        assert "softmax" in msg and "calls" in msg
    finally:
        pool.shutdown()


def test_a_new_token_from_the_full_causal_score_matrix_fails_the_memory_limit():
    def full_matrix(q, K, V):
        Q = np.concatenate([K[:-1], q[None]])               # every query, the new one last
        scores = Q @ K.T / np.sqrt(K.shape[-1])             # (t, t)
        scores = np.where(np.tri(len(K), dtype=bool), scores, -np.inf)
        return softmax(scores, axis=-1)[-1] @ V

    msg = failure(nb06.check_attend_new_token, full_matrix)
    assert "t = 4096" in msg and "MiB" in msg and "(t, t)" in msg


@pytest.mark.parametrize(("check", "solution", "notebook"), [
    (nb06.check_attend_new_token, "attend_new_token", "06_quadratic_cost.ipynb"),
    (nb07.check_masked_attention_backward, "my_attention_backward", "07_learned_attention.ipynb"),
])
def test_float64_in_float32_out_fails(check, solution, notebook):
    right = load_solutions(notebook, "en")[solution]

    def in_float32(*args):
        out = right(*args)
        return tuple(np.asarray(o, np.float32) for o in out) if isinstance(out, tuple) else \
            np.asarray(out, np.float32)

    assert "less precise than the inputs (float64)" in failure(check, in_float32)


def test_the_dtype_rule_follows_np_result_type_with_lists_as_float64():
    f32, f64 = np.ones(2, np.float32), np.ones(2)
    assert input_precision((f32, f32)) == 4
    assert input_precision((f32, f64)) == 8                  # np.result_type: float64
    assert input_precision((f32, [1.0, 2.0])) == 8           # a list counts as float64
    assert input_precision((f32, 0.5, 3)) == 4               # Python scalars are weak
    assert input_precision((np.arange(3), 4)) is None        # no float input: no rule
    assert precision_reason(f32, (f64,)) is not None
    assert precision_reason(f64, (f32,)) is None             # more precise than the inputs passes
    assert precision_reason((f64, f32), (f64,)) is not None  # any item of a tuple counts


def test_x_transposed_for_the_pseudo_inverse_fails():
    def with_transpose(X, i, j):
        P = np.asarray(X, dtype=float).T                     # not the pseudo-inverse
        return 20.0 * (P[:, i] + P[:, j])[:, None], P[:, j][:, None]

    msg = failure(nb02.check_one_way, with_transpose)
    assert "[0.9, 0.3, 0]" in msg and "at least 0.9" in msg


@pytest.mark.parametrize("lang, word", [("en", "tolerance"), ("zh", "容差")])
def test_every_numeric_failure_states_its_tolerance(lang, word):
    cases = [Case("x", (np.array([1.0, 2.0]),))]
    with pytest.raises(CheckFailed) as arrays:
        check_function(lambda x: x * (1 + 1e-7), lambda x: x, cases, name="f", lang=lang)
    with pytest.raises(CheckFailed) as number:
        check_function(lambda x: 1.0 + 1e-7, lambda x: 1.0, cases, name="f", lang=lang)
    for info in (arrays, number):
        assert word in str(info.value) and "1.0e-09" in str(info.value), str(info.value)
