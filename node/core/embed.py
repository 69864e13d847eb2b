"""The ``Embedder`` interface and the deterministic, dependency-free embedder.

An embedder turns texts into unit vectors. Each partition records the embedder id and dimension it was built with and
refuses vectors of another. ``HashEmbedder`` (signed feature hashing of words and word bigrams) is deterministic and
fast: the simulator's and the tests' embedder. The default for real use is MiniLM (``node/shells/minilm.py``).

An asset's vector (:func:`embed_assets`) is the embedding of its :meth:`Asset.embed_text` when its text is one sentence,
and otherwise the mean of its **passages'** embeddings (:func:`passages`): each sentence that says something, after
the speaker, as the asset's text would be read. One vector for a turn of several sentences blurs them: on the LoCoMo
development set (MiniLM), the evidence turns found in the dense top 10 were 0.481 of them with the whole turn's
embedding and 0.620 with the mean of its sentences' (docs/benchmarks.md). A long text is cut into at most
:data:`MAX_PASSAGES` runs of sentences, so what one asset costs to embed stays bounded.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Final, Protocol, TypeVar

import numpy as np

from gaml.node.core.text import extract
from gaml.policy.model import Asset, plain_tags, said_text

_WORD: Final = re.compile(r"[\w']+", re.UNICODE)
GRAMS_MAX: Final = 1 << 16  # the words and word pairs whose bucket a HashEmbedder remembers
MAX_PASSAGES: Final = 16  # an asset's text is embedded as at most this many passages
W = TypeVar("W")


class Embedder(Protocol):
    id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32 rows of norm 1 (or 0 for a text with nothing to embed)."""
        ...


class HashEmbedder:
    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.id = f"hash-v1-{dim}"
        # gram -> its bucket + 1, negated for a negative sign: the words of a memory repeat. Strings and ints only,
        # which the garbage collector does not track; emptied when full.
        self._grams: dict[str, int] = {}

    def _codes(self, text: str, codes: list[int]) -> None:
        """Append the code of each of ``text``'s grams (its words, then its word pairs) to ``codes``: its bucket + 1,
        negated for a negative sign."""
        words = [w.lower() for w in _WORD.findall(text)]
        grams = self._grams
        for g in itertools.chain(words, map(" ".join, itertools.pairwise(words))):
            code = grams.get(g)
            if code is None:
                if len(grams) >= GRAMS_MAX:
                    grams.clear()
                h = int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little")
                code = grams[g] = h % self.dim + 1 if (h >> 63) & 1 else -(h % self.dim) - 1
            codes.append(code)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Per text, each bucket's signed count ``c`` of its grams as ``sign(c)·log(1 + |c|)``, of norm 1 (0 for a
        text without words). The counts of every text at once (one ``bincount``); each row's norm as
        ``np.linalg.norm`` makes it, so the vectors are the same bits as one text at a time."""
        codes: list[int] = []
        counts = np.zeros(len(texts), np.intp)
        for i, text in enumerate(texts):
            before = len(codes)
            self._codes(text, codes)
            counts[i] = len(codes) - before
        code = np.fromiter(codes, np.int64, len(codes))
        row = np.repeat(np.arange(len(texts), dtype=np.int64), counts)
        summed = np.bincount(
            row * self.dim + np.abs(code) - 1, weights=np.sign(code).astype(np.float64), minlength=len(texts) * self.dim
        ).reshape(len(texts), self.dim)
        out = (np.sign(summed) * np.log1p(np.abs(summed))).astype(np.float32)
        for v in out:
            norm = float(np.sqrt(v.dot(v)))  # np.linalg.norm of a row, as it computes it
            if norm > 0:
                v /= norm
        return out


def passages(asset: Asset) -> list[str]:
    """What is embedded for an asset: its :meth:`Asset.embed_text` alone when its payload's text is one sentence (or
    it has no text); else each of its sentences that says something (:func:`extract.says_nothing`: not "Wow, thanks!";
    all of them when none does), after the speaker like the text itself (``"Caroline: …"``), then its plain tags as one
    passage. More than :data:`MAX_PASSAGES` sentences are joined into that many runs of consecutive sentences."""
    text = asset.payload.get("text")
    if not isinstance(text, str):
        return [asset.embed_text()]
    speaker = asset.payload.get("speaker")
    return text_passages(text, speaker if isinstance(speaker, str) else "", asset.tags)


def text_passages(text: str, speaker: str = "", tags: Iterable[str] = ()) -> list[str]:
    """The passages (:func:`passages`) of an asset whose payload's text is ``text``, said by ``speaker``, with
    ``tags``: known before the asset is made, so that ingestion can embed them ahead (:class:`Prefetched`)."""
    said = extract.sentences(text)
    if len(said) < 2:
        return [said_text(text, speaker, tags)]
    plain = " ".join(plain_tags(tags))
    return _sentences(said, speaker) + ([plain] if plain else [])


def _sentences(said: list[str], speaker: str) -> list[str]:
    kept = [s for s in said if not extract.says_nothing(s)] or said
    if len(kept) > MAX_PASSAGES:
        size, extra = divmod(len(kept), MAX_PASSAGES)
        runs, at = [], 0
        for n in range(MAX_PASSAGES):
            step = size + (n < extra)
            runs.append(" ".join(kept[at : at + step]))
            at += step
        kept = runs
    prefix = f"{speaker}: " if speaker else ""
    return [prefix + s for s in kept]


class Prefetched:
    """An embedder that answers from rows embedded ahead (:meth:`ahead`), and embeds the rest with the embedder it
    wraps. A model embeds faster in large calls of texts of like length than in the small calls of one write each,
    and a call given to another thread runs while this one does the rest of the work (the model's runtime releases
    the interpreter while it computes): ingestion embeds the passages of a window of sources' items in one call, on
    a worker, while it writes the window before. A text is answered by its own row whichever call embedded it, so
    what is stored does not depend on the guess: a text not embedded ahead (a fact, a masked text) is embedded when
    asked for. Results are the embedder's own; an error of a call made ahead is raised where its rows are asked for.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.id = embedder.id
        self.dim = embedder.dim
        self._rows: dict[str, np.ndarray] = {}
        self._pending: dict[str, Future[np.ndarray]] = {}  # text -> the call embedding it (on a worker)
        self._calls: dict[Future[np.ndarray], list[str]] = {}
        self._claims: Counter[str] = Counter()  # text -> the ahead calls that asked for it and have not dropped it

    def ahead(self, texts: Sequence[str], worker: Executor | None = None) -> list[str]:
        """Embed ``texts`` (those neither held nor on their way) in one call, on ``worker`` when given, else now, and
        hold their rows until :meth:`drop` is given the list returned (``texts`` once each) by every call that asked
        for them."""
        claimed = list(dict.fromkeys(texts))
        todo = [t for t in claimed if t not in self._rows and t not in self._pending]
        self._claims.update(claimed)
        if not todo:
            return claimed
        if worker is None:
            self._rows.update(zip(todo, self.embedder.embed(todo), strict=True))
            return claimed
        call = worker.submit(self.embedder.embed, todo)
        self._calls[call] = todo
        self._pending.update(dict.fromkeys(todo, call))
        return claimed

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        for call in {self._pending[t] for t in texts if t in self._pending}:
            self._settle(call)
        missing = list(dict.fromkeys(t for t in texts if t not in self._rows))
        found = dict(zip(missing, self.embedder.embed(missing), strict=True)) if missing else {}
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for n, t in enumerate(texts):
            row = self._rows.get(t)
            out[n] = found[t] if row is None else row
        return out

    def _settle(self, call: Future[np.ndarray], *, quiet: bool = False) -> None:
        """Hold the rows of a call made ahead, once it is done; its error is raised, unless ``quiet`` (then its texts
        are only not held: they are embedded when asked for, and the error raised there)."""
        todo = self._calls.pop(call)
        for t in todo:
            del self._pending[t]
        if quiet and call.exception() is not None:
            return
        self._rows.update(zip(todo, call.result(), strict=True))

    def drop(self, texts: Sequence[str]) -> None:
        """Release what an :meth:`ahead` call returned: the rows no other call still asks for are forgotten (once
        the calls embedding them are done; the error of one is not raised here, where no row is asked for)."""
        for call in {self._pending[t] for t in texts if t in self._pending}:
            self._settle(call, quiet=True)
        for t in texts:
            self._claims[t] -= 1
            if self._claims[t] <= 0:
                del self._claims[t]
                self._rows.pop(t, None)


def embedded_ahead(
    embedder: Embedder,
    windows: Iterable[W],
    texts: Callable[[W], Iterable[str]],
    write: Callable[[W, Prefetched], None],
    most: int | None = None,
) -> None:
    """``write`` each of ``windows`` in turn with an embedder that holds its ``texts`` (at most ``most`` of them),
    embedded on a worker thread while the window before is written (:class:`Prefetched`): the pipeline of ingestion and
    curation. A window is made (``windows`` is iterated) only once the one before it is on its way to the worker."""
    pre = Prefetched(embedder)
    worker = ThreadPoolExecutor(1, thread_name_prefix="gaml-embed-ahead")
    held: tuple[W, list[str]] | None = None
    made = iter(windows)
    try:
        while True:
            try:
                window = next(made)
            except StopIteration:
                break
            except Exception:  # the next window could not be made: what was made before it is written, as it was
                if held is not None:
                    write(held[0], pre)
                raise
            claimed = pre.ahead(list(itertools.islice(texts(window), most)), worker)
            if held is not None:
                write(held[0], pre)
                pre.drop(held[1])
            held = (window, claimed)
        if held is not None:
            write(held[0], pre)
            pre.drop(held[1])
    except BaseException:
        worker.shutdown(wait=False, cancel_futures=True)  # an error or an interrupt does not wait for the worker
        raise
    worker.shutdown()


def embed_assets(embedder: Embedder, assets: Sequence[Asset]) -> list[np.ndarray]:
    """Each asset's vector: its one passage's embedding, or the mean of its passages' (:func:`passages`), of norm 1
    (0 when nothing in it could be embedded). One call of the embedder for every passage of every asset."""
    texts: list[str] = []
    owner: list[int] = []
    for n, a in enumerate(assets):
        found = passages(a)
        texts += found
        owner += [n] * len(found)
    if not texts:
        return []
    rows = embedder.embed(texts)
    counts = np.bincount(owner, minlength=len(assets))
    out = np.zeros((len(assets), embedder.dim), dtype=np.float32)
    np.add.at(out, owner, rows)
    many = counts > 1  # a mean is normalized again; a single passage's row is kept as the embedder gave it
    norms = np.linalg.norm(out[many], axis=1, keepdims=True)
    out[many] = np.divide(out[many], norms, out=np.zeros_like(out[many]), where=norms > 0)
    return list(out)
