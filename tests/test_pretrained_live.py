"""attention_course.pretrained against transformers, run live (not from stored vectors).

It needs torch and transformers (the dependency group `reference`, what `make bench`
installs) and about a minute to load the model a second time, so it runs only when asked:

    RUN_LIVE_REFERENCE=1 python -m pytest tests/test_pretrained_live.py

Every tier relies on tests/test_pretrained_reference.py and its stored vectors; make test-reference
(a CI stage) runs this file too, in a venv with the pinned group `reference`.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

if not os.environ.get("RUN_LIVE_REFERENCE"):
    pytest.skip("set RUN_LIVE_REFERENCE=1 to compare with transformers live", allow_module_level=True)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from attention_course import pretrained  # noqa: E402

SENTENCES = [
    "The trophy did not fit into the suitcase because it was too big.",
    "She sat on the bank of the river; he paid 1,250 € at the bank.",
    "它是一只猫。 🙂 tabs\tand  spaces",
]


@pytest.fixture(scope="module")
def both():
    model = pretrained.load()
    folder, name = os.path.split(model.path)
    hf = transformers.LlamaForCausalLM.from_pretrained(
        folder, gguf_file=name, torch_dtype=torch.float32, attn_implementation="eager").eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    return model, hf, tok


@pytest.mark.parametrize("text", SENTENCES)
def test_logits_and_weights_live(both, text):
    model, hf, tok = both
    ids = model.encode(text)
    if not any(ch.isnumeric() and not ch.isascii() for ch in text):
        assert ids == tok(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        res = hf(torch.tensor([ids]), output_attentions=True)
    logits, weights = model.forward(ids, return_weights=True)
    assert np.abs(logits - res.logits[0].numpy()).max() <= 1e-3
    ref = np.stack([a[0].numpy() for a in res.attentions])
    assert np.abs(weights - ref).max() <= 1e-4
