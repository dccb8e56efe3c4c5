"""Adam, the optimiser that trains the tiny models of notebook 07, with ``torch.optim.Adam`` semantics."""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np

from ._validate import as_float_array

__all__ = ["Adam"]


class Adam:
    """Adam (Kingma and Ba, 2015) with bias correction, as ``torch.optim.Adam``.

    For each parameter p with gradient g, at step t = 1, 2, ...::

        m = beta1 · m + (1 - beta1) · g            # running mean of the gradient
        v = beta2 · v + (1 - beta2) · g²           # running mean of its square
        p -= lr · (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)

    The bias corrections ``1 - beta^t`` undo the start of m and v at zero: without them the first
    steps would be far too small.

    Parameters
    ----------
    params : dict of str to ndarray (float32 or float64)
        The parameters, updated **in place** by :meth:`step` (so a model that holds the same arrays
        sees the new values).
    lr : float
        Learning rate.
    betas : (float, float)
        Decay of the running means of the gradient and of its square.
    eps : float
        Added to the denominator; keeps a parameter with a zero gradient from dividing by zero.
    weight_decay : float
        L2 penalty added to the gradient (``g + weight_decay · p``, torch's Adam); 0 by default.

    Attributes
    ----------
    t : int
        Number of steps taken.
    m, v : dict of str to ndarray
        The running means, same shapes and dtypes as the parameters.

    Examples
    --------
    >>> params = {"w": np.array([1.0, -1.0], dtype=np.float32)}
    >>> opt = Adam(params, lr=0.1)
    >>> opt.step({"w": np.array([0.5, -2.0], dtype=np.float32)})
    >>> params["w"].round(4), params["w"].dtype, opt.t   # the first step moves each entry by lr
    (array([ 0.9, -0.9], dtype=float32), dtype('float32'), 1)
    """

    def __init__(self, params: dict, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        if not isinstance(params, dict) or not params:
            raise TypeError(f"params must be a non-empty dict of name -> array; got {params!r:.60}")
        for name, p in params.items():
            if not isinstance(p, np.ndarray):
                raise TypeError(f"params[{name!r}] must be a NumPy array (it is updated in place); "
                                f"got {type(p).__name__}")
            as_float_array(p, f"params[{name!r}]", min_ndim=0)
            if p.dtype not in (np.float32, np.float64):
                raise TypeError(f"params[{name!r}] has dtype {p.dtype}; Adam needs float32 or float64")
            if not p.flags.writeable:
                raise ValueError(f"params[{name!r}] is read-only; Adam updates it in place")
        if not (np.isscalar(lr) and np.isfinite(lr) and lr > 0):
            raise ValueError(f"lr must be a positive number; got lr={lr!r}")
        if (not isinstance(betas, (tuple, list)) or len(betas) != 2
                or not all(np.isscalar(b) and 0 <= b < 1 for b in betas)):
            raise ValueError(f"betas must be two numbers in [0, 1); got betas={betas!r}")
        if not (np.isscalar(eps) and np.isfinite(eps) and eps >= 0):
            raise ValueError(f"eps must be a number >= 0; got eps={eps!r}")
        if not (np.isscalar(weight_decay) and np.isfinite(weight_decay) and weight_decay >= 0):
            raise ValueError(f"weight_decay must be a number >= 0; got weight_decay={weight_decay!r}")
        self.params = params
        # Python floats, never NumPy float64 scalars: those would turn float32 arithmetic into float64.
        self.lr, self.eps, self.weight_decay = float(lr), float(eps), float(weight_decay)
        self.betas = (float(betas[0]), float(betas[1]))
        self.t = 0
        self.m = {name: np.zeros_like(p) for name, p in params.items()}
        self.v = {name: np.zeros_like(p) for name, p in params.items()}

    def __repr__(self):
        return (f"Adam({len(self.params)} arrays, lr={self.lr}, betas={self.betas}, eps={self.eps}, "
                f"t={self.t})")

    def step(self, grads: dict) -> None:
        """Take one step: update every parameter in place from its gradient.

        Parameters
        ----------
        grads : dict of str to ndarray
            One gradient per parameter, same keys and shapes (the dict a backward pass returns).
            A gradient in another float dtype is cast to the parameter's dtype.
        """
        if not isinstance(grads, dict):
            raise TypeError(f"grads must be a dict of name -> array; got {type(grads).__name__}")
        missing, unknown = set(self.params) - set(grads), set(grads) - set(self.params)
        if missing or unknown:
            raise KeyError(f"grads must have the keys of params; missing {sorted(missing)}, "
                           f"unknown {sorted(unknown)}")
        checked = {}
        for name, p in self.params.items():
            g = as_float_array(grads[name], f"grads[{name!r}]", min_ndim=0)
            if g.shape != p.shape:
                raise ValueError(f"grads[{name!r}] has shape {g.shape}; params[{name!r}] has shape {p.shape}")
            checked[name] = g.astype(p.dtype, copy=False)
        self._update(checked)

    def _update(self, grads: dict) -> None:
        # The step itself, for gradients already known to fit (same keys, shapes and dtypes):
        # :meth:`step` checks and calls this; tiny_model.train calls it directly after its first
        # step, whose gradients step checked.
        self.t += 1
        for name, p in self.params.items():
            self._move(p, grads[name], self.m[name], self.v[name])

    def _move(self, p, g, m, v) -> None:
        beta1, beta2 = self.betas
        # The same order of operations as torch's single-tensor Adam, so float32 results agree.
        step_size = self.lr / (1 - beta1 ** self.t)
        bias_correction2_sqrt = math.sqrt(1 - beta2 ** self.t)
        if self.weight_decay:
            g = g + self.weight_decay * p
        m *= beta1
        m += (1 - beta1) * g
        v *= beta2
        v += (1 - beta2) * (g * g)
        denom = np.sqrt(v) / bias_correction2_sqrt + self.eps
        p -= step_size * (m / denom)

    @contextmanager
    def _packed(self):
        """Within the block, every parameter, m and v is a view of one flat array of each.

        Yields a function that takes one step from a dict of gradients (already checked) with a
        few operations on the whole flat arrays instead of a few per parameter: the same
        arithmetic element by element, so the same numbers. Afterwards each original parameter
        array gets its values back and is put back into ``params``. With parameters of mixed
        dtypes, nothing is packed and the function is the ordinary unchecked step.
        """
        originals = dict(self.params)
        if len({p.dtype for p in originals.values()}) != 1:
            yield self._update
            return
        dtype = next(iter(originals.values())).dtype
        names = list(originals)
        bounds = np.cumsum([0] + [p.size for p in originals.values()])

        def flat(arrays):
            return np.concatenate([arrays[n].reshape(-1) for n in names], dtype=dtype)

        def views(buffer):
            return {n: buffer[a:b].reshape(originals[n].shape)
                    for n, a, b in zip(names, bounds[:-1], bounds[1:], strict=True)}

        P, M, V = flat(originals), flat(self.m), flat(self.v)
        self.params.update(views(P))
        self.m, self.v = views(M), views(V)

        def step(grads):
            self.t += 1
            self._move(P, flat(grads), M, V)

        try:
            yield step
        finally:
            for n, p in originals.items():
                p[...] = self.params[n]
                self.params[n] = p
