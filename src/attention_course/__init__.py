"""attention_course: the library behind the self-attention course (中文 / English).

Two parts (every module is listed here, and a test, tests/test_library_map.py, fails when one is
missing). What a learner reads, one module per idea in the order of the notebooks:

- :mod:`.minimal` - each idea of the notebooks in its shortest readable form (at most 25 lines),
  tested equal to the full functions below, whose docstrings point to it (01-07)
- :mod:`.softmax` - a stable softmax (01, 03)
- :mod:`.projections` - Q, K, V from one embedding (02)
- :mod:`.attention` - scaled dot-product attention and masks, PyTorch semantics (03)
- :mod:`.multihead` - multi-head attention, ``torch.nn.MultiheadAttention`` layout (04)
- :mod:`.grouped` - grouped-query attention: H query heads share G key/value heads (04)
- :mod:`.head_patterns` - heads whose weights are set by hand to show what trained heads do (04)
- :mod:`.positional` - sinusoidal, rotary and ALiBi positional encoding (05)
- :mod:`.cost` - how many operations and how much memory attention needs (06)
- :mod:`.chunked` - exact attention in blocks with an online softmax (06)
- :mod:`.decoding` - one token at a time against a KV cache (06)
- :mod:`.backprop` - forward/backward pairs of every layer, CS231n style (07)
- :mod:`.optim` - Adam (07)
- :mod:`.gradcheck` - numerical gradients and relative errors (07)
- :mod:`.tasks` - small seeded tasks that tiny models learn in seconds (07, 08)
- :mod:`.tiny_model` - tiny attention-only models and their training loop (07, 08)
- :mod:`.sweep` - 07's and 08's claims about trained models, measured on seeds no notebook uses;
  08's stored other solution (07, 08)
- :mod:`.progress` - a progress line that updates in place (07)
- :mod:`.gguf_file` - a GGUF file read and dequantized in NumPy (09)
- :mod:`.pretrained` - SmolLM2-135M from its GGUF file, run on the library's RoPE, grouped-query
  attention and KV cache (:class:`.decoding.KVCache`) (09)
- :mod:`.hooks` - inside a model with TransformerLens's names: ``run_with_cache``,
  ``run_with_hooks``, the activation cache, ablation and patching hooks (08, 09)
- :mod:`.circuits` - standard head measures with TransformerLens's definitions: head-detector
  scores, OV copying scores, direct logit attribution (08, 09)
- :mod:`.controls` - 09's ablation controls on the real model (random and same-layer heads),
  measured once and stored (09)
- :mod:`.examples` - the running examples of the course, in both languages
- :mod:`.plots` - heatmaps and bars, Chinese labels in the bundled Noto Sans SC font
- :mod:`.widgets` - one live widget module per notebook (``nbNN``: its controls and a pure
  ``compute()``)
- :mod:`.workbook` - the learner's workbook: the notebooks with each exercise as a stub, hints
  and the solution on request, kept in step with ``notebooks/`` without losing the learner's work
- :mod:`.checks` - one exercise-check module per notebook (``nbNN``), and
  ``checks.forbidden``: the library functions an exercise may forbid, by category

The machinery, each in a subpackage or module named for it, which following the course never
needs:

- :mod:`.fast` - exact attention arranged for speed, benchmarked against PyTorch (``fast.kernel``),
  and the persistent threads it shares its blocks out to (``fast.thread_pool``) (06)
- :mod:`.workers` - the worker processes that run :func:`.tiny_model.train_many`'s trainings
  (``workers.pool``) (07, 08)
- ``widgets.renderer`` - ``Explorer``: a widget's figure built once and updated, sent as PNG
- ``checks``' shared modules, one concern each: ``language`` (the session's language, the
  bilingual texts, ``CheckFailed``), ``comparison`` (tolerances and ``compare``, the grader's
  side), ``watcher`` (forbidden calls), ``loops``, ``cases`` (the loop over cases), ``fresh`` (a
  fresh copy of a check at each call), ``plain`` (plain data across a process boundary, read
  without running code) and ``submission`` (what a re-check reads of a notebook)
- :mod:`._validate` - the input checks shared by the public functions (clear errors at the boundary)

Mask convention everywhere: a boolean mask is True where a position takes part. Heads, layers,
positions and steps count from 0.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from .attention import causal_mask, padding_mask, scaled_dot_product_attention, sliding_window_mask
from .backprop import (
    attention_backward,
    attention_forward,
    embedding_backward,
    embedding_forward,
    layernorm_backward,
    layernorm_forward,
    linear_backward,
    linear_forward,
    mha_backward,
    mha_forward,
    positional_backward,
    positional_forward,
    residual_backward,
    residual_forward,
    softmax_backward,
    softmax_cross_entropy,
    softmax_forward,
)
from .chunked import online_softmax_attention
from .cost import attention_flops, attention_memory_bytes, max_length_for_memory
from .decoding import attend_one, decode_causal, merge_softmax_states, softmax_state
from .fast import fast_attention
from .gradcheck import check_gradient, numerical_gradient, relative_error
from .grouped import GroupedQueryAttention, grouped_query_attention, repeat_kv
from .multihead import MultiHeadAttention, merge_heads, multi_head_attention_reference, split_heads
from .optim import Adam
from .positional import alibi_bias, apply_rotary, position_shift_matrix, sinusoidal_positional_encoding
from .projections import cosine_similarity, plane_rotation, project_qkv
from .softmax import softmax
from .tiny_model import AttentionOnlyModel, LibraryModel, TrainingRun, train

try:  # the one version source is pyproject.toml; an installed package knows it from its metadata
    __version__ = _version("attention_course")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Adam",
    "GroupedQueryAttention",
    "MultiHeadAttention",
    # backward passes, Adam and gradient checks (07)
    "attention_backward",
    "attention_forward",
    "check_gradient",
    "embedding_backward",
    "embedding_forward",
    "layernorm_backward",
    "layernorm_forward",
    "linear_backward",
    "linear_forward",
    "mha_backward",
    "mha_forward",
    "numerical_gradient",
    "positional_backward",
    "positional_forward",
    "relative_error",
    "residual_backward",
    "residual_forward",
    "softmax_backward",
    "softmax_cross_entropy",
    "softmax_forward",
    # tiny models trained in seconds (07)
    "AttentionOnlyModel",
    "LibraryModel",
    "TrainingRun",
    "train",
    # the rest of the library
    "alibi_bias",
    "apply_rotary",
    "attend_one",
    "attention_flops",
    "attention_memory_bytes",
    "causal_mask",
    "cosine_similarity",
    "decode_causal",
    "fast_attention",
    "grouped_query_attention",
    "max_length_for_memory",
    "merge_heads",
    "merge_softmax_states",
    "multi_head_attention_reference",
    "online_softmax_attention",
    "padding_mask",
    "plane_rotation",
    "position_shift_matrix",
    "project_qkv",
    "repeat_kv",
    "scaled_dot_product_attention",
    "sinusoidal_positional_encoding",
    "sliding_window_mask",
    "softmax",
    "softmax_state",
    "split_heads",
]
