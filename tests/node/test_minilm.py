"""The MiniLM shell reads a long text only as far as the model does (review finding 5: a megabyte item's tokens cost
~150 MB before the model dropped all but the first 256)."""

from __future__ import annotations

import random

import numpy as np

from gaml.node.shells.minilm import PIECES_MAX, MiniLMEmbedder, bounded

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "alice",
    "plans",
    "her",
    "trip",
    "to",
    "Paris",
    "in",
    "May",
]


def test_a_long_text_embeds_as_it_would_whole() -> None:
    """Texts far past the model's 256 tokens (many words, paragraphs, one giant word) embed to the same unit vector
    whether the shell cuts them or the model reads them whole; short texts are passed as they are."""
    rng = random.Random(0)
    texts = [" ".join(rng.choice(WORDS) for _ in range(n)) for n in (300, 5000, 20000)]
    texts += ["\n\n".join(texts), "x" * 200_000 + " and a tail", "a short line"]
    m = MiniLMEmbedder()
    whole = m._load().encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    cut = m.embed(texts)
    assert min(float(np.dot(a, b)) for a, b in zip(whole, cut, strict=True)) > 0.99999
    assert len(bounded(texts[2]).split()) == PIECES_MAX and bounded(texts[-1]) is texts[-1]
