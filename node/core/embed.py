"""The ``Embedder`` interface and the deterministic, dependency-free embedder.

An embedder turns texts into unit vectors. Each partition records the embedder id and dimension it was built with and
refuses vectors of another. ``HashEmbedder`` (signed feature hashing of words and word bigrams) is deterministic and
fast: the simulator's and the tests' embedder. The default for real use is MiniLM (``node/shells/minilm.py``).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Sequence
from typing import Final, Protocol

import numpy as np

_WORD: Final = re.compile(r"[\w']+", re.UNICODE)


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

    def _features(self, text: str) -> dict[int, float]:
        words = [w.lower() for w in _WORD.findall(text)]
        feats: dict[int, float] = {}
        grams = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
        for g in grams:
            h = int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little")
            bucket, sign = h % self.dim, 1.0 if (h >> 63) & 1 else -1.0
            feats[bucket] = feats.get(bucket, 0.0) + sign
        return feats

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for bucket, v in self._features(text).items():
                out[i, bucket] = math.copysign(math.log1p(abs(v)), v)
            norm = float(np.linalg.norm(out[i]))
            if norm > 0:
                out[i] /= norm
        return out
