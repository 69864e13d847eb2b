"""The token counters: the estimate's guarantees (additive across newlines, empty is zero, monotone), its error
against the real BPE on texts of this repository and on LoCoMo, and the exact counter's known values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gaml.node.core.text.parsers import parse_locomo
from gaml.node.core.tokens import _PIECE_RE, DEFAULT, HeuristicCounter, TokenCounter
from gaml.node.shells import bpe
from gaml.policy.errors import GamlError

ROOT = Path(__file__).resolve().parents[2]

# Bounds on the aggregate error (Σ estimate / Σ true − 1) against cl100k_base. Measured when written (see
# node/core/tokens.py and bench/results/tokens.md): LoCoMo 0.0 % (median per-turn |error| 0.0 %); README.md paragraphs
# plus the lines of deploy/examples/session.jsonl −1.4 % (README −2.8 %, session +3.5 %).
LOCOMO_AGGREGATE_MAX = 0.03
LOCOMO_MEDIAN_MAX = 0.10
REPO_AGGREGATE_MAX = 0.08

WORDS = ["the", "Hello", "world", "naïve", "getHTTPValue", "über", "東京", "привет", "x", "123456", "_id", "I'm"]
PUNCT = [".", ",", "!?", "...", "—", "’", "😊", "{", "});", "==========", '"', "'s", "-", "/", "\\"]
SPACE = [" ", "  ", "\t", "\n", "\n\n", "  \n", "\r\n", "\r", "\u00a0", "\u2028"]

# Texts built from pieces that stress the pre-tokenizer, plus arbitrary Unicode text.
texts = st.one_of(
    st.lists(st.sampled_from(WORDS + PUNCT + SPACE), max_size=40).map("".join),
    st.text(max_size=60),
    st.text(alphabet=st.sampled_from(list(" \n\r\t.,!?'\"-_()[]{}:;aAbZ09éß中😊\u0301")), max_size=60),
)


@settings(derandomize=True, max_examples=400, deadline=None)
@given(texts, texts)
def test_additive_across_a_newline(a: str, b: str) -> None:
    """count(a + "\\n" + b) == count(a + "\\n") + count(b), for any two strings."""
    assert DEFAULT.count(a + "\n" + b) == DEFAULT.count(a + "\n") + DEFAULT.count(b)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(texts)
def test_a_text_counts_as_the_sum_of_its_lines(text: str) -> None:
    """A text's count is the sum of its lines' counts, each line with its newline."""
    lines = text.split("\n")
    parts = [line + "\n" for line in lines[:-1]] + [lines[-1]]
    assert DEFAULT.count(text) == sum(DEFAULT.count(part) for part in parts)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(texts, texts)
def test_appending_a_line_never_lowers_the_count(a: str, b: str) -> None:
    """Monotone: count(a + "\\n" + b) >= count(a + "\\n") >= count(a)."""
    assert DEFAULT.count(a + "\n" + b) >= DEFAULT.count(a + "\n") >= DEFAULT.count(a)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(texts)
def test_pieces_cover_every_line_and_never_hold_a_newline(text: str) -> None:
    """The pre-tokenizer cuts each line into pieces that join back into it, none empty."""
    for line in text.split("\n"):
        pieces = _PIECE_RE.findall(line)
        assert "".join(pieces) == line
        assert all(pieces)


def test_empty_and_simple_texts() -> None:
    """The empty text is 0 tokens; a lone newline 1; a short sentence its cl100k count."""
    assert DEFAULT.count("") == 0
    assert DEFAULT.count("\n") == 1
    assert DEFAULT.count("hello world") == 2
    assert DEFAULT.count("Hello, world!") == 4  # Hello , world ! in cl100k_base


def test_the_estimate_is_named_and_versioned() -> None:
    """The default counter says what it is, so a stored count can be traced to the estimate that made it."""
    counter: TokenCounter = HeuristicCounter()
    assert counter.name == DEFAULT.name == "gaml-approx-cl100k-v1"


@pytest.mark.parametrize("bad", [None, b"bytes", 3, ["a"]])
def test_count_refuses_what_is_not_text(bad: object) -> None:
    """A non-str is a TypeError that names the type, not a wrong count."""
    with pytest.raises(TypeError, match=type(bad).__name__):
        DEFAULT.count(bad)  # type: ignore[arg-type]


# -- the exact counter ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cl100k() -> bpe.BpeCounter:
    pytest.importorskip("bpe_openai")
    return bpe.BpeCounter()


@pytest.mark.parametrize(
    ("encoding", "text", "tokens"),
    [
        ("cl100k_base", "hello world", 2),  # [15339, 1917]
        ("cl100k_base", "tiktoken is great!", 6),  # [83, 1609, 5963, 374, 2294, 0]: tiktoken's README example
        ("cl100k_base", "<|endoftext|>", 7),  # plain text: < | endo ft ext | >, not the special token 100257
        ("cl100k_base", "I'm here", 3),  # I 'm  here
        ("o200k_base", "I'm here", 2),  # o200k keeps the contraction on the word: I'm  here
        ("o200k_base", "hello world", 2),
        ("cl100k_base", "", 0),
    ],
)
def test_bpe_counter_known_counts(encoding: str, text: str, tokens: int) -> None:
    """BpeCounter gives the exact counts, checked by hand against the token ids, and counts special tokens as text."""
    pytest.importorskip("bpe_openai")
    counter = bpe.BpeCounter(encoding)
    assert counter.name == encoding
    assert counter.count(text) == tokens


def test_bpe_counter_unknown_encoding_lists_the_known(cl100k: bpe.BpeCounter) -> None:
    """An unknown encoding is a GamlError that lists the encodings bpe-openai has."""
    with pytest.raises(GamlError, match=r"unknown BPE encoding 'p99k'.*cl100k_base.*o200k_base"):
        bpe.BpeCounter("p99k")


def test_bpe_counter_refuses_what_is_not_text(cl100k: bpe.BpeCounter) -> None:
    """The exact counter refuses a non-str like the estimate does."""
    with pytest.raises(TypeError, match="bytes"):
        cl100k.count(b"hello")  # type: ignore[arg-type]


def test_bpe_counter_chunks_add_up(cl100k: bpe.BpeCounter, monkeypatch: pytest.MonkeyPatch) -> None:
    """A text counted in chunks (cut only before a space between ASCII letters) counts as the whole: the cut changes
    no token, including runs with no safe place to cut."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")[:6000] + " " + "x" * 300 + " tail words  \n\n end"
    whole = cl100k.count(text)
    monkeypatch.setattr(bpe, "CHUNK_CHARS", 50)
    assert cl100k.count(text) == whole


def test_bpe_counter_without_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without bpe-openai, building the counter says how to install it."""
    import builtins

    real_import = builtins.__import__

    def no_bpe(name: str, *args: object, **kwargs: object) -> object:
        if name == "bpe_openai":
            raise ImportError("No module named 'bpe_openai'")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_bpe)
    with pytest.raises(GamlError, match=r"pip install bpe-openai==0\.1\.4"):
        bpe.BpeCounter()


# -- the estimate against the real BPE ---------------------------------------------------------------------------------


def repo_texts() -> list[str]:
    """README.md's paragraphs and the lines of the example agent session: prose, Markdown, JSON and commands."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    session = (ROOT / "deploy" / "examples" / "session.jsonl").read_text(encoding="utf-8")
    return [p for p in re.split(r"\n\s*\n", readme) if p.strip()] + session.splitlines()


def test_estimate_error_on_this_repository(cl100k: bpe.BpeCounter) -> None:
    """On the repository's own texts the aggregate error stays within the bound measured when written, plus margin."""
    texts = repo_texts()
    true = sum(cl100k.count(t) for t in texts)
    estimate = sum(DEFAULT.count(t) for t in texts)
    assert true > 1000
    assert abs(estimate / true - 1) <= REPO_AGGREGATE_MAX, (estimate, true)


def test_estimate_error_on_locomo(cl100k: bpe.BpeCounter, locomo_path: Path) -> None:
    """On every LoCoMo turn the aggregate error is within ±3 % and the median per-turn error within 10 %."""
    turns = [r.text for s in parse_locomo(locomo_path.read_bytes(), locomo_path.name) for r in s.records]
    true = [cl100k.count(t) for t in turns]
    estimate = [DEFAULT.count(t) for t in turns]
    assert abs(sum(estimate) / sum(true) - 1) <= LOCOMO_AGGREGATE_MAX
    errors = sorted(abs(e / t - 1) for e, t in zip(estimate, true, strict=True) if t)
    assert errors[len(errors) // 2] <= LOCOMO_MEDIAN_MAX
