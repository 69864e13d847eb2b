"""The exact token count of an OpenAI BPE encoding (``cl100k_base``, ``o200k_base``), from ``bpe-openai``.

This is the only module that imports ``bpe_openai`` (an import-linter contract), and it does so when a
:class:`BpeCounter` is built, not when the module is imported: ``bpe_openai`` takes about a second to import. The
package (``bpe-openai==0.1.4``, in the ``dev`` extra) is a Rust BPE with the tables compiled in, so nothing is
downloaded. It measures :class:`node.tokens.HeuristicCounter` (``bench/tokens_bench.py``) and can replace it where the
binding is installed.

Special-token strings such as ``<|endoftext|>`` are counted as plain text (``Encoding.encode_ordinary``), as they are
when a model reads them in a message. ``bpe-openai`` refuses one call of 1,000,000 characters or 200,000 tokens and
more, so a longer text is counted in chunks of at most :data:`CHUNK_CHARS` characters cut only where the count cannot
change: before a space that has an ASCII letter on each side (``"a| b"``). There the pre-tokenizers of cl100k and
o200k always end one piece and start the next, and BPE never merges across pieces, so the chunks' counts add up to
the count of the whole text. A text that is longer than that with no such place in it is counted in one call, and
raises :class:`~policy.errors.GamlError` if ``bpe-openai`` refuses it.
"""

from __future__ import annotations

from typing import Any, Final

from gaml.policy.errors import GamlError

__all__ = ["CHUNK_CHARS", "BpeCounter"]

INSTALL_HINT: Final = "the BPE counter needs `pip install bpe-openai==0.1.4` (make install does it)"
CHUNK_CHARS: Final = 50_000  # at most 4 tokens a character: a chunk stays under bpe-openai's 200,000-token limit


def _is_letter(ch: str) -> bool:
    return ch.isascii() and ch.isalpha()


def _cut(text: str, start: int) -> int:
    """The end of the chunk that starts at ``start``: the last safe place within :data:`CHUNK_CHARS`, else the first
    one after, else the end of the text."""
    end = start + CHUNK_CHARS
    if end >= len(text):
        return len(text)
    pos = text.rfind(" ", start + 1, end)
    while pos > start:
        if _is_letter(text[pos - 1]) and _is_letter(text[pos + 1]):
            return pos
        pos = text.rfind(" ", start + 1, pos)
    pos = text.find(" ", end)
    while pos != -1 and pos + 1 < len(text):
        if _is_letter(text[pos - 1]) and _is_letter(text[pos + 1]):
            return pos
        pos = text.find(" ", pos + 1)
    return len(text)


class BpeCounter:
    """The exact token count of ``encoding`` (``cl100k_base`` by default, or ``o200k_base``)."""

    name: str

    def __init__(self, encoding: str = "cl100k_base") -> None:
        try:
            import bpe_openai
        except ImportError as exc:
            raise GamlError(INSTALL_HINT) from exc
        known = sorted(bpe_openai.list_encoding_names())
        if encoding not in known:
            raise GamlError(f"unknown BPE encoding {encoding!r}: bpe-openai knows {', '.join(known)}")
        try:
            self._encoding: Any = bpe_openai.get_encoding(encoding)
        except (
            RuntimeError,
            KeyError,
            ValueError,
            OSError,
        ) as exc:  # gpt2, r50k and p50k also need tiktoken's tables, which bpe-openai does not ship
            raise GamlError(f"BPE encoding {encoding!r} did not load ({exc}); cl100k_base and o200k_base do") from exc
        self.name = encoding

    def count(self, text: str) -> int:
        """The number of tokens of ``text``, special-token strings counted as plain text."""
        if not isinstance(text, str):
            raise TypeError(f"a token count needs a str, not {type(text).__name__}")
        total, start = 0, 0
        while start < len(text):
            end = _cut(text, start)
            try:
                total += len(self._encoding.encode_ordinary(text[start:end]))
            except ValueError as exc:  # bpe-openai's size limits (its TokenLimitError is a ValueError too)
                raise GamlError(
                    f"bpe-openai cannot count {end - start:,} characters without a word break ({exc})"
                ) from exc
            start = end
        return total

    def __repr__(self) -> str:
        return f"BpeCounter({self.name!r})"
