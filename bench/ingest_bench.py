"""Ingestion benchmark: parsing, ingestion and curation of the LoCoMo development set on the real stack, against the
raw limits of its own dependencies on the same texts, in one run.

::

    .venv/bin/python -m gaml.bench.ingest_bench [--data ../shared/data/locomo/locomo-dev.json]
        [--embedder hash|minilm|both] [--repeat 3] [--repeat-minilm N] [--out bench/results] [--seed 0]

For each embedder, ``--repeat`` runs (medians reported), each in a fresh node home wired like ``node.home``
(RocksKV + FileBlobs + FileKeychain unlocked by a raw key + ``AdaptiveFactory(HnswFactory())``, opened by
``bench.store_bench.open_home``), with the pipeline ``gaml ingest`` builds (``Ingestor`` with the shipped privacy
rules, ``Ladder`` with the ``ExtractiveCurator`` and the default ``TierPolicy``):

1. parse: ``node.parsers.parse`` of the file (3,435 turns in 156 sessions);
2. ingest: ``Ingestor.ingest`` of every session (records/s over the 3,435 records). Where the time goes is measured
   by timing shims installed on this run's objects (the library is not modified): ``Ingestor._plan`` (parsing rules,
   privacy classification, SimHash), ``Ingestor._item`` (entity extraction), ``Ingestor._facts`` (fact extraction and
   temporal tracking, with its store reads): together *plan*; ``node.embedder.embed`` (*embed* where this thread
   calls it: the write path's texts not embedded ahead; *embed ahead* on ingestion's worker, beside everything
   else, so not part of the sum; *waiting for the worker*: ``Prefetched._settle``); ``node.store.put_many``
   (*commit*: sealing, signing, the synced RocksDB batch); the rest (*other*:
   ``Node.prepare``, tombstone and watermark reads, write evaluation without its embedding, principal registration);
3. curation: ``Ladder.curate`` of every pending source (items/s over the L0 items curated), split into compiling
   the rungs (``node.curate.curate_source``, shimmed in its module for the run; of which the curator's
   ``summarize``), embed (ahead, on the worker, and the wait for it, as for ingestion), commit and other (reading
   the items, building the rung assets, the curation state);
4. checkpoint: ``Store.checkpoint`` (index catch-up of the pending vectors + sealed snapshots), as ``gaml`` does when
   it closes the node.

Raw limits, on the same texts in the same run, interleaved with the runs above: plain rocksdict (raw mode) puts of the
records' texts under their item ids, in synced ``WriteBatch``es of the ingest batch size (256), like
``bench.store_bench``'s raw baseline; and the embedder alone on the records' texts, and on what ingestion embeds
for them (each item's passages: ``node.core.embed.text_passages``, 2.6 a LoCoMo turn),
in chunks of the same size: the raw limit of the embedding an ingest does.

Last, the pathological inputs of ``tests/node/test_extract.py`` and ``tests/node/test_privacy.py`` (long repetitive
texts, where a backtracking regex would blow up): the median time of ``Rules.classify`` and of the extraction
functions ingestion runs, per input.

Results: a Markdown table on stdout and in ``OUT/ingest-locomo.md``, the raw numbers in ``OUT/ingest-locomo.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gc
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rocksdict import Rdict, WriteBatch, WriteOptions

from gaml.bench.retrieve_bench import code_version
from gaml.bench.store_bench import (
    T0_MICROS,
    Secrets,
    close_raw,
    fs_type,
    log,
    machine,
    make_embedder,
    open_home,
    open_raw,
)
from gaml.node.core.embed import Embedder, Prefetched, text_passages
from gaml.node.core.memory import curate as curation
from gaml.node.core.memory.curate import ExtractiveCurator
from gaml.node.core.memory.ingest import IngestOptions, Ingestor
from gaml.node.core.memory.ladder import Ladder
from gaml.node.core.memory.tiers import TierPolicy
from gaml.node.core.node import Node
from gaml.node.core.text import extract
from gaml.node.core.text.parsers import parse
from gaml.node.core.text.privacy import Rules
from gaml.node.core.text.records import Source
from gaml.policy.model import item_id
from tests.node.test_extract import PATHOLOGICAL as PATHOLOGICAL_EXTRACT
from tests.node.test_privacy import PATHOLOGICAL as PATHOLOGICAL_PRIVACY

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
BATCH = IngestOptions(owner="x").batch  # the ingest batch size: the raw baselines use the same
OWNER = "alice"


def rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


# -- timing shims ----------------------------------------------------------------------------------------------------


class Stages:
    """Seconds spent in named stages, with call and item counts, collected by shims around library calls."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: Counter[str] = Counter()
        self.items: Counter[str] = Counter()

    def wrap(self, name: str, fn: Callable[..., Any], count: Callable[..., int] | None = None) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0
                self.calls[name] += 1
                if count is not None:
                    self.items[name] += count(*args, **kwargs)

        return timed

    def shim(self, obj: Any, attr: str, name: str, count: Callable[..., int] | None = None) -> None:
        """Replace ``obj.attr`` (a bound method) on this object only by a timed call of the original."""
        setattr(obj, attr, self.wrap(name, getattr(obj, attr), count))

    def take(self) -> dict[str, Any]:
        """The stages so far (then reset)."""
        out = {
            "seconds": dict(self.seconds),
            "calls": dict(self.calls),
            "items": dict(self.items),
        }
        self.seconds, self.calls, self.items = {}, Counter(), Counter()
        return out


@dataclasses.dataclass
class TimedEmbedder:
    """``node.embedder`` for a run: the embedder, its ``embed`` timed as the ``embed`` stage."""

    inner: Embedder
    stages: Stages

    def __post_init__(self) -> None:
        self.id = self.inner.id
        self.dim = self.inner.dim
        self._embed = self.stages.wrap("embed", self.inner.embed, lambda texts: len(texts))

        self._ahead = self.stages.wrap("embed_ahead", self.inner.embed, lambda texts: len(texts))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out: np.ndarray = (self._embed if threading.current_thread() is threading.main_thread() else self._ahead)(texts)
        return out


# -- one run ---------------------------------------------------------------------------------------------------------


def run_gaml(home: Path, secrets: Secrets, emb: Embedder, data: bytes, name: str) -> dict[str, Any]:
    """Parse, ingest, curate and checkpoint in a fresh home; the times, the stages and the counts."""
    gc.collect()
    t0 = time.perf_counter()
    sources = parse(data, name)
    t_parse = time.perf_counter() - t0
    records = sum(len(s.records) for s in sources)

    store = open_home(home, secrets)
    stages = Stages()
    node = Node(store, emb)
    node.embedder = TimedEmbedder(emb, stages)
    stages.shim(store, "put_many", "commit", lambda assets, *a, **kw: len(assets))
    ingestor = Ingestor(node, Rules.load_default())
    for attr, stage in (("_plan", "plan_rules"), ("_item", "plan_item"), ("_facts", "plan_facts")):
        stages.shim(ingestor, attr, stage)
    curator = ExtractiveCurator()
    stages.shim(curator, "summarize", "curator")
    ladder = Ladder(node, ingestor, curator, TierPolicy())
    opts = IngestOptions(owner=OWNER)
    # The ladder calls node.curate.curate_source through the module: shimmed for this run only, restored below.
    compile_rungs = curation.curate_source
    curation.curate_source = stages.wrap("compile", compile_rungs)
    settle = Prefetched._settle  # ingestion waiting for its worker's call: shimmed on the class for this run only
    Prefetched._settle = stages.wrap("wait", settle)  # type: ignore[method-assign]
    try:
        gc.collect()
        t0 = time.perf_counter()
        report = ingestor.ingest(sources, opts, T0_MICROS)
        t_ingest = time.perf_counter() - t0
        ingest_stages = stages.take()

        gc.collect()
        t0 = time.perf_counter()
        cur = ladder.curate(T0_MICROS)
        t_curate = time.perf_counter() - t0
        curate_stages = stages.take()

        t0 = time.perf_counter()
        snapshots = store.checkpoint()
        t_checkpoint = time.perf_counter() - t0
        stats = store.stats()
    finally:
        curation.curate_source = compile_rungs
        Prefetched._settle = settle  # type: ignore[method-assign]
        store.close()
    if report.records != records or cur.sources != len(sources):
        raise RuntimeError(f"ingested {report.records} of {records} records, curated {cur.sources} sources")
    return {
        "records": records,
        "sources": len(sources),
        "parse_s": t_parse,
        "ingest_s": t_ingest,
        "curate_s": t_curate,
        "checkpoint_s": t_checkpoint,
        "snapshots": snapshots,
        "report": {k: v for k, v in report.to_json().items() if k not in ("dirty", "rewritten")},
        "curation": cur.to_json(),
        "ingest_stages": ingest_stages,
        "curate_stages": curate_stages,
        "assets": stats.assets,
        "journal_seq": stats.journal_seq,
    }


def run_raw_puts(path: Path, keys: Sequence[bytes], values: Sequence[bytes]) -> float:
    """Plain rocksdict: the texts under their ids, one synced WriteBatch per ``BATCH`` records."""
    db: Rdict = open_raw(path)
    wo = WriteOptions()
    wo.sync = True
    gc.collect()
    t = 0.0
    try:
        for i in range(0, len(keys), BATCH):
            t0 = time.perf_counter()
            wb = WriteBatch(raw_mode=True)
            for j in range(i, min(i + BATCH, len(keys))):
                wb.put(keys[j], values[j])
            db.write(wb, wo)
            t += time.perf_counter() - t0
    finally:
        close_raw(db)
    return t


def run_embed_alone(emb: Embedder, texts: Sequence[str]) -> float:
    gc.collect()
    t0 = time.perf_counter()
    for i in range(0, len(texts), BATCH):
        emb.embed(texts[i : i + BATCH])
    return time.perf_counter() - t0


def bench_embedder(name: str, repeat: int, data: bytes, data_name: str, secrets: Secrets, work: Path) -> dict[str, Any]:
    emb = make_embedder(name)
    emb.embed(["warm up: load the model before the clock starts"])
    sources: list[Source] = parse(data, data_name)
    keys = [bytes.fromhex(item_id(s.source_id, r.position)) for s in sources for r in s.records]
    texts = [r.text for s in sources for r in s.records]
    passages = [t for s in sources for r in s.records for t in text_passages(r.text, r.speaker)]
    values = [t.encode() for t in texts]
    runs: list[dict[str, Any]] = []
    raw_s: list[float] = []
    embed_s: list[float] = []
    passages_s: list[float] = []
    for r in range(repeat):
        raw_path = work / f"raw-{name}-{r}"
        raw_s.append(run_raw_puts(raw_path, keys, values))
        shutil.rmtree(raw_path, ignore_errors=True)
        embed_s.append(run_embed_alone(emb, texts))
        passages_s.append(run_embed_alone(emb, passages))
        home = work / f"home-{name}-{r}"
        runs.append(run_gaml(home, secrets, emb, data, data_name))
        shutil.rmtree(home, ignore_errors=True)
        g = runs[-1]
        log(
            f"{name} run {r + 1}/{repeat}: parse {g['parse_s']:.2f} s, ingest {rate(g['records'], g['ingest_s']):,.0f} "
            f"records/s, curate {rate(g['curation']['items'], g['curate_s']):,.0f} items/s, checkpoint "
            f"{g['checkpoint_s']:.2f} s; raw puts {rate(len(keys), raw_s[-1]):,.0f}/s, embedder alone "
            f"{rate(len(texts), embed_s[-1]):,.0f} texts/s, on the passages "
            f"{rate(len(passages), passages_s[-1]):,.0f}/s"
        )
    out = summarize(name, emb, runs, raw_s, embed_s, len(texts))
    out["passages"] = len(passages)
    out["embed_passages_alone_s"] = list(passages_s)
    out["embed_passages_alone_per_s"] = rate(len(passages), med(passages_s))
    out["ratio_ingest_vs_embed_passages_alone"] = med(passages_s) / out["ingest_s"]
    return out


def med(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def stage_medians(runs: Sequence[dict[str, Any]], key: str, total_key: str) -> dict[str, Any]:
    """Median seconds per stage (and the unmeasured rest), with the median call and item counts."""
    names = sorted({n for r in runs for n in r[key]["seconds"]})
    out: dict[str, Any] = {}
    for n in names:
        out[n] = {
            "s": med([r[key]["seconds"].get(n, 0.0) for r in runs]),
            "calls": med([r[key]["calls"].get(n, 0) for r in runs]),
            "items": med([r[key]["items"].get(n, 0) for r in runs]),
        }
    out["other"] = {
        "s": med([r[total_key] - sum(v for k, v in r[key]["seconds"].items() if k not in NESTED) for r in runs])
    }
    return out


def summarize(
    name: str, emb: Embedder, runs: Sequence[dict[str, Any]], raw_s: Sequence[float], embed_s: Sequence[float], n: int
) -> dict[str, Any]:
    records = runs[0]["records"]
    items = runs[0]["curation"]["items"]
    ingest_s, curate_s = med([r["ingest_s"] for r in runs]), med([r["curate_s"] for r in runs])
    ingest_rate = rate(records, ingest_s)
    raw_rate, embed_rate = rate(n, med(raw_s)), rate(n, med(embed_s))
    ist = stage_medians(runs, "ingest_stages", "ingest_s")
    plan_s = med([sum(r["ingest_stages"]["seconds"].get(k, 0.0) for k in PLAN) for r in runs])
    return {
        "embedder": emb.id,
        "dim": emb.dim,
        "repeat": len(runs),
        "records": records,
        "sources": runs[0]["sources"],
        "parse_s": med([r["parse_s"] for r in runs]),
        "parse_records_per_s": rate(records, med([r["parse_s"] for r in runs])),
        "ingest_s": ingest_s,
        "ingest_records_per_s": ingest_rate,
        "curate_s": curate_s,
        "curate_items": items,
        "curate_items_per_s": rate(items, curate_s),
        "checkpoint_s": med([r["checkpoint_s"] for r in runs]),
        "end_to_end_s": med([r["parse_s"] + r["ingest_s"] + r["curate_s"] + r["checkpoint_s"] for r in runs]),
        "ingest_plan_s": plan_s,
        "ingest_stages": ist,
        "curate_stages": stage_medians(runs, "curate_stages", "curate_s"),
        "raw_puts_s": list(raw_s),
        "raw_puts_per_s": raw_rate,
        "embed_alone_s": list(embed_s),
        "embed_alone_per_s": embed_rate,
        "ratio_ingest_vs_raw_puts": ingest_rate / raw_rate,
        "ratio_ingest_vs_embed_alone": ingest_rate / embed_rate,
        "report": runs[0]["report"],
        "curation": runs[0]["curation"],
        "assets": runs[0]["assets"],
        "journal_seq": runs[0]["journal_seq"],
        "snapshots": runs[0]["snapshots"],
        "runs": [{k: v for k, v in r.items() if k not in ("report", "curation")} for r in runs],
    }


PLAN = ("plan_rules", "plan_item", "plan_facts")
# stages timed inside another stage (the curator inside compile), or beside them on another thread (embed ahead)
NESTED = frozenset({"curator", "embed_ahead"})


# -- pathological inputs ---------------------------------------------------------------------------------------------


def extract_all(text: str) -> None:
    """The extraction functions ingestion and curation call on a text (as tests/node/test_extract.py's analyse)."""
    extract.sentences(text)
    extract.head_tail(text, 60)
    extract.entities(text)
    extract.keywords(text)
    extract.facts(text, "caroline")
    extract.cues(text)
    extract.is_noise(text)
    extract.is_goal(text)
    extract.goal_text(text)
    extract.is_remember(text)
    extract.contamination(text)
    extract.simhash(text)


def time_median(fn: Callable[[str], Any], text: str, runs: int) -> float:
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(text)
        ts.append(time.perf_counter() - t0)
    return med(ts)


def describe(text: str) -> str:
    """A short label: the repeated unit and the count (``'a.' x 2500``)."""
    for size in range(1, 40):
        unit = text[:size]
        if len(text) % size == 0 and unit * (len(text) // size) == text:
            return f"{unit!r} × {len(text) // size}"
    head = text[:31]
    return f"{head!r} + {len(text) - len(head)} more"


def bench_pathological(runs: int) -> list[dict[str, Any]]:
    rules = Rules.load_default()
    out = []
    inputs = list(dict.fromkeys([*PATHOLOGICAL_EXTRACT, *PATHOLOGICAL_PRIVACY]))  # union, first occurrence order
    for text in inputs:
        out.append(
            {
                "input": describe(text),
                "chars": len(text),
                "from": "+".join(
                    t
                    for t, group in (("extract", PATHOLOGICAL_EXTRACT), ("privacy", PATHOLOGICAL_PRIVACY))
                    if text in group
                ),
                "classify_ms": 1000 * time_median(rules.classify, text, runs),
                "extract_ms": 1000 * time_median(extract_all, text, runs),
            }
        )
    return out


# -- main ------------------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gaml.bench.ingest_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the LoCoMo development set (locomo-dev.json)")
    p.add_argument("--embedder", choices=("hash", "minilm", "both"), default="both")
    p.add_argument("--repeat", type=int, default=3, help="runs per embedder (medians reported)")
    p.add_argument("--repeat-minilm", type=int, default=None, help="runs for MiniLM (default: --repeat)")
    p.add_argument("--pathological-runs", type=int, default=5, help="timed calls per pathological input (median)")
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tmp", type=Path, default=None, help="where the temporary homes go (default: system temp)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.repeat <= 0 or (args.repeat_minilm is not None and args.repeat_minilm <= 0) or args.pathological_runs <= 0:
        raise SystemExit("--repeat, --repeat-minilm and --pathological-runs must be positive")
    if not args.data.is_file():
        raise SystemExit(
            f"LoCoMo data not found at {args.data}: pass --data PATH (the file locomo-dev.json of "
            "../shared/data/locomo/, six LoCoMo conversations; see its README.md)"
        )
    started = dt.datetime.now(dt.UTC)
    load_before = os.getloadavg()
    code = code_version()
    work = Path(tempfile.mkdtemp(prefix="gaml-ingest-bench-", dir=args.tmp))
    tmp_fs = fs_type(work)
    log(f"temporary homes in {work} ({tmp_fs})")
    try:
        data = args.data.read_bytes()
        secrets = Secrets(args.seed)
        names = ("hash", "minilm") if args.embedder == "both" else (args.embedder,)
        R: dict[str, Any] = {"embedders": {}}
        for name in names:
            repeat = args.repeat_minilm if name == "minilm" and args.repeat_minilm is not None else args.repeat
            t0 = time.perf_counter()
            R["embedders"][name] = bench_embedder(name, repeat, data, args.data.name, secrets, work)
            R["embedders"][name]["wall_s"] = time.perf_counter() - t0
        R["pathological"] = bench_pathological(args.pathological_runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    R["data"] = {"path": str(args.data), "bytes": len(data)}
    R["machine"] = {**machine(started, tmp_fs), "loadavg_before_after": [load_before, os.getloadavg()]}
    R["code"] = code
    R["args"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    md = render(R)
    print(md)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ingest-locomo.md").write_text(md)
    (args.out / "ingest-locomo.json").write_text(json.dumps(R, indent=1) + "\n")
    log(f"wrote {args.out / 'ingest-locomo.md'} and {args.out / 'ingest-locomo.json'}")
    return 0


def share(x: float) -> str:
    """A ratio as a percentage with two significant digits (0.013%, 7.0%, 73%)."""
    return f"{100 * x:.2g}%" if x < 0.1 else f"{x:.1%}"


def render(R: dict[str, Any]) -> str:
    m, code, E = R["machine"], R["code"], R["embedders"]
    names = list(E)
    first = E[names[0]]
    dirty = (
        f" + uncommitted changes to {', '.join(code['dirty'])} (digest {code['dirty_digest']})"
        if code["dirty"]
        else ", clean"
    )

    def row(label: str, fmt: Callable[[dict[str, Any]], str]) -> str:
        return f"| {label} | " + " | ".join(fmt(E[n]) for n in names) + " |"

    def stage(where: str, key: str, total: str) -> Callable[[dict[str, Any]], str]:
        def fmt(e: dict[str, Any]) -> str:
            s = e[where][key]["s"] if key in e[where] else 0.0
            return f"{s:.2f} s ({s / e[total]:.0%})"

        return fmt

    def plan(e: dict[str, Any]) -> str:
        return f"{e['ingest_plan_s']:.2f} s ({e['ingest_plan_s'] / e['ingest_s']:.0%})"

    def counted(where: str, key: str) -> Callable[[dict[str, Any]], str]:
        return lambda e: f"{e[where].get(key, {}).get('items', 0):,.0f}"

    lines = [
        "# Ingestion benchmark: LoCoMo development set",
        "",
        f"{m['date']} · {m['nproc']} cores · Python {m['python']} · "
        + " · ".join(f"{k} {v}" for k, v in m["packages"].items())
        + f" · temp fs {m['tmp_fs']} · 1-min load average {m['loadavg_before_after'][0][0]:.2f} before, "
        f"{m['loadavg_before_after'][1][0]:.2f} after",
        "",
        f"Args: `{' '.join(f'--{k} {v}' for k, v in R['args'].items() if v not in (None, False))}`. "
        f"Code: commit {code['commit']}{dirty}.",
        "",
        f"Data: {R['data']['path']} ({R['data']['bytes']:,} bytes): {first['records']:,} records in "
        f"{first['sources']} sessions. Ingest: {first['report']['items']:,} items and {first['report']['facts']:,} "
        f"facts ({first['report']['written']:,} writes); curation: {first['curation']['rungs']:,} rungs from "
        f"{first['curation']['items']:,} items. Medians of "
        + ", ".join(f"{e['repeat']} runs ({n})" for n, e in E.items())
        + ", each in a fresh home.",
        "",
        "| measurement | " + " | ".join(f"{n} ({E[n]['embedder']})" for n in names) + " |",
        "|---|" + "---:|" * len(names),
        row("parse (records/s)", lambda e: f"{e['parse_records_per_s']:,.0f}"),
        row("**ingest (records/s)**", lambda e: f"**{e['ingest_records_per_s']:,.0f}**"),
        row("curation (items/s)", lambda e: f"{e['curate_items_per_s']:,.0f}"),
        row("raw rocksdict puts of the texts, synced batches of 256 (/s)", lambda e: f"{e['raw_puts_per_s']:,.0f}"),
        row("embedder alone on the texts, chunks of 256 (texts/s)", lambda e: f"{e['embed_alone_per_s']:,.0f}"),
        row("ingest ÷ raw rocksdict puts", lambda e: share(e["ratio_ingest_vs_raw_puts"])),
        row(
            "embedder alone on the items' passages (what ingestion embeds), chunks of 256 (passages/s)",
            lambda e: f"{e['embed_passages_alone_per_s']:,.0f} ({e['passages']:,})",
        ),
        row("ingest ÷ embedder alone", lambda e: share(e["ratio_ingest_vs_embed_alone"])),
        row(
            "ingest ÷ embedder alone on the passages (time)",
            lambda e: share(e["ratio_ingest_vs_embed_passages_alone"]),
        ),
        row(
            "end to end: parse + ingest + curate + checkpoint (s)",
            lambda e: f"{e['end_to_end_s']:.1f}",
        ),
        "",
        "Where the time goes (median seconds, share of the phase; stages are timing shims on this run's objects):",
        "",
        "| stage | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
        row("parse", lambda e: f"{e['parse_s']:.2f} s"),
        row("ingest total", lambda e: f"{e['ingest_s']:.2f} s"),
        row("· plan: extraction + privacy classification", plan),
        row("·· parsing rules + classify + SimHash (`_plan`)", stage("ingest_stages", "plan_rules", "ingest_s")),
        row("·· entities (`_item`)", stage("ingest_stages", "plan_item", "ingest_s")),
        row("·· facts + temporal tracking (`_facts`)", stage("ingest_stages", "plan_facts", "ingest_s")),
        row(
            "· embed ahead, on a worker beside the rest (not in the sum)",
            stage("ingest_stages", "embed_ahead", "ingest_s"),
        ),
        row("·· texts embedded ahead", counted("ingest_stages", "embed_ahead")),
        row("· waiting for the worker", stage("ingest_stages", "wait", "ingest_s")),
        row("· embed on the write path (`node.embedder.embed`)", stage("ingest_stages", "embed", "ingest_s")),
        row("·· texts embedded there", counted("ingest_stages", "embed")),
        row("· commit (`store.put_many`)", stage("ingest_stages", "commit", "ingest_s")),
        row("·· assets committed", counted("ingest_stages", "commit")),
        row("· other", stage("ingest_stages", "other", "ingest_s")),
        row("curation total", lambda e: f"{e['curate_s']:.2f} s"),
        row("· compile rungs (`curate_source`)", stage("curate_stages", "compile", "curate_s")),
        row("·· of which the curator (`summarize`)", stage("curate_stages", "curator", "curate_s")),
        row(
            "· embed ahead, on a worker beside the rest (not in the sum)",
            stage("curate_stages", "embed_ahead", "curate_s"),
        ),
        row("· waiting for the worker", stage("curate_stages", "wait", "curate_s")),
        row("· embed on the write path", stage("curate_stages", "embed", "curate_s")),
        row("· commit", stage("curate_stages", "commit", "curate_s")),
        row("· other (item reads, rung assets, curation state)", stage("curate_stages", "other", "curate_s")),
        row("checkpoint (index catch-up + snapshots)", lambda e: f"{e['checkpoint_s']:.2f} s"),
        "",
        "Plan = `Ingestor._plan` + `_item` + `_facts`; other = `Node.prepare`, tombstone and watermark reads, write "
        "evaluation without its embedding, principal registration. Raw rocksdict: raw mode, default column family, "
        "each record's text under its item id, one `WriteBatch` per 256 records, `sync=True`.",
        "",
        f"Pathological inputs (tests/node/test_extract.py, tests/node/test_privacy.py): median of "
        f"{R['args']['pathological_runs']} calls.",
        "",
        "| input | chars | from | `Rules.classify` (ms) | extraction (ms) |",
        "|---|---:|---|---:|---:|",
    ]
    for p in R["pathological"]:
        label = p["input"].replace("|", "\\|").replace("`", "\\`")
        lines.append(f"| {label} | {p['chars']:,} | {p['from']} | {p['classify_ms']:.2f} | {p['extract_ms']:.2f} |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
