"""HNSW, with the node's real parameters, against exact search on real MiniLM embeddings of real sentences.

The corpus is always available offline: sentences from the docstrings of Python's pure standard-library modules,
collected in a fixed order, deduplicated, sorted and sampled with a fixed seed. Nothing is cached on disk.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import io
import random
import re
import sys
import warnings

import numpy as np
import pytest

from gaml.node.core.store.vectors import ExactIndex
from gaml.node.shells.hnsw_index import HnswFactory
from gaml.node.shells.minilm import MiniLMEmbedder

N_INDEX = 5000
N_QUERIES = 200
K = 10
MIN_RECALL = 0.95

# Modules whose import has side effects (a browser, printing, GUI, readline hooks) or that are not library code.
SKIP_MODULES = frozenset(
    {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "test", "rlcompleter", "site", "pydoc_data"}
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def stdlib_modules() -> list[str]:
    """Sorted names of top-level standard-library modules implemented in Python (not C, not private)."""
    names = []
    for name in sorted(sys.stdlib_module_names):
        if name.startswith("_") or name in SKIP_MODULES:
            continue
        spec = importlib.util.find_spec(name)
        if spec is not None and (spec.origin or "").endswith(".py"):
            names.append(name)
    return names


def docstrings(module_name: str) -> list[str]:
    """The docstrings of a module, of its classes and functions, and of the classes' methods, in a fixed order."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")  # deprecated modules and aliases warn on import or attribute access
        try:
            module = importlib.import_module(module_name)
        except Exception:  # a module this platform cannot import (no curses, no Windows)
            return []
        out = [inspect.getdoc(module)]
        for name in sorted(vars(module)):
            obj = vars(module)[name]
            if inspect.isclass(obj) or inspect.isfunction(obj):
                out.append(inspect.getdoc(obj))
            if inspect.isclass(obj):
                out.extend(inspect.getdoc(m) for _, m in sorted(vars(obj).items()) if inspect.isfunction(m))
    return [d for d in out if d]


def sentences(doc: str) -> list[str]:
    """Prose sentences of 30-300 characters with at least five words; doctest lines are dropped."""
    out = []
    for paragraph in re.split(r"\n\s*\n", doc):
        text = " ".join(paragraph.split())
        for s in _SENTENCE_END.split(text):
            if 30 <= len(s) <= 300 and len(s.split()) >= 5 and ">>>" not in s:
                out.append(s)
    return out


def corpus(n: int) -> list[str]:
    """``n`` distinct sentences, the same on every run of the same Python."""
    distinct = sorted({s for name in stdlib_modules() for doc in docstrings(name) for s in sentences(doc)})
    assert len(distinct) >= n, f"only {len(distinct)} distinct docstring sentences; need {n}"
    return random.Random(0).sample(distinct, n)


@pytest.mark.slow  # tens of seconds: `make test-slow`
def test_hnsw_recall_on_minilm_embeddings() -> None:
    """HNSW with HnswFactory() defaults reaches recall@10 >= 0.95 against exact search, for 200 held-out queries."""
    texts = corpus(N_INDEX + N_QUERIES)
    docs, queries = texts[:N_INDEX], texts[N_INDEX:]
    assert len(set(docs)) == N_INDEX and not set(queries) & set(docs)

    embedder = MiniLMEmbedder()
    doc_vecs, query_vecs = embedder.embed(docs), embedder.embed(queries)
    assert doc_vecs.shape == (N_INDEX, embedder.dim)
    np.testing.assert_allclose(np.linalg.norm(doc_vecs, axis=1), 1.0, atol=1e-3)

    ids = [f"s{i:05d}" for i in range(N_INDEX)]
    exact = ExactIndex(embedder.dim)
    exact.add(ids, doc_vecs)
    hnsw = HnswFactory().new(embedder.dim)
    for i in range(0, N_INDEX, 500):  # in batches, as the store adds them
        hnsw.add(ids[i : i + 500], doc_vecs[i : i + 500])
    assert len(hnsw) == N_INDEX

    recalls = []
    for q in query_vecs:
        want = {i for i, _ in exact.search(q, K)}
        got = {i for i, _ in hnsw.search(q, K)}
        recalls.append(len(want & got) / K)
    measured = float(np.mean(recalls))
    print(f"\nHNSW recall@{K} on MiniLM: {measured:.4f} ({N_INDEX} sentences, {N_QUERIES} held-out queries)")
    assert measured >= MIN_RECALL, f"recall@{K} {measured:.4f} < {MIN_RECALL}"
