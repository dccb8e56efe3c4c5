"""attention_course: the library behind the self-attention course (中文 / English).

One module per idea, in the order of the notebooks:

- :mod:`.softmax` - a stable softmax (01, 03)
- :mod:`.projections` - Q, K, V from one embedding (02)
- :mod:`.attention` - scaled dot-product attention and masks, PyTorch semantics (03)
- :mod:`.multihead` - multi-head attention, ``torch.nn.MultiheadAttention`` layout (04)
- :mod:`.grouped` - grouped-query attention: H query heads share G key/value heads (04)
- :mod:`.positional` - sinusoidal and rotary positional encoding (05)
- :mod:`.cost` and :mod:`.chunked` - the quadratic cost and exact chunked attention (06)
- :mod:`.fast` - exact attention arranged for speed, benchmarked against PyTorch (06)
- :mod:`.backprop`, :mod:`.optim`, :mod:`.gradcheck` - backward passes, Adam and gradient checks (07)
- :mod:`.tasks`, :mod:`.tiny_model`, :mod:`.progress` - tiny attention-only models trained in seconds (07)
- :mod:`.examples`, :mod:`.plots`, :mod:`.widgets`, :mod:`.checks` - shared course material

Mask convention everywhere: a boolean mask is True where a position takes part.
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
