"""Retrieval benchmark: GAML's governed search against raw hnswlib, on the same vectors in one run.

::

    .venv/bin/python -m gaml.bench.retrieve_bench [--n 100000] [--queries 500] [--k 10] [--seed 0] [--out bench/results]

Data: ``--n`` seeded synthetic assets (``HashEmbedder``, 256 dims; sentences from a seeded vocabulary, as in
``bench.store_bench``) spread evenly-ish (uniformly at random, seeded) over 50 partitions: 10 tenants x
``tenant_private``, 20 owners x ``user_private`` and the same 20 owners x ``trusted_devices``. They are written into a
fresh real node home (RocksKV + FileBlobs + FileKeychain + ``AdaptiveFactory(HnswFactory())``) with ``Node.build``,
``Node.prepare`` and ``Store.put_many(..., sign=True)`` in batches (what ``Node.put`` does), then ``node.checkpoint()``
indexes every partition (``AdaptiveIndex``: exact up to 2,048 vectors, HNSW above). At N = 100,000 a partition holds
about 2,000 assets, right at that threshold, so most stay exact; ``--threshold`` lowers it for this run only (the
output is then suffixed ``-t<threshold>``) to put every partition behind HNSW.

The caller ``u0`` owns two partitions (its ``user_private`` and ``trusted_devices``) and is a member of tenants t0, t1
and t2: five readable partitions. Every asset has inference policy ``private_nodes`` or ``local_only``; searches run
for ``read`` at ``this_device``, so ``u0`` may read all of those five partitions and nothing else.

Measured per query, interleaved in a seeded random order, single-threaded (p50 / p99 over ``--queries`` seeded
queries after ``--warmup`` untimed ones):

1. ``Retriever.search(mode="dense", log=False)`` (it embeds the query text itself; the embedding alone is timed too);
2. ``Retriever.search(mode="hybrid", log=False)`` (dense + BM25, fused);
3. ``Retriever.search(mode="hybrid", log=True)`` (plus an access-log receipt per query, as the product does);
4. raw hnswlib on the five readable partitions only: one ``hnswlib.Index(space="cosine")`` each, same M /
   ef_construction / seed / threads, ``set_ef(128)``, ``knn_query(q, k)`` on each, merged top k;
5. raw hnswlib, one shared index over all N vectors, ``knn_query(q, k, filter=lambda label: label in allowed)``.

Recall@k (dense methods) is against exact numpy search over the five partitions' vectors, tie-aware. Afterwards a
cProfile of ``--profile-queries`` governed hybrid searches (``log=True``) says where governed search spends its time.

Results: a Markdown table on stdout and in ``OUT/retrieve-N.md``, the raw numbers in ``OUT/retrieve-N.json``.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import gc
import hashlib
import heapq
import io
import json
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np
from tqdm import tqdm

from gaml.bench.store_bench import (
    T0_MICROS,
    TYPES,
    Corpus,
    Secrets,
    bar,
    embed_all,
    fs_type,
    log,
    machine,
    open_home,
    pct,
    rate,
)
from gaml.node.core.access.retrieve import Response, SearchRequest
from gaml.node.core.embed import HashEmbedder
from gaml.node.core.node import Node
from gaml.node.core.store.store import Store
from gaml.node.core.store.vectors import DEFAULT_EXACT_THRESHOLD
from gaml.node.shells.hnsw_index import HnswFactory
from gaml.policy.access import Location, Permission, Principal
from gaml.policy.model import Asset
from gaml.policy.partitions import partition_of

N_TENANTS, N_OWNERS = 10, 20
CALLER, CALLER_TENANTS = "u0", ("t0", "t1", "t2")
INFERENCE = ("private_nodes", "local_only")
HNSW_SEED = 100  # HnswIndex's default seed


def owner_tenant(u: int) -> str:
    return f"t{u % N_TENANTS}"


def plan() -> list[tuple[str, str]]:
    """The 50 partitions as (privacy scope, tenant or owner): 10 tenant_private, 20 user_private, 20 trusted_devices."""
    return (
        [("tenant_private", f"t{t}") for t in range(N_TENANTS)]
        + [("user_private", f"u{u}") for u in range(N_OWNERS)]
        + [("trusted_devices", f"u{u}") for u in range(N_OWNERS)]
    )


def readable(name: str) -> bool:
    """The partitions ``u0`` (member of t0, t1, t2) reads in full, by name."""
    _, _, boundary = name.partition("|")
    kind, _, who = boundary.partition(":")
    return (kind == "owner" and who == CALLER) or (kind == "tenant" and who in CALLER_TENANTS)


def draft(corpus: Corpus, rng: random.Random, i: int, part: tuple[str, str]) -> dict[str, Any]:
    scope, who = part
    if scope == "tenant_private":
        t = int(who[1:])
        owner, tenant = f"u{rng.choice((t, t + N_TENANTS))}", who  # one of the tenant's two members
    else:
        owner, tenant = who, ""
    d: dict[str, Any] = {
        "asset_type": rng.choices([t for t, _ in TYPES], weights=[w for _, w in TYPES])[0],
        "payload": {"text": corpus.sentence()},
        "owner_id": owner,
        "privacy_scope": scope,
        "inference_policy": rng.choice(INFERENCE),
        "entities": rng.sample(corpus.entities, rng.randint(1, 3)),
        "tags": rng.sample(corpus.tags, rng.randint(1, 3)),
        "created_at": T0_MICROS + i * 1_000_000 + rng.randint(0, 999_999),
        "confidence_score": round(rng.uniform(0.5, 1.0), 3),
    }
    if tenant:
        d["tenant_scope"] = tenant
    return d


def raw_index(mat: np.ndarray, labels: np.ndarray, kw: dict[str, Any], ef: int) -> hnswlib.Index:
    idx = hnswlib.Index(space="cosine", dim=mat.shape[1])
    idx.init_index(max_elements=len(mat), ef_construction=kw["ef_construction"], M=kw["m"], random_seed=HNSW_SEED)
    idx.add_items(mat, labels, num_threads=kw["threads"])
    idx.set_ef(ef)
    return idx


def summary(xs: Sequence[float]) -> dict[str, float]:
    return {"p50": pct(xs, 50), "p99": pct(xs, 99), "mean": statistics.fmean(xs)}


# -- profile -------------------------------------------------------------------------------------------------------


def profile_points() -> list[tuple[str, Callable[..., Any]]]:
    """(label, function): the stages of governed search, for a per-query breakdown of the profile.

    Looked up by name, so that a stage the code under test no longer has is left out rather than failing the run.
    """
    from gaml.node.core.access import retrieve
    from gaml.node.core.access.governance import Governance
    from gaml.node.core.store.lexical import LexicalIndex
    from gaml.node.core.store.vectors import ExactIndex
    from gaml.node.shells.hnsw_index import HnswIndex
    from gaml.policy import access

    R = retrieve.Retriever
    wanted: tuple[tuple[str, Any, str], ...] = (
        ("Retriever.search (total)", R, "search"),
        ("1 identity: Governance.principal", Governance, "principal"),
        ("1 identity: Governance.grants_for", Governance, "grants_for"),
        ("2 partitions: Retriever._partitions", R, "_partitions"),
        ("3 policy: Retriever._authorize", R, "_authorize"),
        ("3 policy: decide (one per policy group)", access, "decide"),
        ("4-6 trust, prefilter, temporal: _filter", retrieve, "_filter"),
        ("6 temporal: Retriever._superseded (per id)", R, "_superseded"),
        ("6 temporal: Retriever._temporal", R, "_temporal"),
        ("7 relevance: Retriever.relevance", R, "relevance"),
        ("7 dense: HashEmbedder.embed (query)", HashEmbedder, "embed"),
        ("7 dense: Store.dense_search", Store, "dense_search"),
        ("7 dense: HnswIndex.search", HnswIndex, "search"),
        ("7 dense: ExactIndex.search", ExactIndex, "search"),
        ("7 lexical: LexicalIndex.search", LexicalIndex, "search"),
        (
            "7 lexical: LexicalIndex._postings (in memory; read from RocksDB once per partition)",
            LexicalIndex,
            "_postings",
        ),
        ("7 lexical: Store.sid (id encryption)", Store, "sid"),
        ("7 lexical: Store.id_of (sid decryption)", Store, "id_of"),
        ("8 governor: Retriever._govern", R, "_govern"),
        ("8 governor: Store.get_many (read + decrypt k records)", Store, "get_many"),
        ("receipt: Retriever._log", R, "_log"),
    )
    return [(label, getattr(owner, name)) for label, owner, name in wanted if hasattr(owner, name)]


def profile_summary(stats: pstats.Stats, queries: int) -> dict[str, Any]:
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    points: dict[str, dict[str, float]] = {}
    for label, func in profile_points():
        code = func.__code__
        _c, n, _t, cum, _ = raw.get((code.co_filename, code.co_firstlineno, code.co_name), (0, 0, 0.0, 0.0, None))
        points[label] = {"calls_per_query": n / queries, "cum_ms_per_query": 1000 * cum / queries}
    top = sorted(raw.items(), key=lambda kv: -kv[1][2])[:25]
    tottime = [
        {
            "function": f"{Path(file).name}:{line}({fn})",
            "calls_per_query": n / queries,
            "tot_ms_per_query": 1000 * t / queries,
            "cum_ms_per_query": 1000 * cum / queries,
        }
        for (file, line, fn), (_c, n, t, cum, _) in top
    ]
    return {"queries": queries, "stages": points, "top_tottime": tottime}


# -- main ----------------------------------------------------------------------------------------------------------


def code_version(paths: Sequence[str] = ("node", "policy")) -> dict[str, Any]:
    """The commit and the uncommitted changes of the code under test (``paths``), as imported at start."""
    root = Path(__file__).resolve().parent.parent

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=root, capture_output=True, text=True, timeout=30).stdout.rstrip()
        except (OSError, subprocess.SubprocessError):
            return ""

    dirty = [line[3:] for line in git("status", "--porcelain", "--", *paths).splitlines()]
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(dirty):
        path = root / name
        digest.update(name.encode() + (path.read_bytes() if path.is_file() else b""))
    return {"commit": git("rev-parse", "--short", "HEAD"), "dirty": dirty, "dirty_digest": digest.hexdigest()}


CODE: dict[str, Any] = {}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gaml.bench.retrieve_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100_000, help="assets")
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("bench/results"))
    p.add_argument("--batch", type=int, default=1000, help="assets per put_many")
    p.add_argument("--warmup", type=int, default=20, help="untimed warm-up queries")
    p.add_argument("--profile-queries", type=int, default=200, help="governed hybrid queries to cProfile (0: none)")
    p.add_argument("--profile", type=Path, default=None, help="also write the pstats of that profile here")
    p.add_argument(
        "--threshold",
        type=int,
        default=DEFAULT_EXACT_THRESHOLD,
        help="AdaptiveIndex exact->HNSW threshold (default: the node's); a non-default value suffixes the output",
    )
    p.add_argument("--tmp", type=Path, default=None, help="where the temporary node home goes (default: system temp)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    CODE.update(code_version())
    if args.n < 50 or args.k <= 0 or args.queries <= 0 or args.batch <= 0:
        raise SystemExit("--n must be at least 50; --k, --queries and --batch positive")
    started = dt.datetime.now(dt.UTC)
    work = Path(tempfile.mkdtemp(prefix="gaml-retrieve-bench-", dir=args.tmp))
    log(f"temporary node home in {work} ({fs_type(work)})")
    try:
        return _run(args, work, started)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(args: argparse.Namespace, work: Path, started: dt.datetime) -> int:
    N, K = args.n, args.k
    R: dict[str, Any] = {}
    secrets = Secrets(args.seed)
    emb = HashEmbedder(256)
    corpus = Corpus(args.seed)
    rng = random.Random(f"retrieve-{args.seed}")
    parts = plan()

    store = open_home(work / "home", secrets, args.threshold)
    node = Node(store, emb)
    try:
        return _bench(args, R, store, node, emb, corpus, rng, parts, work, started, N, K)
    finally:
        store.close()


def _bench(
    args: argparse.Namespace,
    R: dict[str, Any],
    store: Store,
    node: Node,
    emb: HashEmbedder,
    corpus: Corpus,
    rng: random.Random,
    parts: list[tuple[str, str]],
    work: Path,
    started: dt.datetime,
    N: int,
    K: int,
) -> int:
    # ---- principals: every owner (member of one tenant) and the caller (member of three) ----------------------------
    for u in range(N_OWNERS):
        tenants = CALLER_TENANTS if f"u{u}" == CALLER else (owner_tenant(u),)
        node.governance.add_principal(Principal(f"u{u}", tenants=frozenset(tenants)))

    # ---- data: drafts -> built assets -> vectors -> prepared -> put_many(sign=True) -> checkpoint -------------------
    built: list[Asset] = []
    seen: set[str] = set()
    t0 = time.perf_counter()
    with bar(N, "generate + build") as pb:
        i = 0
        while len(built) < N:
            d = draft(corpus, rng, i, parts[rng.randrange(len(parts))])
            i += 1
            a = node.build(d, now=d["created_at"])
            if a.id in seen:
                continue
            seen.add(a.id)
            built.append(a)
            pb.update(1)
    t_build = time.perf_counter() - t0
    del seen
    texts = [a.text() for a in built]
    t0 = time.perf_counter()
    vecs = embed_all(emb, texts)
    t_embed = time.perf_counter() - t0
    t0 = time.perf_counter()
    prepared = [node.prepare(a) for a in tqdm(built, desc="prepare", file=sys.stderr, mininterval=1.0, leave=False)]
    t_prepare = time.perf_counter() - t0
    del built
    rows = list(vecs)
    t0 = time.perf_counter()
    with bar(N, "put_many(sign=True)") as pb:
        for s in range(0, N, args.batch):
            changed = store.put_many(prepared[s : s + args.batch], rows[s : s + args.batch], emb.id, emb.dim, sign=True)
            if not all(changed):
                raise RuntimeError("a synthetic asset was a no-op put (duplicate id?)")
            pb.update(len(changed))
    t_put = time.perf_counter() - t0
    log(f"stored {N:,} in {t_put:.1f} s ({rate(N, t_put):,.0f}/s); checkpoint (index catch-up + snapshots) …")
    t0 = time.perf_counter()
    snaps = node.checkpoint()
    t_ckpt = time.perf_counter() - t0
    now = max(a.created_at for a in prepared) + 1_000_000
    R["load"] = {
        "build_s": t_build,
        "embed_s": t_embed,
        "prepare_s": t_prepare,
        "put_many_s": t_put,
        "put_per_s": rate(N, t_put),
        "checkpoint_s": t_ckpt,
        "snapshots": snaps,
        "total_s": t_build + t_embed + t_prepare + t_put + t_ckpt,
        "batch": args.batch,
    }
    log(f"checkpoint {t_ckpt:.1f} s ({snaps} snapshots)")

    # partitions and their rows
    part_rows: dict[str, list[int]] = {}
    for j, a in enumerate(prepared):
        part_rows.setdefault(partition_of(a).name, []).append(j)
    ids = [a.id for a in prepared]
    del prepared
    kinds = {name: str(p["index"]) for name, p in store.stats().partitions.items()}
    names5 = sorted(n for n in part_rows if readable(n))
    if len(part_rows) != len(parts) or len(names5) != 5:
        raise RuntimeError(f"expected {len(parts)} partitions and 5 readable ones, got {len(part_rows)} / {names5}")
    rows5 = np.concatenate([np.asarray(part_rows[n], dtype=np.int64) for n in names5])
    size5 = len(rows5)
    sizes = [len(r) for r in part_rows.values()]
    R["data"] = {
        "n": N,
        "partitions": len(part_rows),
        "partition_size": {"min": min(sizes), "median": statistics.median(sizes), "max": max(sizes)},
        "index_kinds": {k: sum(1 for v in kinds.values() if v == k) for k in sorted(set(kinds.values()))},
        "readable": {n: {"vectors": len(part_rows[n]), "index": kinds[n]} for n in names5},
        "readable_vectors": size5,
        "embedder": emb.id,
        "dim": emb.dim,
        "threshold": args.threshold,
    }
    log(f"{len(part_rows)} partitions ({R['data']['index_kinds']}); u0 reads {size5:,} vectors in {names5}")

    # ---- raw hnswlib: the five readable partitions, and one shared index over everything ---------------------------
    factory = HnswFactory()
    kw = factory.kw
    ef = max(kw["ef_search"], K)
    t0 = time.perf_counter()
    raw5 = [raw_index(vecs[part_rows[n]], np.asarray(part_rows[n], dtype=np.uint64), kw, ef) for n in names5]
    t_raw5 = time.perf_counter() - t0
    log(f"raw hnswlib, 5 partitions: built in {t_raw5:.1f} s; shared index over {N:,} …")
    t0 = time.perf_counter()
    shared_idx = hnswlib.Index(space="cosine", dim=emb.dim)
    shared_idx.init_index(max_elements=N, ef_construction=kw["ef_construction"], M=kw["m"], random_seed=HNSW_SEED)
    with bar(N, "raw hnswlib shared build") as pb:
        for s in range(0, N, 4096):
            e = min(N, s + 4096)
            shared_idx.add_items(vecs[s:e], np.arange(s, e, dtype=np.uint64), num_threads=kw["threads"])
            pb.update(e - s)
    shared_idx.set_ef(ef)
    t_shared = time.perf_counter() - t0
    R["raw_build"] = {"five_s": t_raw5, "shared_s": t_shared, "hnsw_params": kw, "seed": HNSW_SEED, "ef": ef}
    log(f"shared index built in {t_shared:.1f} s")
    allowed_labels = set(rows5.tolist())

    # ---- queries --------------------------------------------------------------------------------------------------
    qrng = random.Random(f"queries-{args.seed}")
    qtexts = [corpus.query(texts[qrng.randrange(N)]) for _ in range(args.warmup + args.queries)]
    qvecs = emb.embed(qtexts)

    def governed(text: str, mode: str, log_: bool) -> Response:
        req = SearchRequest(text, CALLER, Permission.READ, now, Location.THIS_DEVICE, K, mode=mode)
        return node.retriever.search(req, log=log_)

    def raw_five(q: np.ndarray) -> list[int]:
        cands: list[tuple[float, int]] = []
        for idx in raw5:
            labels, dists = idx.knn_query(q, k=min(K, idx.get_current_count()), num_threads=1)
            cands.extend(zip(dists[0].tolist(), labels[0].tolist(), strict=True))
        return [lb for _, lb in heapq.nsmallest(K, cands)]

    def raw_shared(q: np.ndarray) -> list[int]:
        labels, _ = shared_idx.knn_query(q, k=K, num_threads=1, filter=lambda label: label in allowed_labels)
        return labels[0].tolist()

    methods = ("embed", "dense", "hybrid", "hybrid_log", "raw5", "shared")
    lat: dict[str, list[float]] = {m: [] for m in methods}
    got: dict[str, list[list[Any]]] = {m: [] for m in ("dense", "raw5", "shared")}
    hit_paths: dict[str, int] = {}
    bad_auth: list[tuple[int, int]] = []

    def check(resp: Response) -> None:
        if resp.authorized != size5 or resp.partitions != 5:
            bad_auth.append((resp.partitions, resp.authorized))

    for text, q in zip(qtexts[: args.warmup], qvecs[: args.warmup], strict=True):
        emb.embed([text])
        check(governed(text, "dense", False))
        check(governed(text, "hybrid", False))
        check(governed(text, "hybrid", True))
        raw_five(q)
        raw_shared(q)
    calls: dict[str, Callable[[str, np.ndarray], Any]] = {
        "embed": lambda text, q: emb.embed([text]),
        "dense": lambda text, q: governed(text, "dense", False),
        "hybrid": lambda text, q: governed(text, "hybrid", False),
        "hybrid_log": lambda text, q: governed(text, "hybrid", True),
        "raw5": lambda text, q: raw_five(q),
        "shared": lambda text, q: raw_shared(q),
    }
    # A seeded random order per query: whichever method reads a query's postings and records first warms RocksDB's
    # block cache for the others, so a fixed order would favour the later ones.
    orng = random.Random(f"order-{args.seed}")
    order = list(methods)
    load_before = os.getloadavg()
    pc = time.perf_counter
    timed = list(zip(qtexts[args.warmup :], qvecs[args.warmup :], strict=True))
    for text, q in tqdm(timed, desc="queries", file=sys.stderr, mininterval=1.0, leave=False):
        orng.shuffle(order)
        out: dict[str, Any] = {}
        for m in order:
            t0 = pc()
            out[m] = calls[m](text, q)
            lat[m].append(1000 * (pc() - t0))
        for m in ("dense", "hybrid", "hybrid_log"):
            check(out[m])
        for r in out["hybrid"].results:
            hit_paths[r.path] = hit_paths.get(r.path, 0) + 1
        got["dense"].append([r.asset.id for r in out["dense"].results])
        got["raw5"].append(out["raw5"])
        got["shared"].append(out["shared"])
    load_after = os.getloadavg()
    if bad_auth:
        raise RuntimeError(f"expected 5 partitions and {size5} authorized ids, got {bad_auth[:5]}")
    log(f"authorization check: every response had 5 partitions and {size5:,} authorized ids")

    # ---- recall@k against exact search over the five partitions (tie-aware) ---------------------------------------
    mat = vecs[rows5]
    mat = mat / np.linalg.norm(mat, axis=1, keepdims=True)
    pos_of_row = {int(r): p for p, r in enumerate(rows5)}
    pos_of_id = {ids[int(r)]: p for p, r in enumerate(rows5)}
    qm = qvecs[args.warmup :]
    recall: dict[str, list[float]] = {m: [] for m in got}
    outside = 0
    for s in range(0, len(qm), 100):
        scores = qm[s : s + 100] @ mat.T
        for off, row in enumerate(scores):
            kk = min(K, len(row))
            kth = float(np.partition(row, len(row) - kk)[len(row) - kk]) - 1e-5
            for m, hits in got.items():
                pos = [pos_of_id.get(h) if m == "dense" else pos_of_row.get(h) for h in hits[s + off]]
                outside += sum(1 for p in pos if p is None)
                recall[m].append(sum(1 for p in pos if p is not None and float(row[p]) >= kth) / kk)
    if outside:
        raise RuntimeError(f"{outside} results outside the five readable partitions")

    L = {m: summary(v) for m, v in lat.items()}
    for m in ("dense", "hybrid"):
        L[f"{m}_minus_embed"] = summary([g - e for g, e in zip(lat[m], lat["embed"], strict=True)])
    ratios = {
        m: {
            "p50_vs_raw5": L[m]["p50"] / L["raw5"]["p50"],
            "p99_vs_raw5": L[m]["p99"] / L["raw5"]["p99"],
            "p50_vs_shared": L[m]["p50"] / L["shared"]["p50"],
            "p99_vs_shared": L[m]["p99"] / L["shared"]["p99"],
        }
        for m in ("dense", "dense_minus_embed", "hybrid", "hybrid_minus_embed", "hybrid_log")
    }
    R["search"] = {
        "queries": len(timed),
        "warmup": args.warmup,
        "k": K,
        "ef": ef,
        "governed_depth_per_partition": max(4 * K, 50),
        "latency_ms": L,
        "ratios": ratios,
        "recall": {m: statistics.fmean(v) for m, v in recall.items()},
        "hybrid_hit_paths": hit_paths,
        "authorized_ids": size5,
        "loadavg_before_after": [load_before, load_after],
        "lat_ms": lat,
    }

    # ---- profile: where governed hybrid search spends its time -----------------------------------------------------
    if args.profile_queries > 0:
        prof_texts = [qtexts[args.warmup + (i % len(timed))] for i in range(args.profile_queries)]
        prof = cProfile.Profile()
        gc.collect()
        t0 = time.perf_counter()
        prof.enable()
        for text in prof_texts:
            governed(text, "hybrid", True)
        prof.disable()
        t_prof = time.perf_counter() - t0
        stats = pstats.Stats(prof, stream=io.StringIO())
        R["profile"] = {**profile_summary(stats, len(prof_texts)), "wall_ms_per_query": 1000 * t_prof / len(prof_texts)}
        if args.profile is not None:
            stats.dump_stats(str(args.profile))
            log(f"pstats written to {args.profile}")
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(30)
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(20)
        log(buf.getvalue())

    R["machine"] = machine(started, fs_type(work))
    R["args"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    R["code"] = CODE
    md = render(R, args)
    print(md)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"retrieve-{N}" + ("" if args.threshold == DEFAULT_EXACT_THRESHOLD else f"-t{args.threshold}")
    (args.out / f"{stem}.md").write_text(md)
    (args.out / f"{stem}.json").write_text(json.dumps(R, indent=1) + "\n")
    log(f"wrote {args.out / (stem + '.md')} and {args.out / (stem + '.json')}")
    return 0


def render(R: dict[str, Any], args: argparse.Namespace) -> str:
    D, Ld, S, m = R["data"], R["load"], R["search"], R["machine"]
    L, Q, rec = S["latency_ms"], S["ratios"], S["recall"]
    f3: Callable[[float], str] = lambda x: f"{x:.3f}"  # noqa: E731
    fx: Callable[[float], str] = lambda x: f"{x:.2f}×"  # noqa: E731

    def row(label: str, key: str, recall: str = "") -> str:
        lat = L[key]
        r = Q.get(key)
        rs = [fx(r[c]) for c in ("p50_vs_raw5", "p99_vs_raw5", "p50_vs_shared", "p99_vs_shared")] if r else [""] * 4
        return (
            f"| {label} | {f3(lat['p50'])} | {f3(lat['p99'])} | {f3(lat['mean'])} | "
            + " | ".join(rs)
            + (f" | {recall} |")
        )

    k = S["k"]
    lines = [
        f"# Retrieval benchmark: governed search vs raw hnswlib, N = {D['n']:,}",
        "",
        f"{m['date']} · {m['nproc']} cores · Python {m['python']} · "
        + " · ".join(f"{k_} {v}" for k_, v in m["packages"].items())
        + f" · temp fs {m['tmp_fs']}",
        "",
        f"Args: `{' '.join(f'--{k_} {v}' for k_, v in R['args'].items() if v not in (None, False))}`. "
        f"Code: commit {R['code']['commit']}"
        + (
            f" + uncommitted changes to {', '.join(R['code']['dirty'])} (digest {R['code']['dirty_digest']})."
            if R["code"]["dirty"]
            else ", clean."
        ),
        "",
        f"Data: {D['n']:,} assets ({D['embedder']}, {D['dim']} dims) over {D['partitions']} partitions "
        f"(size min / median / max {D['partition_size']['min']:,} / {D['partition_size']['median']:,.0f} / "
        f"{D['partition_size']['max']:,}; indexes: "
        + ", ".join(f"{v} {kind}" for kind, v in D["index_kinds"].items())
        + f", AdaptiveIndex threshold {D['threshold']:,}). "
        f"Caller u0 reads 5 partitions, {D['readable_vectors']:,} vectors: "
        + ", ".join(f"{n} ({v['vectors']:,}, {v['index']})" for n, v in D["readable"].items())
        + f"; every response reported 5 partitions and {S['authorized_ids']:,} authorized ids. "
        f"Load: build {Ld['build_s']:.1f} s, embed {Ld['embed_s']:.1f} s, prepare {Ld['prepare_s']:.1f} s, "
        f"`put_many(sign=True)` in batches of {Ld['batch']:,} {Ld['put_many_s']:.1f} s ({Ld['put_per_s']:,.0f}/s), "
        f"checkpoint (index catch-up + {Ld['snapshots']} snapshots) {Ld['checkpoint_s']:.1f} s; "
        f"total {Ld['total_s']:.1f} s. Raw hnswlib builds: 5 partitions {R['raw_build']['five_s']:.1f} s, "
        f"shared index {R['raw_build']['shared_s']:.1f} s.",
        "",
        f"Latency in ms over {S['queries']} seeded queries (+{S['warmup']} warm-up), k={k}, single thread "
        f"(1-min load average {S['loadavg_before_after'][0][0]:.2f} before the queries, "
        f"{S['loadavg_before_after'][1][0]:.2f} after), "
        "all methods interleaved per query in a seeded random order (whichever runs first warms RocksDB's block cache "
        "for that query's postings and records).",
        "",
        f"| method | p50 | p99 | mean | p50 / raw-5 | p99 / raw-5 | p50 / shared | p99 / shared | recall@{k} |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        row("query embedding alone (HashEmbedder)", "embed"),
        row("governed dense, log off", "dense", f"{rec['dense']:.3f}"),
        row("governed dense − embedding (per query)", "dense_minus_embed"),
        row("governed hybrid, log off", "hybrid"),
        row("governed hybrid − embedding (per query)", "hybrid_minus_embed"),
        row("governed hybrid + access-log receipt", "hybrid_log"),
        row("raw hnswlib, 5 partition indexes, merged (raw-5)", "raw5", f"{rec['raw5']:.3f}"),
        row("raw hnswlib, 1 shared index + label filter (shared)", "shared", f"{rec['shared']:.3f}"),
        "",
        f"Raw hnswlib: `Index(space='cosine')`, M={R['raw_build']['hnsw_params']['m']}, "
        f"ef_construction={R['raw_build']['hnsw_params']['ef_construction']}, seed {R['raw_build']['seed']}, "
        f"threads={R['raw_build']['hnsw_params']['threads']}, `set_ef({S['ef']})`; raw-5 asks each readable partition "
        f"for k and merges; shared asks one index over all {D['n']:,} vectors with "
        "`filter=lambda label: label in allowed`. Governed search asks each partition for "
        f"{S['governed_depth_per_partition']} dense (and as many lexical) candidates, reads the k records (decrypting "
        "them) and builds explained results; raw methods return labels only. Recall is tie-aware, against exact numpy "
        f"search over the 5 partitions' vectors. Hybrid hits by path: {S['hybrid_hit_paths']}.",
        "",
    ]
    P = R.get("profile")
    if P:
        lines += [
            f"Where governed hybrid search (+ receipt) spends its time: cProfile of {P['queries']} queries "
            f"({P['wall_ms_per_query']:.1f} ms/query under the profiler; cumulative, so nested rows overlap).",
            "",
            "| stage / function | calls per query | ms per query |",
            "|---|---:|---:|",
        ]
        lines += [
            f"| {label} | {v['calls_per_query']:,.1f} | {v['cum_ms_per_query']:.2f} |"
            for label, v in P["stages"].items()
            if v["calls_per_query"]
        ]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
