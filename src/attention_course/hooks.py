r"""Looking inside a model, with TransformerLens's names: a cache of activations, and hooks (08, 09).

The tiny models of 07-08 (:class:`~attention_course.tiny_model.AttentionOnlyModel`) and the real
one of 09 (:class:`~attention_course.pretrained.PretrainedModel`) have the same two methods, named
and shaped as in TransformerLens 2, so that what a learner does here reads the same there:

- ``logits, cache = model.run_with_cache(tokens)`` runs the model and keeps every activation the
  model passes through a *hook point*, by name: ``cache["blocks.3.attn.hook_pattern"]``, or in
  short ``cache["pattern", 3]`` (:func:`act_name` spells the short form out);
- ``model.run_with_hooks(tokens, fwd_hooks=[(name, fn)])`` runs it with ``fn(activation, hook)``
  called at the hook point ``name``; what ``fn`` returns is used from there on (``None``: the
  activation as it is, perhaps changed in place). A ready-made ``fn`` for each usual experiment:
  :func:`zero_ablate_head`, :func:`mean_ablate_head`, :func:`resample_ablate_head`,
  :func:`patch_activation`.

Hook points (B sequences, T positions, E = d_model, H query heads, G key/value heads, d head width;
layers count from 0). Every model has:

====================================  ==================  =======================================
name                                  shape               what
====================================  ==================  =======================================
``hook_embed``                        (B, T, E)           the token embeddings
``blocks.{l}.hook_resid_pre``         (B, T, E)           the residual stream entering layer l
``blocks.{l}.attn.hook_q``            (B, T, H, d)        queries (before RoPE, if the model has it)
``blocks.{l}.attn.hook_k``            (B, T, G, d)        keys (G = H without grouped heads)
``blocks.{l}.attn.hook_v``            (B, T, G, d)        values
``blocks.{l}.attn.hook_attn_scores``  (B, H, T, T)        scaled scores, -inf where masked
``blocks.{l}.attn.hook_pattern``      (B, H, T, T)        the weights: [batch, head, query, key]
``blocks.{l}.attn.hook_z``            (B, T, H, d)        each head's weighted values, before W_O
``blocks.{l}.hook_attn_out``          (B, T, E)           what attention adds to the stream
``blocks.{l}.hook_resid_post``        (B, T, E)           the stream leaving layer l
====================================  ==================  =======================================

The tiny models add ``hook_pos_embed`` (B, T, E) when they have a position table. The real model,
whose layers also hold an MLP and RMSNorms, adds ``blocks.{l}.attn.hook_rot_q`` and ``hook_rot_k``
(after RoPE), ``blocks.{l}.ln1.hook_scale`` (B, T, 1) and ``ln1.hook_normalized`` (B, T, E) (the
stream divided by its scale, before the norm's weight), the same for ``ln2``,
``blocks.{l}.hook_resid_mid`` (B, T, E), ``blocks.{l}.mlp.hook_pre`` and ``mlp.hook_pre_linear``
(B, T, d_ff) (SwiGLU's gate and linear inputs), ``mlp.hook_post`` (B, T, d_ff),
``blocks.{l}.hook_mlp_out`` (B, T, E), and ``ln_final.hook_scale``, ``ln_final.hook_normalized``.
Under grouped-query attention ``hook_k`` and ``hook_v`` carry the G key/value heads and
``hook_pattern`` the H query heads, as in TransformerLens.

A hook that changes the attention's scores or pattern makes the model compute attention step by
step, as written above; otherwise the library's attention function runs as usual.

Examples
--------
>>> act_name("pattern", 3), act_name("resid_pre", 0), act_name("scale", 2, "ln1")
('blocks.3.attn.hook_pattern', 'blocks.0.hook_resid_pre', 'blocks.2.ln1.hook_scale')
>>> z = np.ones((1, 4, 2, 3))                                  # (B, T, H, d) at a hook_z
>>> zero_ablate_head(1)(z, HookPoint("blocks.0.attn.hook_z"))[0, :, 1].max()
np.float64(0.0)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import numpy as np

from ._validate import nonnegative_int

__all__ = ["ActivationCache", "HookPoint", "act_name", "mean_ablate_head", "patch_activation",
           "resample_ablate_head", "zero_ablate_head"]

# TransformerLens's short names and where each lives in a block (utils.get_act_name).
_IN_ATTN = ("q", "k", "v", "z", "rot_q", "rot_k", "attn_scores", "pattern", "result")
_IN_MLP = ("pre", "pre_linear", "post")
_IN_BLOCK = ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out")
_IN_NORM = ("scale", "normalized")
_ALIASES = {"attn": "pattern", "attn_logits": "attn_scores", "key": "k", "query": "q", "value": "v",
            "mlp_pre": "pre", "mlp_post": "post"}
# Hook points with a head axis, and where it is: (B, T, heads, d) or (B, heads, T, T).
_HEAD_AXIS = {**{f"hook_{n}": 2 for n in ("q", "k", "v", "z", "rot_q", "rot_k", "result")},
              "hook_attn_scores": 1, "hook_pattern": 1}


def act_name(name: str, layer: int | None = None, kind: str | None = None) -> str:
    """The full hook name of a short one, as TransformerLens's ``utils.get_act_name`` spells it.

    Parameters
    ----------
    name : str
        ``"pattern"``, ``"attn_scores"``, ``"q"``, ``"k"``, ``"v"``, ``"z"``, ``"rot_q"``,
        ``"rot_k"``, ``"resid_pre"``, ``"resid_mid"``, ``"resid_post"``, ``"attn_out"``,
        ``"mlp_out"``, ``"pre"``, ``"pre_linear"``, ``"post"``, ``"scale"``, ``"normalized"``,
        ``"embed"``, ``"pos_embed"`` (and TransformerLens's aliases such as ``"attn"``), or a full
        name, returned as it is.
    layer : int, optional
        The block; none for ``embed``, ``pos_embed`` and the final norm.
    kind : {"ln1", "ln2", "ln_final"}, optional
        Which norm, for ``scale`` and ``normalized`` (``ln_final`` when no layer is given).

    >>> act_name("z", 1), act_name("normalized")
    ('blocks.1.attn.hook_z', 'ln_final.hook_normalized')
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str such as 'pattern'; got {type(name).__name__}")
    if "." in name or name.startswith("hook_"):
        return name
    short = _ALIASES.get(name, name)
    if short in ("embed", "pos_embed"):
        return f"hook_{short}"
    if short in _IN_NORM:
        if layer is None:
            return f"ln_final.hook_{short}"
        kind = kind or "ln1"
        if kind not in ("ln1", "ln2"):
            raise ValueError(f"kind must be 'ln1' or 'ln2' for a layer's norm; got {kind!r}")
        return f"blocks.{_layer(layer)}.{kind}.hook_{short}"
    where = ("attn." if short in _IN_ATTN else "mlp." if short in _IN_MLP
             else "" if short in _IN_BLOCK else None)
    if where is None:
        raise ValueError(f"no hook point is called {name!r}; short names: "
                         f"{', '.join(_IN_BLOCK + _IN_ATTN + _IN_MLP + _IN_NORM)}, embed, pos_embed")
    if layer is None:
        raise ValueError(f"{name!r} belongs to a layer: give act_name({name!r}, layer)")
    return f"blocks.{_layer(layer)}.{where}hook_{short}"


def _layer(layer) -> int:
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or layer < 0:
        raise ValueError(f"layer must be an int >= 0; got {layer!r}")
    return int(layer)


class HookPoint:
    """What a hook function is told about where it runs: ``hook.name`` and ``hook.layer()``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def layer(self) -> int:
        """The block this hook point belongs to; ``ValueError`` for one outside the blocks."""
        parts = self.name.split(".")
        if parts[0] != "blocks":
            raise ValueError(f"{self.name} belongs to no layer")
        return int(parts[1])

    def __repr__(self):
        return f"HookPoint({self.name!r})"


class ActivationCache(Mapping):
    """The activations of one run, by hook name; ``cache["pattern", 3]`` reads as in TransformerLens.

    A key is a full hook name, or a tuple ``(short name, layer[, kind])`` that :func:`act_name`
    spells out. The arrays are those the run made: change a copy, not them.
    """

    def __init__(self, activations: dict, has_batch_dim: bool = True, n_layers: int | None = None):
        self._acts = activations
        self.has_batch_dim = has_batch_dim
        self.n_layers = n_layers

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, tuple):
            if (len(key) > 1 and isinstance(key[1], (int, np.integer)) and not isinstance(key[1], bool)
                    and key[1] < 0 and self.n_layers is not None):
                key = (key[0], self.n_layers + int(key[1]), *key[2:])          # -1: the last layer
            name = act_name(*key)
        else:
            name = act_name(key)
        try:
            return self._acts[name]
        except KeyError:
            near = [k for k in self._acts if k.split(".")[-1] == name.split(".")[-1]][:3]
            raise KeyError(f"the cache holds no {name!r}" + (f"; it has e.g. {near}" if near else
                           "; was it left out by names_filter?")) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._acts)

    def __len__(self) -> int:
        return len(self._acts)

    def __repr__(self):
        return f"ActivationCache({len(self)} activations)"

    def remove_batch_dim(self) -> ActivationCache:
        """The same activations without their batch axis; only for a batch of one sequence."""
        if not self.has_batch_dim:
            return self
        first = next(iter(self._acts.values()), None)
        if first is not None and first.shape[0] != 1:
            raise ValueError(f"remove_batch_dim needs a batch of 1; this cache has {first.shape[0]}")
        return ActivationCache({k: v[0] for k, v in self._acts.items()}, has_batch_dim=False,
                               n_layers=self.n_layers)


def _names_filter(names_filter) -> Callable[[str], bool]:
    if names_filter is None:
        return lambda name: True
    if isinstance(names_filter, str):
        return lambda name: name == names_filter
    if callable(names_filter):
        return names_filter
    try:
        wanted = frozenset(names_filter)
    except TypeError:
        raise TypeError(f"names_filter must be None, a name, a list of names or a function of a name; "
                        f"got {type(names_filter).__name__}") from None
    for name in wanted:
        if not isinstance(name, str):
            raise TypeError(f"names_filter must hold hook names (str); got {name!r}")
    return wanted.__contains__


class Hooks:
    """One run's hook points: the functions to call at each, and the activations to keep.

    A model calls ``x = hooks(name, x)`` at every hook point; ``hooks.changes(name)`` says whether a
    function runs there (a model may then take a slower path that exposes the activation). With
    nothing to call and nothing to keep, a hook point costs one set lookup.
    """

    def __init__(self, fwd_hooks=(), names_filter=None, cache: bool = False, known=None):
        self.fns: dict[str, list] = {}
        self._filters: list = []
        for item in fwd_hooks:
            try:
                where, fn = item
            except (TypeError, ValueError):
                raise TypeError(f"fwd_hooks must hold (name, function) pairs; got {item!r}") from None
            if not callable(fn):
                raise TypeError(f"the hook for {where!r} must be a function fn(activation, hook); "
                                f"got {type(fn).__name__}")
            if isinstance(where, str):
                name = act_name(where)
                if known is not None and name not in known:
                    raise ValueError(f"this model has no hook point {name!r}")
                self.fns.setdefault(name, []).append(fn)
            elif callable(where):
                self._filters.append((where, fn))
            else:
                raise TypeError(f"a hook's name must be a str or a function of a name; got {where!r}")
        if self._filters:
            for name in known or ():
                for test, fn in self._filters:
                    if test(name):
                        self.fns.setdefault(name, []).append(fn)
        self.keep = _names_filter(names_filter) if cache else None
        self.cache: dict[str, np.ndarray] = {}
        self.active = bool(self.fns) or cache

    def changes(self, name: str) -> bool:
        """A function runs at ``name``, so the activation there may be changed."""
        return name in self.fns

    def wants(self, name: str) -> bool:
        """A function runs at ``name`` or its activation is kept."""
        return name in self.fns or (self.keep is not None and self.keep(name))

    def __call__(self, name: str, x: np.ndarray) -> np.ndarray:
        if not self.active:
            return x
        for fn in self.fns.get(name, ()):
            out = fn(x, HookPoint(name))
            if out is not None:
                out = np.asarray(out)
                if out.shape != x.shape:
                    raise ValueError(f"the hook at {name} returned shape {out.shape}; the activation "
                                     f"there has shape {x.shape}, and a hook must keep it")
                x = out.astype(x.dtype, copy=False)
        if self.keep is not None and self.keep(name):
            self.cache[name] = x
        return x

    def heads(self, name: str, x: np.ndarray, axes=(0, 2, 1, 3)) -> np.ndarray:
        """A head-major (B, heads, T, d) array through the hook point ``name``, which sees it as
        TransformerLens lays it out, (B, T, heads, d); back head-major."""
        if not self.active or not self.wants(name):
            return x
        return self(name, x.transpose(axes)).transpose(axes)


def _head_axis(hook: HookPoint, x: np.ndarray, head) -> tuple[int, int]:
    suffix = hook.name.rsplit(".", 1)[-1]
    axis = _HEAD_AXIS.get(suffix)
    if axis is None:
        raise ValueError(f"{hook.name} has no head axis; use a head ablation at hook_z, hook_q, hook_k, "
                         f"hook_v, hook_attn_scores or hook_pattern")
    head = nonnegative_int(head, "head")
    if head >= x.shape[axis]:
        raise ValueError(f"head must be < {x.shape[axis]}, the heads at {hook.name}; got {head}")
    return axis, head


def _at(axis: int, index) -> tuple:
    return (slice(None),) * axis + (index,)


def zero_ablate_head(head: int):
    """A hook function that sets one head's activation to 0 (at ``hook_z``: the head writes nothing).

    At ``hook_attn_scores`` the masked entries stay -inf: the head spreads its weight evenly over
    the keys it may see.

    >>> v = np.ones((1, 2, 3, 4))                              # (B, T, G, d) at a hook_v
    >>> zero_ablate_head(2)(v, HookPoint("blocks.0.attn.hook_v")).sum()
    np.float64(16.0)
    """
    def hook_fn(x, hook):
        axis, h = _head_axis(hook, x, head)
        out = x.copy()
        part = out[_at(axis, h)]
        # at hook_attn_scores the masked entries stay -inf: a zeroed head still sees no later key
        part[~np.isneginf(part)] = 0
        return out
    return hook_fn


def _references(reference, name: str) -> list:
    refs = [reference] if isinstance(reference, np.ndarray) else list(reference)
    if not refs:
        raise ValueError(f"{name} is empty; give the activations of at least one reference run")
    out = []
    for r in refs:
        r = np.asarray(r)
        if r.ndim != 4 or r.dtype.kind != "f":
            raise ValueError(f"{name} must hold float activations (B, T, heads, d) from a cache "
                             f"(e.g. cache['z', layer]); got shape {r.shape}, dtype {r.dtype}")
        out.append(r)
    return out


def mean_ablate_head(head: int, reference):
    """A hook function that puts one head's mean activation over a reference set in its place.

    Parameters
    ----------
    head : int
    reference : ndarray (B, T, heads, d), or a list of them (different T allowed)
        The same hook point's activations on reference text, e.g. ``cache["z", layer]`` of
        ordinary sentences. The mean runs over every sequence and position: one (d,) vector,
        the head's typical output, written at every position.

    >>> ref = np.arange(8.0).reshape(1, 2, 2, 2)               # head 1: [2, 3] and [6, 7]
    >>> mean_ablate_head(1, ref)(np.zeros((1, 3, 2, 2)), HookPoint("blocks.0.attn.hook_z"))[0, :, 1]
    array([[4., 5.],
           [4., 5.],
           [4., 5.]])
    """
    refs = _references(reference, "reference")
    nonnegative_int(head, "head")
    if head >= refs[0].shape[2]:
        raise ValueError(f"head must be < {refs[0].shape[2]}, the heads in reference; got {head}")
    rows = np.concatenate([r[:, :, head].reshape(-1, r.shape[-1]) for r in refs])     # (N, d)
    mean = rows.astype(np.float64).mean(axis=0)                                        # (d,)

    def hook_fn(x, hook):
        axis, h = _head_axis(hook, x, head)
        if axis != 2 or x.shape[-1] != mean.shape[0]:
            raise ValueError(f"the reference's head width {mean.shape[0]} does not fit {hook.name}, "
                             f"shape {x.shape}")
        out = x.copy()
        out[:, :, h] = mean.astype(x.dtype)
        return out
    return hook_fn


def resample_ablate_head(head: int, reference, seed=0):
    """A hook function that gives each sequence one head's activation from a random reference run.

    Parameters
    ----------
    head : int
    reference : ndarray, shape (R, T, heads, d)
        The same hook point's activations on R other sequences of the same length T.
    seed : int or None
        Which reference sequence each sequence of the batch gets (drawn once per call).
    """
    if not isinstance(reference, np.ndarray):
        raise TypeError(f"reference must be one array (R, T, heads, d) of R sequences of one length; "
                        f"got {type(reference).__name__}")
    (ref,) = _references(reference, "reference")
    rng = np.random.default_rng(seed)

    def hook_fn(x, hook):
        axis, h = _head_axis(hook, x, head)
        if axis != 2 or x.shape[1:] != ref.shape[1:]:
            raise ValueError(f"reference has shape {ref.shape}; resampling at {hook.name} needs "
                             f"(R, {', '.join(map(str, x.shape[1:]))}): the same positions and heads")
        out = x.copy()
        out[:, :, h] = ref[rng.integers(0, ref.shape[0], size=x.shape[0]), :, h]
        return out
    return hook_fn


def patch_activation(source, positions=None, head=None):
    """A hook function that puts another run's activation in place (activation patching).

    Parameters
    ----------
    source : ndarray
        The activation of the same hook point in the other run, of the same shape.
    positions : int or sequence of int, optional
        Patch only these positions (the query positions of a pattern); default all.
    head : int, optional
        Patch only this head; default all.

    >>> src = np.full((1, 3, 2), 7.0)                          # (B, T, E) at a resid hook
    >>> patch_activation(src, positions=[2])(np.zeros((1, 3, 2)), HookPoint("hook_embed"))[0]
    array([[0., 0.],
           [0., 0.],
           [7., 7.]])
    """
    src = np.asarray(source)

    def hook_fn(x, hook):
        if src.shape != x.shape:
            raise ValueError(f"source has shape {src.shape}; the activation at {hook.name} has "
                             f"{x.shape}: patch from a run of the same shape")
        index = [slice(None)] * x.ndim
        if head is not None:
            axis, h = _head_axis(hook, x, head)
            index[axis] = h
        if positions is not None:
            pos_axis = 2 if _HEAD_AXIS.get(hook.name.rsplit(".", 1)[-1]) == 1 else 1
            pos = np.atleast_1d(np.asarray(positions))
            if pos.dtype.kind not in "iu" or ((pos < 0) | (pos >= x.shape[pos_axis])).any():
                raise ValueError(f"positions must be ints in 0..{x.shape[pos_axis] - 1}; got {positions!r}")
            index[pos_axis] = pos
        out = x.copy()
        out[tuple(index)] = src[tuple(index)]
        return out
    return hook_fn
