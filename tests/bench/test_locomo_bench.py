"""The LoCoMo evidence-recall benchmark (bench/locomo.py): its parts on hand-made inputs, and a smoke run of its CLI
on a tiny LoCoMo-shaped file with the hash embedder (no model, no network)."""

from __future__ import annotations

import json
import random
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from gaml.bench import locomo
from gaml.node.core.tokens import HeuristicCounter
from gaml.node.home import make_embedder
from gaml.policy.errors import GamlError

# -- a tiny LoCoMo-shaped sample -------------------------------------------------------------------------------------


def tiny_sample() -> dict[str, Any]:
    return {
        "sample_id": "conv-tiny",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! I went to the support group yesterday."},
                {
                    "speaker": "Melanie",
                    "dia_id": "D1:2",
                    "text": "That sounds great. I took a pottery class on Sunday.",
                },
                {
                    "speaker": "Caroline",
                    "dia_id": "D1:3",
                    "text": "Look at this!",
                    "img_url": ["https://example.invalid/a.jpg"],
                    "blip_caption": "a photo of a painted bowl",
                },
            ],
            "session_2_date_time": "10:37 am on 27 June, 2023",
            "session_2": [
                {"speaker": "Melanie", "dia_id": "D2:1", "text": "We went camping at the lake with the kids."},
                {"speaker": "Caroline", "dia_id": "D2:2", "text": "I am researching adoption agencies now."},
            ],
        },
        "qa": [
            {
                "question": "When did Caroline go to the LGBTQ support group?",
                "answer": "7 May 2023",
                "evidence": ["D1:1"],
                "category": 2,
            },
            {
                "question": "What did Melanie do with her kids and at the pottery class?",
                "answer": "camping; pottery",
                "evidence": ["D1:2; D2:1", "D9:9"],
                "category": 1,
            },
            {"question": "What did Melanie adopt?", "adversarial_answer": "a dog", "evidence": ["D2:2"], "category": 5},
        ],
    }


def write_tiny(tmp_path: Path) -> Path:
    path = tmp_path / "locomo-tiny.json"
    path.write_text(json.dumps([tiny_sample()]))
    return path


# -- evidence ids ----------------------------------------------------------------------------------------------------


def test_split_evidence_splits_entries_holding_several_ids() -> None:
    """An evidence entry may hold several dia_ids separated by ';', ',' or spaces; repeats are dropped, order kept."""
    assert locomo.split_evidence(["D1:3"]) == ["D1:3"]
    assert locomo.split_evidence(["D8:6; D9:17"]) == ["D8:6", "D9:17"]
    assert locomo.split_evidence(["D2:1,D2:2", " D3:4  D1:1 ", "D2:1"]) == ["D2:1", "D2:2", "D3:4", "D1:1"]
    assert locomo.split_evidence([]) == []


def test_conversation_keeps_categories_one_to_four_and_counts_missing_evidence() -> None:
    """Category 5 is left out; evidence ids naming no turn are dropped from the question and counted; the turns come
    from the node's parser, image captions included, each with its item id."""
    conv = locomo.conversation_of(tiny_sample())
    assert [q.category for q in conv.questions] == [2, 1]
    assert conv.questions[1].evidence == ("D1:2", "D2:1")
    assert conv.missing_evidence == 1
    assert conv.sessions == 2
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert "[shares an image: a photo of a painted bowl]" in conv.turns[2].text
    assert conv.turns[0].line == "Caroline: Hey Mel! I went to the support group yesterday.\n"
    assert len({t.item_id for t in conv.turns}) == 5
    assert len(locomo.conversation_of(tiny_sample(), questions_max=1).questions) == 1


# -- the baselines ---------------------------------------------------------------------------------------------------


def test_fill_never_exceeds_the_budget_and_keeps_rank_order() -> None:
    """The greedy fill skips what does not fit and tries the next; what it takes stays in rank order within budget."""
    assert locomo.fill([0, 1, 2], [5, 10, 3], 8) == ([0, 2], 8)
    assert locomo.fill([2, 1, 0], [5, 10, 3], 2) == ([], 0)
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(0, 30)
        costs = [rng.randint(1, 60) for _ in range(n)]
        ranking = rng.sample(range(n), n)
        budget = rng.randint(1, 400)
        taken, spent = locomo.fill(ranking, costs, budget)
        assert spent == sum(costs[i] for i in taken) <= budget
        positions = [ranking.index(i) for i in taken]
        assert positions == sorted(positions)
        # Nothing left out would still have fitted after the last turn taken.
        assert all(costs[i] > budget - spent for i in ranking if i not in taken)


def test_rrf_fuses_ranks_by_reciprocal_sum() -> None:
    """score = Σ 1/(60 + rank): 0 gets 1/61 + 1/62, 2 gets 1/63 + 1/61, 1 gets 1/62 + 1/63; ties in turn order."""
    assert locomo.rrf([[0, 1, 2], [2, 0, 1]]) == [0, 2, 1]
    assert locomo.rrf([[0, 1], [1, 0]]) == [0, 1]
    assert locomo.rrf([[1, 0], [0, 1]]) == [0, 1]
    assert locomo.rrf([[3, 1, 0, 2]]) == [3, 1, 0, 2]


def test_bm25_ranks_the_exact_term_match_first() -> None:
    """A query sharing a rare term with one document ranks that document first; stopwords alone score nothing."""
    docs = [
        "Caroline: I went to the support group yesterday.",
        "Melanie: The kids loved the lake and the camping trip.",
        "Melanie: I took a pottery class on Sunday.",
        "Caroline: The painting is of a sunset over the lake.",
    ]
    bm25 = locomo.BM25(docs)
    assert bm25.rank("When did Melanie take the pottery class?")[0] == 2
    assert bm25.rank("camping")[0] == 1
    assert bm25.scores("the of a") == [0.0] * 4
    assert bm25.rank("zebra") == [0, 1, 2, 3]


def test_dense_rank_orders_by_cosine_with_ties_in_turn_order() -> None:
    """Dense ranking is by cosine to the query (scale does not matter); equal cosines keep turn order."""
    import numpy as np

    docs = locomo.unit_rows(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 3.0], [1.0, 1.0]], dtype=np.float32))
    assert locomo.dense_rank(np.array([0.0, 2.0]), docs) == [1, 2, 3, 0]


# -- what a frame holds ----------------------------------------------------------------------------------------------


def test_content_words_lower_split_drop_stopwords_and_stem_lightly() -> None:
    """The measures' words: lower-case, split on non-alphanumerics, stopwords out, plural and verb endings off."""
    assert locomo.content_words("The cats were painting; she PAINTED two boxes & classes in 2023!") == {
        "cat",
        "paint",
        "two",
        "box",
        "class",
        "2023",
    }
    assert locomo.stem("parties") == "party" and locomo.stem("class") == "class" and locomo.stem("sing") == "sing"
    assert locomo.content_words("the of a and") == frozenset()


def test_answer_and_evidence_held_count_words_in_the_frame() -> None:
    """An answer is held when all its content words are in the frame (its share otherwise); an evidence turn when at
    least 80 % of its words are."""
    frame = locomo.content_words("Caroline: I went to a support group on 7 May 2023 with my cats.")
    assert locomo.answer_share(locomo.content_words("7 May 2023"), frame) == 1.0
    assert locomo.answer_share(locomo.content_words("a cat and a dog"), frame) == 0.5
    assert locomo.answer_share(frozenset(), frame) is None
    turn = locomo.content_words("I went to the LGBTQ support group yesterday")  # went lgbtq support group yesterday
    assert locomo.evidence_held([turn], frame) == 0  # 3 of 5 words
    assert locomo.evidence_held([turn], frame | {"yesterday"}) == 1  # 4 of 5 = 80 %
    assert locomo.evidence_held([frozenset()], frame) == 1


def test_frame_body_leaves_out_the_envelope_tags() -> None:
    frame = '<gaml-memory receipt="r_1" source="gaml:x">\n## 8 May 2023 s\nm1 hello\n</gaml-memory>'
    assert locomo.frame_body(frame) == "## 8 May 2023 s\nm1 hello"
    assert locomo.frame_body("m1 only") == "m1 only"


def test_coverage_counts_covers_of_any_fact() -> None:
    """A turn is covered by provenance if any receipt fact covers its item, whatever its level."""
    dia = {"i1": "D1:1", "i2": "D1:2", "i3": "D1:3", "i4": "D2:1"}
    facts = [
        {"id": "i1", "level": "L0", "kind": "item", "covers": ["i1"], "tokens": 12},
        {"id": "s1", "level": "L1", "kind": "arc", "covers": ["i3", "i4"], "tokens": 20},
        {"id": "x", "level": "L0", "kind": "item", "covers": ["elsewhere"], "tokens": 3},
    ]
    assert locomo.covered(facts, dia) == {"D1:1", "D1:3", "D2:1"}
    assert locomo.unmapped(facts, dia) == 1
    assert locomo.recalled(("D1:1", "D2:1", "D3:3"), locomo.covered(facts, dia)) == 2


def test_summarize_means_over_questions_and_pools_evidence_turns() -> None:
    """Each measure per budget and category: answer held over questions whose answer has words, evidence held and
    coverage as the mean share per question (and pooled in ``*_micro``); rounded to 4 places."""
    Out = locomo.Outcome
    outcomes = [
        Out("bm25", 100, 1, evidence=3, covered=0, held=0, answer=0.5, tokens=90, latency_ms=1.0),
        Out("bm25", 100, 4, evidence=1, covered=1, held=1, answer=1.0, tokens=100, latency_ms=3.0),
        Out("bm25", 200, 1, evidence=3, covered=2, held=1, answer=None, tokens=180, latency_ms=2.0),
        Out("bm25", 200, 4, evidence=1, covered=1, held=0, answer=1.0, tokens=200, latency_ms=4.0),
    ]
    block = locomo.summarize(outcomes, ["bm25"], [100, 200])["bm25"]
    assert block["answer_held"] == {"100": 0.5, "200": 1.0}  # the None answer is left out
    assert block["answer_share"] == {"100": 0.75, "200": 1.0}
    assert block["evidence_held"] == {"100": 0.5, "200": 0.1667}  # (0 + 1) / 2, (1/3 + 0) / 2
    assert block["coverage"] == {"100": 0.5, "200": 0.8333}  # (0 + 1) / 2, (2/3 + 1) / 2
    assert block["evidence_held_micro"] == {"100": 0.25, "200": 0.25}
    assert block["coverage_micro"] == {"100": 0.25, "200": 0.75}
    assert block["evidence_held_by_category"]["1"] == {"100": 0.0, "200": 0.3333}
    assert block["answer_held_by_category"]["4"] == {"100": 1.0, "200": 1.0}
    assert block["coverage_by_category"]["2"] == {"100": None, "200": None}  # no such question
    assert block["tokens_used"] == {"100": 95.0, "200": 190.0}
    assert block["latency_ms"]["p50"] == 2.5


def test_measures_weigh_each_question_the_same() -> None:
    """A question with ten evidence turns counts as much as one with one; no outcomes, no figures."""
    Out = locomo.Outcome
    outcomes = [
        Out("dense", 100, 1, evidence=10, covered=10, held=10, answer=1.0, tokens=1, latency_ms=1.0),
        Out("dense", 100, 2, evidence=1, covered=0, held=0, answer=0.0, tokens=1, latency_ms=1.0),
    ]
    m = locomo.measures(outcomes)
    assert m["evidence_held"] == 0.5 and m["coverage"] == 0.5 and m["answer_held"] == 0.5
    assert m["evidence_held_micro"] == 0.9091
    assert set(locomo.measures([]).values()) == {None}


# -- token counters --------------------------------------------------------------------------------------------------


def test_make_counter_heuristic_by_default_and_bpe_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """--counter heuristic is node.tokens' HeuristicCounter; a BPE encoding is counted by node.bpe, and without
    bpe-openai asking for one fails with a GamlError that names the option and the package."""
    assert isinstance(locomo.make_counter("heuristic"), HeuristicCounter)
    try:
        import bpe_openai  # noqa: F401
    except ImportError:
        pass
    else:
        assert locomo.make_counter("cl100k_base").name == "cl100k_base"
    monkeypatch.setitem(sys.modules, "bpe_openai", None)  # an import of it now raises ImportError
    with pytest.raises(GamlError, match=r"--counter o200k_base: .*bpe-openai"):
        locomo.make_counter("o200k_base")


# -- hydration plumbing (with a fake hydrator) -----------------------------------------------------------------------


class FakeHydrator:
    """Stands in for node.hydrate.Hydrator: covers the first L0 item it finds, spends what it is told to."""

    overspend = 0

    def __init__(self, node: Any, counter: Any) -> None:
        self.node, self.counter = node, counter

    def hydrate(self, request: Any) -> Any:
        first = min(a.id for a in self.node.store.get_many(self.node.store.live_ids()) if "dia_id" in a.payload)
        facts = [{"id": first, "level": "L0", "kind": "item", "covers": [first], "tokens": 5}]
        receipt = {"facts": facts, "budget": {"total": request.budget, "spent": request.budget + self.overspend}}
        return types.SimpleNamespace(frame="…", receipt=receipt)


def test_ingest_maps_every_turn_to_its_item_and_hydration_checks_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The conversation ingested in a fresh home has one L0 item per turn carrying its dia_id; hydration outcomes map
    receipt covers back to turns, and a receipt spending more than its budget fails loudly."""
    monkeypatch.setattr(locomo, "Hydrator", FakeHydrator)
    conv = locomo.conversation_of(tiny_sample())
    ingested = locomo.ingest(conv, tmp_path / "home", make_embedder("hash"))
    try:
        assert ingested.dia_of_item == {t.item_id: t.dia_id for t in conv.turns}
        counter = HeuristicCounter()
        out, stray = locomo.run_hydration(conv, ingested, [50, 100], counter, False)
        assert stray == 0
        assert len(out) == 4
        assert all(o.method == "hydration" and o.tokens == o.budget for o in out)
        FakeHydrator.overspend = 1
        with pytest.raises(RuntimeError, match="overspent"):
            locomo.run_hydration(conv, ingested, [50], counter, False)
    finally:
        FakeHydrator.overspend = 0
        ingested.store.close()


# -- the CLI ---------------------------------------------------------------------------------------------------------


def test_main_smoke_on_a_tiny_file(tmp_path: Path) -> None:
    """The baselines run end to end on a tiny file: the JSON has the documented shape, recalls lie in [0, 1], and the
    Markdown (and the plot, with matplotlib) land next to the JSON."""
    out = tmp_path / "res" / "locomo.json"
    argv = ["--data", str(write_tiny(tmp_path)), "--budgets", "20,40,1000", "--json", str(out)]
    assert locomo.main([*argv, "--embedder", "hash", "--methods", "bm25,dense,hybrid,oracle"]) == 0
    R = json.loads(out.read_text())
    assert set(R["methods"]) == {"bm25", "dense", "hybrid", "oracle"}
    assert R["questions"] == 2
    assert R["evidence_turns"] == 3
    assert R["missing_evidence"] == 1
    assert R["conversations"] == 1
    assert R["budgets"] == [20, 40, 1000]
    assert R["categories"] == {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}
    assert R["embedder"] == "hash-v1-256"
    assert isinstance(R["counter"], str) and R["counter"]
    assert {"nproc", "python", "platform", "date"} <= set(R["machine"])
    for name, block in R["methods"].items():
        assert set(block) >= {*locomo.MEASURES, *locomo.MICRO, "latency_ms", "tokens_used"}
        assert set(block["latency_ms"]) == {"p50", "p99"}
        for key in (*locomo.MEASURES, *locomo.MICRO, "tokens_used"):
            assert set(block[key]) == {"20", "40", "1000"}, (name, key)
        for key in locomo.MEASURES:
            by = block[f"{key}_by_category"]
            assert set(by) == {"1", "2", "3", "4"}
            values = [*block[key].values()] + [v for c in by.values() for v in c.values()]
            assert all(v is None or 0.0 <= v <= 1.0 for v in values)
            assert by["4"] == {"20": None, "40": None, "1000": None}  # no such question
        assert block["evidence_held"]["1000"] == 1.0 and block["coverage"]["1000"] == 1.0  # the whole conversation
        assert all(block["tokens_used"][b] <= int(b) for b in block["tokens_used"])
    oracle = R["methods"]["oracle"]
    assert all(
        oracle["evidence_held"][b] >= R["methods"][m]["evidence_held"][b] for m in R["methods"] for b in ("20", "40")
    )
    md = out.with_suffix(".md").read_text()
    assert "| bm25 |" in md and "| oracle |" in md and "@1,000" in md
    assert locomo.MEASURES_NOTE in md and "**answer held**" in md and "**evidence held**" in md
    assert "| hydration |" not in md
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")


def test_main_with_missing_data_says_so_and_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A --data path that does not exist is reported, exit status 0, nothing written."""
    out = tmp_path / "out.json"
    assert locomo.main(["--data", str(tmp_path / "absent.json"), "--json", str(out)]) == 0
    assert f"LoCoMo data not found at {tmp_path / 'absent.json'}; pass --data" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_main_with_hydration_on_a_tiny_file(tmp_path: Path) -> None:
    """Hydration runs next to the baselines and never overspends its budget; the JSON has the shape the issue asks
    for ({"methods": {m: {"recall", "recall_by_category", "latency_ms": {p50, p99}}}, "questions": n}), and the
    Markdown shows hydration's strict recall on a row of its own."""
    out = tmp_path / "h.json"
    argv = ["--data", str(write_tiny(tmp_path)), "--budgets", "200,1000", "--json", str(out), "--embedder", "hash"]
    assert locomo.main([*argv, "--methods", "hydration,bm25"]) == 0
    R = json.loads(out.read_text())
    assert R["questions"] == 2
    assert set(R["methods"]) == {"hydration", "bm25"}
    for block in R["methods"].values():
        assert set(block["answer_held"]) == {"200", "1000"}
        assert all(set(by) == {"200", "1000"} for by in block["evidence_held_by_category"].values())
        assert set(block["latency_ms"]) == {"p50", "p99"}
    block = R["methods"]["hydration"]
    for key in (*locomo.MEASURES, *locomo.MICRO):
        assert all(v is None or 0.0 <= v <= 1.0 for v in block[key].values()), key
    assert block["coverage"]["1000"] == 1.0  # the whole conversation fits, and every turn is covered
    assert block["tokens_used"]["200"] <= 200
    assert R["unmapped_covers"] == 0
    md = out.with_suffix(".md").read_text()
    assert "| hydration |" in md


# -- the real data (optional) ----------------------------------------------------------------------------------------


def test_locomo_dev_set_counts(locomo_path: Path) -> None:
    """The development set parses into 3,435 turns and 885 scored questions; 3 evidence ids name no turn."""
    convs = [locomo.conversation_of(s) for s in locomo.load(locomo_path)]
    assert len(convs) == 6
    assert sum(len(c.turns) for c in convs) == 3435
    assert sum(len(c.questions) for c in convs) == 885
    assert sum(c.missing_evidence for c in convs) == 3
