"""A writer process for the crash test: puts assets one small batch at a time and prints each acknowledged id.

Usage: python crash_writer.py HOME COUNT START (START offsets the content, so each run writes new assets).
It checkpoints every 40 batches so kills also land inside snapshot writes.
The parent kills it with SIGKILL at an arbitrary point.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gaml.node.core.embed import HashEmbedder
from gaml.node.home import open_node
from gaml.node.shells.file_keychain import Unlock


def main() -> None:
    home, count, start = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
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
        if i % 40 == 39:
            node.checkpoint()
    node.close()


if __name__ == "__main__":
    main()
