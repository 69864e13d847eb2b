"""The MiniLM shell: it reads a long text only as far as the model does (review finding 5: a megabyte item's tokens
cost ~150 MB before the model dropped all but the first 256), and its two runtimes (ONNX, torch) give the same
vectors."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from gaml.node.shells.minilm import (
    EXPORT_NAME,
    PAD_WASTE,
    PIECES_MAX,
    MiniLMEmbedder,
    _batches,
    _Onnx,
    _Torch,
    bounded,
    cached_export,
    export_onnx,
)
from gaml.policy.errors import GamlError

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
    m = MiniLMEmbedder(runtime="torch")
    model = m._load()
    assert isinstance(model, _Torch)
    whole = model.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    cut = m.embed(texts)
    assert min(float(np.dot(a, b)) for a, b in zip(whole, cut, strict=True)) > 0.99999
    assert len(bounded(texts[2]).split()) == PIECES_MAX and bounded(texts[-1]) is texts[-1]


TEXTS = [
    "Caroline went to the LGBTQ support group yesterday and found it inspiring.",
    "ok",
    "",
    "Melanie: I painted a lake sunrise last year! 🎨",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    " ".join(random.Random(1).choice(WORDS) + str(i) for i in range(400)),  # past the model's 256 tokens
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A model cache of this module's own (exported once), named by GAML_MODEL_CACHE while its tests run."""
    path = tmp_path_factory.mktemp("model-cache")
    export_onnx(path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GAML_MODEL_CACHE", str(path))
        yield path


def test_the_onnx_runtime_gives_the_torch_vectors(cache: Path) -> None:
    """The ONNX export run by ONNX Runtime embeds as sentence-transformers on torch does (cosine >= 0.9999 each),
    whatever the order and batching of the texts; a long text is read to the model's 256 tokens, as torch reads it."""
    onnx, torch = MiniLMEmbedder(runtime="onnx"), MiniLMEmbedder(runtime="torch", batch_size=2)
    a, b = onnx.embed(TEXTS), torch.embed(TEXTS)
    assert onnx.runtime == "onnx" and torch.runtime == "torch"
    assert a.shape == b.shape == (len(TEXTS), 384) and a.dtype == np.float32
    assert min(float(np.dot(x, y)) for x, y in zip(a, b, strict=True)) >= 0.9999
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    one_by_one = np.stack([onnx.embed([t])[0] for t in TEXTS])
    assert np.allclose(one_by_one, a, atol=1e-5)
    model = onnx._load()
    assert isinstance(model, _Onnx) and len(model.tokenizer.encode(TEXTS[-1]).ids) == 256


@pytest.mark.slow  # tens of seconds: `make test-slow` (make test keeps under 15 minutes)
def test_a_stale_altered_or_broken_export_is_made_again(tmp_path: Path) -> None:
    """The cached export is used only while its manifest matches the installed weights and its bytes: an altered
    file, or a manifest naming other weights, is exported again before use; so is a file whose manifest matches
    but which does not load (written by something else)."""
    export_onnx(tmp_path)
    path = tmp_path / EXPORT_NAME
    assert cached_export(tmp_path) == path.read_bytes()
    ref = MiniLMEmbedder(runtime="onnx", cache=tmp_path).embed(TEXTS[:2])
    with path.open("r+b") as f:  # one byte altered
        f.seek(path.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert cached_export(tmp_path) is None
    again = MiniLMEmbedder(runtime="onnx", cache=tmp_path)
    assert np.allclose(again.embed(TEXTS[:2]), ref, atol=1e-6)
    assert cached_export(tmp_path) == path.read_bytes()
    manifest = tmp_path / (EXPORT_NAME + ".json")
    m = json.loads(manifest.read_text())
    m["weights"]["size"] += 1
    manifest.write_text(json.dumps(m))
    assert cached_export(tmp_path) is None
    export_onnx(tmp_path)
    garbage = b"not a model"  # whole by its manifest, but no model
    path.write_bytes(garbage)
    m = json.loads(manifest.read_text())
    m["sha256"] = hashlib.sha256(garbage).hexdigest()
    manifest.write_text(json.dumps(m))
    assert cached_export(tmp_path) == garbage
    fixed = MiniLMEmbedder(cache=tmp_path)
    assert np.allclose(fixed.embed(TEXTS[:2]), ref, atol=1e-6) and fixed.runtime == "onnx"
    assert cached_export(tmp_path) != garbage


def test_a_cache_others_may_write_is_not_used(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A model cache writable by its group or anyone is neither read nor exported into: ``onnx`` refuses with a
    typed error, ``auto`` embeds on torch and says why in the log."""
    export_onnx(tmp_path)
    tmp_path.chmod(0o777)
    try:
        assert cached_export(tmp_path) is None
        with pytest.raises(GamlError, match="not this user's alone"):
            MiniLMEmbedder(runtime="onnx", cache=tmp_path).embed(["x"])
        auto = MiniLMEmbedder(cache=tmp_path)
        with caplog.at_level(logging.WARNING, logger="gaml.minilm"):
            assert auto.embed(TEXTS[:1]).shape == (1, 384)
        assert auto.runtime == "torch" and any("not this user's alone" in r.message for r in caplog.records)
    finally:
        tmp_path.chmod(0o700)


def test_without_onnx_runtime_auto_falls_back_to_torch_and_onnx_refuses(
    cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where ONNX Runtime cannot be imported, ``auto`` embeds on torch and says so once in the log, and ``onnx``
    refuses with a typed error."""
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails
    with pytest.raises(GamlError, match="ONNX runtime"):
        MiniLMEmbedder(runtime="onnx").embed(["x"])
    auto = MiniLMEmbedder()
    with caplog.at_level(logging.WARNING, logger="gaml.minilm"):
        v = auto.embed(TEXTS[:1])
    assert auto.runtime == "torch" and v.shape == (1, 384)
    assert any("runs on torch" in r.message for r in caplog.records)
    with pytest.raises(GamlError, match="unknown MiniLM runtime"):
        MiniLMEmbedder(runtime="gpu")


def test_the_onnx_runtime_embeds_without_torch(cache: Path) -> None:
    """A process that embeds on the ONNX runtime (the export being cached) never imports torch or
    sentence-transformers."""
    code = (
        "import sys\n"
        "from gaml.node.shells.minilm import MiniLMEmbedder\n"
        "e = MiniLMEmbedder(runtime='onnx')\n"
        "assert e.embed(['hello world']).shape == (1, 384)\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers') if m in sys.modules))\n"
    )
    env = {**os.environ, "GAML_MODEL_CACHE": str(cache)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True, env=env)
    assert out.stdout.strip() == "[]"


def test_onnx_batches_cut_by_tokens_hold_each_text_once_and_pad_little() -> None:
    """Texts in ascending order of tokens are cut into batches of at most the given count, each text once and in
    order, and a batch of more than one text pads by at most PAD_WASTE of its tokens (seeded random token counts)."""
    rng = random.Random(5)
    for _ in range(300):
        sizes = [rng.choice((2, 3, rng.randint(2, 40), rng.randint(2, 256))) for _ in range(rng.randint(0, 60))]
        order = sorted(range(len(sizes)), key=lambda i: (sizes[i], i))
        most = rng.randint(1, 20)
        batches = list(_batches(order, sizes, most))
        assert [i for b in batches for i in b] == order
        for b in batches:
            assert 1 <= len(b) <= most
            width, tokens = max(sizes[i] for i in b), sum(sizes[i] for i in b)
            assert len(b) == 1 or width * len(b) <= tokens * (1 + PAD_WASTE) + 1e-9
