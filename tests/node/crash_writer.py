"""A writer process for the crash test: puts assets one small batch at a time and prints each acknowledged id.

Usage: python crash_writer.py HOME COUNT START [visit] (START offsets the content, so each run writes new assets).
It checkpoints every 40 batches so kills also land inside snapshot writes. With ``visit``, each batch is also visited
once acknowledged, as a frame's visit commits (local state, ``sync=False``): its heat's visits are the batch number,
and the line printed after that commit returns is ``visited ID…``.
The parent kills it with SIGKILL at an arbitrary point.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gaml.node.core.embed import HashEmbedder
from gaml.node.home import open_node
from gaml.node.shells.file_keychain import Unlock
from gaml.policy.model import Heat, Tier


def main() -> None:
    home, count, start = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    visit = sys.argv[4:] == ["visit"]
    node = open_node(home, Unlock.from_env(), embedder=HashEmbedder())
    for i in range(start, start + count):
        drafts = [
            {
                "asset_type": "fact",
                "payload": {"text": f"crash record {i} part {j} token{i}x{j}"},
                "owner_id": "alice",
                "entities": [f"entity{i}"],
            }
            for j in range(3)
        ]
        ids = node.put(drafts, now=1_700_000_000_000_000 + i)
        print(" ".join(ids), flush=True)  # acknowledged: the batch's commit has returned
        if visit:
            heat = Heat(visits=i - start + 1, last_access=1_700_000_000_000_000 + i, score=1.0)
            node.store.update_local([(id_, Tier.HOT, heat) for id_ in ids], sync=False)
            print("visited " + " ".join(ids), flush=True)
        if i % 40 == 39:
            node.checkpoint()
    node.close()


if __name__ == "__main__":
    main()
