"""``python -m gaml.simulations``: the simulations.

- ``run --scenario FILE --seed N [--seeds K] [--json OUT] [--plot OUT]``: the scenario harness
  (simulations/harness.py) over a TOML scenario (simulations/scenarios/); one JSON report line per seed on stdout;
  exit status 0 when every check holds, 1 naming the seed and the step when one fails, 2 on a bad scenario.
- ``[replication] --seed N [--seeds K]``: the replication simulation (simulations/replication.py); exit status 0 when
  every check holds, 1 with the seed to rerun when one fails. (``replication`` is the default.)
- ``poisoning --data FILE --adversary-share S --seed N [--mode fresh|farming] [--json]``: the poisoning benchmark
  (simulations/poisoning.py); with ``--json`` the last line on stdout is one JSON object. ``--sweep`` runs the
  shares 0 to 0.5 in both modes, ``--plot OUT`` draws the sweep (PNG), ``--out FILE`` writes every result (JSON).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from gaml.simulations.replication import Spec, check, run


def _replication(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m gaml.simulations [replication]", description=__doc__)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, default=1, help="run this many seeds from --seed on")
    p.add_argument("--nodes", type=int, default=Spec.nodes)
    p.add_argument("--assets", type=int, default=Spec.assets)
    args = p.parse_args(argv)
    if args.nodes < 20:
        p.error("the world needs 20 nodes (three boundaries, a relay and an outsider)")
    spec = dataclasses.replace(Spec(), nodes=args.nodes, assets=args.assets)
    for seed in range(args.seed, args.seed + args.seeds):
        t0 = time.perf_counter()
        try:
            summary = check(run(seed, spec))
        except AssertionError as e:
            print(f"FAILED: {e}\nreproduce: python -m gaml.simulations --seed {seed}", file=sys.stderr)
            return 1
        summary["wall_s"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(summary))
    return 0


SWEEP = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)


def _poisoning(argv: list[str]) -> int:
    from gaml.simulations import poisoning

    p = argparse.ArgumentParser(prog="python -m gaml.simulations poisoning", description=poisoning.__doc__)
    p.add_argument("--data", required=True, help="a PoisonedRAG-shaped attack file (e.g. nq.json)")
    p.add_argument("--adversary-share", type=float, default=0.3)
    p.add_argument("--mode", choices=poisoning.MODES, default="fresh")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--nodes", type=int, default=poisoning.Spec.nodes)
    p.add_argument("--budget", type=int, default=poisoning.BUDGET)
    p.add_argument("--targets", type=int, default=0, help="only the first this many targets (0: all)")
    p.add_argument("--json", action="store_true", help="print one JSON object per run (the last line: the last run)")
    p.add_argument("--sweep", action="store_true", help="shares 0 to 0.5 in both modes")
    p.add_argument("--out", type=Path, help="write every result here (JSON)")
    p.add_argument("--plot", type=Path, help="draw the sweep here (PNG; with --sweep)")
    p.add_argument("--table", type=Path, help="write the results here as a Markdown table")
    args = p.parse_args(argv)
    if not Path(args.data).is_file():
        p.error(f"no attack file at {args.data}")
    cases = [(m, s) for m in poisoning.MODES for s in SWEEP] if args.sweep else [(args.mode, args.adversary_share)]
    results = []
    for mode, share in cases:
        try:
            spec = poisoning.Spec(args.nodes, share, mode, args.budget, args.targets)
        except ValueError as e:
            p.error(str(e))
        t0 = time.perf_counter()
        try:
            r = poisoning.run(args.data, args.seed, spec)
        except AssertionError as e:
            print(
                f"FAILED: {e}\nreproduce: python -m gaml.simulations poisoning --data {args.data} "
                f"--adversary-share {share} --mode {mode} --seed {args.seed}",
                file=sys.stderr,
            )
            return 1
        r["wall_s"] = round(time.perf_counter() - t0, 1)
        results.append(r)
        if args.json:
            print(json.dumps(r), flush=True)
        else:
            b = r["baseline"]
            print(
                f"{mode:8s} adversaries {share:.0%}: poisoned frames {r['poisoned_target_share']:.3f} "
                f"(baseline {b['poisoned_target_share']:.3f}), honest frames {r['honest_target_share']:.3f} "
                f"(baseline {b['honest_target_share']:.3f}), {r['wall_s']} s",
                flush=True,
            )
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    if args.plot:
        _plot(results, args.plot)
    if args.table:
        args.table.write_text(_table(results, args.seed))
    return 0


def _table(results: list[dict], seed: int) -> str:
    head = (
        "| mode | adversaries | poisoned frames | poisoned tokens | honest frames | baseline poisoned frames | "
        "baseline poisoned tokens | baseline honest frames | search top-5 poison (baseline) | adversaries ever "
        "admitted | max strikes to fall | hydrate p50 ms (baseline) |"
    )
    lines = [
        "# Poisoning benchmark (`python -m gaml.simulations poisoning`)",
        "",
        f"Seed {seed}; {results[0]['nodes'] if results else 0} nodes running the real core over the real sync engine; "
        "the victim hydrates every target question with consensus and, in the same run, without it (baseline). "
        "`fresh`: adversaries admitted half-way, injecting at once; `farming`: admitted at the start, honest for the "
        "first half, then defecting. Search: the share of attack texts in the top 5 of governed search.",
        "",
        head,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        b, led, h = r["baseline"], r["ledger"], r["hydrate_ms"]
        fell = "–" if led["strikes_to_fall_max"] is None else led["strikes_to_fall_max"]
        lines.append(
            f"| {r['mode']} | {r['adversary_share']:.0%} ({r['adversaries']}) | {r['poisoned_target_share']:.3f} | "
            f"{r['poisoned_token_share']:.3f} | {r['honest_target_share']:.3f} | {b['poisoned_target_share']:.3f} | "
            f"{b['poisoned_token_share']:.3f} | {b['honest_target_share']:.3f} | {r['search_top5_poison_share']:.3f} "
            f"({r['baseline_search_top5_poison_share']:.3f}) | {led['ever_admitted']} | {fell} | "
            f"{h['consensus_p50']} ({h['baseline_p50']}) |"
        )
    return "\n".join(lines) + "\n"


def _plot(results: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for mode, style in (("fresh", "-"), ("farming", "--")):
        rs = sorted((r for r in results if r["mode"] == mode), key=lambda r: r["adversary_share"])
        if not rs:
            continue
        xs = [r["adversary_share"] for r in rs]
        ax.plot(
            xs, [r["poisoned_target_share"] for r in rs], "r" + style, marker="o", label=f"poisoned, consensus ({mode})"
        )
        ax.plot(
            xs, [r["honest_target_share"] for r in rs], "g" + style, marker="o", label=f"honest, consensus ({mode})"
        )
        ax.plot(
            xs,
            [r["baseline"]["poisoned_target_share"] for r in rs],
            "k" + style,
            marker="x",
            alpha=0.6,
            label=f"poisoned, no consensus ({mode})",
        )
    ax.set_xlabel("adversarial share of the boundary's nodes")
    ax.set_ylabel("share of target frames")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center right")
    ax.set_title("Poisoning: target frames holding an attack text or the honest claim", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def _run(argv: list[str]) -> int:
    from gaml.policy.errors import InvalidInput
    from gaml.simulations import harness, report
    from gaml.simulations.scenario import load

    p = argparse.ArgumentParser(
        prog="python -m simulations run",
        description=harness.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--scenario", required=True, type=Path, help="a scenario file (TOML; simulations/scenarios/)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--seeds", type=int, default=1, help="run this many seeds from --seed on")
    p.add_argument("--json", type=Path, help="write the report here (one seed: an object; more: a list)")
    p.add_argument("--plot", type=Path, help="draw the report here (PNG)")
    p.add_argument(
        "--real",
        action="store_true",
        help="drive real daemons in network namespaces instead (simulations/real.py; root; scaled to --max-nodes)",
    )
    p.add_argument("--max-nodes", type=int, default=8, help="the real mode's daemons (4 to 8; default 8)")
    p.add_argument("--assets-per-node", type=int, default=15, help="the real mode's puts per daemon (default 15)")
    args = p.parse_args(argv)
    if args.seeds < 1:
        p.error("--seeds is at least 1")
    if args.real and not 4 <= args.max_nodes <= 8:
        p.error("--max-nodes is 4 to 8")
    try:
        scenario = load(args.scenario)
    except InvalidInput as e:
        p.error(str(e))
    if args.real:
        from gaml.simulations.lan import lan_unavailable

        why = lan_unavailable()
        if why:
            p.error(f"the real mode needs network namespaces: {why}")
    results = []
    for seed in range(args.seed, args.seed + args.seeds):
        try:
            r = _real(scenario, seed, args) if args.real else harness.run(scenario, seed)
        except harness.InvariantBroken as e:
            real = " --real" if args.real else ""
            print(
                f"FAILED: {e}\nreproduce: python -m simulations run --scenario {args.scenario} --seed {seed}{real}",
                file=sys.stderr,
            )
            if args.json:
                args.json.write_text(json.dumps({"scenario": scenario.name, "seed": seed, "failed": str(e)}) + "\n")
            return 1
        results.append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "timeline"}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results[0] if len(results) == 1 else results, indent=1) + "\n")
    if args.plot:
        report.plot(results, args.plot)
    return 0


def _real(scenario: object, seed: int, args: argparse.Namespace) -> dict:
    import shutil
    import tempfile

    from gaml.simulations import real

    base = Path(tempfile.mkdtemp(prefix="gaml-real-", dir="/tmp"))
    try:
        return real.run(scenario, seed, base, max_nodes=args.max_nodes, assets_per_node=args.assets_per_node)  # type: ignore[arg-type]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "run":
        return _run(argv[1:])
    if argv and argv[0] == "poisoning":
        return _poisoning(argv[1:])
    if argv and argv[0] == "replication":
        argv = argv[1:]
    return _replication(argv)


if __name__ == "__main__":
    sys.exit(main())
