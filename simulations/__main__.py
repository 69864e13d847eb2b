"""``python -m gaml.simulations --seed N``: the replication simulation (simulations/replication.py) for one seed.

Exit status 0 when every check holds; 1 with the seed to rerun when one fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

from gaml.simulations.replication import Spec, check, run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gaml.simulations", description=__doc__)
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


if __name__ == "__main__":
    sys.exit(main())
