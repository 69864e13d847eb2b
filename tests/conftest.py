"""Test-wide settings: one OpenBLAS thread, as the node runs (see node/__init__.py), set before numpy is imported."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
