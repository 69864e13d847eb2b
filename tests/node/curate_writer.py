"""A curation process for the ladder's crash test: it ingests, then curates, reporting each write of curation.

Usage: python curate_writer.py HOME LOCOMO_PATH SOURCES NOW

It ingests the first SOURCES sessions of the LoCoMo file with curation deferred, prints ``ingested``, then curates.
After each write of curation (``Node.put``, ``Store.delete``, ``Store.write_meta``) it prints the write's name and
waits for a line on stdin before going on, so the parent's SIGKILL lands right after the write it chose. It prints
``done`` at the end.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gaml.node.core.embed import HashEmbedder
from gaml.node.core.memory.ingest import IngestOptions, Ingestor
from gaml.node.core.memory.ladder import Ladder
from gaml.node.core.text import parsers
from gaml.node.core.text.privacy import Rules
from gaml.node.home import open_node
from gaml.node.shells.file_keychain import Unlock


def reported(name: str, write: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kw: Any) -> Any:
        out = write(*args, **kw)
        print(name, flush=True)  # the write has committed
        sys.stdin.readline()  # the parent's go-ahead (or, instead, its SIGKILL)
        return out

    return call


def main() -> None:
    home, data, count, now = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    node = open_node(home, Unlock.from_env(), embedder=HashEmbedder())
    ing = Ingestor(node, Rules.load_default())
    ing.ingest(parsers.parse(data.read_bytes(), data.name, "locomo")[:count], IngestOptions(owner="alice"), now)
    print("ingested", flush=True)
    sys.stdin.readline()
    node.put = reported("put", node.put)  # type: ignore[method-assign]
    node.store.delete = reported("delete", node.store.delete)  # type: ignore[method-assign]
    node.store.write_meta = reported("write_meta", node.store.write_meta)  # type: ignore[method-assign]
    Ladder(node, ing).curate(now)
    print("done", flush=True)
    node.close()


if __name__ == "__main__":
    main()
