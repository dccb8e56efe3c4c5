"""What the widget tests share: an explorer shown without a front end, its frame as pixels, and the
comparison of a live frame with the static figure of the same setting."""

from __future__ import annotations

import importlib
import inspect
import io
import pkgutil

import numpy as np
from matplotlib import pyplot as plt
from PIL import Image


def shown(explorer):
    """As after display(): drawn into its image, without a front end."""
    explorer._shown = True
    explorer.refresh(force=True)
    return explorer


def pixels(png: bytes) -> np.ndarray:
    """A PNG frame as an (H, W, 3) array of ints."""
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def frame_differs(explorer) -> np.ndarray:
    """Per pixel, the largest channel difference between the live frame and ``explorer.figure()``
    drawn at the same dpi; raises if the two are not the same size."""
    live = pixels(explorer.image.value)
    fig = explorer.figure()
    fig.set_dpi(explorer.dpi)
    fig.canvas.draw()
    full = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)
    plt.close(fig)
    assert live.shape == full.shape, (live.shape, full.shape)
    return np.abs(live - full).max(-1)


def same_picture(diff: np.ndarray) -> bool:
    """The same figure up to the rounding of blended glyph edges."""
    return bool((diff > 8).mean() < 0.01 and (diff > 40).sum() < 20)


def course_explorers():
    """(module name, class) of every explorer of the course's widget modules (``nbNN``)."""
    import attention_course.widgets as package
    from attention_course.widgets import Explorer

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("nb"):
            module = importlib.import_module(f"attention_course.widgets.{info.name}")
            for name, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, Explorer) and cls.__module__ == module.__name__:
                    yield info.name, name, cls


def small_runs07() -> dict:
    """Two short trainings for 07's explorer: the library task and the previous-token task."""
    from functools import partial

    from attention_course import tasks
    from attention_course.tiny_model import AttentionOnlyModel, LibraryModel, train

    lib = train(LibraryModel(seed=0), partial(tasks.library_batch, batch_size=32), 20, lr=1e-2,
                eval_batch=tasks.library_batch(1, 64))
    prev = train(AttentionOnlyModel(10, d_model=16, max_len=8, seed=0),
                 partial(tasks.previous_token_batch, batch_size=8, length=8, vocab=10), 10,
                 eval_batch=tasks.previous_token_batch(1, 16, length=8, vocab=10))
    return {"library": lib, "previous": prev}
