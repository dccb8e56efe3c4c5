"""Machinery: worker processes that run :func:`attention_course.tiny_model.train_many`'s trainings
side by side, one per core (notebooks 07 and 08).

- :mod:`.pool` - :class:`WorkerPool`: plain Python processes fed pickles on stdin, and why not
  :mod:`multiprocessing`
"""

from .pool import WorkerPool

__all__ = ["WorkerPool"]
