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


def _data(request: pytest.FixtureRequest, option: str, what: str, env: str) -> Path:
    """The data file an option names; the test skips, saying so, where it is absent."""
    path = Path(request.config.getoption(f"--{option}"))
    if not path.is_file():
        pytest.skip(f"{what} not found at {path} (pass --{option} PATH or set {env})")
    return path


@pytest.fixture(scope="session")
def locomo_path(request: pytest.FixtureRequest) -> Path:
    """The LoCoMo development set; tests that need it skip, saying so, where it is absent."""
    return _data(request, "locomo", "LoCoMo data", "GAML_LOCOMO")


@pytest.fixture(scope="session")
def poison_path(request: pytest.FixtureRequest) -> Path:
    """A PoisonedRAG attack file; tests that need it skip, saying so, where it is absent."""
    return _data(request, "poison", "PoisonedRAG data", "GAML_POISON")
