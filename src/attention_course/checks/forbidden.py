"""The library functions an exercise may forbid, in named categories that the checks compose.

An exercise that asks the learner to build something the library already has forbids the
library's versions while the learner's function runs (:func:`~attention_course.checks.watch_calls`).
The lists live here, once, so that a function added to the library is added to its category and
every check that forbids the category forbids it too; ``tests/test_forbidden.py`` fails when a
public function of the library is in no category and not in :data:`ALLOWED_EVERYWHERE`.

Categories (:data:`CATEGORIES`):

- ``softmax``: every softmax of the library (also inside a backward pass or a loss);
- ``attention``: every function or layer that computes attention weights or outputs;
- ``online_softmax``: the running softmax accounts of notebook 06;
- ``masks``: the boolean masks (causal, padding, sliding window);
- ``positional``: the position encodings; ``rotary``: the rotations among them;
- ``grouped``: grouped-query attention in every form;
- ``layers``: the attention layers, their constructors and parameter counts;
- ``cosine``: the cosine similarity;
- ``backward``: the backward passes of attention; ``softmax_backward``: that of the softmax (a
  separate category: a suspect backward handed to the learner may call it);
- ``gradient_check``: the finite-difference gradient and its checker;
- ``optimiser``: the Adam step;
- ``head_scores``: the head measures of notebooks 08 and 09 (induction, previous token, first token,
  the head detector's patterns and scores, copying scores, direct logit attribution);
  ``model_cost``: its operation count of a forward pass.

SciPy's and PyTorch's softmax and attention join ``softmax`` and ``attention`` when the learner's
session has loaded them (neither is a dependency of the course, and a module never imported cannot
be called; importing them here would slow every check down).

How a check module uses it::

    from . import forbidden
    from .cases import check_function

    def check_my_softmax(fn, lang=None):
        check_function(fn, reference, cases, name=..., hint=...,
                       forbidden=forbidden.of("softmax"), lang=lang)

:func:`of` is called when the check runs (not at import), so the loaded outside libraries are
those of that moment. A check module ends with these two lines, so that ``nbNN_checks.check_x``
in a notebook is taken from a fresh copy of the installed file at every call
(:func:`~attention_course.checks.fresh.fresh_copy`; ``tests/test_fresh_checks.py`` fails without)::

    from .fresh import fresh_on_call  # noqa: E402 - last, once the module is complete

    fresh_on_call(__name__)
 A new check module adds nothing here unless the library gained a function:
then that function goes into its category (or into :data:`ALLOWED_EVERYWHERE` when no exercise
could be answered by calling it).
"""

from __future__ import annotations

import sys

from .. import backprop as bp
from .. import circuits, fast, gradcheck
from .. import minimal as short
from ..attention import (
    attend_prepared,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
)
from ..chunked import online_softmax_attention
from ..decoding import KVCache, attend_one, decode_causal, merge_softmax_states, softmax_state, state_output
from ..grouped import GroupedQueryAttention, grouped_query_attention, repeat_kv
from ..multihead import MultiHeadAttention, multi_head_attention_reference
from ..optim import Adam
from ..positional import (
    alibi_bias,
    apply_rotary,
    frequencies,
    position_shift_matrix,
    rotary_tables,
    rotate_pairs,
    sinusoidal_positional_encoding,
)
from ..pretrained import (
    PretrainedModel,
    first_token_scores,
    forward_flops,
    induction_scores,
    previous_token_scores,
)
from ..projections import cosine_similarity
from ..softmax import softmax, softmax_rows

__all__ = ["ALLOWED_EVERYWHERE", "CATEGORIES", "OUTSIDE", "from_names", "names_of", "of"]

_ROTARY = (position_shift_matrix, apply_rotary, rotary_tables, rotate_pairs, short.apply_rotary)

#: Category name -> the library's callables in it. A class stands for its constructor and its call.
CATEGORIES: dict[str, tuple] = {
    "softmax": (softmax, softmax_rows, bp.softmax_forward, bp.softmax_cross_entropy, short.softmax,
                short.softmax_cross_entropy),
    "attention": (scaled_dot_product_attention, attend_prepared, fast.fast_attention,
                  online_softmax_attention, grouped_query_attention, GroupedQueryAttention,
                  MultiHeadAttention, multi_head_attention_reference, bp.attention_forward,
                  bp.mha_forward, attend_one, decode_causal, KVCache, PretrainedModel,
                  short.scaled_dot_product_attention),
    "online_softmax": (softmax_state, merge_softmax_states, state_output),
    "masks": (causal_mask, padding_mask, sliding_window_mask),
    "positional": (sinusoidal_positional_encoding, frequencies, alibi_bias, *_ROTARY),
    "rotary": _ROTARY,
    "grouped": (grouped_query_attention, repeat_kv, GroupedQueryAttention),
    "layers": (MultiHeadAttention, GroupedQueryAttention, GroupedQueryAttention.parameter_shapes),
    "cosine": (cosine_similarity,),
    "backward": (bp.attention_backward, bp.mha_backward, short.attention_backward, short.mha_backward),
    "softmax_backward": (bp.softmax_backward, short.softmax_backward),
    "gradient_check": (gradcheck.numerical_gradient, gradcheck.check_gradient),
    "optimiser": (Adam.step,),
    "head_scores": (induction_scores, previous_token_scores, first_token_scores,
                    circuits.detection_pattern, circuits.head_detector_scores, circuits.copying_scores,
                    circuits.direct_logit_attribution, circuits.induction_attention,
                    circuits.offset_weights),
    "model_cost": (forward_flops,),
}

#: Public callables of the library that no exercise forbids (helpers, building blocks of the tiny
#: models, cost formulas, teaching material), as ``"module.name"`` so that none is imported here.
ALLOWED_EVERYWHERE: tuple[str, ...] = (
    "projections.project_qkv", "projections.plane_rotation",
    "multihead.split_heads", "multihead.merge_heads", "multihead.from_torch_mha_mask",
    "multihead.check_layer_inputs", "attention.check_finite", "attention.prepare_attention_inputs",
    "fast.kernel.default_block_q", "gradcheck.relative_error", "optim.Adam",
    "backprop.linear_forward", "backprop.linear_backward", "backprop.embedding_forward",
    "backprop.embedding_backward", "backprop.positional_forward", "backprop.positional_backward",
    "backprop.residual_forward", "backprop.residual_backward", "backprop.layernorm_forward",
    "backprop.layernorm_backward", "backprop.unchecked",
    "minimal.split_heads", "minimal.merge_heads", "minimal.linear_backward", "minimal.embedding_backward",
    "minimal.positional_backward", "minimal.residual_backward", "minimal.layernorm_backward",
    "cost.attention_flops", "cost.attention_memory_bytes", "cost.max_length_for_memory",
    "cost.recurrent_flops", "cost.layer_complexity", "cost.windowed_pairs",
    "cost.windowed_attention_flops", "cost.windowed_attention_memory_bytes",
    "cost.chunked_attention_memory_bytes", "cost.stored_bench", "cost.StoredBench",
    "examples.toy_embeddings", "examples.meaning_embeddings",
    "head_patterns.hand_made_embeddings", "head_patterns.head_gain", "head_patterns.hand_set_heads",
    "head_patterns.layer_patterns",
    "plots.cjk_font_path", "plots.use_cjk_font", "plots.heatmap", "plots.heatmaps", "plots.weight_bars",
    "plots.set_heatmap", "plots.bar_artists", "plots.set_bars",
    "progress.ProgressLine",
    "tasks.LibraryBatch", "tasks.SequenceBatch", "tasks.library_batch", "tasks.previous_token_batch",
    "tasks.previous_two_batch", "tasks.repeat_batch", "tasks.first_and_previous_batch",
    "tiny_model.LibraryModel", "tiny_model.AttentionOnlyModel", "tiny_model.TrainingRun",
    "tiny_model.train", "tiny_model.train_many", "tiny_model.start_workers",
    "tiny_model.repeat_model", "tiny_model.two_token_model",
    "sweep.Claim", "sweep.run", "sweep.summary", "sweep.stored", "sweep.evaluation_batches", "sweep.main",
    "sweep.table", "sweep.not_clear", "sweep.circuit_seeds", "sweep.has_circuit", "sweep.other_solution",
    "pretrained.Config", "pretrained.load", "pretrained.default_model_path",
    "pretrained.repeated_random_tokens", "pretrained.token_losses", "pretrained.transformers_sample",
    "pretrained.TransformersSample",
    "gguf_file.GGUFError", "gguf_file.GGUFFile", "gguf_file.TensorInfo", "gguf_file.read_gguf",
    "gguf_file.dequantize",
    "fast.thread_pool.available_cpus", "fast.thread_pool.blas_one_thread", "fast.thread_pool.run_shared",
    "workers.pool.WorkerPool",
    "hooks.act_name", "hooks.HookPoint", "hooks.ActivationCache", "hooks.Hooks", "hooks.zero_ablate_head",
    "hooks.mean_ablate_head", "hooks.resample_ablate_head", "hooks.patch_activation",
    "controls.trials", "controls.induction_heads", "controls.head_means", "controls.zero_ablation",
    "controls.mean_ablation", "controls.second_copy_losses", "controls.random_draws",
    "controls.same_layer_heads", "controls.next_heads", "controls.run", "controls.stored", "controls.main",
    "workbook.stubs.is_solution", "workbook.stubs.exercise_id", "workbook.stubs.solution_code",
    "workbook.stubs.stub_source", "workbook.build.hints", "workbook.build.help_cell",
    "workbook.build.workbook_notebook", "workbook.build.with_hints", "workbook.sync.sync",
    "workbook.sync.Report",
    "workbook.__main__.main", "workbook.progress.progress", "workbook.progress.notebook_progress",
    "workbook.progress.table",
)


#: Functions of other libraries that join a category when the session has loaded their module.
OUTSIDE: dict[str, tuple[str, ...]] = {
    "softmax": ("scipy.special.softmax", "torch.softmax", "torch.Tensor.softmax",
                "torch.nn.functional.softmax"),
    "attention": ("torch.nn.functional.scaled_dot_product_attention",),
}


def _outside(category: str) -> list:
    """The functions of :data:`OUTSIDE` for ``category`` whose module the session has loaded."""
    found = []
    for dotted in OUTSIDE.get(category, ()):
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            obj = sys.modules.get(".".join(parts[:cut]))
            if obj is None:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr, None)
            if obj is not None:
                found.append(obj)
            break
    return found


def names_of(calls) -> list[str]:
    """``"module:qualified name"`` of each of the library's callables in ``calls``, to send them to
    another process (:func:`from_names`); ``ValueError`` for one that cannot be found again.

    >>> names_of(of("cosine"))
    ['attention_course.projections:cosine_similarity']
    """
    names = []
    for f in calls:
        name = f"{getattr(f, '__module__', '')}:{getattr(f, '__qualname__', '')}"
        if not _same_callable(_find(name), f):
            raise ValueError(f"{f!r} cannot be found again by its name {name}")
        names.append(name)
    return names


def from_names(names) -> tuple:
    """The callables :func:`names_of` named, each category complete with the functions of other
    libraries that this session has loaded (:data:`OUTSIDE`).

    >>> from_names(names_of(of("cosine"))) == of("cosine")
    True
    """
    found = [_find(n) for n in names]
    for category, members in CATEGORIES.items():
        if category in OUTSIDE and all(any(_same_callable(m, f) for f in found) for m in members):
            found += [f for f in _outside(category) if not any(f is g for g in found)]
    return tuple(found)


def _find(name: str):
    import importlib

    module, _, qualname = name.partition(":")
    if module.split(".")[0] != "attention_course" or not qualname:
        raise ValueError(f"{name} is not a callable of the course's library")
    obj = importlib.import_module(module)
    for attr in qualname.split("."):
        obj = getattr(obj, attr)
    return obj


def _same_callable(a, b) -> bool:
    # a method looked up again is a new bound object around the same function
    return a is b or (getattr(a, "__func__", a) is getattr(b, "__func__", b))


def of(*names: str) -> tuple:
    """The callables of the named categories together, each once, in order.

    Raises ``KeyError`` naming the known categories for a name that is not one of them.
    """
    found: list = []
    for name in names:
        if name not in CATEGORIES:
            raise KeyError(f"no category {name!r}; the categories are {', '.join(CATEGORIES)}")
        for f in (*CATEGORIES[name], *_outside(name)):
            if not any(f is g for g in found):
                found.append(f)
    return tuple(found)
