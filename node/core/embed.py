"""The ``Embedder`` interface and the deterministic, dependency-free embedder.

An embedder turns texts into unit vectors. Each partition records the embedder id and dimension it was built with and
refuses vectors of another. ``HashEmbedder`` (signed feature hashing of words and word bigrams) is deterministic and
fast: the simulator's and the tests' embedder. The default for real use is MiniLM (``node/shells/minilm.py``).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence
from typing import Final, Protocol

import numpy as np

_WORD: Final = re.compile(r"[\w']+", re.UNICODE)
GRAMS_MAX: Final = 1 << 16  # the words and word pairs whose bucket a HashEmbedder remembers


class Embedder(Protocol):
    id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32 rows of norm 1 (or 0 for a text with nothing to embed)."""
        ...


class HashEmbedder:
    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.id = f"hash-v1-{dim}"
        # gram -> its bucket + 1, negated for a negative sign: the words of a memory repeat. Strings and ints only,
        # which the garbage collector does not track; emptied when full.
        self._grams: dict[str, int] = {}

    def _features(self, text: str) -> dict[int, float]:
        words = [w.lower() for w in _WORD.findall(text)]
        feats: dict[int, float] = {}
        grams = self._grams
        for g in itertools.chain(words, map(" ".join, itertools.pairwise(words))):
            code = grams.get(g)
            if code is None:
                if len(grams) >= GRAMS_MAX:
                    grams.clear()
                h = int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little")
                code = grams[g] = h % self.dim + 1 if (h >> 63) & 1 else -(h % self.dim) - 1
            bucket = abs(code) - 1
            feats[bucket] = feats.get(bucket, 0.0) + (1.0 if code > 0 else -1.0)
        return feats

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            feats = self._features(text)
            if feats:
                values = np.fromiter(feats.values(), np.float64, len(feats))
                out[i, np.fromiter(feats.keys(), np.intp, len(feats))] = np.sign(values) * np.log1p(np.abs(values))
                norm = float(np.linalg.norm(out[i]))
                if norm > 0:
                    out[i] /= norm
        return out
