"""Benchmarks of the node against the raw libraries."""

import os as _os

_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as node/__init__.py: before numpy is imported
