"""The front page and the reference pages: the README is a front page (short, the quickstart in its first screen, every
link alive), and docs/configuration.md is the schema that check_config enforces, regenerated, never hand-edited."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gaml.node.home import CONFIG_KEYS, check_config, config_reference
from gaml.policy.errors import InvalidInput

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_the_readme_is_a_front_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) <= 12 * 1024
    first_screen = "\n".join(text.splitlines()[:40])
    for command in ("make demo", "make test", "gaml init", 'gaml add "', "gaml search", "gaml hydrate"):
        assert command in first_screen, command
    assert "pip install" in text and "gaml mcp" in text and "gaml proxy" in text and "connect()" in text


def test_every_link_of_the_readme_and_the_docs_leads_somewhere() -> None:
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://")):
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to {target}, which is missing"


def test_the_configuration_reference_is_generated_from_the_schema() -> None:
    assert (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8") == config_reference(), (
        "docs/configuration.md is stale: python -m gaml.node.home > docs/configuration.md"
    )
    for key in CONFIG_KEYS:
        assert f"| `{key}` |" in config_reference()


@pytest.mark.parametrize(
    ("extra", "named", "suggested"),
    [
        ({"embeder": "hash"}, "'embeder'", "did you mean 'embedder'?"),
        ({"p2p": {"listen": [], "mnds": True}}, "p2p.mnds", "did you mean 'p2p.mdns'?"),
        ({"curator": {"kind": "openai", "base-url": "http://127.0.0.1:1"}}, "curator.base-url", "'curator.base_url'"),
        ({"limits": {"brust": 3}}, "limits.brust", "did you mean 'limits.burst'?"),
        (
            {"limits": {"principals": {"bob": {"burts": 3}}}},
            "limits.principals.bob.burts",
            "'limits.principals.bob.burst'",
        ),
        ({"tiers": {"zzz": 1}}, "tiers.zzz", "known: tiers."),
        ({"consensus": {"admitt": 1}}, "consensus.admitt", "did you mean 'consensus.admit'?"),
    ],
)
def test_a_key_the_schema_does_not_know_is_refused_by_name_with_the_nearest_valid_one(
    extra: dict[str, object], named: str, suggested: str
) -> None:
    cfg = {"format": "gaml-home-1", "embedder": "hash", "max_payload_bytes": 1024, **extra}
    with pytest.raises(InvalidInput) as e:
        check_config(json.loads(json.dumps(cfg)), "config.json")
    assert named in str(e.value) and suggested in str(e.value) and "docs/configuration.md" in str(e.value), e.value
