"""Reputation-weighted consensus inside a boundary: slots, scores, the ledger, resolutions. Pure core.

The CRDT's winner of concurrent writes is chosen by actor id, so it is never a verdict. Contested claims are separate
signed assets in one **slot**, and the winner is chosen here, by policy, before anything is ranked into a frame.

- **Claims and their sources.** Every asset of a boundary (an asset whose policy reaches it) is a claim. Its sources
  are the members whose *verified* snapshots made it what it is here (:meth:`node.core.replica.Replica.writers`: the
  signature and membership of each object checked on arrival; this node, for what it wrote). A claim weighs what its
  least reputable source weighs: a member that edited an asset may have changed what it says. Assets that reach no
  boundary (private memory on one node) are no one else's claims: consensus never touches them, so a node without
  peers pays nothing for it.
- **Slots.** Explicit: facts whose payload names a ``subject`` and an ``attribute`` (the value is ``payload.value``).
  Found: *near-duplicates* whose sources are not the same, texts that are the same but for a few short spans (a
  number, a name, a date, a ``not``) (:func:`near_duplicate`). Either way only within one boundary, never across.
- **Independence.** Claims that echo each other count as one source: the same text, a source in common, or sources
  the admin admitted together (within :attr:`Weights.together_us` of each other, per the signed roster's ``since``).
  Ten colluding nodes echoing one false claim weigh what one of them weighs.
- **Scores.** A claim scores its weight (its sources' reputation) times a confidence factor, a trust-class factor and a
  small recency factor (the slot's newest claim). Self-declared fields (confidence, trust class) can move a score by
  bounded shares only, because a source declares them about itself. A value scores the sum over the independent
  groups asserting it of each group's best claim. The highest value wins; ties go to the smaller value key.
- **Ledger.** Per boundary, each node folds what it can verify, in time order (a claim counts from the later of its
  creation and its sources' admission): a member starts at :attr:`Weights.start` when admitted (the *founder*, the
  first member admitted, which created the boundary and holds the admin key that signs the roster, at full
  weight); it *gains* when an
  independent group corroborates a claim of it (same slot, same value), by a share of the corroborator's weight,
  once per corroborating group (volume buys nothing), and never above a *ceiling* that grows with time admitted
  (:attr:`Weights.rate_per_day`: a fresh identity cannot be trusted yet, whatever it does); it *loses* a share
  (:attr:`Weights.loss`) of its reputation for each slot in which its claim is contradicted by a winner an admitted
  source backs (not when it later asserted the winning value itself: a source that changed its claim is not
  contradicted); it decays toward the start (:attr:`Weights.half_life_days`). The members of a ``devices`` boundary
  are the owner's own devices (the owner's key certified each): they weigh fully, always.
  Fixed-point integers (parts per :data:`SCALE`), sorted inputs, ties by id: the same merged state gives the same
  ledger and the same records on every member.
- **Admission.** A claim whose weight is under :attr:`Weights.admit` enters a frame only when an independent admitted
  source corroborates it (this node's own claims always do).
- **Execution-integrity evidence.** A ``verification_result`` or ``execution_verdict`` asset in the boundary whose
  payload names a claim (``about``: its id) and a ``verdict`` (``verified``/``pass`` or ``refuted``/``fail``), or a
  member (``about_node``) and ``verdict: fraud``, counts when an admitted member independent of what it judges wrote it:
  a verified claim's sources gain as from one corroborating group, and the claim counts as corroborated; a refuted
  claim scores nothing and its sources are struck; a fraud verdict strikes the member. Evidence from anyone else
  counts for nothing (it is kept, and ``ignored`` in :meth:`Consensus.reputation`).
- **Records.** Each contested slot resolved for a frame becomes a record (slot, candidates with scores and sources,
  winner, ledger version, rule version) whose id is a digest of its canonical JSON; the receipt carries it. A node that
  replicates also keeps, per contested slot of each boundary, the boundary's ``consensus_record`` *asset*
  (:meth:`Consensus.record_assets`: decided over every claim of the slot, derived from them, so it inherits their
  most restrictive policy and is erased with any of them; it names the winners and the losers, which stay stored,
  in its payload, never as ``contradicts`` edges, which would silence the losers by themselves), one asset per slot
  whichever member writes it, replicated inside the boundary like any asset. Any member writes it when it is
  missing; only the founder rewrites it when the decision changes (two members that weigh differently never write it
  back and forth); any member tightens its policy to its candidates'. Frames never read it: each node decides live,
  and the record is what a person or an auditor reads. Records, overrides and evidence are never claims themselves.
- **Overrides.** A person may choose a slot's value (:func:`override_payload`): an audited ``consensus_record`` that
  names who chose, when and why. It decides the slot on the node that wrote it; on other members only when the
  boundary's founder wrote it, or in a ``devices`` boundary (all one owner's). It changes no reputation.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Protocol

from gaml.crdt.membership import Roster
from gaml.policy.access import at_least_as_restrictive, inherit
from gaml.policy.errors import Deleted, GamlError
from gaml.policy.model import Asset, AssetType, Creator, TrustClass, canonical_json

SCALE: Final = 1_000_000  # fixed point: parts per million
RULE_VERSION: Final = "gaml/consensus/1"
DAY_US: Final = 86_400 * 1_000_000
DEVICES: Final = "devices"

_TOKEN: Final = re.compile(r"[a-z0-9]+")
MIN_TOKENS: Final = 4  # shorter texts are too short to call near-duplicates
BLOCK: Final = 4  # state-wide, near-duplicates are looked for among texts sharing their first or last BLOCK tokens
BUCKET_MAX: Final = 64  # a block key more texts share than this is a common phrase, not a slot
RECORD_ID_TAG: Final = b"gaml-consensus-1"  # blake2b personalisation of a stored record's id (16 bytes)
EVIDENCE_TYPES: Final = frozenset({AssetType.VERIFICATION_RESULT, AssetType.EXECUTION_VERDICT})
NOT_CLAIMS: Final = EVIDENCE_TYPES | {AssetType.CONSENSUS_RECORD}  # weighed as what they are, never as claims
VERIFIED: Final = frozenset({"verified", "pass", "passed", "confirmed"})
REFUTED: Final = frozenset({"refuted", "fail", "failed", "false"})
FRAUD: Final = frozenset({"fraud"})


@dataclasses.dataclass(frozen=True)
class Weights:
    """The consensus policy's numbers (parts per :data:`SCALE` unless named otherwise); the node config's
    ``consensus`` section overrides them."""

    start: int = 50_000  # a newly admitted member's reputation
    admit: int = 250_000  # below it, a claim enters a frame only when corroborated
    rate_per_day: int = 10_000  # the ceiling: start + this per day admitted (a full weight takes ~95 days)
    gain: int = 200_000  # share of the room under the ceiling gained per corroborating group (times its weight)
    loss: int = 500_000  # share of reputation lost per slot in which a claim is contradicted
    half_life_days: int = 180  # reputation above the start halves toward it in this many days without news
    confidence: int = 200_000  # the share of a claim's score its (self-declared) confidence can move
    trust: Mapping[str, int] = dataclasses.field(
        default_factory=lambda: {
            TrustClass.HIGHER_TRUST.value: SCALE,
            TrustClass.UNVERIFIED.value: 800_000,
            TrustClass.LOWER_TRUST.value: 500_000,
        }
    )
    recency: int = 50_000  # what the slot's newest claim is ahead of the others
    together_us: int = 3_600 * 1_000_000  # members admitted within this of each other count as one source
    near_ratio: int = 750_000  # near-duplicates: token similarity at least this
    near_changed: int = 8  # and at most this many tokens changed on either side
    near_spans: int = 3  # in at most this many places

    def __post_init__(self) -> None:
        for name in ("start", "admit", "rate_per_day", "gain", "loss", "confidence", "recency", "near_ratio"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= SCALE:
                raise ValueError(f"consensus.{name} is an integer from 0 to {SCALE}, got {v!r}")
        for name in ("half_life_days", "together_us", "near_changed", "near_spans"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"consensus.{name} is a positive integer, got {v!r}")
        if set(self.trust) != {t.value for t in TrustClass} or not all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= SCALE for x in self.trust.values()
        ):
            raise ValueError(f"consensus.trust gives each trust class a factor from 0 to {SCALE}")

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Weights:
        """The node config's ``consensus`` section: any of the fields above by name (``trust`` may name only some
        classes; the others keep their defaults). An unknown name or a value out of range is a ValueError."""
        if not isinstance(d, Mapping):
            raise ValueError(f"consensus is an object of settings, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown consensus settings: {', '.join(unknown)} (known: {', '.join(sorted(names))})")
        fields = dict(d)
        if "trust" in fields:
            if not isinstance(fields["trust"], Mapping):
                raise ValueError("consensus.trust is an object of trust class -> factor")
            fields["trust"] = {**cls().trust, **fields["trust"]}
        return cls(**fields)


class Provenance(Protocol):
    """What consensus needs of replication (:class:`node.core.replica.Replica` implements it)."""

    def boundary_of(self, asset: Asset) -> bytes | None: ...

    def writers(self, bid: bytes, asset_id: str) -> tuple[str, ...]: ...

    def roster_of(self, bid: bytes) -> Roster | None: ...

    def asset_ids(self, bid: bytes) -> list[str]: ...

    def boundary_ids(self) -> list[bytes]: ...

    def boundary_version(self, bid: bytes) -> tuple[int, int]: ...


# -- claims ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Claim:
    id: str
    writers: tuple[str, ...]  # verified sources, sorted
    created_at: int
    tokens: tuple[str, ...]
    text_key: str  # digest of the normalized text: the same text is an echo
    slot: str  # an explicit slot's key ("" when none)
    value: str  # the explicit value's canonical JSON; else the text key
    confidence: int
    trust: str
    edges: tuple[str, ...] = ()  # the claims it supersedes or contradicts, sorted


@dataclasses.dataclass(frozen=True)
class Evidence:
    """An execution-integrity verdict: about a claim (``about``) or a member (``node``)."""

    id: str
    writers: tuple[str, ...]
    created_at: int
    about: str  # a claim's asset id ("" when about a node)
    node: str  # a member's node id ("" when about a claim)
    verdict: str  # "verified", "refuted" or "fraud"


def evidence_of(asset: Asset, writers: Iterable[str]) -> Evidence | None:
    """The evidence a ``verification_result`` / ``execution_verdict`` asset gives, or None when it names no claim or
    member with a verdict this rule reads."""
    if asset.asset_type not in EVIDENCE_TYPES:
        return None
    p = asset.payload
    verdict = p.get("verdict")
    verdict = verdict.strip().lower() if isinstance(verdict, str) else ""
    about, node = p.get("about"), p.get("about_node")
    if isinstance(about, str) and about and verdict in VERIFIED | REFUTED:
        kind = "verified" if verdict in VERIFIED else "refuted"
        return Evidence(asset.id, tuple(sorted(set(writers))), asset.created_at, about, "", kind)
    if isinstance(node, str) and node and verdict in FRAUD:
        return Evidence(asset.id, tuple(sorted(set(writers))), asset.created_at, "", node, "fraud")
    return None


@dataclasses.dataclass(frozen=True)
class Override:
    """A person's choice of a slot's value (a ``consensus_record`` asset whose payload has ``override``)."""

    id: str
    writers: tuple[str, ...]
    created_at: int
    slot: str
    choose: str  # the chosen value (as a record names values)
    by: str  # the principal who chose
    reason: str


def override_of(asset: Asset, writers: Iterable[str]) -> Override | None:
    if asset.asset_type is not AssetType.CONSENSUS_RECORD:
        return None
    o = asset.payload.get("override")
    if not isinstance(o, Mapping) or not isinstance(o.get("slot"), str) or not isinstance(o.get("choose"), str):
        return None
    by, reason = o.get("by"), o.get("reason")
    return Override(
        asset.id,
        tuple(sorted(set(writers))),
        asset.created_at,
        o["slot"],
        o["choose"],
        by if isinstance(by, str) else "",
        reason if isinstance(reason, str) else "",
    )


def override_payload(bid: bytes, slot: str, choose: str, by: str, at: int, reason: str = "") -> dict[str, Any]:
    """The payload of an override record: who chose which value of which slot, when and why."""
    return {
        "rule": RULE_VERSION,
        "boundary": bid.hex(),
        "override": {"slot": slot, "choose": choose, "by": by, "at": at, "reason": reason},
        "text": f"{by} chose the value of a contested slot" + (f": {reason}" if reason else ""),
    }


def record_asset_id(bid: bytes, slot: str) -> str:
    """The id of the boundary's record of one slot: one asset per slot, whichever member writes it (an edit of the
    record when the decision changes, not a new one), so a boundary holds one record per contested slot, not one per
    member."""
    body = canonical_json(["consensus_record", bid.hex(), slot]).encode()
    return hashlib.blake2b(body, digest_size=16, person=RECORD_ID_TAG).hexdigest()


def tokens(text: str) -> tuple[str, ...]:
    return tuple(_TOKEN.findall(text.lower()))


def claim_of(asset: Asset, writers: Iterable[str]) -> Claim:
    text = asset.payload.get("text")
    toks = tokens(text if isinstance(text, str) else canonical_json(dict(asset.payload)))
    key = hashlib.blake2b(" ".join(toks).encode(), digest_size=12).hexdigest()
    slot, value = "", key
    subject, attribute = asset.payload.get("subject"), asset.payload.get("attribute")
    if asset.asset_type is AssetType.FACT and isinstance(subject, str) and isinstance(attribute, str) and subject:
        slot = canonical_json([" ".join(tokens(subject)), " ".join(tokens(attribute))])
        value = canonical_json(asset.payload.get("value"))
    conf = min(SCALE, max(0, round(asset.confidence_score * SCALE)))
    edges = tuple(sorted(set(asset.supersedes) | set(asset.contradicts)))
    return Claim(
        asset.id,
        tuple(sorted(set(writers))),
        asset.created_at,
        toks,
        key,
        slot,
        value,
        conf,
        asset.trust_class.value,
        edges,
    )


def edge_counts(by: Claim | tuple[str, ...], target: Claim | tuple[str, ...], kind: str) -> bool:
    """Whether a ``supersedes`` / ``contradicts`` edge of ``by`` may resolve ``target`` out by itself (given as
    claims or as their sources): in a ``devices`` boundary always (one owner's devices), else when every source of
    ``by`` is a source of ``target`` (a source updating or retracting its own claim). Otherwise the edge is a
    conflict, and the two claims are one slot for consensus to weigh: a member cannot silence another's claim by
    naming it."""
    bw = by.writers if isinstance(by, Claim) else by
    tw = target.writers if isinstance(target, Claim) else target
    return kind == DEVICES or (bool(bw) and set(bw) <= set(tw))


def near_duplicate(a: Sequence[str], b: Sequence[str], w: Weights) -> list[tuple[str, str]] | None:
    """The differing spans ``[(a's words, b's words), …]`` when two token sequences say the same but for a few short
    spans (:attr:`Weights.near_ratio`, :attr:`Weights.near_changed`, :attr:`Weights.near_spans`); else None."""
    if len(a) < MIN_TOKENS or len(b) < MIN_TOKENS or a == b:
        return None
    if abs(len(a) - len(b)) > w.near_changed:
        return None
    if len(set(a) & set(b)) * SCALE < w.near_ratio * max(len(set(a)), len(set(b))) * 9 // 10:
        return None  # too few words in common for the ratio below: no need to align them
    m = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if round(m.ratio() * SCALE) < w.near_ratio:
        return None
    spans = [(" ".join(a[i1:i2]), " ".join(b[j1:j2])) for op, i1, i2, j1, j2 in m.get_opcodes() if op != "equal"]
    changed_a = sum(i2 - i1 for op, i1, i2, _, _ in m.get_opcodes() if op != "equal")
    changed_b = sum(j2 - j1 for op, _, _, j1, j2 in m.get_opcodes() if op != "equal")
    if not spans or len(spans) > w.near_spans or max(changed_a, changed_b) > w.near_changed:
        return None
    return spans


# -- reputation --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Rep:
    rep: int
    at: int  # when ``rep`` was last brought up to date
    since: int
    struck: bool = False  # contradicted once (a struck founder no longer decays toward full weight)


def _decayed(r: _Rep, t: int, w: Weights, start: int) -> int:
    """``r.rep`` brought from ``r.at`` to ``t``: the part above ``start`` halves every half-life (integer steps; the
    last, partial one linear)."""
    if t <= r.at or r.rep <= start:
        return r.rep
    hl = w.half_life_days * DAY_US
    above = r.rep - start
    k, rem = divmod(t - r.at, hl)
    above = above >> min(k, 62)
    above -= above * rem // (2 * hl)
    return start + above


class Ledger:
    """One boundary's reputations, folded from its claims (see the module docstring). Read with :meth:`weight`."""

    def __init__(self, roster: Roster, w: Weights, now: int) -> None:
        self.w = w
        self.now = now
        self.kind = roster.boundary.kind
        self.members = {m.node: m.since for m in roster.members if m.role == "member"}
        # The founder: the first member admitted (the node that created the boundary, which holds the admin key that
        # signs every roster) weighs fully from the start; every other member earns its weight.
        self.founder = min(self.members.items(), key=lambda x: (x[1], x[0]))[0] if self.members else ""
        self.reps: dict[str, _Rep] = {
            n: _Rep(SCALE if n == self.founder else w.start, s, s) for n, s in sorted(self.members.items())
        }
        self._gained: set[tuple[str, str]] = set()  # (member, corroborating group) already credited
        self._struck: set[tuple[str, str]] = set()  # (member, slot) already penalized
        self.events = 0
        self._strikes_admitted: dict[str, int] = {}  # contradicted claims a member had while admitted
        # member -> how many contradicted claims took it from admitted to under the admission weight (first fall)
        self.fell: dict[str, int] = {}
        # The boundary's slots (found state-wide by :func:`fold`): key -> claims, and claim id -> key.
        self.slots: dict[str, list[Claim]] = {}
        self.slot_of: dict[str, str] = {}
        self._contested: frozenset[str] | None = None
        self._now_weights: dict[str, int] = {}  # weights at the ledger's time (gains and strikes clear it)
        self.verified: dict[str, str] = {}  # claim id -> the evidence that verified it
        self.refuted: dict[str, str] = {}  # claim id -> the evidence that refuted it
        self.ignored: list[str] = []  # evidence that did not count (an unadmitted or interested judge, no such claim)
        self._version: str | None = None  # made once the fold is done (gains and strikes clear it)
        # Admission groups: members admitted within ``together_us`` of each other (chained), by ``since``.
        # The founder is a group of its own: the members it admits in its first hour are not its echoes.
        self.group_of: dict[str, str] = {self.founder: self.founder} if self.founder else {}
        lead, last = "", -1
        for node, since in sorted(self.members.items(), key=lambda x: (x[1], x[0])):
            if node == self.founder:
                continue
            if since == 0 or last < 0 or since - last > w.together_us:
                lead = node
            self.group_of[node] = lead
            last = since

    def _ceiling(self, node: str, r: _Rep, t: int) -> int:
        if node == self.founder:
            return SCALE
        return min(SCALE, self.w.start + self.w.rate_per_day * max(0, t - r.since) // DAY_US)

    def weight(self, node: str, t: int | None = None) -> int:
        """A source's weight at ``t`` (default: the ledger's time): 0 for a non-member, full in a ``devices``
        boundary, else its reputation."""
        if t is None:
            hit = self._now_weights.get(node)
            if hit is None:
                hit = self._now_weights[node] = self.weight(node, self.now)
            return hit
        if node not in self.members:
            return 0
        if self.kind == DEVICES:
            return SCALE
        return _decayed(self.reps[node], t, self.w, self._floor(node))

    def _floor(self, node: str) -> int:
        """What reputation decays toward: the start (a struck founder decays toward it too)."""
        r = self.reps[node]
        return SCALE if node == self.founder and not r.struck else self.w.start

    @property
    def disputed_slots(self) -> int:
        """How many of the boundary's slots hold claims that disagree (for metrics)."""
        return sum(1 for members in self.slots.values() if _disputed(members))

    @property
    def contested(self) -> frozenset[str]:
        """The claims in a slot whose claims assert more than one value (made once per fold)."""
        if self._contested is None:
            self._contested = frozenset(c.id for members in self.slots.values() if _disputed(members) for c in members)
        return self._contested

    def claim_weight(self, c: Claim, t: int | None = None) -> int:
        return min((self.weight(n, t) for n in c.writers), default=0)

    def _touch(self, node: str, t: int) -> _Rep:
        r = self.reps[node]
        r.rep, r.at = _decayed(r, t, self.w, self._floor(node)), max(r.at, t)
        return r

    def gain(self, node: str, by_group: str, by_weight: int, t: int) -> None:
        if node not in self.reps or (node, by_group) in self._gained:
            return
        self._gained.add((node, by_group))
        r = self._touch(node, t)
        room = self._ceiling(node, r, t) - r.rep
        if room > 0:
            r.rep += room * self.w.gain // SCALE * by_weight // SCALE
            self.events += 1
            self._version = None
            self._now_weights.clear()

    def strike(self, node: str, slot: str, t: int) -> None:
        if node not in self.reps or (node, slot) in self._struck:
            return
        self._struck.add((node, slot))
        r = self._touch(node, t)
        before = r.rep
        r.rep -= r.rep * self.w.loss // SCALE
        r.struck = True
        self.events += 1
        self._version = None
        self._now_weights.clear()
        if before >= self.w.admit and node not in self.fell:
            n = self._strikes_admitted[node] = self._strikes_admitted.get(node, 0) + 1
            if r.rep < self.w.admit:
                self.fell[node] = n

    def version(self) -> str:
        if self._version is not None:
            return self._version
        body = canonical_json(
            {
                "rule": RULE_VERSION,
                "now": self.now,
                "reps": {n: self.weight(n) for n in sorted(self.members)},
                "events": self.events,
            }
        )
        self._version = "l_" + hashlib.blake2b(body.encode(), digest_size=8).hexdigest()
        return self._version


class _Components:
    """Union-find over claim ids; a component is named by its smallest id, so the result does not depend on the
    order of the unions."""

    def __init__(self, ids: Iterable[str]) -> None:
        self.parent = {i: i for i in ids}

    def find(self, x: str) -> str:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _groups(claims: Sequence[Claim], ledger: Ledger) -> dict[str, str]:
    """Each claim's independence group (a representative claim id): claims with the same text, a source in common,
    or sources admitted together are one group."""
    comps = _Components(c.id for c in claims)
    seen: dict[str, str] = {}
    for c in sorted(claims, key=lambda c: c.id):
        keys = ["t:" + c.text_key] + ["g:" + ledger.group_of.get(n, n) for n in c.writers]
        for k in keys:
            if k in seen:
                comps.union(seen[k], c.id)
            else:
                seen[k] = c.id
    return {c.id: comps.find(c.id) for c in claims}


# -- scores and resolution -------------------------------------------------------------------------------------------


def claim_score(c: Claim, ledger: Ledger, newest: int, t: int | None = None) -> int:
    if c.id in ledger.refuted:  # execution-integrity evidence from an admitted, independent judge
        return 0
    w = ledger.w
    s = ledger.claim_weight(c, t)
    s = s * (SCALE - w.confidence + w.confidence * c.confidence // SCALE) // SCALE
    s = s * w.trust.get(c.trust, 0) // SCALE
    return s if c.created_at >= newest else s * (SCALE - w.recency) // SCALE


@dataclasses.dataclass(frozen=True)
class Verdict:
    slot: str
    winner: str  # the winning value
    scores: dict[str, int]  # value -> score
    groups: dict[str, str]  # claim id -> independence group
    claim_scores: dict[str, int]


def decide(slot: str, claims: Sequence[Claim], ledger: Ledger, t: int | None = None) -> Verdict:
    """The winning value of one slot's claims: each value scores the sum over independent groups of the group's best
    claim for it; the highest wins, ties to the smaller value."""
    groups = _groups(claims, ledger)
    newest = max(c.created_at for c in claims)
    cs = {c.id: claim_score(c, ledger, newest, t) for c in claims}
    best: dict[tuple[str, str], int] = {}
    for c in claims:
        k = (c.value, groups[c.id])
        best[k] = max(best.get(k, 0), cs[c.id])
    scores: dict[str, int] = {}
    for (value, _), s in sorted(best.items()):
        scores[value] = scores.get(value, 0) + s
    winner = min(scores, key=lambda v: (-scores[v], v))
    return Verdict(slot, winner, scores, groups, cs)


def corroborated(c: Claim, slot_claims: Sequence[Claim], ledger: Ledger, groups: Mapping[str, str]) -> bool:
    """Whether an independent admitted source asserts the same value in the same slot, or an admitted judge
    verified the claim."""
    return c.id in ledger.verified or any(
        o.id != c.id
        and o.value == c.value
        and groups[o.id] != groups[c.id]
        and ledger.claim_weight(o) >= ledger.w.admit
        for o in slot_claims
    )


# -- slots over a set of claims --------------------------------------------------------------------------------------


def slots_of(claims: Sequence[Claim], w: Weights, kind: str = "") -> dict[str, list[Claim]]:
    """The slots among a boundary's ``claims``: explicit ones by key, found ones as connected near-duplicates whose
    sources are not the same (compared only within block keys: texts sharing their first or last :data:`BLOCK`
    words), and claims joined by a ``supersedes`` / ``contradicts`` edge that does not count by itself
    (:func:`edge_counts`) among claims in no other slot. Slots of one claim are left out."""
    out: dict[str, list[Claim]] = {}
    loose = []
    for c in sorted(claims, key=lambda c: c.id):
        if c.slot:
            out.setdefault("s:" + c.slot, []).append(c)
        elif len(c.tokens) >= MIN_TOKENS:
            loose.append(c)
    near = _Components(c.id for c in loose)
    pairs: set[tuple[int, int]] = set()
    buckets: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    for i, c in enumerate(loose):
        buckets.setdefault(("h", c.tokens[:BLOCK]), []).append(i)
        buckets.setdefault(("t", c.tokens[-BLOCK:]), []).append(i)
    for idx in buckets.values():
        if len(idx) <= BUCKET_MAX:
            pairs.update((a, b) for n, a in enumerate(idx) for b in idx[n + 1 :])
    for a, b in sorted(pairs):
        ca, cb = loose[a], loose[b]
        # Not the same sources: one source's two texts are its own update, not a conflict. Sources in common do not
        # keep two claims apart (a member that edits an honest claim becomes one of its sources: its own rival
        # text must still meet it in a slot).
        if ca.writers == cb.writers or ca.text_key == cb.text_key:
            continue
        if near_duplicate(ca.tokens, cb.tokens, w) is not None:
            near.union(ca.id, cb.id)
    comps: dict[str, list[Claim]] = {}
    for c in loose:
        comps.setdefault(near.find(c.id), []).append(c)
    # An echo (the same text again) of a slot's claim joins the slot too.
    by_text: dict[str, str] = {}
    for root, members in sorted(comps.items()):
        if len(members) > 1:
            for c in members:
                by_text.setdefault(c.text_key, root)
    for root, members in sorted(comps.items()):
        if len(members) == 1 and members[0].text_key in by_text and by_text[members[0].text_key] != root:
            comps[by_text[members[0].text_key]].append(members[0])
            members.clear()
    for members in comps.values():
        if _disputed(members):
            out[_slot_key("n:", members)] = sorted(members, key=lambda c: c.id)
    out = {k: v for k, v in out.items() if len(v) > 1}
    # Edges between claims of different sources: the one that names the other and the one it names are one slot.
    slotted = {c.id for v in out.values() for c in v}
    free = {c.id: c for c in claims if c.id not in slotted}
    linked = _Components(free)
    joined: set[str] = set()
    for c in sorted(free.values(), key=lambda c: c.id):
        for t in c.edges:
            target = free.get(t)
            if target is not None and target.id != c.id and not edge_counts(c, target, kind):
                linked.union(c.id, target.id)
                joined.update((c.id, target.id))
    by_root: dict[str, list[Claim]] = {}
    for id_ in sorted(joined):
        by_root.setdefault(linked.find(id_), []).append(free[id_])
    for members in by_root.values():
        if _disputed(members):
            out[_slot_key("e:", members)] = members
    return out


def _disputed(claims: Iterable[Claim]) -> bool:
    """Whether the claims assert more than one value (a slot of them is contested)."""
    return len({c.value for c in claims}) > 1


def _slot_key(prefix: str, members: Sequence[Claim]) -> str:
    """A found slot's key: a digest of its first claim (by creation, then id), so the key stays as later claims join
    the slot (its stored record is edited, not orphaned), and names no claim (which the caller may not read)."""
    first = min(members, key=lambda c: (c.created_at, c.id))
    return prefix + hashlib.blake2b(first.id.encode(), digest_size=12).hexdigest()


def fold(roster: Roster, claims: Sequence[Claim], w: Weights, now: int, evidence: Sequence[Evidence] = ()) -> Ledger:
    """The boundary's ledger at ``now`` from its claims and execution-integrity evidence (see the module
    docstring), folded in time order."""
    ledger = Ledger(roster, w, now)
    slots = slots_of(claims, w, ledger.kind)
    ledger.slots = slots
    for key, members in slots.items():
        for c in members:
            ledger.slot_of.setdefault(c.id, key)
    if ledger.kind == DEVICES:
        return ledger

    def at(c: Claim | Evidence) -> int:
        return max([c.created_at] + [ledger.members.get(n, 0) for n in c.writers])

    slot_of: dict[str, str] = {}
    for key, members in slots.items():
        for c in members:
            slot_of.setdefault(c.id, key)
    by_id = {c.id: c for c in claims}
    events: list[tuple[int, int, str, Claim | Evidence]] = [
        (at(c), 0, c.id, c) for c in claims if c.id in slot_of and at(c) <= now
    ]
    events += [(at(e), 1, e.id, e) for e in evidence if at(e) <= now]
    seen: dict[str, list[Claim]] = {}
    for t, _, _, ev in sorted(events, key=lambda x: x[:3]):
        if isinstance(ev, Evidence):
            _judge(ledger, ev, by_id.get(ev.about), t)
            continue
        c = ev
        key = slot_of[c.id]
        before = seen.setdefault(key, [])
        before.append(c)
        groups = _groups(before, ledger)
        mine = groups[c.id]
        for o in before[:-1]:
            if o.value == c.value and groups[o.id] != mine:
                for n in c.writers:
                    ledger.gain(n, groups[o.id], ledger.claim_weight(o, t), t)
                for n in o.writers:
                    ledger.gain(n, mine, ledger.claim_weight(c, t), t)
        if not _disputed(before):
            continue
        v = decide(key, before, ledger, t)
        top = v.scores[v.winner]
        backed = max((ledger.claim_weight(x, t) for x in before if x.value == v.winner), default=0)
        if backed < w.admit:  # only a winner an admitted source backs contradicts anyone
            continue
        for x in before:
            if x.value != v.winner and v.scores[x.value] < top:
                for n in x.writers:
                    # A source that later asserted the winning value updated its claim: no strike (one that asserts
                    # the winner first and the loser after is hedging, and is struck).
                    if not any(y.value == v.winner and n in y.writers and y.created_at > x.created_at for y in before):
                        ledger.strike(n, key, t)
    return ledger


def _judge(ledger: Ledger, e: Evidence, target: Claim | None, t: int) -> None:
    """One piece of execution-integrity evidence at ``t``: it counts only from an admitted judge independent of what
    it judges (not one of the claim's sources, nor admitted together with one; not the member judged). A judge may
    refute a claim or find fraud only against sources that weigh no more than it does (a farmed identity cannot
    silence the founder), and one judging group strikes a member for fraud once, however many verdicts it writes."""
    judge = min((ledger.weight(n, t) for n in e.writers), default=0)
    mine = {ledger.group_of.get(n, n) for n in e.writers}
    judged = set(target.writers) if target is not None else {e.node}
    heavier = max((ledger.weight(n, t) for n in judged), default=0) > judge
    if (
        judge < ledger.w.admit
        or (e.about and target is None)
        or (e.node and e.node not in ledger.members)
        or mine & {ledger.group_of.get(n, n) for n in judged}
        or (e.verdict != "verified" and heavier)
    ):
        ledger.ignored.append(e.id)
        return
    lead = min(mine)
    if target is None:  # a fraud verdict about a member
        ledger.strike(e.node, "f:" + lead, t)
    elif e.verdict == "verified":
        ledger.verified.setdefault(target.id, e.id)
        for n in target.writers:
            ledger.gain(n, "v:" + lead, judge, t)
    else:
        ledger.refuted.setdefault(target.id, e.id)
        for n in target.writers:
            ledger.strike(n, "v:" + target.id, t)


# -- a node's consensus: ledgers and frame resolutions -----------------------------------------------------------------


@dataclasses.dataclass
class Resolution:
    """What consensus decided for a frame's candidates: ids left out (and why), per contested slot a record, and per
    winning claim the record that resolved it."""

    dropped: dict[str, str] = dataclasses.field(default_factory=dict)  # id -> "contradicted" | "unadmitted" | "future"
    records: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # record id -> record
    resolved_by: dict[str, str] = dataclasses.field(default_factory=dict)  # winning claim id -> record id
    ledgers: dict[str, str] = dataclasses.field(default_factory=dict)  # boundary id hex -> ledger version

    def json(self) -> dict[str, Any]:
        return {
            "rule": RULE_VERSION,
            "ledgers": dict(sorted(self.ledgers.items())),
            "records": [self.records[k] for k in sorted(self.records)],
            "contradicted": sorted(i for i, why in self.dropped.items() if why == "contradicted"),
            "unadmitted": sorted(i for i, why in self.dropped.items() if why == "unadmitted"),
            "future": sorted(i for i, why in self.dropped.items() if why == "future"),
        }


class AssetSource(Protocol):
    def get(self, id_: str) -> Asset: ...


def overridden(verdict: Verdict, o: Override | None) -> Verdict:
    """The verdict with an honored override's value as the winner (when a candidate asserts that value)."""
    if o is None or o.choose not in verdict.scores:
        return verdict
    return dataclasses.replace(verdict, winner=o.choose)


def record_of(
    bid: bytes, slot: str, verdict: Verdict, claims: Sequence[Claim], ledger: Ledger, override: Override | None = None
) -> dict[str, Any]:
    """A resolution as a record: the same inputs give the same bytes on every member. Each candidate ``says`` what
    sets it apart: an explicit slot's value, or a near-duplicate's own words where it differs from the winner's.
    ``override``: the honored override that chose the winner (named in the record)."""
    verdict = overridden(verdict, override)
    ref = min((c for c in claims if c.value == verdict.winner), key=lambda c: c.id)

    loser = min((c for c in claims if c.value != verdict.winner), key=lambda c: c.id, default=None)

    def says(c: Claim) -> str:
        if c.slot:
            return c.value
        other = ref if c.value != ref.value else loser
        spans = None if other is None else near_duplicate(c.tokens, other.tokens, ledger.w)
        return " … ".join(mine for mine, _ in spans) if spans else ""

    body = {
        "rule": RULE_VERSION,
        "boundary": bid.hex(),
        "slot": slot,
        "ledger": ledger.version(),
        "winner": verdict.winner,
        "candidates": [
            {
                "id": c.id,
                "value": c.value,
                "says": says(c),
                "sources": list(c.writers),
                "group": verdict.groups[c.id],
                "weight": ledger.claim_weight(c),
                "score": verdict.claim_scores[c.id],
                "won": c.value == verdict.winner,
                **({"refuted": ledger.refuted[c.id]} if c.id in ledger.refuted else {}),
            }
            for c in sorted(claims, key=lambda c: c.id)
        ],
        "scores": dict(sorted(verdict.scores.items())),
    }
    if override is not None and override.choose == verdict.winner:
        body["override"] = {"id": override.id, "by": override.by, "reason": override.reason}
    rid = "c_" + hashlib.blake2b(canonical_json(body).encode(), digest_size=10).hexdigest()
    return {"record": rid, **body}


class Consensus:
    """A node's consensus over what replication brought it: ledgers per boundary (cached per store state and day),
    the resolution of a frame's candidates, the views a person asks for (:meth:`conflicts`, :meth:`reputation`) and
    the records this node keeps (:meth:`record_assets`). ``local``: this node's id (its own claims are never held back
    on it for want of corroboration, and its own overrides decide here)."""

    def __init__(
        self,
        store: AssetSource,
        provenance: Provenance,
        local: str,
        weights: Weights | None = None,
        *,
        pump: Callable[[int], object] | None = None,
        catch_up: bool = False,
    ) -> None:
        """``pump``: turns this node's new writes into the boundary's objects (the replica's), so that a record or an
        override it writes counts at once (:meth:`wrote`). ``catch_up``: pump once before the first ledger is folded
        (a command on the store, where no daemon has sealed this node's latest writes yet)."""
        self.store = store
        self.provenance = provenance
        self.local = local
        self.w = weights or Weights()
        self._pump = pump
        self._catch_up = catch_up and pump is not None
        self._claims: dict[tuple[str, bytes, tuple[str, ...]], Claim] = {}
        self._ledgers: dict[bytes, tuple[tuple[tuple[int, int], int, int], Ledger]] = {}
        self._overrides: dict[bytes, dict[str, Override]] = {}  # per boundary: slot -> the override honored here
        self._shared: dict[bytes, dict[str, Override]] = {}  # … and the one every member honors (the stored records')
        self._settled: dict[bytes, Ledger] = {}  # per boundary, the ledger its records were last written from
        # (ledger version, slot, the caller's candidates in it) -> (record, independence groups): frames and rounds
        # of one frame that meet a slot again do not weigh it again
        self._decided: dict[tuple[str, str, tuple[Any, ...], str], tuple[dict[str, Any], dict[str, str]]] = {}

    def _writers(self, bid: bytes, id_: str) -> tuple[str, ...]:
        """An asset's verified sources in a boundary. None recorded: this node wrote it and has not sealed it yet
        (what arrives from a peer has its writer recorded in the commit that stores it)."""
        return self.provenance.writers(bid, id_) or (self.local,)

    def claim(self, bid: bytes, asset: Asset) -> Claim:
        writers = self._writers(bid, asset.id)
        key = (asset.id, asset.signature, writers)
        c = self._claims.get(key)
        if c is None:
            if len(self._claims) > 200_000:
                self._claims.clear()
            c = self._claims[key] = claim_of(asset, writers)
        return c

    def ledger(self, bid: bytes, now: int) -> Ledger | None:
        """The boundary's ledger, folded up to the end of ``now``'s day (so every member asked on one day, holding
        one state, folds the same ledger); None when this node holds no roster for it. Folded again only when the
        boundary's objects, its roster or the day change."""
        if self._catch_up and self._pump is not None:
            self._catch_up = False
            self._pump(now)
        roster = self.provenance.roster_of(bid)
        if roster is None:
            return None
        day_end = (now // DAY_US + 1) * DAY_US
        key = (self.provenance.boundary_version(bid), roster.version, day_end)  # a new roster: new members
        hit = self._ledgers.get(bid)
        if hit is not None and hit[0] == key:
            return hit[1]
        claims: list[Claim] = []
        evidence: list[Evidence] = []
        overrides: list[Override] = []
        for id_ in sorted(self.provenance.asset_ids(bid)):
            try:
                asset = self.store.get(id_)
            except GamlError:  # erased or unreadable here: not a claim this node can weigh
                continue
            if asset.asset_type in NOT_CLAIMS:
                writers = self._writers(bid, asset.id)
                e = evidence_of(asset, writers)
                if e is not None:
                    evidence.append(e)
                o = override_of(asset, writers)
                if o is not None:
                    overrides.append(o)
                continue
            claims.append(self.claim(bid, asset))
        ledger = fold(roster, claims, self.w, day_end, evidence)
        honored: dict[str, Override] = {}
        shared: dict[str, Override] = {}
        for o in sorted(overrides, key=lambda o: (o.created_at, o.id)):  # the newest honored one stands
            if o.created_at > day_end:
                continue
            if self._honors(ledger, o, everywhere=False):
                honored[o.slot] = o
            if self._honors(ledger, o, everywhere=True):
                shared[o.slot] = o
        self._overrides[bid] = honored
        self._shared[bid] = shared
        self._ledgers[bid] = (key, ledger)
        return ledger

    def wrote(self, now: int) -> None:
        """This node wrote consensus assets (records, an override): seal them into their boundaries now, so the next
        ledger reads them."""
        if self._pump is not None:
            self._pump(now)
        self._ledgers.clear()
        self._settled.clear()

    def edge_counts(self, by: Any, target: Any) -> bool:
        """Whether ``by``'s ``supersedes`` / ``contradicts`` edge resolves ``target`` out of this node's reads by
        itself (temporal resolution asks; both are assets or views: what :func:`policy.replication.reach` reads, and
        an ``id``). Yes when this node wrote ``by`` (its user's own decision, on this node); else only within the
        target's own boundary, per :func:`edge_counts` (a peer's asset never resolves this node's private memory, nor
        memory of another boundary). Otherwise the two are a slot, weighed like any other."""
        bbid = self.provenance.boundary_of(by)
        bw = self.provenance.writers(bbid, by.id) if bbid is not None else ()
        if bw in ((), (self.local,)):
            return True
        bid = self.provenance.boundary_of(target)
        if bid is None or bid != bbid:
            return False
        roster = self.provenance.roster_of(bid)
        kind = roster.boundary.kind if roster is not None else ""
        return edge_counts(bw, self._writers(bid, target.id), kind)

    def _honors(self, ledger: Ledger, o: Override, *, everywhere: bool) -> bool:
        """Whether an override decides: on every member, when the founder wrote it, or a device of a devices boundary;
        here (``everywhere`` False), also when this node wrote it."""
        return bool(o.writers) and all(
            (n == self.local and not everywhere)
            or n == ledger.founder
            or (ledger.kind == DEVICES and n in ledger.members)
            for n in o.writers
        )

    def _decide(
        self,
        bid: bytes,
        ledger: Ledger,
        key: str,
        group: Sequence[Claim],
        allowed: Callable[[str], bool],
        *,
        everywhere: bool = False,
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The record of one slot over ``group`` ({} when its claims agree) and their independence groups. An override
        counts only for a caller who may read it (it names who chose and why); ``everywhere``: only one every member
        honors (a stored record's)."""
        o = (self._shared if everywhere else self._overrides).get(bid, {}).get(key)
        if o is not None and not allowed(o.id):
            o = None
        memo = (
            ledger.version(),
            bid.hex() + key,
            tuple((c.id, c.value, c.writers, c.created_at, c.confidence, c.trust) for c in group),
            o.id if o else "",
        )
        hit = self._decided.get(memo)
        if hit is None:
            if len(self._decided) > 20_000:
                self._decided.clear()
            rec: dict[str, Any] = {}
            if _disputed(group):
                rec = record_of(bid, key, decide(key, group, ledger), group, ledger, o)
            hit = self._decided[memo] = (rec, _groups(group, ledger))
        return hit

    def _slot_group(self, ledger: Ledger, key: str, allowed: Callable[[str], bool], also: str = "") -> list[Claim]:
        return [x for x in ledger.slots[key] if (x.id == also or allowed(x.id)) and x.created_at <= ledger.now]

    def resolve(
        self, assets: Sequence[Asset], now: int, allowed: Callable[[str], bool], *, gate: bool = True
    ) -> Resolution:
        """Decide for a frame's candidates: a candidate in a contested slot stays only if its value wins, and one
        under the admission weight without independent admitted corroboration is held back. A slot is weighed over
        its claims the caller may use (``allowed``: the caller's authorization, decided before) and within its
        boundary only; the slots themselves are the ledger's (found over the whole boundary), so what a frame happens
        to rank does not change a record: the same state and caller give the same records on every member.
        ``gate``: hold back unadmitted claims too (a frame does; a search shows a new member's memory, resolving
        contested slots only). Consensus records, overrides and verdicts are bookkeeping, never shown as memory
        (dropped as ``record``)."""
        out = Resolution()
        by_bid: dict[bytes, list[Asset]] = {}
        for a in assets:
            bid = self.provenance.boundary_of(a)
            if bid is not None:
                by_bid.setdefault(bid, []).append(a)
        for bid, members in sorted(by_bid.items()):
            ledger = self.ledger(bid, now)
            if ledger is None:
                continue
            out.ledgers[bid.hex()] = ledger.version()
            claims = []
            for a in members:
                if a.asset_type is AssetType.CONSENSUS_RECORD:
                    out.dropped[a.id] = "record"
                    continue
                if a.asset_type in NOT_CLAIMS:
                    continue  # evidence is memory too; it is weighed in the ledger, not in a slot
                c = self.claim(bid, a)
                if c.created_at > ledger.now:  # dated after today: not a claim yet (nor weighed, nor shown)
                    out.dropped[c.id] = "future"
                else:
                    claims.append(c)
            groups: dict[str, list[Claim]] = {}
            for c in claims:
                key = ledger.slot_of.get(c.id, "")
                if key and key not in groups:
                    groups[key] = self._slot_group(ledger, key, allowed, c.id)
            independent: dict[str, dict[str, str]] = {}
            for key, group in sorted(groups.items()):
                rec, independent[key] = self._decide(bid, ledger, key, group, allowed)
                if not rec:
                    continue
                out.records[rec["record"]] = rec
                for c in group:
                    if c.value == rec["winner"]:
                        out.resolved_by[c.id] = rec["record"]
                    else:
                        out.dropped[c.id] = "contradicted"
            if ledger.kind == DEVICES or not gate:
                continue
            for c in claims:
                if c.id in out.dropped or self.local in c.writers or ledger.claim_weight(c) >= self.w.admit:
                    continue
                key = ledger.slot_of.get(c.id, "")
                if not corroborated(c, groups.get(key, ()), ledger, independent.get(key, {})):
                    out.dropped[c.id] = "unadmitted"
        return out

    def clear(self, views: Sequence[Any], now: int) -> dict[str, str] | None:
        """The ledgers' versions (boundary id hex -> version) when :meth:`resolve` would leave every one of these
        candidates (assets or views: an ``id``, an ``asset_type``, a ``created_at`` and what
        :func:`policy.replication.reach` reads) as it is: none a record, none in a contested slot, none dated after
        today, each from an admitted source, this node, or a device. A frame then need not open them to weigh them.
        None when any one needs weighing: then :meth:`resolve` decides (it decides the same for the rest)."""
        out: dict[str, str] = {}
        # Memos for this call: candidates of one frame share a few policies, one boundary and a few sources.
        bids: dict[tuple[Any, ...], bytes | None] = {}
        ledgers: dict[bytes, Ledger | None] = {}
        admitted: dict[tuple[bytes, str], bool] = {}
        for v in views:
            if v.asset_type is AssetType.CONSENSUS_RECORD:
                return None
            if v.asset_type in NOT_CLAIMS:
                continue
            where = (id(v.privacy_scope), id(v.replication_policy), v.owner_id, v.tenant_scope)  # enums: singletons
            if where not in bids:
                bids[where] = self.provenance.boundary_of(v)
            bid = bids[where]
            if bid is None:
                continue
            if bid not in ledgers:
                found = ledgers[bid] = self.ledger(bid, now)
                if found is not None:
                    out[bid.hex()] = found.version()
            ledger = ledgers[bid]
            if ledger is None:
                continue
            if v.id in ledger.contested or v.created_at > ledger.now:
                return None
            if ledger.kind == DEVICES:
                continue
            writers = self._writers(bid, v.id)
            if self.local in writers:
                continue
            for n in writers:
                if (bid, n) not in admitted:
                    admitted[(bid, n)] = ledger.weight(n) >= self.w.admit
                if not admitted[(bid, n)]:
                    return None
        return out

    # -- what a person asks (gaml conflicts, gaml reputation) -------------------------------------------------------

    def conflicts(self, now: int, allowed: Callable[[str], bool], slot: str = "") -> list[dict[str, Any]]:
        """The contested slots among what the caller may use (``allowed``), in every boundary this node is in, each
        as the record a frame would carry (decided over the caller's claims of the slot, as a frame is); ``slot``:
        that one only (an unknown slot gives none)."""
        out = []
        for bid in sorted(self.provenance.boundary_ids()):
            ledger = self.ledger(bid, now)
            if ledger is None:
                continue
            for key in sorted(ledger.slots):
                if slot and key != slot:
                    continue
                group = self._slot_group(ledger, key, allowed)
                rec = self._decide(bid, ledger, key, group, allowed)[0] if len(group) > 1 else {}
                if rec:
                    out.append(copy.deepcopy(rec))  # the memo's is shared with frames
        return out

    def weigher(self, bid: bytes, now: int) -> Callable[[str], float]:
        """A source's weight in boundary ``bid`` now, as a share of full weight (0..1): what its claims count for.
        0 for every node where this node holds no roster of ``bid``."""
        ledger = self.ledger(bid, now)
        if ledger is None:
            return lambda node: 0.0
        return lambda node: ledger.weight(node) / SCALE

    def reputation(
        self, now: int, visible: Callable[[bytes], bool], allowed: Callable[[str], bool]
    ) -> list[dict[str, Any]]:
        """Per boundary the caller may see (``visible``), its ledger: each member's weight now, when it was admitted,
        whether it is admitted (weight at least :attr:`Weights.admit`), how many contradicted claims took it under,
        and the evidence that did not count."""
        out = []
        for bid in sorted(self.provenance.boundary_ids()):
            ledger = self.ledger(bid, now)
            if ledger is None or not visible(bid):
                continue
            roster = self.provenance.roster_of(bid)
            assert roster is not None
            members = [
                {
                    "node": n,
                    "since": since,
                    "founder": n == ledger.founder,
                    "weight": ledger.weight(n),
                    "admitted": ledger.weight(n) >= self.w.admit,
                    **({"fell_after": ledger.fell[n]} if n in ledger.fell else {}),
                }
                for n, since in sorted(ledger.members.items(), key=lambda x: (x[1], x[0]))
            ]
            out.append(
                {
                    "boundary": bid.hex(),
                    "name": roster.boundary.name,
                    "kind": ledger.kind,
                    "rule": RULE_VERSION,
                    "ledger": ledger.version(),
                    "at": ledger.now,
                    "admit": self.w.admit,
                    "members": members,
                    "slots": sum(_disputed(m) for m in ledger.slots.values()),  # contested
                    "verified": len(ledger.verified),
                    "refuted": len(ledger.refuted),
                    "ignored_evidence": sorted(i for i in ledger.ignored if allowed(i)),
                    "overrides": sorted(o.id for o in self._overrides.get(bid, {}).values() if allowed(o.id)),
                }
            )
        return out

    def slot_boundaries(self, slot: str, now: int) -> list[tuple[bytes, Ledger]]:
        """The boundaries (and their ledgers) that hold a slot of that key (an explicit slot's key can recur)."""
        out = []
        for bid in sorted(self.provenance.boundary_ids()):
            ledger = self.ledger(bid, now)
            if ledger is not None and slot in ledger.slots:
                out.append((bid, ledger))
        return out

    # -- the records this node keeps ----------------------------------------------------------------------------------

    def record_assets(self, now: int) -> list[Asset]:
        """The ``consensus_record`` assets to write, one per contested slot of each boundary whose ledger changed
        since the last pass (who writes which: :meth:`_record_asset`), decided over every claim of the slot with
        only the overrides every member honors: derived from the candidates (their most restrictive policy,
        :func:`policy.access.inherit`), naming the winners (``won``) and the losers (``lost``) in the payload.
        Unsigned: the caller writes them as the node's own writes, and replication carries them inside the
        boundary."""
        out = []
        for bid in sorted(self.provenance.boundary_ids()):
            ledger = self.ledger(bid, now)
            if ledger is None or self._settled.get(bid) is ledger:  # nothing changed since the last pass
                continue
            self._settled[bid] = ledger
            for key in sorted(ledger.slots):
                group = self._slot_group(ledger, key, lambda _: True)
                if not _disputed(group):
                    continue
                rec = self._decide(bid, ledger, key, group, lambda _: True, everywhere=True)[0]
                asset = self._record_asset(bid, ledger, key, rec, group, now)
                if asset is not None:
                    out.append(asset)
        return out

    def _record_asset(
        self, bid: bytes, ledger: Ledger, key: str, rec: Mapping[str, Any], group: Sequence[Claim], now: int
    ) -> Asset | None:
        """The slot's record to write, or None. Who writes: any member creates a missing record; only the founder
        rewrites one for a changed decision (one writer, so members that weigh differently, by config or by what
        they hold, never write it back and forth, and a forged record is corrected once); any member tightens one
        whose policy is looser than its candidates' (monotone, so it settles). A record erased with a candidate is
        not written again, nor one whose id another asset holds."""
        id_ = record_asset_id(bid, key)
        try:
            sources = [self.store.get(c.id) for c in group]
            policy = inherit(sources, owner=min(s.owner_id for s in sources))
        except GamlError:  # a candidate erased meanwhile, or sources that cannot be combined: no record
            return None
        try:
            old: Asset | None = self.store.get(id_)
        except Deleted:
            return None
        except GamlError:
            old = None
        if old is not None:
            if (old.asset_type, old.owner_id, old.tenant_scope) != (
                AssetType.CONSENSUS_RECORD,
                policy["owner_id"],
                policy["tenant_scope"],
            ):
                return None  # not an edit this node may make (another owner or kind of asset holds the id)
            stored = old.payload.get("consensus")
            stored = stored if isinstance(stored, Mapping) else {}
            looser = any(at_least_as_restrictive(old, src) for src in sources)
            if not looser and (_decision(stored) == _decision(rec) or self.local != ledger.founder):
                return None
        won = sorted(c.id for c in group if c.value == rec["winner"])
        lost = sorted(c.id for c in group if c.value != rec["winner"])
        # The winners and losers are named in the payload, not as ``supports`` / ``contradicts`` edges: an edge of
        # the owner's would resolve its target out of every frame by itself (temporal resolution), a verdict no
        # record may pass on the members that did not decide it.
        # The whole record under one key: replication merges a payload key by key, so two members' records of one
        # slot merge into one of them, never into a winner of one and the candidates of the other.
        payload = {
            "consensus": {**rec, "won": won, "lost": lost},
            "text": f"consensus on a contested slot: {len(won)} of {len(group)} candidates won",
        }
        asset = Asset(
            id=id_,
            asset_type=AssetType.CONSENSUS_RECORD,
            payload=payload,
            created_at=now,
            updated_at=now,
            creator=Creator.SYSTEM,
            **policy,
        )
        return asset if self.provenance.boundary_of(asset) == bid else None


def _decision(rec: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a stored record is rewritten for: its candidates, their sources and standing, the winner, the
    override."""
    cands = rec.get("candidates")
    cands = cands if isinstance(cands, (list, tuple)) else ()
    rows = []
    for c in cands:
        if isinstance(c, Mapping):
            sources = c.get("sources")
            sources = tuple(str(x) for x in sources) if isinstance(sources, (list, tuple)) else ()
            rows.append((str(c.get("id")), bool(c.get("won")), sources))
    over = rec.get("override")
    return (tuple(sorted(rows)), rec.get("winner"), over.get("id") if isinstance(over, Mapping) else None)


__all__ = [
    "RULE_VERSION",
    "SCALE",
    "Claim",
    "Consensus",
    "Evidence",
    "Ledger",
    "Override",
    "Provenance",
    "Resolution",
    "Verdict",
    "Weights",
    "claim_of",
    "claim_score",
    "corroborated",
    "decide",
    "edge_counts",
    "evidence_of",
    "fold",
    "near_duplicate",
    "override_of",
    "override_payload",
    "record_asset_id",
    "slots_of",
    "tokens",
]
