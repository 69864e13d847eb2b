"""The operations benchmark runs end to end on a small home and reports every figure (make bench-ops runs it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gaml.bench import ops_bench


@pytest.mark.slow  # four daemon starts: `make test-slow`
def test_ops_bench_smoke(tmp_path: Path) -> None:
    assert ops_bench.main(["--assets", "300", "--calls", "10", "--out", str(tmp_path)]) == 0
    r = json.loads((tmp_path / "ops.json").read_text())
    for key in ("search_plain", "search_metrics", "status_plain", "status_metrics", "scrape"):
        assert r[key]["n"] > 0 and r[key]["median_ms"] > 0, key
    assert r["backup_assets"] == 300 and r["backup_bytes"] > 0 and r["restored_same_answers"] is True
    assert "| SDK `search`, daemon with `--metrics` |" in (tmp_path / "ops.md").read_text()
