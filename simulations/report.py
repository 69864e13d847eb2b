"""The harness's report as a picture: convergence over simulated time, traffic per node, the leak and lost-write
counters over time (they must stay on zero), and the poisoned share of honest frames against the adversary share."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def plot(results: Sequence[dict[str, Any]], out: Path) -> None:
    """Draw one PNG for the runs of a scenario (one line or point per seed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    conv, traffic, leaks, poison = axes.flat
    for r in results:
        tl = r["timeline"]
        t0 = 0.0  # the workload's start
        conv.plot([p["t"] - t0 for p in tl], [p["convergence"] for p in tl], lw=1, label=f"seed {r['seed']}")
        heal = next((p["t"] - t0 for p in tl if p["phase"] == "liveness"), None)
        if heal is not None:
            conv.axvline(heal, color="grey", ls=":", lw=0.8)
        leaks.plot([p["t"] - t0 for p in tl], [p["leaks"] for p in tl], "r-", lw=1)
        leaks.plot([p["t"] - t0 for p in tl], [p["lost"] for p in tl], "b--", lw=1)
        traffic.plot([p["t"] - t0 for p in tl], [p["bytes"] / max(1, r["nodes"]) / 1e6 for p in tl], lw=1)
        poison.scatter([r["adversary_share"]], [r["poisoned_frame_share"]], c="r", marker="o")
        if r.get("baseline_poisoned_frame_share") is not None:
            poison.scatter([r["adversary_share"]], [r["baseline_poisoned_frame_share"]], c="k", marker="x")
    name = results[0]["scenario"] if results else ""
    conv.set(
        title="held share of what members must hold", xlabel="simulated s since the workload began", ylim=(-0.02, 1.02)
    )
    if len(results) <= 8:
        conv.legend(fontsize=7)
    traffic.set(title="bytes received per node (mean, MB)", xlabel="simulated s")
    leaks.set(title="leaks (red) and lost acknowledged writes (blue)", xlabel="simulated s", ylim=(-0.5, 5))
    poison.set(
        title="poisoned honest frames: consensus (o), none (x)",
        xlabel="adversarial share of nodes",
        ylim=(-0.02, 1.02),
        xlim=(-0.02, 0.6),
    )
    for ax in axes.flat:
        ax.grid(alpha=0.3)
    fig.suptitle(f"scenario {name}: {len(results)} seed(s), {results[0]['nodes'] if results else 0} nodes", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


__all__ = ["plot"]
