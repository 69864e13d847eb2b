"""Test-wide settings: one OpenBLAS thread, as the node runs (see node/__init__.py), set before numpy is imported."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


from pathlib import Path

import pytest

DEFAULT_LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--locomo",
        default=os.environ.get("GAML_LOCOMO", str(DEFAULT_LOCOMO)),
        help="path of the LoCoMo development set (default: ../shared/data/locomo/locomo-dev.json, or $GAML_LOCOMO)",
    )


@pytest.fixture(scope="session")
def locomo_path(request: pytest.FixtureRequest) -> Path:
    """The LoCoMo development set; tests that need it skip, saying so, where it is absent."""
    path = Path(request.config.getoption("--locomo"))
    if not path.is_file():
        pytest.skip(f"LoCoMo data not found at {path} (pass --locomo PATH or set GAML_LOCOMO)")
    return path
