"""Test-wide settings: one OpenBLAS thread, as the node runs (see node/__init__.py), set before numpy is imported."""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


from pathlib import Path

import pytest

DEFAULT_LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
DEFAULT_POISON = Path(__file__).resolve().parents[2] / "shared" / "data" / "poisonedrag" / "nq.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--locomo",
        default=os.environ.get("GAML_LOCOMO", str(DEFAULT_LOCOMO)),
        help="path of the LoCoMo development set (default: ../shared/data/locomo/locomo-dev.json, or $GAML_LOCOMO)",
    )
    parser.addoption(
        "--poison",
        default=os.environ.get("GAML_POISON", str(DEFAULT_POISON)),
        help="path of a PoisonedRAG attack file (default: ../shared/data/poisonedrag/nq.json, or $GAML_POISON)",
    )


@pytest.fixture(scope="session")
def locomo_path(request: pytest.FixtureRequest) -> Path:
    """The LoCoMo development set; tests that need it skip, saying so, where it is absent."""
    path = Path(request.config.getoption("--locomo"))
    if not path.is_file():
        pytest.skip(f"LoCoMo data not found at {path} (pass --locomo PATH or set GAML_LOCOMO)")
    return path


@pytest.fixture(scope="session")
def poison_path(request: pytest.FixtureRequest) -> Path:
    """A PoisonedRAG attack file; tests that need it skip, saying so, where it is absent."""
    path = Path(request.config.getoption("--poison"))
    if not path.is_file():
        pytest.skip(f"PoisonedRAG data not found at {path} (pass --poison PATH or set GAML_POISON)")
    return path
