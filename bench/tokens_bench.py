"""Token-counter benchmark: the default estimate (``node.tokens.HeuristicCounter``) against real BPE tokenizers.

::

    .venv/bin/python -m gaml.bench.tokens_bench [--data ../shared/data/locomo/locomo-dev.json] [--out bench/results]
                                           [--repeat 3]

For each of ``cl100k_base`` (the encoding the estimate models) and ``o200k_base``, counted exactly by
``node.bpe.BpeCounter`` (bpe-openai, tables compiled in):

1. LoCoMo: every turn of the development set, as ingestion reads it (``node.parsers.parse_locomo``: the text, plus
   `` [shares an image: …]`` where the turn has a caption): the per-turn relative error ``estimate / true − 1``
   (median, p90 and p99 of its absolute value, its mean) and the aggregate error ``Σ estimate / Σ true − 1``, over all
   turns, over the samples the estimate was tuned on (conv-26, conv-30, conv-41) and over the held-out ones;
2. built-in texts that are not conversation and were not used to fit the estimate (:data:`SAMPLES`: Python code,
   JSON, URLs, Markdown, and paragraphs in eight languages other than English), each reported on its own;
3. throughput of both counters over all turns (turns/s, median of ``--repeat`` runs, and the first run; the
   estimate's cache of piece costs is already warm from step 1, as it is in a running node).

Results: a Markdown table on stdout and in ``OUT/tokens.md``, the raw numbers in ``OUT/tokens.json``. Without the
LoCoMo file the benchmark says where it looked and exits 0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from gaml.bench.retrieve_bench import code_version
from gaml.bench.store_bench import log, machine
from gaml.node.core.text.parsers import parse_locomo
from gaml.node.core.tokens import HeuristicCounter, TokenCounter
from gaml.node.shells.bpe import BpeCounter

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
ENCODINGS = ("cl100k_base", "o200k_base")
TUNE_SAMPLES = frozenset({"conv-26", "conv-30", "conv-41"})

SAMPLES: dict[str, str] = {
    "code (Python)": '''import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RetryPolicy:
    """How often to retry a failed upload, and how long to wait between attempts."""

    attempts_max: int = 5
    backoff_ms: list[int] = field(default_factory=lambda: [100, 250, 500, 1000, 2000])

    def delay_ms(self, attempt: int) -> int:
        if attempt < 0:
            raise ValueError(f"attempt must be >= 0, got {attempt}")
        return self.backoff_ms[min(attempt, len(self.backoff_ms) - 1)]


def load_manifest(path: Path) -> dict[str, str]:
    """Read ``manifest.json`` and return {file name: sha256}, skipping entries without a digest."""
    with path.open(encoding="utf-8") as fh:
        raw = json.load(fh)
    out: dict[str, str] = {}
    for entry in raw.get("files", []):
        name, digest = entry.get("name"), entry.get("sha256")
        if isinstance(name, str) and isinstance(digest, str) and len(digest) == 64:
            out[name] = digest.lower()
    return out


if __name__ == "__main__":
    policy = RetryPolicy()
    print([policy.delay_ms(i) for i in range(7)])
    print(load_manifest(Path("build/manifest.json")))
''',
    "JSON": json.dumps(
        {
            "id": "evt_01HZX3K9QF7W2M8N4P6R0T5V1B",
            "type": "invoice.payment_succeeded",
            "created": 1718035200,
            "livemode": False,
            "data": {
                "object": {
                    "customer": {"id": "cus_Q2w9LmZk", "email": "maria.lopez@example.org", "name": "María López"},
                    "amount_paid": 4900,
                    "currency": "eur",
                    "lines": [
                        {"description": "Team plan (monthly)", "quantity": 3, "unit_amount": 1500},
                        {"description": "Extra storage 50 GB", "quantity": 1, "unit_amount": 400},
                    ],
                    "metadata": {"region": "eu-west-1", "trial": "false", "coupon": None},
                    "hosted_invoice_url": "https://invoice.example.com/i/acct_1Nv0/test_YWNjdF8xTnYw",
                }
            },
            "request": {"id": "req_8fJ2kLq0ZbX1", "idempotency_key": "c0a8012e-5d4b-4f7e-9a3c-2b1d9e8f7a6b"},
        },
        indent=2,
        ensure_ascii=False,
    ),
    "URLs": "\n".join(
        [
            "https://github.com/python/cpython/blob/main/Lib/json/__init__.py#L120-L135",
            "https://docs.python.org/3/library/re.html#regular-expression-syntax",
            "https://www.example.com/search?q=token+budget&lang=en&page=2&sort=relevance",
            "https://arxiv.org/abs/2402.17753",
            "https://en.wikipedia.org/wiki/Byte_pair_encoding",
            "https://news.ycombinator.com/item?id=39428880",
            "https://storage.googleapis.com/bucket-name/exports/2024/06/report_final_v3.pdf",
            "https://pypi.org/project/bpe-openai/0.1.4/",
            "http://localhost:8080/api/v1/assets?scope=user_private&limit=50&cursor=eyJpZCI6IjEyMyJ9",
            "https://maps.google.com/?ll=48.858370,2.294481&z=17",
        ]
    ),
    "Markdown": """# Deploying the relay

The relay forwards **encrypted** envelopes between peers that cannot reach each other directly. It never sees
plaintext: see [the security model](../README.md#security-model) before exposing it to the internet.

## Requirements

- Linux x86_64 or arm64, 1 vCPU and 256 MB of RAM are plenty
- an open TCP port (default `4001`) and a DNS name
- `systemd` if you want the unit file below

## Quick start

```bash
curl -fsSL https://example.com/relay/install.sh | sh
relay init --listen /ip4/0.0.0.0/tcp/4001 --name relay-eu-1
sudo systemctl enable --now relay
```

| setting | default | meaning |
|---|---|---|
| `max_peers` | 512 | connections accepted before new ones are refused |
| `queue_mb` | 64 | memory for envelopes waiting for an offline peer |
| `ttl_hours` | 72 | how long an undelivered envelope is kept |

> **Note:** the relay keeps no logs of envelope contents, only counters (see `relay stats`).
""",
    "French": (
        "La mémoire d'un assistant ne sert à rien si elle oublie ce qui compte. Hier soir, Claire m'a expliqué "
        "qu'elle préparait un voyage à Lisbonne avec ses deux enfants, qu'elle cherchait un appartement près de la "
        "mer et qu'elle voulait éviter les vols trop tôt le matin. Nous avons aussi parlé de son nouveau travail à "
        "l'hôpital : elle commence lundi, elle est un peu inquiète, mais elle a hâte de rencontrer son équipe."
    ),
    "German": (
        "Gestern Abend hat mir Jonas erzählt, dass er im Frühling mit dem Fahrrad von München nach Wien fahren "
        "möchte. Er plant ungefähr sechzig Kilometer pro Tag, übernachtet lieber in kleinen Pensionen als im Zelt "
        "und sucht noch jemanden, der ihn auf der Strecke entlang der Donau begleitet. Außerdem hat er angefangen, "
        "Italienisch zu lernen, weil seine Schwester nächstes Jahr in Bologna heiratet."
    ),
    "Spanish": (
        "Ayer por la tarde Lucía me contó que quiere abrir una pequeña librería en su barrio de Valencia. Ya "
        "encontró un local cerca del mercado, aunque necesita reformar la entrada y pedir un préstamo al banco. "
        "También me dijo que su hermano la ayudará los fines de semana y que piensa organizar lecturas para niños "
        "todos los sábados por la mañana."
    ),
    "Italian": (
        "Ieri sera Marco mi ha raccontato che sta preparando l'esame di guida e che vorrebbe comprare una macchina "
        "usata prima dell'estate. Lavora in una pasticceria del centro, comincia alle cinque del mattino e dice che "
        "il momento più bello della giornata è quando sforna i cornetti. Sua madre verrà a trovarlo a ottobre."
    ),
    "Russian": (
        "Вчера вечером Анна рассказала мне, что собирается летом поехать на Байкал вместе с подругами. Они хотят "
        "жить в палатках, ходить в походы и обязательно увидеть восход солнца над озером. Кроме того, Анна "
        "начала учиться играть на гитаре и уже выучила несколько песен, которые пела её бабушка."
    ),
    "Chinese": (
        "昨天晚上，小王告诉我他打算明年春天去云南旅行。他想先在昆明住几天，然后坐火车去大理和丽江，"
        "最后再去香格里拉看看雪山。他还说最近开始学习摄影，买了一台二手相机，希望这次旅行能拍到很多好看的照片。"
    ),
    "Japanese": (
        "昨日の夜、佐藤さんは来月から新しい仕事を始めると話してくれました。会社は駅から歩いて十分ほどのところに"
        "あって、毎朝電車で通うつもりだそうです。週末には料理教室に通い始めたので、今度みんなにカレーを作ってくれる"
        "と言っていました。"
    ),
    "Arabic": (
        "أخبرتني سارة مساء أمس أنها تخطط للسفر إلى المغرب في الربيع القادم مع عائلتها. تريد زيارة مراكش وفاس، "
        "وتحب أن تتعلم الطبخ المغربي التقليدي من سيدة في السوق القديم."
    ),
    "Hindi": (
        "कल शाम राहुल ने मुझे बताया कि वह अगले महीने अपने दोस्तों के साथ गोवा जा रहा है। वे समुद्र के किनारे एक छोटे "
        "से घर में रहेंगे और हर सुबह तैरना सीखेंगे।"
    ),
}


def locomo_turns(path: Path) -> list[tuple[str, str]]:
    """(sample id, text) of every turn, as ingestion reads them."""
    sources = parse_locomo(path.read_bytes(), path.name)
    return [(str(s.meta["sample_id"]), r.text) for s in sources for r in s.records]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between the closest ranks."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def error_stats(estimates: Sequence[int], truths: Sequence[int]) -> dict[str, Any]:
    """Per-text relative errors (texts with at least one true token) and the aggregate error."""
    errs = [e / t - 1 for e, t in zip(estimates, truths, strict=True) if t > 0]
    abs_errs = [abs(x) for x in errs]
    return {
        "texts": len(truths),
        "tokens_true": sum(truths),
        "tokens_estimate": sum(estimates),
        "aggregate_error": sum(estimates) / sum(truths) - 1,
        "abs_error_median": statistics.median(abs_errs),
        "abs_error_p90": percentile(abs_errs, 0.90),
        "abs_error_p99": percentile(abs_errs, 0.99),
        "error_mean": statistics.fmean(errs),
        "exact_share": sum(1 for e, t in zip(estimates, truths, strict=True) if e == t) / len(truths),
    }


def throughput(counter: TokenCounter, texts: Sequence[str], repeat: int) -> dict[str, float]:
    """Turns per second of ``counter`` over ``texts``: the median of ``repeat`` runs, and the first run's."""
    rates = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for text in texts:
            counter.count(text)
        rates.append(len(texts) / (time.perf_counter() - t0))
    return {"turns_per_s_median": statistics.median(rates), "turns_per_s_first": rates[0]}


def run(data: Path, repeat: int) -> dict[str, Any]:
    turns = locomo_turns(data)
    texts = [t for _, t in turns]
    tune = [i for i, (sid, _) in enumerate(turns) if sid in TUNE_SAMPLES]
    held = [i for i, (sid, _) in enumerate(turns) if sid not in TUNE_SAMPLES]
    heuristic = HeuristicCounter()
    log(f"{len(texts):,} turns in {len({sid for sid, _ in turns})} samples; counting with {heuristic.name}")
    est = [heuristic.count(t) for t in texts]
    samples_est = {name: heuristic.count(text) for name, text in SAMPLES.items()}
    result: dict[str, Any] = {"counter": heuristic.name, "encodings": {}, "throughput": {}}
    for i, encoding in enumerate(ENCODINGS):
        t0 = time.perf_counter()
        bpe = BpeCounter(encoding)
        load_s = time.perf_counter() - t0
        log(f"{encoding}: loaded in {load_s:.2f} s (the first includes importing bpe-openai)")
        true = [bpe.count(t) for t in texts]
        locomo = {
            "all": error_stats(est, true),
            "tune": error_stats([est[j] for j in tune], [true[j] for j in tune]),
            "held_out": error_stats([est[j] for j in held], [true[j] for j in held]),
        }
        samples: dict[str, dict[str, float]] = {}
        for name, text in SAMPLES.items():
            n = bpe.count(text)
            samples[name] = {
                "chars": len(text),
                "tokens_true": n,
                "tokens_estimate": samples_est[name],
                "error": samples_est[name] / n - 1,
            }
        result["encodings"][encoding] = {"load_s": load_s, "locomo": locomo, "samples": samples}
        result["throughput"][encoding] = throughput(bpe, texts, repeat)
        if i == 0:
            result["throughput"][heuristic.name] = throughput(heuristic, texts, repeat)
    result["turns"] = len(texts)
    return result


def pct(x: float, signed: bool = False) -> str:
    return f"{x * 100:+.1f}%" if signed else f"{x * 100:.1f}%"


def markdown(result: dict[str, Any], header: str) -> str:
    enc = result["encodings"]
    name = result["counter"]
    lines = [
        "# Token counter: the default estimate against real BPE tokenizers",
        "",
        header,
        "",
        f"Estimate: `{name}` (`node.tokens.HeuristicCounter`); truth: `node.bpe.BpeCounter` (bpe-openai). Error = "
        "estimate / true − 1; per-turn columns are over turns, the aggregate is Σ estimate / Σ true − 1.",
        "",
        "LoCoMo turns (the estimate was tuned on conv-26, conv-30 and conv-41; the others are held out):",
        "",
        "| encoding | turns | true tokens | estimate | aggregate error | median \\|err\\| | p90 \\|err\\| "
        "| p99 \\|err\\| | mean err | exact |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for encoding in ENCODINGS:
        for split in ("all", "tune", "held_out"):
            s = enc[encoding]["locomo"][split]
            label = {"all": "all", "tune": "tune", "held_out": "held out"}[split]
            agg = pct(s["aggregate_error"], signed=True)
            lines.append(
                f"| {encoding}, {label} | {s['texts']:,} | {s['tokens_true']:,} | {s['tokens_estimate']:,} | "
                f"{'**' + agg + '**' if split == 'all' else agg} | {pct(s['abs_error_median'])} | "
                f"{pct(s['abs_error_p90'])} | {pct(s['abs_error_p99'])} | {pct(s['error_mean'], signed=True)} | "
                f"{pct(s['exact_share'])} |"
            )
    lines += [
        "",
        "Other texts (built into `bench/tokens_bench.py`, not used to fit the estimate):",
        "",
        "| text | chars | cl100k_base | estimate | error vs cl100k | o200k_base | error vs o200k |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for sample in SAMPLES:
        a, b = enc["cl100k_base"]["samples"][sample], enc["o200k_base"]["samples"][sample]
        lines.append(
            f"| {sample} | {a['chars']:,} | {a['tokens_true']:,} | {a['tokens_estimate']:,} | "
            f"{pct(a['error'], signed=True)} | {b['tokens_true']:,} | {pct(b['error'], signed=True)} |"
        )
    tp = result["throughput"]
    lines += [
        "",
        f"Throughput over the {result['turns']:,} turns (median of {result['args']['repeat']} runs, the first in "
        "brackets; one thread; the estimate's piece cache is warm from the accuracy pass):",
        "",
        "| counter | turns/s |",
        "|---|---:|",
        f"| `{name}` (pure Python) | {tp[name]['turns_per_s_median']:,.0f} ({tp[name]['turns_per_s_first']:,.0f}) |",
    ]
    for encoding in ENCODINGS:
        t = tp[encoding]
        lines.append(
            f"| bpe-openai {encoding} (Rust; counter built in {enc[encoding]['load_s']:.2f} s"
            f"{', importing bpe-openai' if encoding == ENCODINGS[0] else ''}) | "
            f"{t['turns_per_s_median']:,.0f} ({t['turns_per_s_first']:,.0f}) |"
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gaml.bench.tokens_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the LoCoMo development set (locomo-dev.json)")
    p.add_argument("--out", type=Path, default=Path("bench/results"), help="directory for tokens.json and tokens.md")
    p.add_argument("--repeat", type=int, default=3, help="throughput runs (the median is reported)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.repeat <= 0:
        raise SystemExit("--repeat must be positive")
    if not args.data.is_file():
        print(
            f"LoCoMo data not found at {args.data}: nothing to measure. Pass --data PATH (the file locomo-dev.json "
            "of ../shared/data/locomo/, six LoCoMo conversations; see its README.md).",
            file=sys.stderr,
        )
        return 0
    started = dt.datetime.now(dt.UTC)
    code = code_version()
    result = run(args.data, args.repeat)
    info = machine(started, "n/a (no files written but the results)")
    info["packages"]["bpe-openai"] = metadata.version("bpe-openai")
    result.update({"machine": info, "code": code, "data": str(args.data), "args": {"repeat": args.repeat}})
    packages = " · ".join(f"{k} {v}" for k, v in info["packages"].items() if k in ("bpe-openai",))
    header = (
        f"{info['date']} · {info['nproc']} cores · Python {info['python']} · {packages} · "
        f"{info['platform']}\n\nArgs: `--data {args.data} --repeat {args.repeat} --out {args.out}`. "
        f"Code: commit {code.get('commit', '?')}, {'clean' if not code.get('dirty') else 'with uncommitted changes'}."
    )
    md = markdown(result, header)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tokens.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (args.out / "tokens.md").write_text(md, encoding="utf-8")
    print(md)
    log(f"wrote {args.out / 'tokens.json'} and {args.out / 'tokens.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
