"""The poisoning benchmark (simulations/poisoning.py) at a small size: the real core, replication over the simulated
network, consensus against the same frames without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gaml.simulations import poisoning
from gaml.simulations.__main__ import main


def test_fresh_adversaries_poison_the_baseline_but_not_the_consensus_frames(poison_path: Path) -> None:
    r = poisoning.run(poison_path, 3, poisoning.Spec(nodes=12, adversary_share=0.3, mode="fresh", targets=6))
    assert r["targets"] == 6 and r["adversaries"] == 4 and r["poison_claims"] == 30
    assert r["baseline"]["poisoned_target_share"] >= 0.8  # the attack works without consensus
    assert r["poisoned_target_share"] == 0.0 and r["poisoned_token_share"] == 0.0
    assert r["honest_target_share"] >= r["baseline"]["honest_target_share"]
    assert r["records"] > 0 and r["records_compared_with_witness"] > 0  # the witness agreed byte for byte
    # Search resolves contested slots but holds back no unadmitted claim: only attack texts without a twin remain.
    assert r["baseline_search_top5_poison_share"] > 0.3
    assert r["search_top5_poison_share"] <= r["baseline_search_top5_poison_share"] / 4


def test_without_adversaries_consensus_changes_nothing_the_frames_hold(poison_path: Path) -> None:
    r = poisoning.run(poison_path, 4, poisoning.Spec(nodes=10, adversary_share=0.0, targets=4))
    assert r["poison_claims"] == 0
    assert r["honest_target_share"] == r["baseline"]["honest_target_share"] == 1.0


def test_the_command_prints_one_json_object_last(
    poison_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "poisoning",
            "--data",
            str(poison_path),
            "--adversary-share",
            "0.2",
            "--seed",
            "2",
            "--nodes",
            "10",
            "--targets",
            "3",
            "--json",
            "--table",
            str(tmp_path / "t.md"),
        ]
    )
    assert code == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for k in (
        "targets",
        "poisoned_target_share",
        "poisoned_token_share",
        "honest_target_share",
        "baseline",
        "adversary_share",
        "seed",
    ):
        assert k in last
    assert last["seed"] == 2 and last["adversary_share"] == 0.2
    table = (tmp_path / "t.md").read_text().splitlines()
    row = next(line for line in table if line.startswith("| fresh | 20%"))
    assert f"| {last['poisoned_target_share']:.3f} |" in row


def test_bad_arguments_are_refused_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["poisoning", "--data", str(tmp_path / "missing.json")])
    assert e.value.code == 2 and "no attack file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"t1": {"question": "q"}}))
    with pytest.raises(ValueError, match="lacks question"):
        poisoning.load(bad)
    with pytest.raises(ValueError, match="adversary share"):
        poisoning.Spec(adversary_share=0.9)


def test_the_receipt_names_the_record_that_resolved_each_contested_fact(poison_path: Path) -> None:
    w = poisoning.World(5, poisoning.Spec(nodes=10, adversary_share=0.3, targets=2), poisoning.load(poison_path)[:2])
    w.build()
    (receipt, _) = w.frames(w.victim, True)
    c = receipt["consensus"]
    records = {r["record"]: r for r in c["records"]}
    resolved = [f for f in receipt["facts"] if "consensus" in f]
    assert resolved and c["rule"] == "gaml/consensus/1"
    for f in resolved:
        rec = records[f["consensus"]["record"]]
        assert f["consensus"]["candidates"] == len(rec["candidates"]) >= 2
        won = [x for x in rec["candidates"] if x["won"]]
        assert f["unit"] in {x["id"] for x in won} and f["unit"] not in w.poison
        lost = [x for x in rec["candidates"] if not x["won"]]
        assert all(x["id"] in c["contradicted"] and x["says"] for x in lost)  # kept, marked, and what they said
    assert not {f["unit"] for f in receipt["facts"]} & set(w.poison)
