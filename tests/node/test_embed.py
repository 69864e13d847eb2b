"""The dependency-free ``HashEmbedder``: its vectors follow from its definition (signed feature hashing of words and
word pairs, log-scaled, unit length) whatever it remembers of the words it met, so a store's vectors never change."""

from __future__ import annotations

import hashlib
import itertools
import math
import re

import numpy as np
import pytest

from gaml.node.core import embed
from gaml.node.core.embed import HashEmbedder

TEXTS = [
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "the the the cat sat on the mat, the cat",
    "Melanie's kids painted a sunset; Melanie's kids love painting.",
    "",
    "!!! ???",
    "naïve café — déjà vu, 42 times",
]


def by_definition(text: str, dim: int) -> np.ndarray:
    """The vector of ``text`` computed from the definition alone, in float64, one gram at a time."""
    words = [w.lower() for w in re.findall(r"[\w']+", text)]
    feats: dict[int, float] = {}
    for g in words + [f"{a} {b}" for a, b in itertools.pairwise(words)]:
        h = int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little")
        feats[h % dim] = feats.get(h % dim, 0.0) + (1.0 if (h >> 63) & 1 else -1.0)
    v = np.zeros(dim)
    for bucket, x in feats.items():
        v[bucket] = math.copysign(math.log1p(abs(x)), x)
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


@pytest.mark.parametrize("grams_max", [embed.GRAMS_MAX, 3])
def test_vectors_follow_the_definition_whatever_the_embedder_remembers(
    grams_max: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same rows from a fresh embedder, one that met the texts before, and one whose memory of grams holds only
    three (emptied again and again); each row is the definition's vector (to float32), of norm 1, or 0 when the text
    has no word."""
    monkeypatch.setattr(embed, "GRAMS_MAX", grams_max)
    e = HashEmbedder(64)
    first = e.embed(TEXTS)
    again = e.embed(list(reversed(TEXTS)))[::-1]
    assert first.dtype == np.float32 and first.shape == (len(TEXTS), 64)
    assert np.array_equal(first, again) and np.array_equal(first, HashEmbedder(64).embed(TEXTS))
    assert len(e._grams) <= grams_max
    for text, row in zip(TEXTS, first, strict=True):
        np.testing.assert_allclose(row, by_definition(text, 64), atol=1e-6)
    norms = np.linalg.norm(first, axis=1)
    assert norms[3] == 0.0 and norms[4] == 0.0
    np.testing.assert_allclose(np.delete(norms, [3, 4]), 1.0, atol=1e-6)
