"""Machinery: exact attention arranged for speed (notebook 06), and the threads it runs on.

Nothing here is needed to follow the course. The idea is
:func:`attention_course.attention.scaled_dot_product_attention` (in its shortest form,
:func:`attention_course.minimal.scaled_dot_product_attention`); :func:`fast_attention` computes the
same numbers, to float32 rounding, in an order a CPU likes, and ``make bench`` times it.

- :mod:`.kernel` - :func:`fast_attention`: the blocks, the steps of one block, and why
- :mod:`.thread_pool` - the few persistent threads the kernel shares its blocks out to, and BLAS's
  thread count meanwhile
"""

from .kernel import default_block_q, fast_attention
from .thread_pool import available_cpus

__all__ = ["available_cpus", "default_block_q", "fast_attention"]
