"""GAML's node: the core (store, retrieval, governance) and its shells (RocksDB, hnswlib, files, CLI)."""

import os as _os

# The node's numpy work is small matrix-vector products (an exact partition search is 2,048 x 384 at most). With
# OpenBLAS's default of one thread per core, each such product synchronises threads, and on a busy 2-core machine it
# was measured 50x slower (8 ms instead of 0.15 ms). It must be set before numpy is first imported.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def __getattr__(name: str) -> object:
    """``gaml.node.connect`` and ``gaml.node.connect_async``: the SDK (:mod:`gaml.node.serve.sdk`), imported on first
    use so that the pure core never loads gRPC."""
    if name in ("connect", "connect_async"):
        from gaml.node.serve import sdk

        return getattr(sdk, name)
    raise AttributeError(f"module 'gaml.node' has no attribute {name!r}")
