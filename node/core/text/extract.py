"""Deterministic text analysis for ingestion and curation: sentences, entities, keywords, slot facts, cues, noise.

Everything here is pure and rule-based: no clock, no randomness, no I/O, no language model. The same text always
gives the same result, on every run and platform. It runs on every ingested message, so every pattern is compiled
once, at import, and a typical 200-character message is analysed in well under a millisecond per function.

Decisions, each pinned by a test:

* **Sentences** end at ``.``, ``!``, ``?`` or ``…`` followed by whitespace (closing quotes and brackets stay with the
  sentence), and at line breaks. A period inside a token never ends one (``3.14``, ``src/app.py``, ``e.g.``), nor does
  one after a known abbreviation (``Dr.``, ``etc.``, ``vs.``) or a single capital initial (``J. K. Rowling``).
* **Entities** are, in order of first appearance and deduplicated case-insensitively: URL hosts, backtick identifiers,
  quoted titles, file paths, ``@mentions``, ``#hashtags`` and issue refs (``#123``), versions (``v1.2.3``), then
  capitalized names and acronyms outside those spans. A capitalized word that only starts a sentence (``The``,
  ``Hey``, ``Fixed``) is not a name: stopwords, common verbs and sentence-initial ``-ed``/``-ing`` words are dropped
  there. E-mail
  addresses are not entities (privacy classification handles them).
* **Facts** favour precision: no fact from a question, from a sentence with a conditional or hedge (``if``,
  ``unless``, ``would``, ``maybe`` …), from a subject that is a pronoun (``it``, ``this``, ``he``), or with a value of
  more than :data:`FACT_VALUE_WORDS_MAX` words. First person singular (``my``, ``I``) names the ``speaker``; first
  person plural (``we``, ``our``) and unowned subjects (``the database``) name the shared context, ``""``. The slot
  is ``(entity, attribute)``: ``"The database is Postgres"``, ``"Database: Postgres 16"`` and ``"set the database to
  MySQL"`` all fill ``("", "database")``.
* **SimHash** is over word 3-shingles and the content words, each hashed with BLAKE2b (never ``hash()``), so values
  are stable across runs and platforms.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Final, Generic, TypeVar

import numpy as np

from gaml.node.core.text import when

R = TypeVar("R")

FACT_VALUE_WORDS_MAX: Final = 8
FACT_VALUE_CHARS_MAX: Final = 200  # a value longer than this is a blob of text, not a slot's value
ENTITY_CHARS_MAX: Final = 200  # likewise a "name" or path longer than this (a run of capitals, a pasted blob)
KEYWORD_CHARS_MAX: Final = 64  # and a "word" longer than this
SIMHASH_BATCH: Final = 4096  # features hashed and summed at a time: memory stays flat whatever the text's length
FACT_ATTRIBUTE_WORDS_MAX: Final = 5
NOISE_WORDS_MAX: Final = 5
BASE64_BLOB_CHARS_MIN: Final = 200
SIMHASH_WORD_WEIGHT: Final = 2
HEAD_SHARE: Final = 0.4  # of the budget; the tail (endings, conclusions) gets the rest
ELLIPSIS_JOIN: Final = " … "

_APOSTROPHES: Final = str.maketrans({"’": "'", "‘": "'"})  # same length: offsets are kept


def _norm(text: str) -> str:
    return text.translate(_APOSTROPHES)


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _phrases(text: str) -> frozenset[str]:
    return frozenset(text.split("|"))


# -- word lists --------------------------------------------------------------------------------------------------------

STOPWORDS: Final = _words(
    """
    a about above after again against all also am an and any are aren't as at be because been before being below
    between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
    either else even ever every few for from further get gets getting got had hadn't has hasn't have haven't having
    he he'd he'll he's her here here's hers herself him himself his how how's however i i'd i'll i'm i've if in
    into is isn't it it's its itself just let let's like lot lots may me might more most much must mustn't my
    myself no nor not now of off oh ok okay on once one only or other ought our ours ourselves out over own
    per quite rather really same shall shan't she she'd she'll she's should shouldn't since so some such than that
    that's the their theirs them themselves then there there's these they they'd they'll they're they've this those
    though through thus to too toward under until up upon us very via was wasn't we we'd we'll we're we've well were
    weren't what what's when when's where where's whether which while who who's whom whose why why's will with
    within without won't would wouldn't yeah yes yet you you'd you'll you're you've your yours yourself yourselves
    also maybe actually anyway anyways pretty lol haha hey hi hello thanks thank sure yep nope gonna wanna gotta
    thing things stuff something anything everything nothing someone anyone everyone kind sort way ways bit
    """
)

# Imperative verbs that open a request (and, capitalized at a sentence start, are not names).
_VERBS_PLAIN: Final = (
    "fix|add|implement|refactor|rename|remove|delete|create|write|rewrite|explain|summarize|summarise|generate|convert|"
    "migrate|optimize|optimise|improve|document|debug|investigate|install|configure|setup|deploy|revert|upgrade|bump|"
    "translate|compare|analyze|analyse|research|draft|send|schedule|refresh|clean|tidy|port|extract|replace|split|"
    "merge|handle|ensure|prevent|enable|disable|allow|make|build|find|show|tell|give|help|describe|compute|calculate|"
    "recommend|suggest|book|organize|organise|prepare|verify|validate|profile|benchmark|reproduce|patch|resolve|"
    "design|edit|modify|change|update|move|open|close|restart|stop|start|launch|print|format|lint|type-check"
)
_VERBS_AMBIGUOUS: Final = "test|run|list|plan|review|use|search|support|check|look|set|get|try|report|sort|fetch"

# Capitalized words that are never names alone: function words, interjections, chat abbreviations.
_CAP_STOP: Final = STOPWORDS | _words(
    """
    yesterday today tomorrow tonight now then also just really actually finally basically honestly anyway besides
    meanwhile otherwise still sometimes often usually always never recently lately later soon great good nice cool
    awesome wow wowza omg hmm um uh ah aw aww yay whoa ooh ugh sorry please thanks congrats congratulations welcome bye
    goodbye cheers dear yup nah hiya hey ok okay alright sure agreed exactly absolutely definitely totally anyways
    plus overall luckily unfortunately fortunately hopefully sadly happily glad here there why how what when where
    which who whose whatever whenever wherever everyone everybody someone somebody nobody anyone anybody todo fyi btw
    imo tbh lmao rofl idk ps nb re fwiw asap eta aka obviously clearly usually recently apparently seriously surely
    currently initially originally eventually personally ideally generally lastly similarly additionally alternatively
    interestingly surprisingly certainly probably possibly literally quickly slowly only early daily weekly monthly
    """
)
# Common words that are not names when they only start a sentence (mid-sentence, "Will" or "Mark" may be).
_INITIAL_COMMON: Final = _words(
    f"""
    {_VERBS_PLAIN.replace("|", " ")} {_VERBS_AMBIGUOUS.replace("|", " ")}
    first second third next last another right love let go went came come made done did got said says say think
    thought know knew feel felt want need hope remember note updated added fixed removed changed moved created wrote
    read ran sets wait ask asked see saw take took keep kept call called meet met
    """
)

_ABBREVIATIONS: Final = _words(
    """
    mr mrs ms dr prof sr jr st mt vs etc e.g i.e cf al approx dept est inc ltd co corp no nos vol fig eq ch sec
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri sat sun a.m p.m u.s u.k
    """
)

_FILE_EXTENSIONS: Final = _phrases(
    "py|pyi|pyx|ipynb|js|mjs|cjs|jsx|ts|tsx|json|jsonl|md|rst|txt|yaml|yml|toml|cfg|ini|conf|env|lock|sh|bash|zsh|"
    "ps1|bat|go|rs|java|kt|kts|scala|swift|c|h|cc|cpp|hpp|cs|rb|php|pl|lua|r|sql|html|htm|css|scss|vue|svelte|xml|"
    "csv|tsv|parquet|proto|log|pdf|png|jpg|jpeg|gif|svg|webp|mp3|mp4|wav|zip|tar|gz|tgz|whl|dockerfile|makefile|gradle|"
    "tf|hcl|graphql|gql|dart|ex|exs|erl|hs|ml|clj|vim|el|nix|bzl|cmake|mk|patch|diff|db|sqlite"
)

# -- sentences ---------------------------------------------------------------------------------------------------------

_SENTENCE_END_RE: Final = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s|$)|\n+")


def _is_abbreviation(text: str, dot: int) -> bool:
    """Whether the single period at ``dot`` belongs to the word before it (an abbreviation or an initial)."""
    i = dot
    while i > 0 and not text[i - 1].isspace() and dot - i <= 12:
        i -= 1
    word = text[i:dot].lstrip("\"'“‘([")
    if len(word) == 1 and word.isalpha() and word.isupper():
        return True  # an initial: "J. K. Rowling"
    return word.lower() in _ABBREVIATIONS


# What the text functions of a frame remember: the answers for this many recent texts, each at most this long (a
# longer one is read again each time), so that what they hold stays under a few tens of MB whatever the texts.
MEMO_TEXTS: Final = 1 << 14
MEMO_CHARS: Final = 1024


class TextMemo(Generic[R]):
    """``fn(text, *args)``, remembered for the :data:`MEMO_TEXTS` most recent texts of at most :data:`MEMO_CHARS`
    characters: for pure functions of a text, which a frame calls on the same turns again and again."""

    def __init__(self, fn: Callable[..., R]) -> None:
        self.fn = fn
        self._memo = functools.lru_cache(maxsize=MEMO_TEXTS)(fn)
        functools.update_wrapper(self, fn)

    def __call__(self, text: str, *args: Any) -> R:
        return self._memo(text, *args) if len(text) <= MEMO_CHARS else self.fn(text, *args)

    def cache_clear(self) -> None:
        self._memo.cache_clear()

    def cache_info(self) -> Any:
        return self._memo.cache_info()


@TextMemo
def _sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    """``[start, end)`` of each sentence, stripped, in order (remembered for the texts read most recently: a frame
    reads the sentences of the same turns again and again)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _SENTENCE_END_RE.finditer(text):
        token = m.group()
        if token[0] == "." and token.count(".") == 1 and _is_abbreviation(text, m.start()):
            continue
        end = m.start() if token[0] == "\n" else m.end()
        spans.append((start, end))
        start = m.end()
    spans.append((start, len(text)))
    out = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
    return tuple(out)


def clear_caches() -> None:
    """Forget the texts this module remembers (their sentences, their count of content words)."""
    _sentence_spans.cache_clear()
    content_count.cache_clear()


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped, in order (see the module notes for what ends one)."""
    return [text[s:e] for s, e in _sentence_spans(text)]


# -- content -----------------------------------------------------------------------------------------------------------

# Words that carry no content in a turn of conversation ("Wow, cool, thanks!"), besides the stopwords.
FILLERS: Final = _words(
    "hey hi hello wow cool awesome great thanks thank yeah yes yep yup nice amazing really oh ok okay lol glad sound "
    "sounds good love totally sure definitely absolutely agree bye see soon take care haha congrats congratulations "
    "omg wonderful fantastic incredible super fun"
)
_CONTENT_TOKEN_RE: Final = re.compile(r"[A-Za-z0-9']+")
_CONTENT_WORD_RE: Final = re.compile(r"[a-z0-9]+")


@TextMemo
def content_count(text: str, enough: int) -> int:
    """How many words of ``text`` are neither fillers, stopwords nor capitalised (names), counted up to ``enough``
    (what the caller needs to know: the count stops there)."""
    n = 0
    for m in _CONTENT_TOKEN_RE.finditer(text):
        w = m.group()
        low = w.lower().strip("'")
        if w[0].isupper() or not low or low in FILLERS or low in STOPWORDS:
            continue
        if _CONTENT_WORD_RE.fullmatch(low) is not None:  # not with an apostrophe inside: "that's", "I'm"
            n += 1
            if n == enough:
                break
    return n


def says_nothing(text: str) -> bool:
    """A text with no word but fillers, stopwords and capitalised words (names): "Hey Caroline!", "Wow, cool!"."""
    return content_count(text, 1) == 0


# -- head and tail -----------------------------------------------------------------------------------------------------

_BOUNDARY_RE: Final = re.compile(r"[.!?…][\"'”’)\]]*\s+|\n\s*")


def _cut_head(piece: str) -> str:
    """``piece`` (a prefix) cut back to its last sentence end, else its last word boundary, if that keeps half."""
    ends = [m.start() + 1 for m in _BOUNDARY_RE.finditer(piece)]
    if ends and ends[-1] >= len(piece) // 2:
        return piece[: ends[-1]].rstrip()
    space = piece.rfind(" ")
    return (piece[:space] if space >= len(piece) // 2 else piece).rstrip()


def _cut_tail(piece: str, whole_boundary: bool) -> str:
    """``piece`` (a suffix) cut forward to its first sentence start, else its first word start, if that keeps half."""
    if whole_boundary:
        return piece.lstrip()
    m = _BOUNDARY_RE.search(piece)
    if m and m.end() <= len(piece) // 2:
        return piece[m.end() :].lstrip()
    space = piece.find(" ")
    return (piece[space + 1 :] if 0 <= space <= len(piece) // 2 else piece).lstrip()


def head_tail(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail joined by ``" … "`` (at most ``limit``).

    The tail gets about 60 % of the room, so that endings and conclusions survive; both parts are cut at sentence
    boundaries when that keeps at least half of their share, else at word boundaries.
    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if len(text) <= limit:
        return text
    budget = limit - len(ELLIPSIS_JOIN)
    if budget < 8:
        return text[:limit]
    head_len = int(budget * HEAD_SHARE)
    tail_len = budget - head_len
    tail_start = len(text) - tail_len
    head = _cut_head(text[:head_len])
    tail = _cut_tail(text[tail_start:], text[tail_start - 1].isspace())
    return f"{head}{ELLIPSIS_JOIN}{tail}"


# -- entities ----------------------------------------------------------------------------------------------------------

_EMAIL_RE: Final = re.compile(r"(?<![\w.%+\-])[\w.%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
_URL_RE: Final = re.compile(r"\b(?:https?|ftp|wss?)://[^\s<>\"'`)\]]+", re.IGNORECASE)
_URL_HOST_RE: Final = re.compile(r"://(?:[^/?#@\s]*@)?([^/?#:\s]+)")
_BACKTICK_RE: Final = re.compile(r"(?<!`)`([^`\n]{1,100})`(?!`)")
_QUOTED_RE: Final = re.compile(r"\"([^\"\n]{1,80})\"|“([^”\n]{1,80})”")
_PATH_RE: Final = re.compile(r"(?<![\w@:~/.\-])(?:~|\.{1,2})?/?[\w\-]+(?:[./][\w\-]+)+/?")
_MENTION_RE: Final = re.compile(r"(?<![\w.@])@[A-Za-z0-9_][\w\-]*")
_HASHTAG_RE: Final = re.compile(r"(?<![\w&#/])#\w[\w\-]*")
_VERSION_RE: Final = re.compile(r"(?<![\w.])(?:v\d+(?:\.\d+)+|\d+\.\d+(?:\.\d+)+)(?:[\-+][0-9A-Za-z.]+)?(?![\w.])")
_CAP_WORD: Final = r"(?:(?:Mr|Mrs|Ms|Dr|Prof|St|Mt|Sr|Jr)\.|[A-ZÀ-ÖØ-Þ][\w'\-]*)"
_CONNECTOR: Final = r"(?:of|the|de|da|del|der|van|von|la|le|du|y|&)"
_CAP_RUN_RE: Final = re.compile(rf"(?<![\w'\-]){_CAP_WORD}(?:[ \t](?:{_CONNECTOR}[ \t]){{0,2}}{_CAP_WORD})*")
_CAMEL_RE: Final = re.compile(r"(?<![\w'\-])[a-z]+[A-Z][\w\-]*")
_RUN_TOKEN_RE: Final = re.compile(r"\S+")
_CONTRACTION_TAILS: Final = frozenset({"m", "ve", "ll", "d", "re", "t"})
_INITIAL_SKIP: Final = frozenset(" \t\r\"'“‘([*_-•>")


def _is_sentence_initial(text: str, pos: int) -> bool:
    i = pos - 1
    while i >= 0 and text[i] in _INITIAL_SKIP:
        i -= 1
    return i < 0 or text[i] in ".!?:;…\n"


def _token_base(token: str) -> str | None:
    """A capitalized token without its possessive; None for a contraction (``I'm``, ``Don't``)."""
    if "'" in token:
        base, _, tail = token.partition("'")
        if tail.lower() in _CONTRACTION_TAILS or tail.lower() not in ("s", ""):
            return None
        return base
    return token


def _is_common(word: str, initial: bool) -> bool:
    low = word.lower()
    if len(word) == 1 or low in _CAP_STOP or (initial and low in _INITIAL_COMMON):
        return True
    if word.isupper():
        return False  # an acronym: LGBTQ, API
    return initial and len(word) >= 5 and low.endswith(("ed", "ing"))


def _valid_path(path: str) -> bool:
    if "/" not in path:  # a bare file name needs a known extension: a.py, README.md (not 3.14, e.g)
        stem, _, ext = path.rpartition(".")
        return ext.lower() in _FILE_EXTENSIONS and not stem.replace(".", "").isdigit()
    parts = [p for p in path.split("/") if p not in ("", ".", "..", "~")]
    if not parts or all(p.isdigit() for p in parts):
        return False  # a fraction or a date
    last = parts[-1]
    has_ext = "." in last.strip(".") and not last.rsplit(".", 1)[1].isdigit()
    return has_ext or path.startswith(("/", "./", "../", "~/")) or path.count("/") >= 2


def _valid_title(title: str) -> bool:
    words = title.split()
    if not words or len(words) > 6 or not (title[0].isupper() or title[0].isdigit()):
        return False
    return title[-1] not in ".,;:" and ". " not in title and words[0].lower() not in STOPWORDS


_PLACEHOLDER_RE: Final = re.compile(r"\[REDACTED(?::[A-Za-z0-9_]*)?\]")


def entities(text: str) -> list[str]:
    """Named things in ``text``, ordered by first appearance, deduplicated case-insensitively (first form kept)."""
    text = _norm(text)
    found: list[tuple[int, str]] = []
    masked = list(text)

    def claim(s: int, e: int, value: str | None) -> None:
        masked[s:e] = "\x00" * (e - s)
        if value:
            found.append((s, value))

    def free(s: int, e: int) -> bool:
        return "\x00" not in masked[s:e]

    if "[REDACTED" in text:  # a redaction placeholder names no thing
        for m in _PLACEHOLDER_RE.finditer(text):
            claim(*m.span(), None)
    if "://" in text:
        for m in _URL_RE.finditer(text):
            host = _URL_HOST_RE.search(m.group())
            claim(*m.span(), host.group(1).lower().removeprefix("www.") if host else None)
    if "@" in text:
        for m in _EMAIL_RE.finditer(text):
            if free(*m.span()):
                claim(*m.span(), None)
    if "`" in text:
        for m in _BACKTICK_RE.finditer(text):
            if free(*m.span()) and m.group(1).strip():
                claim(*m.span(), m.group(1).strip())
    if '"' in text or "“" in text:
        for m in _QUOTED_RE.finditer(text):
            title = (m.group(1) or m.group(2) or "").strip()
            if free(*m.span()) and _valid_title(title):
                claim(*m.span(), title)
    for rx, gate in ((_PATH_RE, ""), (_MENTION_RE, "@"), (_HASHTAG_RE, "#"), (_VERSION_RE, ".")):
        if gate in text:
            for m in rx.finditer(text):
                if free(*m.span()) and (rx is not _PATH_RE or _valid_path(m.group())):
                    claim(*m.span(), m.group())

    scan = "".join(masked)
    for m in _CAP_RUN_RE.finditer(scan):
        initial = _is_sentence_initial(scan, m.start())
        run: list[tuple[int, str]] = []
        for t in _RUN_TOKEN_RE.finditer(m.group()):
            base = _token_base(t.group())
            if base is None or base == "I":
                _flush_run(run, found, initial)
                run, initial = [], False
            else:
                run.append((m.start() + t.start(), base))
        _flush_run(run, found, initial)
    for m in _CAMEL_RE.finditer(scan):
        found.append((m.start(), m.group()))

    found.sort(key=lambda p: p[0])
    seen: set[str] = set()
    out: list[str] = []
    for _, value in found:
        key = value.casefold()
        if key not in seen and len(value) <= ENTITY_CHARS_MAX:
            seen.add(key)
            out.append(value)
    return out


def _flush_run(run: list[tuple[int, str]], found: list[tuple[int, str]], initial: bool) -> None:
    """Add one run of capitalized words (leading common words and trailing connectors dropped) as an entity."""
    while run and (run[0][1][0].islower() or len(run[0][1]) == 1 or _is_common(run[0][1], initial)):
        if run[0][1].isupper() and len(run[0][1]) > 1 and run[0][1].lower() not in _CAP_STOP:
            break  # an acronym
        run = run[1:]
        initial = False
    while run and run[-1][1][0].islower():
        run = run[:-1]
    if not run:
        return
    if len(run) == 1 and _is_common(run[0][1], initial):
        return
    found.append((run[0][0], " ".join(w for _, w in run)))


# -- keywords ----------------------------------------------------------------------------------------------------------

_KEYWORD_STOP: Final = _words(
    """
    http https www com went go goes going gone said say says see saw seen get got make made know knew think thought
    want wanted need needed feel felt come came take took tell told look looking looked lot lots really thing things
    yes yeah day time today yesterday tomorrow
    """
)
_KEYWORD_RE: Final = re.compile(r"[^\W\d_][\w'\-]*")


def keywords(text: str, k: int = 8) -> list[str]:
    """Up to ``k`` salient lower-case content words: stopwords and words under 3 letters dropped, by frequency then
    first appearance."""
    words = []
    for m in _KEYWORD_RE.finditer(_norm(text).lower()):
        w = m.group().strip("'-")
        w = w.removesuffix("'s")
        if 3 <= len(w) <= KEYWORD_CHARS_MAX and w not in STOPWORDS and w not in _KEYWORD_STOP:
            words.append(w)
    counts = Counter(words)
    first = {w: i for i, w in reversed(list(enumerate(words)))}
    return sorted(counts, key=lambda w: (-counts[w], first[w]))[: max(k, 0)]


# -- facts -------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Fact:
    """An atomic slot fact: ``entity``'s ``attribute`` is ``value`` (or, if ``negated``, is not), from ``text``."""

    entity: str
    attribute: str
    value: str
    text: str
    negated: bool = False


_QUESTION_START_RE: Final = re.compile(
    r"^(?:is|are|am|was|were|do|does|did|can|could|would|will|should|shall|may|have|has|had|what|who|whom|whose|where"
    r"|when|why|how|which|isn't|aren't|don't|doesn't|didn't|won't|can't)\b",
    re.IGNORECASE,
)
_HEDGE_RE: Final = re.compile(
    r"\b(?:if|unless|whether|suppose|supposing|assuming|in case|would|could|might|maybe|perhaps|wish|hope|"
    r"hopefully|should|probably|possibly)\b",
    re.IGNORECASE,
)
_LEAD_RE: Final = re.compile(
    r"^(?:(?:oh|well|so|also|btw|by the way|anyway|actually|and|but|hey|um|uh|honestly|fyi|plus|now|update|please)"
    r"\b[,:]?\s*"
    r"|(?:yes|yeah|no|nope|ok|okay|sure|right)\s*[,:]\s*)+",
    re.IGNORECASE,
)
_CLAUSE_SPLIT_RE: Final = re.compile(
    r";\s*|\s+—\s+|,\s*(?:and|but|so|because)\s+|\s+(?:and|but)\s+(?=(?:i|we|my|our)\b)", re.IGNORECASE
)
_NEG: Final = r"(?P<neg>no\s+longer\s+|don't\s+|do\s+not\s+|not\s+)?"
_ADV: Final = r"(?:(?:now|currently|still|just|recently|also|actually|finally)\s+)?"
_LIVE_RES: Final = (
    re.compile(
        rf"^(?P<subj>i|we)(?:'ve|\s+have)?\s+{_NEG}{_ADV}(?:live|moved|relocated)\s+(?:in|to)\s+(?P<val>.+)$", re.I
    ),
    re.compile(rf"^(?P<subj>i|we)(?:'m|'re|\s+am|\s+are)\s+{_NEG}{_ADV}living\s+in\s+(?P<val>.+)$", re.I),
)
_WORK_RES: Final = (
    re.compile(rf"^(?P<subj>i|we)\s+{_NEG}{_ADV}work\s+(?:at|for)\s+(?P<val>.+)$", re.I),
    re.compile(rf"^(?P<subj>i|we)(?:'m|'re|\s+am|\s+are)\s+{_NEG}{_ADV}working\s+(?:at|for)\s+(?P<val>.+)$", re.I),
)
_ROLE_RE: Final = re.compile(
    r"^i(?:'m|\s+am)\s+(?P<neg>not\s+|no\s+longer\s+)?(?:now\s+|still\s+|actually\s+)?an?\s+(?P<val>.+)$",
    re.IGNORECASE,
)
_ROLE_CUT_RE: Final = re.compile(
    r"\s+(?:at|for|in|from|with|who|that|which|and|but|so|because|since|on)\b.*$|,.*$", re.IGNORECASE
)
_ROLE_NOT: Final = _words("bit little lot few couple tad big huge total complete real bunch fan")
_RENAME_RE: Final = re.compile(
    r"^(?P<x>.+?)\s+(?:was|has\s+been|got|is)\s+renamed\s+(?:to|as)\s+(?P<val>.+)$"
    r"|^(?:(?:i|we)\s+(?:have\s+|'ve\s+)?)?renamed\s+(?P<x2>.+?)\s+(?:to|as)\s+(?P<val2>.+)$",
    re.IGNORECASE,
)
_CHANGE_RE: Final = re.compile(
    r"^(?:(?P<subj>i|we)\s+(?:have\s+|'ve\s+|just\s+)?)?(?:changed|switched|updated|bumped|upgraded|moved)\s+"
    r"(?P<x>(?!to\b).+?)\s+(?:from\s+(?P<old>.+?)\s+)?to\s+(?P<val>.+)$",
    re.IGNORECASE,
)
_SET_RE: Final = re.compile(
    r"^(?:(?P<subj>i|we)\s+(?:have\s+|'ve\s+|just\s+)?)?set\s+(?!up\b)(?P<x>.+?)\s+to\s+(?P<val>.+)$", re.IGNORECASE
)
_USES_RE: Final = re.compile(
    r"^(?P<x>.+?)\s+(?P<neg>no\s+longer\s+|doesn't\s+|does\s+not\s+|don't\s+|do\s+not\s+)?(?:now\s+|still\s+)?"
    r"(?P<verb>uses|use|runs\s+on|run\s+on|is\s+running\s+on|are\s+running\s+on|relies\s+on|rely\s+on"
    r"|depends\s+on|depend\s+on|is\s+built\s+(?:with|on)|are\s+built\s+(?:with|on))\s+(?P<val>.+)$",
    re.IGNORECASE,
)
_CHANGE_GATE: Final = ("changed", "switched", "updated", "bumped", "upgraded", "moved")
_VERB_ATTRIBUTES: Final = (("use", "uses"), ("run", "runs on"), ("built", "built with"), ("", "depends on"))
_IS_RE: Final = re.compile(
    r"^(?P<x>.+?)\s+(?:is|are)(?P<n1>n't)?\s+(?P<n2>not\s+|no\s+longer\s+)?(?P<val>.+)$", re.IGNORECASE
)
_NAMED_RE: Final = re.compile(r"^(?:named|called)\s+(.+)$", re.IGNORECASE)
_KV_RE: Final = re.compile(r"^\s*(?:[-*•]\s+)?\**(?P<key>[A-Za-z][\w .\-/()]{0,40}?)\**\s*:\s+(?P<val>\S.*?)\s*$")
_KV_KEY_NOT: Final = _words(
    """
    note notes error errors warning warnings traceback todo q a question answer re subject update edit summary example
    tip hint info debug fatal exception reason ps nb fyi caveat important output input result results response
    step user assistant system human ai bot me you
    """
)
_PERSON_RE: Final = re.compile(r"\b(?:i|i'm|i've|i'll|i'd|me|my|you|your|you're|we|our|us|he|she|they)\b", re.I)
_FUNCTION_WORD_RE: Final = re.compile(r"\b(?:the|a|an|to|on|in|of|for|with|and|is|was|are|at|so|it|this)\b", re.I)
_SUBJECT_NOT: Final = _words(
    """
    it this that these those he she they them him her his their theirs there here what which who whom whose where when
    why how thing problem point question idea reason fact truth today tomorrow yesterday tonight life everything
    nothing something anything everyone someone anyone one all each both either neither none you your yours
    """
)
_SUBJECT_WORDS_NOT: Final = _words(
    """
    i i'm you we he she they it me said says say told tells think thinks thought know knows knew went goes go got get
    gets feel feels felt believe believes guess mean means heard hear see saw seen wrote want wants need needs like
    likes love loves hate hates did does do can will would should must may might was were been has have had is are
    e.g i.e e.g. i.e. when while because since that which who
    """
)
_DETERMINER_RE: Final = re.compile(r"^(?:the|a|an|this|that|these|those|our|my)\s+", re.IGNORECASE)
_OF_RE: Final = re.compile(r"^(?P<attr>.+?)\s+of\s+(?P<owner>.+)$", re.IGNORECASE)
_VALUE_NOT_START: Final = _words(
    """
    so very really too pretty quite such just like gonna going being getting also still that what how why when where
    if because about kind sort even always never all
    """
)
_TRAILING_TIME_RE: Final = re.compile(
    r"(?:\s+(?:last|this|next|a\s+few|few|two|three|several|some|a\s+couple\s+of)\s+(?:\w+\s+)?"
    r"(?:day|days|week|weeks|month|months|year|years|weekend|summer|winter|spring|fall|autumn)(?:\s+ago)?"
    r"|\s+(?:yesterday|today|tonight|recently|now|ago|lately|already|again|too|anymore|as\s+well|these\s+days)"
    r"|\s+(?:in|since|on)\s+(?:\d{4}|january|february|march|april|may|june|july|august|september|october"
    r"|november|december|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b.*)$",
    re.IGNORECASE,
)
_VALUE_STRIP: Final = " \t.,;:!?…\"'`*()[]"


def _clean_value(value: str) -> str:
    value = _collapse(value).strip(_VALUE_STRIP)
    for _ in range(3):
        stripped = _TRAILING_TIME_RE.sub("", value).strip(_VALUE_STRIP)
        if stripped == value or not stripped:
            break
        value = stripped
    return value


def _norm_name(text: str) -> str:
    text = _collapse(text.lower()).strip(_VALUE_STRIP)
    return _DETERMINER_RE.sub("", text)


def _value_ok(value: str) -> bool:
    if len(value) > FACT_VALUE_CHARS_MAX:
        return False
    words = value.split()
    return 0 < len(words) <= FACT_VALUE_WORDS_MAX and words[0].lower() not in _VALUE_NOT_START


def _subject_ok(subject: str) -> bool:
    words = subject.lower().split()
    if not words or len(words) > FACT_ATTRIBUTE_WORDS_MAX or any(c in subject for c in ':"()[]{}!?,'):
        return False
    if words[0] in _SUBJECT_NOT or words[-1] in _SUBJECT_NOT:
        return False
    return not any(w in _SUBJECT_WORDS_NOT or (w.endswith(".") and len(w) > 1) for w in words)


def _owner(subject: str, speaker: str) -> tuple[str, str] | None:
    """(entity, attribute) of a noun-phrase subject, or None if it is not a usable slot."""
    s = _collapse(subject).strip(_VALUE_STRIP)
    low = s.lower()
    if low.startswith("my ") and "'s " in s:
        owner, _, attr = s[3:].partition("'s ")
        entity = f"{speaker}'s {_norm_name(owner)}".strip()
    elif low.startswith("my "):
        entity, attr = speaker, s[3:]
    elif low.startswith(("your ", "his ", "her ", "their ", "its ")):
        return None
    elif "'s " in s:
        owner, _, attr = s.partition("'s ")
        entity = _norm_name(owner)
    elif m := _OF_RE.match(s):
        entity, attr = _norm_name(m.group("owner")), m.group("attr")
    else:
        entity, attr = "", s
    if not _subject_ok(attr) or (entity and not _subject_ok(entity) and entity != speaker):
        return None
    return entity, _norm_name(attr)


def _person(subject: str, speaker: str) -> str:
    return speaker if subject.lower() in ("i", "my", "me") else ""


def _first_match(patterns: tuple[re.Pattern[str], ...], text: str) -> re.Match[str] | None:
    for rx in patterns:
        if m := rx.match(text):
            return m
    return None


def _clause_fact(clause: str, sentence: str, speaker: str) -> Fact | None:
    def fact(entity: str, attribute: str, value: str, negated: bool) -> Fact | None:
        if not _value_ok(value) or not attribute:
            return None
        return Fact(entity, attribute, value, sentence, negated)

    low = clause.lower()
    if any(w in low for w in ("live", "moved", "relocated", "living")) and (m := _first_match(_LIVE_RES, clause)):
        value = _clean_value(m.group("val"))
        return fact(_person(m.group("subj"), speaker), "location", value, bool(m.group("neg")))
    if "work" in low and (m := _first_match(_WORK_RES, clause)):
        value = _clean_value(m.group("val"))
        if value.lower() in ("home", "the moment", "night"):
            return None
        return fact(_person(m.group("subj"), speaker), "employer", value, bool(m.group("neg")))
    if low.startswith(("i'm ", "i am ")) and (m := _ROLE_RE.match(clause)):
        value = _clean_value(_ROLE_CUT_RE.sub("", m.group("val")))
        if not value or value.split()[0].lower() in _ROLE_NOT:
            return None
        return fact(speaker, "role", value, bool(m.group("neg")))
    if "renamed" in low and (m := _RENAME_RE.match(clause)):
        x, val = (m.group("x"), m.group("val")) if m.group("x") else (m.group("x2"), m.group("val2"))
        if not _subject_ok(x):
            return None
        return fact(_norm_name(x), "name", _clean_value(val), False)
    for rx, gates in ((_CHANGE_RE, _CHANGE_GATE), (_SET_RE, ("set ",))):
        if any(g in low for g in gates) and (m := rx.match(clause)):
            x = m.group("x")
            entity = _person(m.group("subj") or "", speaker)
            if x.lower().startswith("my "):
                entity, x = speaker, x[3:]
            if not _subject_ok(x):
                return None
            return fact(entity, _norm_name(x), _clean_value(m.group("val")), False)
    if any(w in low for w in ("use", "run", "rel", "depend", "built")) and (m := _USES_RE.match(clause)):
        x = _collapse(m.group("x"))
        if x.lower() in ("i", "we"):
            entity = _person(x, speaker)
        elif _subject_ok(x):
            entity = _norm_name(x)
        else:
            return None
        verb = m.group("verb").lower()
        attribute = next(a for k, a in _VERB_ATTRIBUTES if k in verb)
        return fact(entity, attribute, _clean_value(m.group("val")), bool(m.group("neg")))
    if any(w in low for w in (" is ", " are ", "isn't", "aren't")) and (m := _IS_RE.match(clause)):
        slot = _owner(m.group("x"), speaker)
        if slot is None:
            return None
        entity, attribute = slot
        value = _clean_value(m.group("val"))
        if m2 := _NAMED_RE.match(value):
            attribute, value = f"{attribute} name", m2.group(1)
        return fact(entity, attribute, value, bool(m.group("n1") or m.group("n2")))
    return None


def _kv_fact(line: str, speaker: str) -> Fact | None:
    m = _KV_RE.match(line)
    if m is None:
        return None
    key, value = _collapse(m.group("key")), _clean_value(m.group("val"))
    words = key.split()
    if not words or len(words) > 4 or key.lower() in _KV_KEY_NOT or key.lower() == speaker:
        return None
    raw = m.group("val").rstrip()
    if raw.endswith(("!", "?")) or ". " in raw or _PERSON_RE.search(raw) or not _value_ok(value):
        return None
    if len(words) == 1 and key[0].isupper() and len(value.split()) > 3 and _FUNCTION_WORD_RE.search(value):
        return None  # reads as a speaker's line ("Caroline: Congrats on the promotion"), not a setting
    return Fact("", _norm_name(key), value, _collapse(line.strip()), False)


def facts(text: str, speaker: str = "") -> list[Fact]:
    """Atomic slot facts in ``text`` by rules (see the module notes); ``speaker`` names the first person."""
    speaker = _collapse(speaker.lower())
    text = _norm(text)
    out: list[Fact] = []
    for line in text.splitlines():
        if kv := _kv_fact(line, speaker):
            out.append(kv)
            continue
        for sentence in sentences(line):
            flat = _collapse(sentence)
            if flat.endswith("?") or _HEDGE_RE.search(flat):
                continue
            for clause in _CLAUSE_SPLIT_RE.split(flat):
                clause = _LEAD_RE.sub("", clause).strip(" .!…")
                if not clause or _QUESTION_START_RE.match(clause):
                    continue
                if f := _clause_fact(clause, flat, speaker):
                    out.append(f)
    return out


# -- cues --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Cues:
    """Sentences of a text that read as decisions, constraints, outcomes, questions and errors (one may be several)."""

    decisions: list[str]
    constraints: list[str]
    outcomes: list[str]
    questions: list[str]
    errors: list[str]


# Each cue: single words (a set lookup), and phrases, searched only when one of their gate words is present.
_CUE_WORD_RE: Final = re.compile(r"[a-z']+")
_DECISION_WORDS: Final = _words("decided let's i'll we'll gonna chose chosen opted")
_DECISION_GATE: Final = _words("let will going settled plan agreed")
_DECISION_RE: Final = re.compile(
    r"\b(?:let\s+us|i\s+will|we\s+will|going\s+to|will\s+use|settled\s+on|the\s+plan\s+is|we\s+agreed)\b"
)
_CONSTRAINT_WORDS: Final = _words(
    "must mustn't never always don't shouldn't only required require requires cannot can't"
)
_CONSTRAINT_GATE: Final = _words("not most least more")
_CONSTRAINT_RE: Final = re.compile(
    r"\b(?:do\s+not|should\s+not|may\s+not|must\s+not|not\s+allowed|no\s+more\s+than|at\s+most|at\s+least)\b"
)
_OUTCOME_WORDS: Final = _words(
    "done fixed pass passed passes passing failed fails works worked finished resolved completed won got succeeded "
    "merged shipped deployed solved"
)
_ERROR_GATE: Final = ("error", "exception", "traceback", "fail", "exit", "fault", "panic", "fatal")
_ERROR_RE: Final = re.compile(
    r"Traceback \(most recent call last\)|\b[A-Z]\w*(?:Error|Exception)\b"
    r"|\b(?:Error|error|Exception|fatal|Fatal):|\b(?:ERROR|FATAL)\b"
    r"|\bpanicked\b|(?i:\bfailed\s+with\b|\bexit(?:ed)?\s+(?:with\s+)?(?:code|status)\s+[1-9]\d*\b"
    r"|\bnon-zero\s+exit|\bsegmentation\s+fault\b)"
)


def cues(text: str) -> Cues:
    """The sentences of ``text`` (whitespace-collapsed) sorted into decisions, constraints, outcomes, questions and
    errors."""
    out: Cues = Cues([], [], [], [], [])
    for raw in sentences(_norm(text)):
        s = _collapse(raw)
        low = s.lower()
        words = set(_CUE_WORD_RE.findall(low))
        if words & _DECISION_WORDS or (words & _DECISION_GATE and _DECISION_RE.search(low)):
            out.decisions.append(s)
        if words & _CONSTRAINT_WORDS or (words & _CONSTRAINT_GATE and _CONSTRAINT_RE.search(low)):
            out.constraints.append(s)
        if words & _OUTCOME_WORDS:
            out.outcomes.append(s)
        if s.endswith("?"):
            out.questions.append(s)
        if any(g in low for g in _ERROR_GATE) and _ERROR_RE.search(s):
            out.errors.append(s)
    return out


# -- noise -------------------------------------------------------------------------------------------------------------

_ACK_WORDS: Final = _words(
    """
    ok okay k kk okie okey alright fine thanks thx ty tysm cheers gotcha sure great cool nice awesome perfect excellent
    wonderful amazing lovely sweet yes yeah yep yup yea no nope nah np welcome noted understood roger right agreed
    exactly indeed true same lol haha hahaha lmao hehe wow whoa omg oh ah aw aww yay bye goodbye later ttyl cya night
    gn congrats congratulations definitely absolutely totally
    """
)
_ACK_MULTI: Final = _phrases(
    "thank you|thanks a lot|thank you so much|got it|sure thing|sounds good|sounds great|sounds fun|sounds perfect|"
    "no problem|no worries|you're welcome|of course|will do|me too|makes sense|good to know|see ya|see you|"
    "see you later|see you soon|talk later|talk soon|take care|good night|have a good one|good job|well done|"
    "nice one|love it|love that|glad to hear that|for sure|sounds like a plan|that's great|that's awesome|"
    "that's cool|that's nice|that's amazing|that's wonderful|appreciate it|much appreciated|all right|bye bye"
)
_GREETING_WORDS: Final = _words("hi hello hey yo hiya howdy morning evening sup")
_GREETING_MULTI: Final = _phrases("hey there|hi there|hello there|good morning|good afternoon|good evening|what's up")
_NOISE_FILLER: Final = _words("so very much really a lot lots again all guys man dude buddy mate you too")
_NOISE_TOKEN_RE: Final = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?|\d+")
_EMOTICON_RE: Final = re.compile(r"[:;=8][\-'^]?[()\[\]DPpO3/\\|*]|<3|\^_*\^|[()][\-']?[:;=]")
_PHRASE_WORDS_MAX: Final = 5

_BOILERPLATE_RE: Final = re.compile(
    r"^(?:(?:sure|ok|okay|alright|great|got it|certainly|of course)[,!.]?\s*)?"
    r"(?:(?:let me|i'll|i will|i'm going to|i am going to|i'm gonna)\s+(?:quickly\s+|now\s+|first\s+)?"
    r"(?:check|look|take a look|have a look|look into|investigate|see|review|think|dig|examine|verify|explore|"
    r"read|inspect|start (?:by|with)|get started|work on (?:it|this|that))\b[^\n]{0,40}"
    r"|here(?:'s| is| are| you go)\b[^\n]{0,40}"
    r"|continuing(?: from)? where (?:we|i) left off[^\n]{0,20}"
    r"|(?:one|just a) (?:moment|sec|second)[^\n]{0,20}"
    r"|give me a (?:moment|sec|second|minute)[^\n]{0,20}"
    r"|(?:working|on it|let me think)[^\n]{0,20})$",
    re.IGNORECASE,
)


# A sentence that only announces a step of looking ("I'll start by running the test suite to see the failure."): not a
# decision ("Let's use PostgreSQL because …"), not a conclusion ("I'll summarize: the cause was …"), not one with a
# reason.
_ANNOUNCES_RE: Final = re.compile(
    r"^(?:(?:ok|okay|sure|alright|understood|great|now|first|next|then|so)[,!.]?\s+)*"
    r"(?:let me|i'll|i will|i'm going to|i am going to|i'm gonna|we'll)\s+(?:quickly\s+|now\s+|first\s+)?"
    r"(?:start by|begin by|start with|run|rerun|re-run|check|look|take a look|have a look|read|open|inspect|"
    r"investigate|search|grep|find|try|test|profile|examine|review|see|verify|dig|explore|debug|reproduce)\b"
    r"(?![^.!?]*\b(?:because|since|so that)\b)",
    re.IGNORECASE,
)


def announces_step(sentence: str) -> bool:
    """Whether ``sentence`` only announces what its speaker will look at next (typographic apostrophes read as ')."""
    return _ANNOUNCES_RE.match(_norm(sentence)) is not None


# A plan is not filler: "I'll start a painting class next month", "Let me check the flights for May 12". (Not "may"
# and "march", which are verbs more often: "Let me check whether that may help"; with a day, the number names it.)
_WHEN_RE: Final = re.compile(
    r"\d|\b(?:today|tomorrow|tonight|yesterday|weekend|week|month|year|morning|afternoon|evening|"
    + "|".join(name.lower() for name in (*when.WEEKDAYS, *when.MONTHS) if name not in ("May", "March"))
    + r")s?\b",
    re.IGNORECASE,
)


def _consume(words: list[str], single: frozenset[str], multi: frozenset[str]) -> tuple[list[str], int]:
    """Greedily remove the phrases of ``single`` and ``multi`` (longest first); the rest, and how many were removed."""
    rest: list[str] = []
    hits = 0
    i = 0
    while i < len(words):
        for n in range(min(_PHRASE_WORDS_MAX, len(words) - i), 1, -1):
            if " ".join(words[i : i + n]) in multi:
                hits += 1
                i += n
                break
        else:
            if words[i] in single:
                hits += 1
            else:
                rest.append(words[i])
            i += 1
    return rest, hits


def is_noise(text: str) -> str | None:
    """Why ``text`` carries nothing to remember (``"empty"``, ``"acknowledgement"``, ``"greeting"``,
    ``"boilerplate"``), or None. Only a text that is *wholly* such a phrase (at most about five words) is noise."""
    flat = _collapse(_norm(text))
    if not flat:
        return "empty"
    tokens = [t.group() for t in _NOISE_TOKEN_RE.finditer(flat)]
    if not tokens:  # only punctuation, emoticons or emoji
        return "acknowledgement" if _EMOTICON_RE.search(flat) or _has_emoji(flat) else "empty"
    if len(tokens) <= NOISE_WORDS_MAX + 2:
        words = [t.lower() for t in tokens]
        rest, acks = _consume(words, _ACK_WORDS, _ACK_MULTI)
        rest, greets = _consume(rest, _GREETING_WORDS, _GREETING_MULTI)
        rest = [w for w in rest if w not in _NOISE_FILLER]
        # one vocative name is allowed: "Thanks, Caroline!", "Hey Mel!"
        names = [t for t in tokens if t.lower() in rest and t[0].isupper()]
        if (acks or greets) and len(rest) <= 1 and len(names) == len(rest) and len(tokens) - len(rest) <= 7:
            return "acknowledgement" if acks else "greeting"
    if _BOILERPLATE_RE.match(flat) and not _WHEN_RE.search(flat):
        return "boilerplate"
    return None


def _has_emoji(text: str) -> bool:
    return any(ord(c) >= 0x2190 for c in text)


# -- goals and remember ------------------------------------------------------------------------------------------------

_GOAL_PREFIX_RE: Final = re.compile(
    r"^(?:(?:hey|hi|hello|ok|okay|so|alright|now|also|and|then|next|great|thanks|thank you|cool|right|well|yo)\b"
    r"[\s,!.:\-]*)+(?:[A-Z][\w\-]*\s*[,:!]\s*)?"
    r"|^[A-Z][\w\-]*\s*,\s*(?=\w)",
    re.IGNORECASE,
)
_OBJECT_START: Final = (
    r"(?:the|a|an|this|that|these|those|it|them|my|our|your|all|some|every|each|up|out|me|us|for|to|with|on|in|"
    r"into|over|through|again|whether|if|how|why|what|which|`|\"|'|[\w.\-]+/|[\w\-]+\.\w+)"
)
_GOAL_RE: Final = re.compile(
    rf"^(?:please\b|pls\b|plz\b"
    rf"|(?:{_VERBS_PLAIN})\b(?!:)"
    rf"|(?!check\s+(?:it\s+|this\s+|that\s+)?out\b)(?:{_VERBS_AMBIGUOUS})\s+{_OBJECT_START}"
    r"|(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+)?(?!believe|imagine|guess|tell\s+me\s+(?:more\s+|a\s+bit\s+)?about)\w"
    r"|(?:i|we)\s+(?:really\s+)?(?:want|need|would\s+like|'d\s+like)\s+(?:you\s+to|to|a|an|the|some|help|it)\b"
    r"|(?:i|we)'d\s+like\s+(?:you\s+to|to|a|an|the|some|help)\b"
    r"|help\s+me\b|let's\b|let\s+us\b"
    r"|how\s+(?:do|can|should|would|could)\s+(?:i|we)\b|how\s+to\b"
    r"|(?:i'm|i\s+am|we're|we\s+are)\s+trying\s+to\b"
    r"|is\s+there\s+a\s+way\s+to\b|what's\s+the\s+best\s+way\s+to\b|what\s+is\s+the\s+best\s+way\s+to\b"
    r"|(?:you|we)\s+(?:should|need\s+to|must)\b)",
    re.IGNORECASE,
)
_PLEASE_RE: Final = re.compile(r"\bplease\b", re.IGNORECASE)


def _goal_sentence(text: str) -> tuple[str, bool] | None:
    """The first sentence that is not noise, without a greeting prefix, and whether it reads as a request."""
    for raw in sentences(_norm(text))[:4]:
        s = _collapse(raw)
        if is_noise(s) is not None:
            continue
        s = _GOAL_PREFIX_RE.sub("", s, count=1).strip() or s
        if is_noise(s) is not None:
            continue
        return s, bool(_GOAL_RE.match(s) or (_PLEASE_RE.search(s) and not s.lower().startswith(("i ", "thanks"))))
    return None


def is_goal(text: str) -> bool:
    """Whether ``text`` is a request or goal: an imperative (``fix …``), ``please …``, ``can you …``, ``I want/need
    …``, ``help me …``, ``let's …``, or a ``how do I …`` question; never an acknowledgement."""
    found = _goal_sentence(text)
    return found is not None and found[1]


def goal_text(text: str, limit: int = 160) -> str:
    """The goal label of ``text``: its first request sentence (else its first sentence), whitespace-collapsed, without
    a greeting prefix, cut at a word boundary to at most ``limit`` characters."""
    found = _goal_sentence(text)
    label = found[0] if found else _collapse(text)
    label = label[:1].upper() + label[1:]  # a stripped lead-in ("Now, please …") leaves a lower-case start
    if len(label) <= limit:
        return label
    cut = label[: limit + 1].rfind(" ")
    return label[: cut if cut > 0 else limit].rstrip(" ,;:-")


_REMEMBER_RE: Final = re.compile(
    r"(?:^|\b(?:please|pls|always|also|and|so|to)\s+)remember\s+(?:this|that|to)\b"
    r"|\b(?:don't|do\s+not|never)\s+forget\b|(?:^|\b(?:please|pls|also|and|so)\s+)(?:make\s+a\s+)?note\s+(?:that|this)\b"
    r"|\b(?:keep|bear)\s+(?:this\s+|that\s+)?in\s+mind\b|\bfor\s+future\s+reference\b|^take\s+note\b",
    re.IGNORECASE,
)
_REMEMBER_LEAD_RE: Final = re.compile(r"^(?:(?:hey|hi|ok|okay|oh|so|also|and|btw|fyi|by the way)\b[\s,!.:\-]*)+", re.I)
_RECALL_QUESTION_RE: Final = re.compile(r"^\s*(?:do|did|can|could)\s+(?:you|u)\s+remember\b|remember\s+when\b", re.I)


def is_remember(text: str) -> bool:
    """Whether ``text`` explicitly asks to remember something (``remember this``, ``don't forget``, ``note that``,
    ``keep in mind``, ``for future reference``); a question such as ``do you remember that trip?`` is not."""
    text = _norm(text)
    low = text.lower()
    if not any(g in low for g in ("remember", "forget", "note", "mind", "reference")):
        return False
    for raw in sentences(text):
        s = _REMEMBER_LEAD_RE.sub("", _collapse(raw))
        if _REMEMBER_RE.search(s) and not (s.endswith("?") and _RECALL_QUESTION_RE.search(s)):
            return True
    return False


# -- contamination -----------------------------------------------------------------------------------------------------

_CONTAMINATION: Final = (
    (
        "injection:ignore_previous_instructions",
        ("ignore", "forget", "override"),
        re.compile(
            r"\b(?:ignore|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+|of\s+)*(?:previous|prior|above|earlier|"
            r"preceding|original|system)\s+(?:instructions|prompts?|messages|directions|rules|context)\b",
            re.I,
        ),
    ),
    (
        "injection:disregard_above",
        ("disregard",),
        re.compile(r"\bdisregard\s+(?:all\s+|any\s+|the\s+|everything\s+)*(?:above|previous|prior|earlier)\b", re.I),
    ),
    (
        "injection:you_are_now",
        ("now",),
        re.compile(
            r"\byou\s+are\s+now\s+(?:in\s+|a\s+|an\s+|the\s+|my\s+)?(?:\w+\s+){0,2}(?:ai|assistant|model|bot|chatbot|"
            r"dan|mode|persona|character|jailbroken|unrestricted|unfiltered|free|developer|admin|root)\b"
            r"|\bfrom\s+now\s+on,?\s+you\s+(?:are|will|must)\b",
            re.I,
        ),
    ),
    (
        "injection:system_prompt",
        ("system", "sys>>", "[inst]", "im_start"),
        re.compile(
            r"\b(?:ignore|reveal|print|show|repeat|override|disregard|leak|output|replace|new|updated)\s+(?:\w+\s+){0,3}"
            r"system\s+prompt\b|\bsystem\s+prompt\s*:|<\|?\s*system\s*\|?>|<<SYS>>|\[INST\]|<\|im_start\|>",
            re.I,
        ),
    ),
    ("envelope_marker", ("gaml-memory",), re.compile(r"gaml-memory", re.I)),
    ("base64_blob", (), re.compile(rf"[A-Za-z0-9+/]{{{BASE64_BLOB_CHARS_MIN},}}={{0,2}}")),
)


def contamination(text: str) -> list[str]:
    """Reasons ``text`` looks injected or poisoned (prompt-injection phrases, leftover ``gaml-memory`` envelope
    markers, base64 blobs of more than 200 characters); ``[]`` if it looks clean."""
    reasons = []
    low = text.lower()
    for reason, gates, rx in _CONTAMINATION:
        if gates and not any(g in low for g in gates):
            continue
        m = rx.search(text)
        if m and (reason != "base64_blob" or any(c.isdigit() or c in "+/" for c in m.group())):
            reasons.append(reason)
    return reasons


# -- near-duplicates ---------------------------------------------------------------------------------------------------

_SIMHASH_WORD_RE: Final = re.compile(r"\w+")


def simhash(text: str) -> int:
    """The 64-bit SimHash of ``text`` (lower-cased, punctuation stripped; 0 for a text without words).

    The features are the word 3-shingles, plus each non-stopword word at weight :data:`SIMHASH_WORD_WEIGHT` (with
    3-shingles alone, one edited word of twenty changes a sixth of the features and moves about 12 of the 64 bits; with
    the words too, about 6 to 8, while unrelated texts stay about 30 apart). A text of fewer than three words uses its
    words. Each feature is hashed with BLAKE2b, so the value is stable across runs and platforms.
    """
    words = _SIMHASH_WORD_RE.findall(text.lower())
    if not words:
        return 0
    if len(words) < 3:
        features: Iterable[tuple[str, int]] = ((w, 1) for w in words)
    else:
        shingles = ((" ".join(words[i : i + 3]), 1) for i in range(len(words) - 2))
        content = ((w, SIMHASH_WORD_WEIGHT) for w in words if w not in STOPWORDS)
        features = itertools.chain(shingles, content)
    # Summed a batch at a time (the sum is exact, so the value does not depend on the batch size): one feature takes
    # 64 int64 lanes, which for a whole megabyte of text at once would be hundreds of megabytes.
    score = np.zeros(64, dtype=np.int64)
    while batch := list(itertools.islice(features, SIMHASH_BATCH)):
        digests = b"".join(hashlib.blake2b(f.encode(), digest_size=8).digest() for f, _ in batch)
        bits = np.unpackbits(np.frombuffer(digests, dtype=np.uint8).reshape(len(batch), 8), axis=1)
        score += np.asarray([w for _, w in batch], dtype=np.int64) @ (bits.astype(np.int64) * 2 - 1)
    return int.from_bytes(np.packbits(score > 0).tobytes(), "big")


def hamming(a: int, b: int) -> int:
    """The number of bits in which ``a`` and ``b`` differ."""
    return (a ^ b).bit_count()
