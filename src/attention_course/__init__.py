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
- :mod:`.examples`, :mod:`.plots`, :mod:`.widgets`, :mod:`.checks` - shared course material

Mask convention everywhere: a boolean mask is True where a position takes part.
"""

from .attention import causal_mask, padding_mask, scaled_dot_product_attention, sliding_window_mask
from .chunked import online_softmax_attention
from .cost import attention_flops, attention_memory_bytes, max_length_for_memory
from .decoding import attend_one, decode_causal, merge_softmax_states, softmax_state
from .fast import fast_attention
from .grouped import GroupedQueryAttention, grouped_query_attention, repeat_kv
from .multihead import MultiHeadAttention, merge_heads, multi_head_attention_reference, split_heads
from .positional import alibi_bias, apply_rotary, position_shift_matrix, sinusoidal_positional_encoding
from .projections import cosine_similarity, plane_rotation, project_qkv
from .softmax import softmax

__version__ = "0.1.0"

__all__ = [
    "GroupedQueryAttention",
    "MultiHeadAttention",
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
