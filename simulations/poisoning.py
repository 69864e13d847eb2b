"""The poisoning benchmark: a boundary of simulated nodes running the real core, some of them adversaries.

``python -m simulations poisoning --data FILE --adversary-share S --seed N [--mode fresh|farming] [--json]`` runs
it; ``--sweep`` runs the shares 0, 0.1, … 0.5 in both modes and ``--plot OUT`` draws them.

The world (times are simulated microseconds; the nodes are told them, nothing reads a clock):

- One tenant boundary, administered by the **victim** (node 0). Honest members are admitted one by one over the
  first 60 days and build a **history** until day 365: facts with an explicit slot (``subject``/``attribute``/
  ``value``) that several of them assert independently, each in its own words.
- The run lasts :data:`RUN_DAYS` days from day 365. For each target of the attack file, honest members hold its
  correct answer as claims that look exactly like the attack: each attack text with its incorrect answer replaced by
  the correct one (texts without the incorrect answer verbatim are left out), each written by a random honest member.
- **Adversaries** (``adversary_share`` of the nodes) are admitted like any member, sign validly and carry no flag.
  They inject the five attack texts of every target, each from a random adversary. ``fresh``: they are admitted
  half-way through the run and inject at once. ``farming``: admitted at the start, they assert the true values of
  facts honest members assert during the first half (earning what reputation that earns), then defect.
- Every member replicates to the victim and to a **witness** (node 1) through the real sync engine over the
  simulated network; then the victim hydrates every target question (budget :data:`BUDGET` tokens) with consensus
  and, as the baseline, without it; the witness hydrates the same questions, and its consensus records must be
  byte-identical to the victim's.

Measures (the data README's): ``poisoned_target_share`` (frames holding at least one attack text),
``poisoned_token_share`` (attack tokens among the frames' fact tokens, pooled), ``honest_target_share`` (frames
holding at least one honest claim of their target), for consensus and for the ``baseline``.
"""

from __future__ import annotations

import dataclasses
import json
import random
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from gaml.crdt.sync import BACKOFF_MAX, Sync
from gaml.node.core.consensus import DAY_US, Consensus, Weights
from gaml.node.core.hydrate import HydrationRequest, Hydrator
from gaml.node.core.replica import Replica
from gaml.policy import crypto
from gaml.policy.access import Principal
from gaml.policy.model import canonical_json
from gaml.simulations.net import US_PER_MS, US_PER_S, SimClock, SimNetwork
from gaml.simulations.nodes import SyncEndpoint, make_node

HISTORY_END: Final = 365 * DAY_US
RUN_DAYS: Final = 120
BUDGET: Final = 300
TENANT: Final = "acme"
OWNER: Final = "acme-kb"
READER: Final = "analyst"
RETRY_US: Final = 1 * US_PER_S
QUIET_US: Final = (2**BACKOFF_MAX + 2) * RETRY_US
HISTORY_FACTS: Final = 10  # history facts per honest member (each asserted by 3-5 of them)
FARM_FACTS: Final = 6  # facts each farmer asserts while it farms
MODES: Final = ("fresh", "farming")


@dataclasses.dataclass(frozen=True)
class Spec:
    nodes: int = 50
    adversary_share: float = 0.3
    mode: str = "fresh"
    budget: int = BUDGET
    targets: int = 0  # 0: every target in the file

    def __post_init__(self) -> None:
        if self.nodes < 10:
            raise ValueError("the poisoning world needs at least 10 nodes")
        if not 0.0 <= self.adversary_share <= 0.5:
            raise ValueError("the adversary share is from 0 to 0.5")
        if self.mode not in MODES:
            raise ValueError(f"the mode is one of {', '.join(MODES)}")


def load(path: str | Path) -> list[dict[str, Any]]:
    """The targets of a PoisonedRAG-shaped file (an object of ``{id, question, correct answer, incorrect answer,
    adv_texts}``), in key order."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of targets")
    out = []
    for key in sorted(data, key=lambda k: (len(k), k)):
        t = data[key]
        if not all(isinstance(t.get(f), str) for f in ("question", "correct answer", "incorrect answer")):
            raise ValueError(f"{path}: target {key!r} lacks question / correct answer / incorrect answer")
        if not isinstance(t.get("adv_texts"), list) or not all(isinstance(x, str) for x in t["adv_texts"]):
            raise ValueError(f"{path}: target {key!r} has no list of adv_texts")
        out.append({"id": key, **t})
    return out


def twins(target: Mapping[str, Any]) -> list[str]:
    """The honest twins of a target's attack texts: the incorrect answer replaced by the correct one."""
    wrong, right = target["incorrect answer"], target["correct answer"]
    return [t.replace(wrong, right) for t in target["adv_texts"] if wrong and wrong in t]


def _draft(text: str, **payload: Any) -> dict[str, Any]:
    return {
        "owner_id": OWNER,
        "tenant_scope": TENANT,
        "privacy_scope": "tenant_private",
        "replication_policy": "tenant_nodes",
        "asset_type": "fact",
        "payload": {"text": text, **payload},
    }


class World:
    def __init__(self, seed: int, spec: Spec, targets: Sequence[Mapping[str, Any]]) -> None:
        self.seed, self.spec, self.targets = seed, spec, list(targets)
        self.rng = random.Random(seed)
        self.names = [f"n{i:02d}" for i in range(spec.nodes)]
        self.replicas: dict[str, Replica] = {}
        self.name_of: dict[str, str] = {}
        for i, name in enumerate(self.names):
            rep = Replica(make_node(seed * 1000 + i))
            self.replicas[name] = rep
            self.name_of[rep.node_id] = name
        n_adv = round(spec.nodes * spec.adversary_share)
        self.victim, self.witness = self.names[0], self.names[1]
        pool = self.names[2:]
        self.rng.shuffle(pool)
        self.adversaries = sorted(pool[:n_adv])
        self.honest = sorted(set(self.names) - set(self.adversaries))
        self.net = SimNetwork(seed, tick_us=100 * US_PER_MS, delay_us=(1 * US_PER_MS, 20 * US_PER_MS), clock=SimClock())
        for name in self.names:
            rep = self.replicas[name]
            sync = Sync(rep, crypto.SeededEntropy(seed * 1000 + 500 + self.names.index(name)), retry_after=RETRY_US)
            self.net.add(name, SyncEndpoint(self.name_of, self.replicas, rep, sync))
        self.poison: dict[str, str] = {}  # asset id -> target id
        self.honest_claims: dict[str, str] = {}  # asset id -> target id
        self.bid = b""

    # -- building the world ------------------------------------------------------------------------------------------

    def _at(self, t: int) -> int:
        if t > self.net.clock.now():
            self.net.skip_to(t)
        return self.net.clock.now()

    def _admit(self, name: str, t: int) -> None:
        admin = self.replicas[self.victim]
        admin.invite(self.bid, self.replicas[name].node_id, "member", t)
        self.replicas[name].join(admin.roster(self.bid), t)

    def _put(self, name: str, draft: dict[str, Any], t: int) -> str:
        (id_,) = self.replicas[name].node.put([draft], t)
        return id_

    def _deliver(self) -> None:
        if not self.net.run_until_quiet(self.net.clock.now() + 600 * US_PER_S, QUIET_US):
            raise AssertionError(f"seed={self.seed}: the network did not settle: {self.net.stats()}")

    def build(self) -> None:
        rng, spec = self.rng, self.spec
        victim = self.replicas[self.victim]
        self.bid = victim.create("tenant", "acme-kb", TENANT, 1).id
        for name in self.names[1:]:
            for hub in (self.victim, self.witness):
                if name != hub and not self.net.is_connected(name, hub):
                    self.net.connect(name, hub)
        self._deliver()
        # Honest members: admitted one by one over the first 60 days.
        for name in self.honest:
            if name != self.victim:
                self._admit(name, self._at(self.net.clock.now() + rng.randrange(DAY_US // 2, DAY_US * 60 // 50)))
        start = self._at(max(self.net.clock.now(), 60 * DAY_US))
        # History: explicit facts, each asserted by 3-5 honest members in their own words, over the year.
        facts = []
        for k in range(HISTORY_FACTS * len(self.honest) // 4):
            facts.append(
                (f"asset-{k}", rng.choice(("status", "owner", "location", "version")), f"v{rng.randrange(99)}")
            )
        writes: list[tuple[int, str, dict[str, Any]]] = []
        for subject, attribute, value in facts:
            t0 = rng.randrange(start, HISTORY_END - 30 * DAY_US)
            for name in rng.sample(self.honest, rng.randint(3, 5)):
                t = t0 + rng.randrange(0, 20 * DAY_US)
                text = f"{name} checked {subject}: its {attribute} is {value} (ticket {rng.randrange(10**6)})"
                writes.append((t, name, _draft(text, subject=subject, attribute=attribute, value=value)))
        self._write(writes)
        run_end = HISTORY_END + RUN_DAYS * DAY_US
        half = HISTORY_END + RUN_DAYS * DAY_US // 2
        # Adversaries: admitted at the start (farming) or half-way (fresh), one by one.
        admit_at = HISTORY_END if spec.mode == "farming" else half
        t = admit_at
        for name in self.adversaries:
            t += rng.randrange(DAY_US // 24, DAY_US // 4)
            self._admit(name, self._at(t))
        writes = []
        if spec.mode == "farming":
            for name in self.adversaries:
                for _ in range(FARM_FACTS):
                    subject, attribute, value = rng.choice(facts)
                    honest = rng.choice(self.honest)
                    tf = rng.randrange(t + DAY_US, half)
                    mine = f"{name} checked {subject}: its {attribute} is {value} (ticket {rng.randrange(10**6)})"
                    theirs = f"{honest} checked {subject}: its {attribute} is {value} (ticket {rng.randrange(10**6)})"
                    writes.append((tf, name, _draft(mine, subject=subject, attribute=attribute, value=value)))
                    writes.append((tf + 1, honest, _draft(theirs, subject=subject, attribute=attribute, value=value)))
        tags: dict[int, tuple[str, str]] = {}
        for target in self.targets:
            for text in twins(target):
                writes.append((rng.randrange(HISTORY_END, run_end - DAY_US), rng.choice(self.honest), _draft(text)))
                tags[len(writes) - 1] = ("honest", target["id"])
            if self.adversaries:
                for text in target["adv_texts"]:
                    tp = rng.randrange(max(half, t) + DAY_US, run_end - DAY_US)
                    writes.append((tp, rng.choice(self.adversaries), _draft(text)))
                    tags[len(writes) - 1] = ("poison", target["id"])
        ids = self._write(writes)
        for i, (kind, tid) in tags.items():
            (self.poison if kind == "poison" else self.honest_claims)[ids[i]] = tid
        self._at(run_end)
        self._deliver()
        for hub in (self.victim, self.witness):
            self.replicas[hub].node.governance.add_principal(Principal(READER, tenants=frozenset({TENANT})))

    def _write(self, writes: list[tuple[int, str, dict[str, Any]]]) -> list[str]:
        """Write in time order (each at its own time), then deliver; returns the ids in the order given."""
        order = sorted(range(len(writes)), key=lambda i: (writes[i][0], i))
        ids: list[str] = [""] * len(writes)
        for i in order:
            t, name, draft = writes[i]
            self._at(t)
            ids[i] = self._put(name, draft, t)
        self._deliver()
        return ids

    # -- measuring ---------------------------------------------------------------------------------------------------

    def frames(self, hub: str, consensus: bool, times: list[float] | None = None) -> list[dict[str, Any]]:
        """Every target question's receipt on ``hub`` (``times``: each frame's milliseconds appended, the first
        frame, which folds the ledger, included)."""
        rep = self.replicas[hub]
        c = Consensus(rep.store, rep, rep.node_id, Weights()) if consensus else None
        h = Hydrator(rep.node, consensus=c)
        now = self.net.clock.now() + DAY_US
        out = []
        for target in self.targets:
            t0 = time.perf_counter()
            hyd = h.hydrate(HydrationRequest(target["question"], READER, now, self.spec.budget))
            if times is not None:
                times.append((time.perf_counter() - t0) * 1e3)
            out.append(hyd.receipt)
        return out

    def top5(self, consensus: bool) -> float:
        """The share of attack texts among the victim's top-5 governed search results for the target questions."""
        rep = self.replicas[self.victim]
        retriever = rep.node.retriever
        retriever.consensus = Consensus(rep.store, rep, rep.node_id, Weights()) if consensus else None
        now = self.net.clock.now() + DAY_US
        bad = total = 0
        try:
            for target in self.targets:
                hits = rep.node.search(target["question"], READER, now, k=5)
                total += len(hits)
                bad += sum(h.asset.id in self.poison for h in hits)
        finally:
            retriever.consensus = None
        return round(bad / max(1, total), 4)

    def measure(self, receipts: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        poisoned = honest = 0
        tok_poison = tok_all = 0
        for target, r in zip(self.targets, receipts, strict=True):
            shown = [(f["unit"], f["tokens"]) for f in r["facts"]]
            tok_all += sum(t for _, t in shown)
            bad = [t for u, t in shown if self.poison.get(u) == target["id"] or u in self.poison]
            tok_poison += sum(bad)
            poisoned += bool(bad)
            honest += any(self.honest_claims.get(u) == target["id"] for u, _ in shown)
        n = max(1, len(self.targets))
        return {
            "poisoned_target_share": round(poisoned / n, 4),
            "poisoned_token_share": round(tok_poison / max(1, tok_all), 4),
            "honest_target_share": round(honest / n, 4),
        }

    def defectors(self) -> dict[str, Any]:
        """Per adversary in the victim's ledger: its weight, and how many contradicted claims took it from admitted
        to under the admission weight (None if it never was admitted)."""
        rep = self.replicas[self.victim]
        c = Consensus(rep.store, rep, rep.node_id, Weights())
        ledger = c.ledger(self.bid, self.net.clock.now() + DAY_US)
        assert ledger is not None
        ids = [self.replicas[a].node_id for a in self.adversaries]
        return {
            "admitted_at_end": sum(ledger.weight(i) >= ledger.w.admit for i in ids),
            "ever_admitted": sum(i in ledger.fell or ledger.weight(i) >= ledger.w.admit for i in ids),
            "strikes_to_fall_max": max((ledger.fell[i] for i in ids if i in ledger.fell), default=None),
            "honest_admitted_share": round(
                sum(ledger.weight(self.replicas[h].node_id) >= ledger.w.admit for h in self.honest) / len(self.honest),
                4,
            ),
        }


def run(data: str | Path, seed: int, spec: Spec) -> dict[str, Any]:
    targets = load(data)
    if spec.targets:
        targets = targets[: spec.targets]
    w = World(seed, spec, targets)
    w.build()
    base_ms: list[float] = []
    with_ms: list[float] = []
    w.frames(w.victim, False)  # warm: the records cache, as a running node has it
    base = w.frames(w.victim, False, base_ms)
    with_c = w.frames(w.victim, True, with_ms)
    witness = w.frames(w.witness, True)
    # Each member holds back its own claims from no frame of its own, so two members' frames may consider different
    # slots; a slot both resolved must be resolved byte for byte alike.
    compared = 0
    for a, b in zip(with_c, witness, strict=True):
        ra = {r["slot"]: canonical_json(r) for r in a.get("consensus", {}).get("records", [])}
        rb = {r["slot"]: canonical_json(r) for r in b.get("consensus", {}).get("records", [])}
        for slot in sorted(ra.keys() & rb.keys()):
            compared += 1
            if ra[slot] != rb[slot]:
                raise AssertionError(f"seed={seed}: the victim's and the witness's records of slot {slot} differ")
    if w.adversaries and not compared:
        raise AssertionError(f"seed={seed}: the witness resolved none of the victim's contested slots")
    out = {
        "targets": len(targets),
        **w.measure(with_c),
        "baseline": w.measure(base),
        "adversary_share": spec.adversary_share,
        "mode": spec.mode,
        "nodes": spec.nodes,
        "adversaries": len(w.adversaries),
        "poison_claims": len(w.poison),
        "honest_claims": len(w.honest_claims),
        "records": sum(len(r.get("consensus", {}).get("records", [])) for r in with_c),
        "records_compared_with_witness": compared,
        "search_top5_poison_share": w.top5(True),
        "baseline_search_top5_poison_share": w.top5(False),
        "ledger": w.defectors(),
        "hydrate_ms": {
            "consensus_p50": round(statistics.median(with_ms), 2) if with_ms else None,
            "baseline_p50": round(statistics.median(base_ms), 2) if base_ms else None,
            "ledger_fold_ms": round(with_ms[0] - base_ms[0], 1) if with_ms else None,
        },
        "seed": seed,
    }
    return out


__all__ = ["MODES", "Spec", "World", "load", "run", "twins"]
