"""Checks for the exercises of notebook 07 (attention that is learned: gradients and training).

Each check runs the learner's function on several inputs, edge cases and float32 included, and
compares with the library's backward passes and optimiser. The library functions the exercise
asks the learner to write are forbidden inside the learner's function. Before the cases, a probe
input is compared with the usual mistakes (a missing transpose, only the diagonal of the softmax
Jacobian, the scale forgotten in one gradient, no bias correction, ...); when one matches, the
message names that mistake.
"""

from __future__ import annotations

import numpy as np

from .. import backprop as bp
from ..optim import Adam
from . import forbidden as _forbidden
from .cases import Case, check_function, matching_hint
from .isolated import rebuildable
from .language import fail, get_language
from .language import label as _label
from .watcher import run_learner

__all__ = ["check_adam_step", "check_find_bugs", "check_masked_attention_backward",
           "check_scale_gradient"]


def _qkv(seed, L, S, d_k, d_v, batch=(), dtype=np.float64):
    rng = np.random.default_rng(seed)
    q, k = (rng.standard_normal((*batch, n, d_k)).astype(dtype) for n in (L, S))
    v = rng.standard_normal((*batch, S, d_v)).astype(dtype)
    dout = rng.standard_normal((*batch, L, d_v)).astype(dtype)
    return dout, q, k, v


def _swap(a):
    return np.swapaxes(a, -1, -2)


def _pieces(dout, q, k, v, mask=None, scale=None):
    """Weights, upstream of the weights, and the library's gradient of the scores (for mistakes)."""
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    z = (q @ _swap(k)) * scale
    w, cache = bp.softmax_forward(z, mask=mask)
    dw = dout @ _swap(v)
    dz = bp.softmax_backward(dw, cache)
    return w, dw, dz, scale


# --- exercise 1: the backward of masked attention -----------------------------------------------

BACKWARD_NAME = _label("练习 1（带掩码的注意力的反向传播）",
                       "Exercise 1 (backward of masked attention)")
BACKWARD_HINT = _label(
    "分三段往回走：先是值（权重的转置乘上游梯度），再是权重（上游梯度乘 v 的转置），然后穿过"
    "softmax（用整个雅可比矩阵，不只是对角线），最后是分数到 q 和 k（别忘了缩放因子，k 那一项要"
    "转置）。被屏蔽的位置权重为 0，梯度也应为 0；整行被屏蔽的查询梯度全为 0。",
    "Walk back in three stages: the values (the weights' transpose times the upstream "
    "gradient), the weights (the upstream gradient times v's transpose), through the softmax "
    "(with its whole Jacobian, not just the diagonal), and from the scores to q and k (keep the "
    "scale factor, and transpose for k). A masked position has weight 0 and must get gradient "
    "0; a fully masked query gets all zeros.",
)


def _reference_backward(dout, q, k, v, mask):
    _, _, cache = bp.attention_forward(q, k, v, attn_mask=mask)
    return bp.attention_backward(dout, cache)


def _backward_variants(dout, q, k, v, mask):
    w, dw, dz, scale = _pieces(dout, q, k, v, mask)
    dv = _swap(w) @ dout
    diag = w * (1 - w) * dw                                          # J's diagonal only
    no_mask_w, no_mask_dw, no_mask_dz, _ = _pieces(dout, q, k, v, None)
    return [
        ((dz @ k * scale, dz @ q * scale, dv), _label(
            "dk 缺了一个转置：你用了分数梯度本身，而 k 的梯度要用它的转置（第 j 个键收集的是"
            "第 j 列）。L = S 时形状碰巧对得上，数值却是错的。",
            "dk is missing a transpose: you used the gradient of the scores itself, but key j "
            "collects column j of it. With L = S the shapes happen to fit; the numbers do not.")),
        ((diag @ k * scale, _swap(diag) @ q * scale, dv), _label(
            "你只用了 softmax 雅可比矩阵的对角线 p(1 − p)：一个分数变了，同一行的"
            "所有权重都会跟着变，要减去每行的加权和。",
            "You used only the diagonal of the softmax Jacobian: changing one score moves every "
            "weight of its row, so the row's weighted sum must be subtracted.")),
        ((dz @ k, _swap(dz) @ q * scale, dv), _label(
            "dq 忘了乘缩放因子 1/√d_k：分数是 q·k 乘上这个因子，它对 q 的导数里也有这个因子。",
            "dq is missing the scale 1/√d_k: the scores are q·k times that factor, so their "
            "derivative with respect to q carries it too.")),
        ((dz @ k * scale, _swap(dz) @ q, dv), _label(
            "dk 忘了乘缩放因子 1/√d_k。", "dk is missing the scale 1/√d_k.")),
        ((no_mask_dz @ k * scale, _swap(no_mask_dz) @ q * scale, _swap(no_mask_w) @ dout),
         _label("你的梯度和完全不用掩码时一样：反向传播也要用前向时被屏蔽过的权重，被屏蔽的键"
                "不应该收到梯度。",
                "Your gradients are those of attention without the mask: the backward must use "
                "the masked weights, and a masked key must receive no gradient.")),
    ]


def check_masked_attention_backward(learner, lang: str | None = None) -> None:
    """Check ``learner(dout, q, k, v, mask) -> (dq, dk, dv)`` against the library's backward.

    The attention is softmax of the scaled scores (scale 1/√d_k, the mask True where a key takes
    part), times v; ``dout`` is the gradient of the loss with respect to its output.

    Parameters
    ----------
    learner : callable
        ``learner(dout, q, k, v, mask)`` with dout (..., L, d_v), q (..., L, d_k),
        k (..., S, d_k), v (..., S, d_v), mask bool (L, S) or broadcastable; returns the
        gradients with the shapes of q, k and v.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        Naming the input: causal mask, L ≠ S, a fully masked query, batch axes, float32.
    """
    forbidden = _forbidden.of("backward", "softmax_backward")
    causal4 = np.tril(np.ones((4, 4), dtype=bool))
    probe = (*_qkv(11, 4, 4, 4, 3), causal4)
    hint = matching_hint(learner, probe, _backward_variants(*probe), BACKWARD_HINT, forbidden)
    rng = np.random.default_rng(3)
    ragged = rng.random((3, 5)) < 0.6
    ragged[:, 0] = True
    dead_row = causal4.copy()
    dead_row[1] = False
    batch_mask = np.tril(np.ones((5, 5), dtype=bool))
    cases = [
        Case(_label("因果掩码，L = S = 4，d_k = 4", "causal mask, L = S = 4, d_k = 4"),
             (*_qkv(0, 4, 4, 4, 3), causal4)),
        Case(_label("随机布尔掩码，L = 3 个查询，S = 5 个键", "random bool mask, L = 3 queries, S = 5 keys"),
             (*_qkv(1, 3, 5, 6, 2), ragged)),
        Case(_label("第 1 个查询整行被屏蔽", "query 1 fully masked"),
             (*_qkv(2, 4, 4, 4, 3), dead_row)),
        Case(_label("批次轴 (2, 3)，因果掩码，n = 5", "batch axes (2, 3), causal mask, n = 5"),
             (*_qkv(4, 5, 5, 8, 4, batch=(2, 3)), batch_mask)),
        Case(_label("float32，因果掩码，d_k = 16", "float32, causal mask, d_k = 16"),
             (*_qkv(5, 4, 4, 16, 4, dtype=np.float32), causal4)),
    ]
    check_function(learner, _reference_backward, cases, name=BACKWARD_NAME, hint=hint, lang=lang,
                   forbidden=forbidden)


# --- exercise 2: the gradient with respect to the scale -----------------------------------------

SCALE_NAME = _label("练习 2（对缩放因子求梯度）", "Exercise 2 (the gradient of the scale)")
SCALE_HINT = _label(
    "缩放因子乘在每一个原始分数 q·k 上：先求损失对（缩放后）分数的梯度（要穿过 softmax），"
    "再把它和没缩放的 q·k 逐项相乘、全部加起来（批次轴也加）。",
    "The scale multiplies every raw score q·k: get the gradient of the loss with respect to the "
    "(scaled) scores, through the softmax, then multiply it entry by entry with the unscaled "
    "q·k and add everything up (batch axes included).",
)


def _reference_scale_gradient(dout, q, k, v, scale):
    _, _, dz, _ = _pieces(dout, q, k, v, None, scale)
    return float(np.sum(dz * (q @ _swap(k))))


def _scale_variants(dout, q, k, v, scale):
    w, dw, dz, _ = _pieces(dout, q, k, v, None, scale)
    raw = q @ _swap(k)
    return [
        (float(np.sum(dz * raw * scale)), _label(
            "你乘的是缩放后的分数：求导对象是缩放因子，乘它的是没缩放的 q·k。",
            "You multiplied by the scaled scores: the scale multiplies the unscaled q·k, and "
            "that is what its derivative is taken against.")),
        (float(np.sum(w * (1 - w) * dw * raw)), _label(
            "你只用了 softmax 雅可比矩阵的对角线：一个分数变了，同一行的所有权重都会跟着变。",
            "You used only the diagonal of the softmax Jacobian: changing one score moves every "
            "weight of its row.")),
        (float(np.sum(dz)), _label(
            "你把分数的梯度直接加起来了（softmax 每行的梯度和恒为 0）：还要乘上每个分数里缩放"
            "因子的系数，也就是没缩放的 q·k。",
            "You added up the scores' gradient alone (each row of it sums to 0 through the "
            "softmax): each entry must be weighted by what multiplies the scale there, the "
            "unscaled q·k.")),
    ]


def check_scale_gradient(learner, lang: str | None = None) -> None:
    """Check ``learner(dout, q, k, v, scale) -> float``, the derivative of the loss by the scale.

    The loss is the sum of the attention output times ``dout`` (so ``dout`` is its upstream
    gradient); the attention uses ``scale`` in place of 1/√d_k and no mask.

    Parameters
    ----------
    learner : callable
        ``learner(dout, q, k, v, scale)`` with shapes as in exercise 1; returns one number
        (summed over any batch axes).
    lang : {"zh", "en"}, optional
    """
    forbidden = _forbidden.of("gradient_check", "backward")
    probe = (*_qkv(21, 3, 4, 4, 2), 0.5)
    hint = matching_hint(learner, probe, _scale_variants(*probe), SCALE_HINT, forbidden)
    cases = [
        Case(_label("scale = 1/√d_k，d_k = 4", "scale = 1/√d_k, d_k = 4"), (*_qkv(0, 3, 4, 4, 2), 0.5)),
        Case(_label("scale = 1（不缩放），d_k = 8", "scale = 1 (unscaled), d_k = 8"),
             (*_qkv(1, 4, 4, 8, 3), 1.0)),
        Case(_label("scale = 0.1，L = 2，S = 6", "scale = 0.1, L = 2, S = 6"), (*_qkv(2, 2, 6, 5, 3), 0.1)),
        Case(_label("批次轴 (2,)，scale = 0.25", "batch axis (2,), scale = 0.25"),
             (*_qkv(3, 4, 4, 16, 2, batch=(2,)), 0.25)),
        Case(_label("float32，scale = 1/√d_k，d_k = 16", "float32, scale = 1/√d_k, d_k = 16"),
             (*_qkv(4, 3, 3, 16, 2, dtype=np.float32), 0.25)),
    ]
    check_function(learner, _reference_scale_gradient, cases, name=SCALE_NAME, hint=hint, lang=lang,
                   forbidden=forbidden)


# --- exercise 3: one Adam step ------------------------------------------------------------------

ADAM_NAME = _label("练习 3（Adam 的一步）", "Exercise 3 (one Adam step)")
ADAM_HINT = _label(
    "先更新两个滑动平均（梯度的和梯度平方的），再做偏差修正：分别除以 1 减去 β 的 t 次方，"
    "t 是这一步的编号（第一步 t = 1）；最后参数减去学习率乘修正后的一阶平均，除以修正后二阶"
    "平均的平方根加 eps。返回新的参数和两个平均，输入数组不要改。",
    "Update the two running means first (of the gradient and of its square), then correct their "
    "bias: divide each by one minus its beta to the power t, where t numbers this step (the "
    "first step has t = 1); last, subtract the learning rate times the corrected first mean, "
    "divided by the square root of the corrected second mean plus eps. Return the new "
    "parameter and both means; leave the input arrays unchanged.",
)


def _reference_adam(p, g, m, v, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
    params = {"p": np.array(p, copy=True)}
    opt = Adam(params, lr=lr, betas=betas, eps=eps)
    opt.m["p"][...] = m
    opt.v["p"][...] = v
    opt.t = t - 1
    opt.step({"p": np.asarray(g, dtype=params["p"].dtype)})
    return params["p"], opt.m["p"], opt.v["p"]


def _adam_variants(p, g, m, v, t, lr, betas, eps):
    b1, b2 = betas
    m1 = b1 * m + (1 - b1) * g
    v1 = b2 * v + (1 - b2) * g * g
    mh, vh = m1 / (1 - b1 ** t), v1 / (1 - b2 ** t)
    return [
        ((p - lr * m1 / (np.sqrt(v1) + eps), m1, v1), _label(
            "你没有做偏差修正：m 和 v 从 0 开始，前几步偏小，要分别除以 1 − β₁ᵗ 和 1 − β₂ᵗ。",
            "You left out the bias correction: m and v start at 0 and are too small in the first "
            "steps; divide them by 1 − β₁ᵗ and 1 − β₂ᵗ.")),
        ((p - lr * (m1 / (1 - b1 ** (t + 1))) / (np.sqrt(v1 / (1 - b2 ** (t + 1))) + eps), m1, v1),
         _label("偏差修正的次数错了一位：这一步的编号就是 t（第一步 t = 1），不是 t + 1。",
                "The bias correction uses the wrong power: this step's number is t (the first "
                "step has t = 1), not t + 1.")),
        ((p - lr * mh / np.sqrt(vh + eps), m1, v1), _label(
            "eps 放进了平方根里：它加在平方根之后。",
            "eps went inside the square root: it is added after the square root.")),
        ((p - lr * mh / (vh + eps), m1, v1), _label(
            "分母少了平方根：除以的是修正后二阶平均的平方根。",
            "The denominator is missing its square root.")),
    ]


def check_adam_step(learner, lang: str | None = None) -> None:
    """Check ``learner(p, g, m, v, t, lr, betas, eps) -> (p_new, m_new, v_new)`` against Adam.

    One step of :class:`attention_course.optim.Adam` (torch semantics, with bias correction) from
    the state ``m``, ``v`` after ``t - 1`` steps; ``t`` is the number of this step.

    Parameters
    ----------
    learner : callable
        Arrays p, g, m, v of one shape, an int t ≥ 1, floats lr and eps, and a pair betas.
    lang : {"zh", "en"}, optional
    """
    forbidden = _forbidden.of("optimiser")
    rng = np.random.default_rng(0)

    def state(shape, t, dtype=np.float64, scale=1.0):
        p, g = (rng.standard_normal(shape).astype(dtype) * scale for _ in range(2))
        m = (rng.standard_normal(shape) * 0.1 * (t > 1)).astype(dtype)
        v = (rng.random(shape) * 0.01 * (t > 1)).astype(dtype)
        return p, g, m, v

    probe = (*state((3,), 2), 2, 0.01, (0.9, 0.999), 1e-8)
    hint = matching_hint(learner, probe, _adam_variants(*probe), ADAM_HINT, forbidden)
    cases = [
        Case(_label("第 1 步（t = 1），m = v = 0", "first step (t = 1), m = v = 0"),
             (*state((4,), 1), 1, 1e-3, (0.9, 0.999), 1e-8)),
        Case(_label("第 3 步，lr = 0.01", "step 3, lr = 0.01"),
             (*state((2, 3), 3), 3, 0.01, (0.9, 0.999), 1e-8)),
        Case(_label("第 1000 步，betas = (0.8, 0.99)", "step 1000, betas = (0.8, 0.99)"),
             (*state((5,), 1000), 1000, 3e-3, (0.8, 0.99), 1e-8)),
        Case(_label("梯度全为 0，eps = 1e-3", "zero gradient, eps = 1e-3"),
             (*state((3,), 5)[:1], np.zeros(3), *state((3,), 5)[2:], 5, 1e-2, (0.9, 0.999), 1e-3)),
        Case(_label("float32 参数，第 2 步", "float32 parameters, step 2"),
             (*state((3, 2), 2, np.float32), 2, 1e-2, (0.9, 0.999), 1e-8)),
    ]
    check_function(learner, _reference_adam, cases, name=ADAM_NAME, hint=hint, lang=lang,
                   forbidden=forbidden)


# --- exercise 4: find the planted bug with finite differences -----------------------------------

BUGS_NAME = _label("练习 4（用有限差分找出错的梯度）", "Exercise 4 (find the wrong gradient)")
BUGS_HINT = _label(
    "只用前向（库里的 scaled_dot_product_attention）和一个标量损失（输出和一个固定随机数组"
    "逐项相乘再求和），对 q、k、v 的每个元素做中心差分（float64，eps 约 1e-6），再和被检查的"
    "反向传播给出的梯度比相对误差；误差大（比如 > 1e-4）的那个就是错的。答案可能是空集，"
    "也可能不止一个。",
    "Use only the forward (the library's scaled_dot_product_attention) and a scalar loss (the "
    "output times a fixed random array, summed); nudge every entry of q, k and v up and down "
    "(central differences, float64, eps about 1e-6) and compare with the gradients the suspect "
    "backward returns by relative error; the large ones (say > 1e-4) are wrong. The answer may "
    "be empty, or hold more than one name.",
)


def _suspects() -> dict:
    """The five suspect backwards, new function objects at each call, by planted mistake.

    Each takes ``(dout, q, k, v)`` of unmasked attention (scale 1/√d_k). They share one name and
    have no closure, no defaults and no docstring: only their code tells them apart.
    """
    made = {}

    def backward(dout, q, k, v):
        w, dw, dz, scale = _pieces(dout, q, k, v)
        return dz @ k * scale, _swap(dz) @ q * scale, _swap(w) @ dout
    made[None] = backward

    def backward(dout, q, k, v):                                              # noqa: F811
        w, dw, dz, scale = _pieces(dout, q, k, v)
        return dz @ k, _swap(dz) @ q * scale, _swap(w) @ dout
    made["dq_scale"] = backward

    def backward(dout, q, k, v):                                              # noqa: F811
        w, dw, dz, scale = _pieces(dout, q, k, v)
        return dz @ k * scale, -_swap(dz) @ q * scale, _swap(w) @ dout
    made["dk_sign"] = backward

    def backward(dout, q, k, v):                                              # noqa: F811
        w, dw, dz, scale = _pieces(dout, q, k, v)
        w_raw, _ = bp.softmax_forward(q @ _swap(k))
        return dz @ k * scale, _swap(dz) @ q * scale, _swap(w_raw) @ dout
    made["dv_unscaled_weights"] = backward

    def backward(dout, q, k, v):                                              # noqa: F811
        w, dw, dz, scale = _pieces(dout, q, k, v)
        diag = w * (1 - w) * dw                                               # J's diagonal only
        return diag @ k * scale, _swap(diag) @ q * scale, _swap(w) @ dout
    made["diagonal"] = backward
    for f in made.values():
        f.__qualname__ = "backward"
    return made


@rebuildable
def _suspect(bug: str | None):
    """The suspect backward with the planted mistake ``bug`` (None: a correct one); the grade of
    record makes the same one in its worker (:func:`~.isolated.rebuildable`)."""
    return _suspects()[bug]


SUSPECTS = [
    (None, set(), _label("没有错误的反向传播", "a correct backward")),
    ("dq_scale", {"dq"}, _label("dq 忘了缩放因子", "dq without the scale")),
    ("dk_sign", {"dk"}, _label("dk 的符号反了", "dk with the wrong sign")),
    ("dv_unscaled_weights", {"dv"}, _label("dv 用了没缩放的权重", "dv from unscaled weights")),
    ("diagonal", {"dq", "dk"}, _label("只用了 softmax 雅可比矩阵的对角线",
                                       "only the diagonal of the softmax Jacobian")),
]


def check_find_bugs(learner, lang: str | None = None) -> None:
    """Check ``learner(backward) -> names`` on suspect backwards with planted mistakes.

    Each suspect takes ``(dout, q, k, v)`` of unmasked attention (scale 1/√d_k) and returns
    ``(dq, dk, dv)``. The learner returns the names among ``"dq"``, ``"dk"``, ``"dv"`` of the
    gradients that are wrong (a set, list or tuple; empty when all are right). The library's
    gradient checker and backward are forbidden: the learner's own finite differences decide.

    Parameters
    ----------
    learner : callable
    lang : {"zh", "en"}, optional
    """
    lang = get_language(lang)
    forbidden = _forbidden.of("gradient_check", "backward")
    for bug, expected, label in SUSPECTS:
        got = run_learner(learner, _suspect(bug), name=BUGS_NAME, label=label,
                          forbidden=forbidden, hint=BUGS_HINT, lang=lang)
        try:
            names = {str(x) for x in (got or ())}
            shown_got = ", ".join(sorted(names)) or "∅"
        except TypeError:
            names, shown_got = None, repr(got)
        if names != expected:
            shown = ", ".join(sorted(expected)) or "∅"
            reason = {"zh": f"得到 {shown_got}，应为 {shown}",
                      "en": f"got {shown_got}, expected {shown}"}[lang]
            fail(BUGS_NAME, label, reason, hint=BUGS_HINT, lang=lang)
    print({"zh": f"✓ {BUGS_NAME['zh']}：{len(SUSPECTS)} 个测试用例全部通过",
           "en": f"✓ {BUGS_NAME['en']}: all {len(SUSPECTS)} cases pass"}[lang])


from .fresh import fresh_on_call  # noqa: E402 - last, once the module is complete

fresh_on_call(__name__)
