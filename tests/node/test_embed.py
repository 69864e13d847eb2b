"""The dependency-free ``HashEmbedder``: its vectors follow from its definition (signed feature hashing of words and
word pairs, log-scaled, unit length) whatever it remembers of the words it met, so a store's vectors never change."""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gaml.node.core import embed
from gaml.node.core.embed import HashEmbedder
from gaml.node.core.text import extract
from gaml.policy.model import Asset, AssetType

TEXTS = [
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "the the the cat sat on the mat, the cat",
    "Melanie's kids painted a sunset; Melanie's kids love painting.",
    "",
    "!!! ???",
    "naïve café — déjà vu, 42 times",
]


def by_definition(text: str, dim: int) -> np.ndarray:
    """The vector of ``text`` computed from the definition alone, in float64, one gram at a time."""
    words = [w.lower() for w in re.findall(r"[\w']+", text)]
    feats: dict[int, float] = {}
    for g in words + [f"{a} {b}" for a, b in itertools.pairwise(words)]:
        h = int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little")
        feats[h % dim] = feats.get(h % dim, 0.0) + (1.0 if (h >> 63) & 1 else -1.0)
    v = np.zeros(dim)
    for bucket, x in feats.items():
        v[bucket] = math.copysign(math.log1p(abs(x)), x)
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


@pytest.mark.parametrize("grams_max", [embed.GRAMS_MAX, 3])
def test_vectors_follow_the_definition_whatever_the_embedder_remembers(
    grams_max: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same rows from a fresh embedder, one that met the texts before, one whose memory of grams holds only three
    (emptied again and again), and each text embedded alone; each row is the definition's vector (to float32), of
    norm 1, or 0 when the text has no word."""
    monkeypatch.setattr(embed, "GRAMS_MAX", grams_max)
    e = HashEmbedder(64)
    first = e.embed(TEXTS)
    again = e.embed(list(reversed(TEXTS)))[::-1]
    assert first.dtype == np.float32 and first.shape == (len(TEXTS), 64)
    assert np.array_equal(first, again) and np.array_equal(first, HashEmbedder(64).embed(TEXTS))
    assert np.array_equal(first, np.vstack([e.embed([t]) for t in TEXTS]))  # a batch's rows: the same bits as alone
    assert e.embed([]).shape == (0, 64)
    assert len(e._grams) <= grams_max
    for text, row in zip(TEXTS, first, strict=True):
        np.testing.assert_allclose(row, by_definition(text, 64), atol=1e-6)
    norms = np.linalg.norm(first, axis=1)
    assert norms[3] == 0.0 and norms[4] == 0.0
    np.testing.assert_allclose(np.delete(norms, [3, 4]), 1.0, atol=1e-6)


# -- an asset's vector: its passages ----------------------------------------------------------------------------------


def turn(text: str, speaker: str = "Caroline", tags: tuple[str, ...] = ()) -> Asset:
    payload = {"text": text, "speaker": speaker} if speaker else {"text": text}
    return Asset(id="0" * 32, asset_type=AssetType.EVENT, payload=payload, owner_id="alice", created_at=1, tags=tags)


def test_a_text_of_one_sentence_is_embedded_as_before() -> None:
    """One sentence (or no text): the asset's embed_text, and the very vector the embedder gives it."""
    e = HashEmbedder(64)
    one = turn("I went to the support group yesterday.", tags=("kind:message", "support"))
    bare = Asset(id="1" * 32, asset_type=AssetType.FACT, payload={"k": "v"}, owner_id="alice", created_at=1)
    for a in (one, bare):
        assert embed.passages(a) == [a.embed_text()]
        np.testing.assert_array_equal(embed.embed_assets(e, [a])[0], e.embed([a.embed_text()])[0])


def test_sentences_that_say_something_are_the_passages_after_the_speaker_then_the_plain_tags() -> None:
    a = turn(
        "Wow, thanks Mel! I went to the support group yesterday. It was so powerful. Cool!",
        tags=("kind:message", "support", "group"),
    )
    assert embed.passages(a) == [
        "Caroline: I went to the support group yesterday.",
        "Caroline: It was so powerful.",
        "group support",  # the model keeps tags sorted
    ]
    only_fillers = turn("Wow, thanks Mel! Cool!")
    assert embed.passages(only_fillers) == ["Caroline: Wow, thanks Mel!", "Caroline: Cool!"]


def test_an_asset_of_several_sentences_is_the_normalized_mean_of_its_passages() -> None:
    e = HashEmbedder(64)
    a = turn("I went camping by the lake. The kids roasted marshmallows. We saw the Perseids.")
    b = turn("My favourite colour is blue.")
    got = embed.embed_assets(e, [a, b])
    rows = e.embed(embed.passages(a))
    mean = rows.mean(axis=0)
    np.testing.assert_allclose(got[0], mean / np.linalg.norm(mean), atol=1e-6)
    assert float(np.linalg.norm(got[0])) == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_array_equal(got[1], e.embed([b.embed_text()])[0])
    assert embed.embed_assets(e, []) == []


def test_a_long_text_is_embedded_as_a_bounded_number_of_runs_of_sentences() -> None:
    """However many sentences, at most MAX_PASSAGES passages (plus the tags), every sentence in one of them, in
    order."""
    said = [f"Step {n} moved the {n}th crate to the dock." for n in range(100)]
    a = turn(" ".join(said), speaker="")
    got = embed.passages(a)
    assert len(got) == embed.MAX_PASSAGES
    assert " ".join(got) == " ".join(said)
    assert {len(p.split(". ")) for p in got} <= {6, 7}  # 100 = 16 runs of 6 or 7 sentences


class Counting:
    """An embedder that counts the texts it is asked to embed (and fails on ``fail``)."""

    def __init__(self, inner: HashEmbedder, fail: str | None = None) -> None:
        self.inner, self.fail = inner, fail
        self.id, self.dim = inner.id, inner.dim
        self.asked: list[str] = []
        self.here: list[str] = []  # asked on the main thread (not ahead, on a worker)

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.fail is not None and self.fail in texts:
            raise RuntimeError(f"cannot embed {self.fail!r}")
        self.asked += texts
        if threading.current_thread() is threading.main_thread():
            self.here += texts
        return self.inner.embed(texts)


@pytest.mark.parametrize("on_worker", [False, True])
def test_prefetched_answers_each_text_with_its_own_row_and_embeds_it_once(on_worker: bool) -> None:
    """Rows embedded ahead (on a worker or not) are the embedder's own; a text not embedded ahead is embedded when
    asked for, a text embedded ahead is not embedded again, and one that every call asking for it dropped is embedded
    again when asked for (one still asked for by another call is held)."""
    e = HashEmbedder(64)
    counting = Counting(e)
    pre = embed.Prefetched(counting)
    assert (pre.id, pre.dim) == (e.id, e.dim)
    with ThreadPoolExecutor(1) as worker:
        first = pre.ahead(TEXTS[:3] + TEXTS[:1], worker if on_worker else None)
        assert first == TEXTS[:3]  # once each
        second = pre.ahead(TEXTS[1:4], worker if on_worker else None)
        assert second == TEXTS[1:4]
        asked = [TEXTS[2], TEXTS[5], TEXTS[0], TEXTS[5], TEXTS[3]]
        got = pre.embed(asked)
    np.testing.assert_array_equal(got, e.embed(asked))
    assert sorted(counting.asked) == sorted(TEXTS[:4] + TEXTS[5:6])  # the new text once, nothing twice
    pre.drop(first)
    np.testing.assert_array_equal(pre.embed(TEXTS[:2]), e.embed(TEXTS[:2]))
    assert (counting.asked.count(TEXTS[0]), counting.asked.count(TEXTS[1])) == (2, 1)  # the second call holds TEXTS[1]
    pre.drop(second)
    pre.embed(TEXTS[1:2])
    assert counting.asked.count(TEXTS[1]) == 2


def test_an_error_of_a_call_made_ahead_is_raised_where_its_rows_are_asked_for() -> None:
    """Not where no row is asked for (another text, a drop); a row asked for is embedded again, so the embedder's
    error (here, for the same text) is raised there."""
    pre = embed.Prefetched(Counting(HashEmbedder(64), fail="!!! ???"))
    with ThreadPoolExecutor(1) as worker:
        claimed = pre.ahead(["a cat", "!!! ???"], worker)
        np.testing.assert_array_equal(pre.embed(["a dog"]), HashEmbedder(64).embed(["a dog"]))  # another call
        with pytest.raises(RuntimeError, match="cannot embed"):
            pre.embed(["a cat"])
        pre.ahead(["a cat", "!!! ???"], worker)
        pre.drop(claimed)  # nothing asked for: no error
        np.testing.assert_array_equal(pre.embed(["a cat"]), HashEmbedder(64).embed(["a cat"]))  # embedded when asked
        with pytest.raises(RuntimeError, match="cannot embed"):
            pre.embed(["!!! ???"])


def test_embedded_ahead_writes_every_window_in_order_and_what_was_made_before_a_failure() -> None:
    """Each window is written once, in order, with its texts held (none embedded by the write); when the next window
    cannot be made, the window made before it is still written and the error raised."""
    counting = Counting(HashEmbedder(64))
    written: list[tuple[int, int]] = []

    def write(window: list[str], pre: embed.Embedder) -> None:
        before = len(counting.here)
        np.testing.assert_array_equal(pre.embed(window), counting.inner.embed(window))
        written.append((len(window), len(counting.here) - before))

    windows = [TEXTS[:2], TEXTS[2:3], TEXTS[3:]]
    embed.embedded_ahead(counting, iter(windows), iter, write)
    assert written == [(2, 0), (1, 0), (3, 0)]

    def failing() -> Iterator[list[str]]:
        yield TEXTS[:2]
        raise ValueError("cannot make the next window")

    written.clear()
    with pytest.raises(ValueError, match="next window"):
        embed.embedded_ahead(counting, failing(), iter, write)
    assert written == [(2, 0)]


@pytest.mark.parametrize(
    "text",
    [
        "I went to the support group yesterday.",
        "Wow! Thanks! I went camping by the lake. The kids roasted marshmallows.",
        "Hey! Cool!",
        " ".join(f"Sentence number {n} says something new." for n in range(40)),
        "",
    ],
)
@pytest.mark.parametrize("speaker", ["Caroline", ""])
@pytest.mark.parametrize("tags", [(), ("kind:message",), ("fact", "slot:caroline/color")])
def test_text_passages_are_the_passages_of_an_asset_of_that_text(
    text: str, speaker: str, tags: tuple[str, ...]
) -> None:
    """What ingestion embeds ahead for a record is what the item (or fact) it becomes is embedded by."""
    asset = turn(text, speaker, tags=tags)
    assert embed.text_passages(text, speaker, tags) == embed.passages(asset)
    if len(extract.sentences(text)) < 2:
        assert embed.passages(asset) == [asset.embed_text()]
