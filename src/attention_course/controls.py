"""09's ablation controls on the real model: random heads and same-layer heads, measured once and stored.

Notebook 09 picks five induction heads on three trials of random tokens repeated twice (seeds
0, 1, 2) and ablates them on three other trials (the held-out seeds 10, 11, 12). Whether five heads
out of 270 matter more than *any* five needs many random draws: 20 draws of five heads from the
other 265, on each held-out trial, zero- and mean-ablated, is 40 forward passes of a batch of three
sequences, more than the notebook's time budget. :func:`run` measures them (``python -m
attention_course.controls --out build/controls.json``, make controls), make controls-store copies the
result into the package, and :func:`stored` reads it. The notebook prints from it, recomputes a few
draws live and checks them against it.

The pieces the notebook uses itself, so that what it computes live and what was stored are the
same computation: :func:`induction_heads`, :func:`head_means`, :func:`second_copy_losses`,
:func:`zero_ablation`, :func:`mean_ablation`, :func:`random_draws`.

Heads are (layer, head) pairs counted from 0; losses are the mean cross-entropy in nats of the
second copy's next tokens (positions period .. 2·period - 2 predict tokens period + 1 .. 2·period - 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources

import numpy as np

from . import pretrained
from .hooks import mean_ablate_head, zero_ablate_head

__all__ = ["CHOICE_SEEDS", "HELD_OUT_SEEDS", "N_DRAWS", "N_HEADS", "PARAGRAPH", "PERIOD", "head_means",
           "induction_heads", "main", "mean_ablation", "next_heads", "random_draws", "run",
           "same_layer_heads", "second_copy_losses", "stored", "trials", "zero_ablation"]

PERIOD = 35
CHOICE_SEEDS = (0, 1, 2)
HELD_OUT_SEEDS = (10, 11, 12)
N_HEADS = 5
N_DRAWS = 20
DRAW_SEED = 2024
#: Ordinary text: where 09 reads first-token and previous-token heads, and each head's mean output.
PARAGRAPH = ("A student walked into the library and asked for a book about cats. The librarian "
             "pointed to a shelf near the window, and the student took two books from it.")


def trials(seeds) -> np.ndarray:
    """The repeated random sequences of ``seeds``: (len(seeds), 2 · PERIOD) token ids."""
    return np.stack([pretrained.repeated_random_tokens(PERIOD, s) for s in seeds])


def induction_heads(model, seeds=CHOICE_SEEDS, k: int = N_HEADS):
    """The ``k`` heads with the highest induction score averaged over the trials of ``seeds``.

    Returns
    -------
    heads : list of (layer, head), strongest first
    scores : ndarray, shape (n_layers, H), the mean induction score of every head
    """
    H = model.config.H
    _, cache = model.run_with_cache(trials(seeds), names_filter=lambda n: n.endswith("hook_pattern"))
    w = np.stack([cache["pattern", layer] for layer in range(model.config.n_layers)])   # (L, B, H, T, T)
    scores = pretrained.induction_scores(w, PERIOD).mean(axis=1)                       # (L, H)
    order = np.argsort(scores.ravel(), kind="stable")[::-1][:k]
    return [(int(j // H), int(j % H)) for j in order], scores


def head_means(model, text: str = PARAGRAPH) -> np.ndarray:
    """Each head's mean output before W_O (its ``hook_z``) over ``text``: (n_layers, H, d_k).

    Position 0 is left out: its outputs are the first-token sink's, unlike every other position's.
    """
    _, cache = model.run_with_cache(model.encode(text), names_filter=lambda n: n.endswith("hook_z"))
    return np.stack([cache["z", layer][0, 1:].mean(axis=0) for layer in range(model.config.n_layers)])


def zero_ablation(heads) -> list:
    """``fwd_hooks`` that set each of ``heads``' outputs to 0 before W_O."""
    return [(f"blocks.{layer}.attn.hook_z", zero_ablate_head(head)) for layer, head in heads]


def mean_ablation(heads, means) -> list:
    """``fwd_hooks`` that put each of ``heads``' mean output (:func:`head_means`) in its place."""
    return [(f"blocks.{layer}.attn.hook_z", mean_ablate_head(head, means[layer][None, None]))
            for layer, head in heads]


def second_copy_losses(model, ids, fwd_hooks=()) -> np.ndarray:
    """The mean second-copy loss of each sequence of ``ids`` (B, 2 · PERIOD): shape (B,)."""
    logits = model.run_with_hooks(ids, fwd_hooks=fwd_hooks)
    return np.array([pretrained.token_losses(lg, seq)[PERIOD:].mean() for lg, seq in zip(logits, ids,
                                                                                          strict=True)])


def random_draws(top, n_layers: int, H: int, n: int = N_DRAWS, seed: int = DRAW_SEED) -> list:
    """``n`` draws of len(top) heads from the heads not in ``top``, each sorted: a list of lists."""
    rng = np.random.default_rng(seed)
    others = [j for j in range(n_layers * H) if (j // H, j % H) not in set(top)]
    draws = [sorted(rng.choice(others, len(top), replace=False).tolist()) for _ in range(n)]
    return [[(int(j // H), int(j % H)) for j in d] for d in draws]


def same_layer_heads(top, scores) -> list:
    """The len(top) heads of top's layers outside ``top`` with the highest induction scores: heads
    of the same depth (their scores are low: the layers' other heads do not do induction)."""
    layers = sorted({layer for layer, _ in top})
    pool = [(layer, h) for layer in layers for h in range(scores.shape[1]) if (layer, h) not in top]
    return sorted(pool, key=lambda p: -scores[p])[:len(top)]


def next_heads(top, scores) -> list:
    """The len(top) heads with the next-highest induction scores after ``top``, in any layer."""
    H = scores.shape[1]
    order = [(int(j // H), int(j % H)) for j in np.argsort(scores.ravel(), kind="stable")[::-1]]
    return [p for p in order if p not in top][:len(top)]


def run(model=None) -> dict:
    """Measure every control on the held-out trials (about 45 passes of three sequences)."""
    model = model or pretrained.load()
    c = model.config
    top, scores = induction_heads(model)
    means = head_means(model)
    held = trials(HELD_OUT_SEEDS)
    same = same_layer_heads(top, scores)
    after = next_heads(top, scores)
    draws = random_draws(top, c.n_layers, c.H)
    result = {"period": PERIOD, "choice_seeds": list(CHOICE_SEEDS), "held_out_seeds": list(HELD_OUT_SEEDS),
              "top": top, "scores": scores.round(4).tolist(), "same_layer": same, "next": after,
              "draws": draws,
              "intact": second_copy_losses(model, held).tolist(),
              "first_copy": [float(pretrained.token_losses(lg, s)[:PERIOD - 1].mean())
                             for lg, s in zip(model.run_with_hooks(held), held, strict=True)]}
    for name, fn in (("zero", zero_ablation), ("mean", lambda h: mean_ablation(h, means))):
        result[f"{name}_top"] = second_copy_losses(model, held, fn(top)).tolist()
        result[f"{name}_same_layer"] = second_copy_losses(model, held, fn(same)).tolist()
        result[f"{name}_next"] = second_copy_losses(model, held, fn(after)).tolist()
        result[f"{name}_draws"] = [second_copy_losses(model, held, fn(d)).tolist() for d in draws]
    return result


def stored() -> dict:
    """The controls :func:`run` measured, as stored in the package (``data/controls.json``)."""
    text = resources.files("attention_course").joinpath("data/controls.json").read_text(encoding="utf-8")
    data = json.loads(text)
    for key in ("top", "same_layer", "next"):
        data[key] = [tuple(p) for p in data[key]]
    data["draws"] = [[tuple(p) for p in d] for d in data["draws"]]
    return data


def main(argv=None) -> int:
    """Command line of ``make controls``: measure the controls and write them as JSON to ``--out``."""
    parser = argparse.ArgumentParser(description="Measure 09's ablation controls on the real model.")
    parser.add_argument("--out", required=True, help="where to write the result (JSON)")
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_info

    result = run()
    result["kernel"] = [f"{i.get('internal_api')} {i.get('architecture')}" for i in threadpool_info()
                        if i.get("user_api") == "blas"]
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    rise = np.array(result["zero_draws"]) - np.array(result["intact"])
    print(f"{result['kernel']}: top {result['top']}; random draws add {np.median(rise):.2f} nats "
          f"(median), {rise.max():.2f} at most; the top five add "
          f"{min(np.array(result['zero_top']) - result['intact']):.2f} at least")
    return 0


if __name__ == "__main__":
    sys.exit(main())
