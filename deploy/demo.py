"""`make demo`: a GAML node in a temporary home, driven through its real command line.

It initialises a node (MiniLM embeddings, RocksDB, per-partition HNSW, a passphrase-sealed keychain), stores the
example assets (``deploy/examples/assets.jsonl``: three dozen facts, goals, plans and policies across private, device,
tenant and public scopes), runs searches as different principals, shows that each sees only what it may, reads a
private asset back decrypted, and proves the payloads are not on disk in the clear.

Run it with ``make demo`` (or ``python -m deploy.demo [--keep] [--embedder hash]``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXAMPLES = Path(__file__).with_name("examples") / "assets.jsonl"
SESSION = Path(__file__).with_name("examples") / "session.jsonl"
SESSION_SECRETS = [b"sk_test_51HxQeR2eZvKYlo2C8Nf3kLmNoPq", b"s3cr3t-pw", b"Priya Raman", b"priya.raman@example.com"]
SEARCHES = [
    ("alice", "what does Alice like to drink?"),
    ("bob", "what does Alice like to drink?"),
    ("bob", "food allergies"),
    ("alice", "when does the next release ship and what must happen first?"),
    ("bob", "when does the next release ship and what must happen first?"),
    ("carol", "what is Alice training for?"),
]


def gaml(home: Path, *args: str, stdin: str | None = None) -> str:
    cmd = [sys.executable, "-m", "node.cli", "--home", str(home), *args]
    out = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=os.environ.copy())
    if out.returncode != 0:
        sys.exit(f"demo: `gaml {' '.join(args)}` failed ({out.returncode}):\n{out.stderr}")
    return out.stdout


def ingest_act(home: Path) -> None:
    """An agent's session log becomes memory: items with goals and source pointers, rungs, redaction, erasure."""
    banner(f"gaml ingest {SESSION.name} --owner alice  (a coding agent's session log, 18 lines)")
    report = json.loads(gaml(home, "ingest", str(SESSION), "--owner", "alice"))
    keep = ("sources", "records", "items", "facts", "flagged", "redactions", "local_only", "curation")
    print(json.dumps({k: report[k] for k in keep}, indent=2))
    again = json.loads(gaml(home, "ingest", str(SESSION), "--owner", "alice"))
    print(f"ingest the same log again: {again['items']} new items, {again['skipped']} records behind the watermark")
    print(gaml(home, "sources").rstrip())

    banner("gaml search 'why did the login test fail' --as alice  (items carry their goal and source pointer)")
    hits = json.loads(gaml(home, "search", "why did the login test fail", "--as", "alice", "--k", "3", "--json"))
    for h in hits:
        item = json.loads(gaml(home, "get", h["id"], "--as", "alice"))
        print(
            f"- [{item['level']}] {h['text'][:100]}…\n  goal: {item['goal']!r}\n  source: {item['source']}"
            f"  kind: {item['payload'].get('kind', item['payload'].get('role'))}"
        )

    banner("the credentials in the tool output were redacted before anything was stored")
    hits = json.loads(
        gaml(home, "search", "stripe api key database url", "--as", "alice", "--type", "tool_result", "--json")
    )
    shown = next(h for h in hits if "STRIPE_API_KEY" in h["text"])
    print(shown["text"])

    banner("the ladder: the arc's L1 summary and L2 distillation, derived from the items (--tag rung:arc)")
    for level in ("l1", "l2"):
        hits = json.loads(
            gaml(home, "search", "invoice export profiling", "--as", "alice", "--tag", "rung:arc", "--k", "6", "--json")
        )
        rung = next(h for h in hits if h["level"] == level)
        asset = json.loads(gaml(home, "get", rung["id"], "--as", "alice"))
        print(f"{level}: {rung['text']}\n    derived from {len(asset['derived_from'])} items, {asset['privacy_scope']}")

    banner("gaml hydrate --goal 'why did the login test fail?' --budget 250 --as alice  (a frame and its receipt)")
    out = json.loads(
        gaml(home, "hydrate", "--goal", "why did the login test fail?", "--budget", "250", "--as", "alice", "--json")
    )
    print(out["frame"])
    r = out["receipt"]
    print(
        f"receipt {r['receipt']}: {r['budget']['spent']}/{r['budget']['total']} tokens ({r['counter']}), "
        f"path {r['path']}, {len(r['facts'])} facts, {r['beyond']['relevant']} relevant items left out"
    )
    for f in r["facts"][:4]:
        print(
            f"  {f['handle']:<4} {f['level']} {f['kind']:<4} seeded_by={f['seeded_by']:<16} score={f['score']:.4f} "
            f"tokens={f['tokens']:<3} covers {len(f['covers'])} item(s)"
        )
    log = json.loads(gaml(home, "access-log", "--as", "alice", "--limit", "1", "--json"))
    print(f"alice's access log: {log[0]['kind']} {log[0]['receipt']}, {len(log[0]['read'])} items read")

    banner("gaml forget <the item with Priya's email> --as alice  (the item, its facts and its influence go)")
    email = "priya.raman@example.com"
    hits = json.loads(gaml(home, "search", "who owns the billing service", "--as", "alice", "--k", "20", "--json"))
    target = next(h for h in hits if h["level"] == "l0" and email in h["text"])
    print(f"the item is {json.loads(gaml(home, 'get', target['id'], '--as', 'alice'))['privacy_scope']} (an email)")
    before = sum(email in h["text"] for h in hits)
    print(gaml(home, "forget", target["id"], "--as", "alice").rstrip())
    left = json.loads(gaml(home, "search", "who owns the billing service", "--as", "alice", "--k", "20", "--json"))
    print(
        f"search results holding the email: {before} before, {sum(email in h['text'] for h in left)} after; "
        "the rungs compiled from the item were rebuilt without it"
    )


def banner(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m" if sys.stdout.isatty() else f"\n== {text}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the temporary home and print its path")
    ap.add_argument("--embedder", default="minilm", choices=["minilm", "hash"])
    args = ap.parse_args()
    os.environ["GAML_PASSPHRASE"] = "demo passphrase (a real node asks for one, or reads it from a secret store)"
    tmp = Path(tempfile.mkdtemp(prefix="gaml-demo-"))
    home = tmp / "home"
    t0 = time.perf_counter()
    try:
        banner(f"gaml init  (home {home})")
        print(gaml(home, "init", "--embedder", args.embedder).strip())

        banner(f"gaml put  ({EXAMPLES.name}: 36 assets across 7 scopes)")
        ids = gaml(home, "put", str(EXAMPLES)).split()
        print(f"stored {len(ids)} assets; first ids: {', '.join(ids[:3])} …")
        again = gaml(home, "put", str(EXAMPLES)).split()
        print(f"put the same file again: {len(again)} ids, identical: {again == ids} (content-derived ids: an upsert)")

        banner("gaml principal add …  (alice in tenant acme, bob in globex, carol on her own)")
        for argv in (["alice", "--tenant", "acme"], ["bob", "--tenant", "globex"], ["carol"]):
            print(gaml(home, "principal", "add", *argv).strip())
        banner("gaml grant --as alice --to carol --segment personal --max-level l0")
        grant = json.loads(
            gaml(home, "grant", "--as", "alice", "--to", "carol", "--segment", "personal", "--max-level", "l0")
        )
        print(f"grant {grant['id']}: alice's 'personal' segment to carol, up to {grant['max_level']}")

        for who, text in SEARCHES:
            banner(f"gaml search {text!r} --as {who}")
            print(gaml(home, "search", text, "--as", who, "--k", "3").rstrip())

        banner("gaml search … --json  (why a result is there)")
        top = json.loads(gaml(home, "search", "green tea", "--as", "alice", "--k", "1", "--json"))[0]
        print(
            json.dumps(
                {k: top[k] for k in ("id", "score", "path", "dense", "lexical", "via", "partition", "stages")}, indent=2
            )
        )

        banner(f"gaml revoke {grant['id']} --as alice; carol searches again")
        gaml(home, "revoke", grant["id"], "--as", "alice")
        print(gaml(home, "search", "what is Alice training for?", "--as", "carol", "--k", "3").rstrip())

        banner("gaml access-log --as alice  (who read alice's memory)")
        print(gaml(home, "access-log", "--as", "alice", "--limit", "8").rstrip())

        banner("gaml get <Alice's first asset>  (decrypted for its owner's node)")
        asset = json.loads(gaml(home, "get", ids[0], "--as", "alice"))
        keep = ("id", "asset_type", "payload", "owner_id", "privacy_scope", "entities", "encryption_key_ref", "version")
        print(json.dumps({k: asset[k] for k in keep}, indent=2))
        print(f"signature: {asset['signature'][:24]}… by node {asset['source_node'][:16]}…")

        ingest_act(home)

        banner("encryption at rest: scan every file under the home for private strings")
        needles = [b"green tea in the morning", b"allergic to peanuts", b"security review", b"Maya", *SESSION_SECRETS]
        found = [n.decode() for n in needles for p in home.rglob("*") if p.is_file() and n in p.read_bytes()]
        print(
            f"searched {sum(1 for p in home.rglob('*') if p.is_file())} files for {len(needles)} private strings: "
            f"{'FOUND ' + ', '.join(found) if found else 'none found'}"
        )
        if found:
            sys.exit("demo: private text found on disk")

        banner("gaml stats")
        print(gaml(home, "stats").rstrip())
        print(f"\ndemo finished in {time.perf_counter() - t0:.1f} s")
    finally:
        if args.keep:
            print(f"home kept at {home}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
