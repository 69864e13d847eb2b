"""`make demo`: a GAML node in a temporary home, served by its daemon, driven through its real command line and
its gRPC API.

1. Set up (the store directly, before the daemon runs): ``gaml init`` (MiniLM embeddings, RocksDB, per-partition HNSW,
   a passphrase-sealed keychain), the example assets (``deploy/examples/assets.jsonl``: three dozen facts, goals,
   plans and policies of several owners across private, device, tenant and public scopes), principals, a grant, and
   ``gaml certs`` (a node CA, client certificates for bob and carol).
2. ``gaml run``: the daemon serves the node on its Unix socket (the caller is alice, by the kernel's peer
   credentials) and on 127.0.0.1 with mutual TLS (bob and carol, by their certificates).
3. Through the daemon: ingest a coding agent's session log (``deploy/examples/session.jsonl``, written for this demo),
   hydrate a context frame for a goal and print it with its receipt, search as alice over the socket and as bob and
   carol over mTLS (each sees only what they may), refuse a client without a certificate, show alice's access log,
   forget an item.
4. SIGTERM: the daemon drains and stops cleanly; then every file of the home is scanned for private text.
5. Replication: the home becomes alice's laptop; her phone is paired with it (``gaml pair``), and a third, unrelated
   node dials in. Over libp2p on 127.0.0.1, a private plan written on the laptop appears on the phone (a local-only
   note does not), the phone's edit comes back merged, the unrelated node hears no object id, and forgetting the
   plan on the laptop erases it on the phone. Finally the unrelated node's files are scanned for the plan.

Run it with ``make demo`` (or ``python -m gaml.deploy.demo [--keep] [--embedder hash]``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from gaml.node.serve.client import Client

EXAMPLES = Path(__file__).with_name("examples") / "assets.jsonl"
SESSION = Path(__file__).with_name("examples") / "session.jsonl"
SESSION_SECRETS = [b"sk_test_51HxQeR2eZvKYlo2C8Nf3kLmNoPq", b"s3cr3t-pw", b"Priya Raman", b"priya.raman@example.com"]


def gaml(home: Path, *args: str, stdin: str | None = None) -> str:
    cmd = [sys.executable, "-m", "gaml.node.cli", "--home", str(home), *args]
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

    banner("gaml hydrate --goal 'why did the login test fail?' --budget 200 --as alice  (a frame and its receipt)")
    out = json.loads(
        gaml(home, "hydrate", "--goal", "why did the login test fail?", "--budget", "200", "--as", "alice", "--json")
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
    log = json.loads(gaml(home, "access-log", "--limit", "1", "--json"))
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


def start_daemon(home: Path, *extra: str) -> tuple[subprocess.Popen[str], list[dict[str, Any]]]:
    """``gaml run`` in a child process; returns once its log says it serves (its JSON log lines are kept)."""
    cmd = [sys.executable, "-m", "gaml.node.cli", "--home", str(home), "run", "--principal", "alice", *extra]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    log: list[dict[str, Any]] = []
    assert proc.stderr is not None
    for line in proc.stderr:
        entry = _log_line(line, log)
        if entry and entry.get("event") == "serving":
            return proc, log
    sys.exit(f"demo: the daemon exited ({proc.wait()}) before serving: {log[-3:]}")


def _log_line(line: str, log: list[dict[str, Any]]) -> dict[str, Any] | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    log.append(entry)
    return entry if isinstance(entry, dict) else None


def stop_daemon(proc: subprocess.Popen[str], log: list[dict[str, Any]]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.stderr is not None
    rest: IO[str] = proc.stderr
    for line in rest:
        _log_line(line, log)
    code = proc.wait(120)
    for e in log:
        if e.get("event") in ("stopping", "stopped"):
            print(json.dumps(e))
    if code != 0:
        sys.exit(f"demo: the daemon exited with {code}")


def mtls_act(home: Path, certs_dir: Path, address: str) -> None:
    """bob and carol over TCP with mutual TLS: each is the principal of their certificate, and sees what they may."""
    question = "what is Alice training for?"
    for who in ("bob", "carol"):
        key, cert, ca = (certs_dir / f"{who}.key", certs_dir / f"{who}.crt", certs_dir / "ca.crt")
        with Client.mtls(address, key.read_bytes(), cert.read_bytes(), ca.read_bytes()) as c:
            st = c.status()
            hits = c.search(question, k=3)
        print(f"{who} over {st['transport']} (certificate {cert.name}): {len(hits)} result(s) for {question!r}")
        for h in hits:
            text = h["asset"]["payload"].get("text", "")
            print(f"  {h['score']:.4f} {h['asset']['privacy_scope']:<14} owner={h['asset']['owner_id']:<6} {text[:70]}")
    ca_pem = (certs_dir / "ca.crt").read_bytes()
    banner(f"a client without a certificate dials {address}")
    with Client.mtls(address, b"", b"", ca_pem, timeout_s=10) as c:  # no key, no certificate
        try:
            c.status()
            sys.exit("demo: a client without a certificate was served")
        except Exception as e:
            print(f"refused: {type(e).__name__}: {str(e)[:160]}")


PLAN = "alice renews her passport on 14 March; the appointment code is QX-7731"


def wait_for(what: str, check: Any, timeout_s: float = 90.0) -> float:
    """Poll ``check()`` until it is true; the seconds it took (the demo stops with a message on timeout)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        if check():
            return time.perf_counter() - t0
        time.sleep(0.05)
    sys.exit(f"demo: {what} did not happen within {timeout_s:.0f} s")


def has_asset(home: Path, id_: str) -> bool:
    """Whether alice can get the asset from the node's daemon (over its socket: a poll costs a millisecond)."""
    from gaml.policy.errors import NotFound

    with Client.unix(home / "run" / "gaml.sock") as c:
        try:
            c.get(id_)
        except NotFound:
            return False
    return True


def replication_act(tmp: Path, laptop: Path, embedder: str, daemons: list[subprocess.Popen[str]]) -> None:
    """Act two: alice's laptop (the home above) and her phone replicate her private memory over libp2p; a third,
    unrelated node on the same loopback dials in and receives nothing."""
    phone, other = tmp / "phone", tmp / "other"
    banner("act two: replication.  gaml init  (alice's phone, and an unrelated node)")
    for h in (phone, other):
        print(gaml(h, "init", "--embedder", embedder).strip())
    phone_id = json.loads(gaml(phone, "peers", "--json"))["node_id"]

    banner("gaml pair <phone's node id> --owner alice --out invite.json  (on the laptop: alice's devices)")
    invite = tmp / "invite.json"
    print(gaml(laptop, "pair", phone_id, "--owner", "alice", "--out", str(invite)).strip())
    banner("gaml pair --join invite.json  (on the phone)")
    print(gaml(phone, "pair", "--join", str(invite)).strip())

    banner("gaml run --p2p /ip4/127.0.0.1/tcp/0  (laptop); the phone and the unrelated node dial it (--peer)")
    up = start_daemon(laptop, "--p2p", "/ip4/127.0.0.1/tcp/0")
    daemons.append(up[0])
    address = json.loads((laptop / "run" / "daemon.json").read_text())["p2p"][0]
    print(f"laptop listens on {address}")
    logs = [up]
    for h in (phone, other):
        d = start_daemon(h, "--p2p", "/ip4/127.0.0.1/tcp/0", "--peer", address)
        daemons.append(d[0])
        logs.append(d)

    banner("on the laptop: a private plan (user_private, replication trusted_devices) and a local-only note")
    plan = {
        "asset_type": "plan",
        "payload": {"text": PLAN},
        "owner_id": "alice",
        "privacy_scope": "user_private",
        "replication_policy": "trusted_devices",
        "tags": ["travel"],
    }
    note = {**plan, "payload": {"text": "the spare key is under the blue pot"}, "privacy_scope": "local_only"}
    plan_id = gaml(laptop, "put", stdin=json.dumps(plan)).strip()
    note_id = gaml(laptop, "put", stdin=json.dumps(note)).strip()
    took = wait_for("the plan reaching the phone", lambda: has_asset(phone, plan_id))
    print(f"the phone has the plan after {took:.2f} s (a node's first write also loads its embedding model):")
    got = json.loads(gaml(phone, "get", plan_id, "--as", "alice"))
    print(
        f"  {got['payload']['text']!r}  tags={got['tags']}  (materialized and signed by the phone: "
        f"{got['source_node'][:12]}… = {phone_id[:12]}…)"
    )
    print(f"the local-only note on the phone: {'present!' if has_asset(phone, note_id) else 'absent (it never left)'}")

    banner("the phone edits the plan (a tag); the laptop sees the merged record")
    gaml(phone, "put", stdin=json.dumps({**plan, "tags": ["travel", "booked"]}))
    wait_for(
        "the phone's edit reaching the laptop",
        lambda: "booked" in json.loads(gaml(laptop, "get", plan_id, "--as", "alice"))["tags"],
    )
    print(f"laptop: tags={json.loads(gaml(laptop, 'get', plan_id, '--as', 'alice'))['tags']}")

    banner("gaml peers  (laptop)")
    print(gaml(laptop, "peers").rstrip())
    banner("gaml peers --json  (the unrelated node: connected to the laptop, in no boundary)")
    st = json.loads(gaml(other, "peers", "--json"))
    for peer, s in st["peers"].items():
        print(
            f"  from {peer[:12]}…: frames in {s['frames_in']}, object ids heard {s['ids_heard']}, "
            f"objects received {s['objects_received']}, open boundaries {s['open_boundaries']}"
        )
    print(f"  its search for the plan: {len(json.loads(gaml(other, 'search', 'passport appointment', '--json')))} hits")

    banner("gaml forget <the plan> --as alice  (laptop): the tombstone erases it on the phone too")
    print(gaml(laptop, "forget", plan_id, "--as", "alice").strip()[:200])
    took = wait_for("the tombstone reaching the phone", lambda: not has_asset(phone, plan_id))
    print(f"the phone no longer has the plan ({took:.2f} s)")

    banner("SIGTERM to the three daemons; scan the unrelated node's files for the plan")
    for proc, log in logs:
        stop_daemon(proc, log)
    needles = [PLAN.encode(), b"QX-7731", b"spare key"]
    files = [p for p in other.rglob("*") if p.is_file()]
    found = [n.decode() for n in needles for p in files if n in p.read_bytes()]
    print(
        f"searched {len(files)} files of the unrelated node: {'FOUND ' + ', '.join(found) if found else 'none found'}"
    )
    if found:
        sys.exit("demo: the unrelated node holds alice's plan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the temporary home and print its path")
    ap.add_argument("--embedder", default="minilm", choices=["minilm", "hash"])
    args = ap.parse_args()
    os.environ["GAML_PASSPHRASE"] = "demo passphrase (a real node asks for one, or reads it from a secret store)"
    tmp = Path(tempfile.mkdtemp(prefix="gaml-demo-", dir="/tmp"))  # short: Unix-socket paths are limited to 107 bytes
    home = tmp / "home"
    certs_dir = tmp / "certs"
    t0 = time.perf_counter()
    daemon: tuple[subprocess.Popen[str], list[dict[str, Any]]] | None = None
    daemons: list[subprocess.Popen[str]] = []  # the replication act's, killed at the end if still running
    try:
        banner(f"gaml init  (home {home})")
        print(gaml(home, "init", "--embedder", args.embedder).strip())

        banner("gaml principal add …  (alice in tenant acme, bob in globex, carol alone; before any tenant's memory)")
        for argv in (["alice", "--tenant", "acme"], ["bob", "--tenant", "globex"], ["carol"]):
            print(gaml(home, "principal", "add", *argv).strip())

        banner(f"gaml put  ({EXAMPLES.name}: 36 assets of several owners across 7 scopes, loaded before serving)")
        ids = gaml(home, "put", str(EXAMPLES)).split()
        print(f"stored {len(ids)} assets; first ids: {', '.join(ids[:3])} …")

        banner("gaml grant --as alice --to carol --segment personal --max-level l0")
        grant = json.loads(
            gaml(home, "grant", "--as", "alice", "--to", "carol", "--segment", "personal", "--max-level", "l0")
        )
        print(f"grant {grant['id']}: alice's 'personal' segment to carol, up to {grant['max_level']}")

        banner("gaml certs init; gaml certs issue bob|carol  (a node CA; client certificates name a principal)")
        print(gaml(home, "certs", "init").strip())
        for who in ("bob", "carol"):
            issued = json.loads(gaml(home, "certs", "issue", who, "--out", str(certs_dir)))
            print(f"{who}: serial {issued['serial'][:16]}…, key {Path(issued['key']).name} (0600, only in {certs_dir})")

        banner("gaml run --principal alice --listen 127.0.0.1:0  (the daemon; its log is JSON lines)")
        daemon = start_daemon(home, "--listen", "127.0.0.1:0")
        serving = next(e for e in daemon[1] if e.get("event") == "serving")
        print(json.dumps(serving))

        banner("gaml stats  (the CLI finds the daemon and talks to it over the socket: you are alice)")
        print(gaml(home, "stats").rstrip())

        ingest_act(home)

        banner("gaml search 'what is Alice training for?'  (alice, over the Unix socket)")
        print(gaml(home, "search", "what is Alice training for?", "--k", "3").rstrip())
        banner(f"bob and carol over TCP with mutual TLS ({serving['listen']})")
        mtls_act(home, certs_dir, serving["listen"])

        banner("gaml access-log  (alice's: who read her memory, for what, how)")
        print(gaml(home, "access-log", "--limit", "8").rstrip())

        banner("SIGTERM: the daemon stops accepting, drains in-flight calls, snapshots its indexes, and exits")
        stop_daemon(*daemon)
        daemon = None
        print(f"socket left behind: {(home / 'run' / 'gaml.sock').exists()}")

        banner("encryption at rest: scan every file under the home for private strings")
        needles = [b"green tea in the morning", b"allergic to peanuts", b"security review", b"Maya", *SESSION_SECRETS]
        found = [n.decode() for n in needles for p in home.rglob("*") if p.is_file() and n in p.read_bytes()]
        print(
            f"searched {sum(1 for p in home.rglob('*') if p.is_file())} files for {len(needles)} private strings: "
            f"{'FOUND ' + ', '.join(found) if found else 'none found'}"
        )
        if found:
            sys.exit("demo: private text found on disk")

        banner("gaml stats  (the daemon has stopped: the CLI opens the store itself)")
        print(gaml(home, "stats").rstrip())

        replication_act(tmp, home, args.embedder, daemons)
        print(f"\ndemo finished in {time.perf_counter() - t0:.1f} s")
    finally:
        for proc in [*([daemon[0]] if daemon else []), *daemons]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if args.keep:
            print(f"home kept at {home}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
