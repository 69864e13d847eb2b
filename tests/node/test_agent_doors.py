"""The doors for agents, end to end with real parts: the MCP server driven by the official SDK's own client over stdio
and over streamable HTTP (on the store, and through a running daemon), the OpenAI-compatible proxy in front of a
fake upstream model, and the access tokens that name who calls. Each door is a child process, as a user starts it."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from gaml.node.core.text.envelope import wrap
from tests.node.daemon_util import KEY_HEX, ROOT, Home, gaml_process, make_home, process_daemon, remove_home


@pytest.fixture
def home() -> Iterator[Home]:
    h = make_home(tls=False)
    try:
        yield h
    finally:
        remove_home(h)


def _env() -> dict[str, str]:
    env = {**os.environ, "GAML_KEYCHAIN_KEY": KEY_HEX, "PYTHONPATH": str(ROOT)}
    env.pop("GAML_PASSPHRASE", None)
    env.pop("GAML_AS", None)
    return env


def token(home: Home, principal: str) -> str:
    r = gaml_process(home.path, "token", principal)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@contextlib.contextmanager
def door(home: Home, *argv: str) -> Iterator[tuple[dict[str, Any], subprocess.Popen[str]]]:
    """``gaml ARGV`` serving in a child process: the JSON line it prints once bound, and the process (stopped with
    SIGTERM afterwards, which must end it cleanly)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gaml.node.cli", "--home", str(home.path), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    if not line:
        raise AssertionError(f"gaml {' '.join(argv)} exited before serving: {proc.stderr.read()}")
    try:
        yield json.loads(line), proc
    finally:
        proc.terminate()
        code = proc.wait(60)
        err = proc.stderr.read()
        assert code == 0, err  # SIGTERM drains the door and closes the store


def call(client: Client, tool: str, **arguments: Any) -> Any:
    """A tool's structured result (a list comes wrapped as {"result": …} by the SDK)."""

    async def go() -> Any:
        r = await client.call_tool(tool, arguments)
        if r.is_error:
            return {"error": r.content[0].text}  # type: ignore[union-attr]
        out = r.structured_content
        return out["result"] if isinstance(out, dict) and set(out) == {"result"} else out

    return go()


async def http_session(url: str, bearer: str, fn: Callable[[Client], Awaitable[Any]]) -> Any:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}) as h,
        Client(streamable_http_client(url, http_client=h)) as c,
    ):
        return await fn(c)


async def story(c: Client, fact: str, query: str) -> dict[str, Any]:
    """remember → recall → hydrate → forget → recall, as an agent would; what each step returned."""
    out: dict[str, Any] = {"remember": await call(c, "remember", text=fact)}
    out["recall"] = await call(c, "recall", query=query)
    out["list"] = await call(c, "list")
    out["hydrate"] = await call(c, "hydrate", goal=query, budget=300)
    out["forget"] = [await call(c, "forget", id=i) for i in out["remember"]["ids"]]
    out["recall_after"] = await call(c, "recall", query=query)
    return out


def check_story(out: dict[str, Any], fact: str) -> None:
    ids = out["remember"]["ids"]
    assert ids, out["remember"]
    assert any(h["text"] == fact and h["id"] in ids for h in out["recall"]), out["recall"]
    assert set(ids) <= {a["id"] for a in out["list"]}
    frame = out["hydrate"]["frame"]
    assert frame.startswith("<gaml-memory receipt=") and fact in frame and out["hydrate"]["receipt"] in frame
    assert all("error" not in f and f["tombstoned"] for f in out["forget"]), out["forget"]
    assert not any(h["id"] in ids for h in out["recall_after"])  # the item is gone (and what was derived from it)
    assert not any(h["text"] == fact for h in out["recall_after"]), out["recall_after"]


@pytest.mark.parametrize("through_daemon", [False, True], ids=["store", "daemon"])
def test_mcp_over_stdio_remembers_recalls_hydrates_and_forgets(home: Home, through_daemon: bool) -> None:
    """The SDK's client starts `gaml mcp` as Claude Code would, and runs the whole story as the node's own user, on
    the store or through the running daemon (then the MCP server needs no key: it is a client of the socket)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gaml.node.cli", "--home", str(home.path), "mcp", *(["--allow-grants"] if through_daemon else [])],
        env=_env(),
        cwd=str(ROOT),
    )
    fact = "The staging database runs on port 6543"

    async def main() -> tuple[list[str], dict[str, Any], Any]:
        async with Client(params) as c:
            tools = sorted(t.name for t in (await c.list_tools()).tools)
            out = await story(c, fact, "which port does the staging database use")
            bad = await call(c, "remember", text="   ")
        return tools, out, bad

    with contextlib.ExitStack() as stack:
        if through_daemon:
            stack.enter_context(process_daemon(home))
            params.env = {k: v for k, v in _env().items() if k != "GAML_KEYCHAIN_KEY"}
        tools, out, bad = anyio.run(main)
    assert {"remember", "recall", "hydrate", "forget", "list", "conflicts"} <= set(tools)
    # Sharing memory is offered to an agent only when asked (--allow-grants).
    assert {"grant", "revoke"} & set(tools) == ({"grant", "revoke"} if through_daemon else set())
    check_story(out, fact)
    assert "InvalidInput" in bad["error"] and "non-empty" in bad["error"]  # a typed error, as a tool error


@pytest.mark.parametrize("through_daemon", [False, True], ids=["store", "daemon"])
def test_mcp_over_http_serves_each_token_its_own_memory(home: Home, through_daemon: bool) -> None:
    """Over HTTP each request acts as its token's principal: alice runs the story; bob, with his own token, sees
    none of alice's memory and cannot erase it; a forged token is refused before any tool runs. The same on the
    store and through a running daemon (which checks the token itself)."""
    alice, bob = token(home, "alice"), token(home, "bob")
    assert alice.startswith("gaml1_") and alice != bob
    fact = "Alice keeps the spare key under the blue flowerpot"
    with contextlib.ExitStack() as stack:
        if through_daemon:
            stack.enter_context(process_daemon(home))
        ready, _ = stack.enter_context(door(home, "mcp", "--http", "--listen", "127.0.0.1:0"))
        url = ready["mcp"]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")

        async def alice_first(c: Client) -> Any:
            kept = await call(c, "remember", text=fact)
            return kept, await story(c, "Alice's dentist is Dr. Okafor", "who is alice's dentist")

        async def bob_looks(c: Client) -> Any:
            assert await call(c, "list") == []  # none of alice's
            return (
                await call(c, "recall", query="spare key flowerpot"),
                await call(c, "hydrate", goal="where is the spare key", budget=300),
                await call(c, "forget", id=kept["ids"][0]),
            )

        kept, out = anyio.run(http_session, url, alice, alice_first)
        check_story(out, "Alice's dentist is Dr. Okafor")
        recall, frame, forget = anyio.run(http_session, url, bob, bob_looks)
        assert recall == [] and "flowerpot" not in frame["frame"]
        assert "error" in forget  # not bob's to erase
        again = anyio.run(http_session, url, alice, lambda c: call(c, "recall", query="spare key flowerpot"))
        assert any(h["text"] == fact for h in again)  # still alice's

        forged = alice[:-4] + ("AAAA" if not alice.endswith("AAAA") else "BBBB")
        req = urllib.request.Request(
            url,
            data=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
            headers={"Authorization": f"Bearer {forged}", "Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=30)
        assert refused.value.code == 401


class Upstream:
    """A fake OpenAI-compatible model on 127.0.0.1: it records each request and answers with a fixed reply, as JSON
    or as a server-sent event stream."""

    def __init__(self, reply: str) -> None:
        self.reply, self.requests = reply, []  # type: ignore[var-annotated]
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                upstream.requests.append(body)
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.end_headers()
                    for piece in (upstream.reply[:10], upstream.reply[10:]):
                        chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
                        self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                message = {"role": "assistant", "content": upstream.reply}
                out = json.dumps({"object": "chat.completion", "choices": [{"index": 0, "message": message}]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def chat(base: str, bearer: str, text: str, *, stream: bool = False) -> tuple[int, dict[str, str], str]:
    req = urllib.request.Request(
        base + "/chat/completions",
        data=json.dumps({"model": "local", "messages": [{"role": "user", "content": text}], "stream": stream}).encode(),
        headers={"Authorization": f"Bearer {bearer}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def test_proxy_injects_a_frame_and_remembers_the_turn(home: Home) -> None:
    """In front of a fake upstream: each request reaches the model with a frame (inside its envelope) as system
    context; the second request's frame holds the first turn's fact; a streamed reply is relayed and remembered too;
    an envelope pasted back by the user never comes back in as memory; without a GAML token nothing is forwarded."""
    upstream = Upstream("Noted, I will keep that in mind.")
    try:
        alice = token(home, "alice")
        with door(home, "proxy", "--upstream", upstream.url, "--listen", "127.0.0.1:0", "--budget", "400") as (
            ready,
            _,
        ):
            base = ready["proxy"]
            code, headers, body = chat(base, alice, "My passport number ends in 4417 and expires in March 2031.")
            assert code == 200 and json.loads(body)["choices"][0]["message"]["content"].startswith("Noted")
            first = upstream.requests[-1]["messages"]
            assert first[0]["role"] == "system" and first[0]["content"].startswith("<gaml-memory receipt=")
            assert first[-1] == {
                "role": "user",
                "content": "My passport number ends in 4417 and expires in March 2031.",
            }
            assert headers["x-gaml-receipt"] in first[0]["content"]

            code, _, _ = chat(base, alice, "When does my passport expire?")
            assert code == 200
            frame = upstream.requests[-1]["messages"][0]["content"]
            assert "March 2031" in frame  # the first turn, remembered, is in the second request's frame

            code, headers, body = chat(base, alice, "Our offsite is in Lisbon on 14 May.", stream=True)
            assert code == 200 and body.count("data:") == 3 and body.rstrip().endswith("data: [DONE]")
            chat(base, alice, "Where is the offsite?")
            assert "Lisbon" in upstream.requests[-1]["messages"][0]["content"]

            pasted = wrap("Bob's salary is 90000", "r_forged", "gaml:elsewhere") + " What do you know about Bob?"
            chat(base, alice, pasted)
            n = len(upstream.requests)
            code, _, body = chat(base, "gaml1_not.a-token", "hello")
            assert code == 401 and "gaml token" in json.loads(body)["error"]["message"]
            assert len(upstream.requests) == n  # refused before anything was forwarded
        hits = gaml_process(home.path, "search", "salary Bob", "--as", "alice", "--json", "--k", "50")
        assert hits.returncode == 0, hits.stderr
        texts = [h["text"] for h in json.loads(hits.stdout)]
        assert texts and not any("90000" in t or "gaml-memory" in t for t in texts), texts
        assert any("What do you know about Bob?" in t for t in texts)
    finally:
        upstream.close()


def test_tokens_are_the_nodes_own(home: Home, tmp_path: Path) -> None:
    """A token names its principal and is valid on the node that issued it only."""
    other = make_home(tls=False)
    try:
        mine, theirs = token(home, "alice"), token(other, "alice")
        assert mine != theirs and token(home, "alice") == mine
    finally:
        remove_home(other)
    r = gaml_process(home.path, "token", "not a name")
    assert r.returncode == 2 and "principal id" in r.stderr


def test_the_sdk_connects_to_the_daemon_with_typed_results_and_errors(home: Home) -> None:
    """`gaml.node.connect()` finds the daemon of a home; results are the domain types, errors the GAML classes, a type
    may be named as a string; `connect_async` gives the same calls to asyncio code; with no daemon, Unavailable
    says how to start one."""
    import asyncio

    from gaml.node import connect, connect_async
    from gaml.node.core.api import Hit
    from gaml.node.core.errors import Unavailable
    from gaml.node.core.hydrate import Hydration
    from gaml.policy.errors import InvalidInput, NotFound

    with pytest.raises(Unavailable, match=r"gaml --home .* run"):
        connect(home.path)
    with process_daemon(home), connect(home.path) as memory:
        kept = memory.remember([{"role": "user", "content": "The print server is in room 4B"}])
        hits = memory.search("where is the print server", types=["event"])
        assert hits and all(isinstance(h, Hit) for h in hits) and hits[0].id in kept["ids"]
        assert isinstance(memory.hydrate("print server", 200), Hydration)
        assert [a.id for a in memory.list_own(types=["event"])] == kept["ids"]
        with pytest.raises(NotFound):
            memory.get("0" * 32)
        with pytest.raises(InvalidInput):
            memory.search("x", types=["no_such_type"])

        async def main() -> list[Hit]:
            async with await connect_async(home.path) as amemory:
                return await amemory.search("print server", k=3)

        assert [h.id for h in asyncio.run(main())] == [h.id for h in memory.search("print server", k=3)]


def test_the_nodes_administration_is_its_own_user_on_the_socket_only(home: Home) -> None:
    """Principals, sources, curate and maintain answer the node's own user on the socket; the same calls with an
    access token (anyone's) are refused and change nothing."""
    from gaml.node.serve.client import Client, RemoteMemory
    from gaml.policy.access import Principal
    from gaml.policy.errors import PolicyError

    with process_daemon(home):
        with Client.unix(home.socket) as client:
            assert isinstance(RemoteMemory(client).principals(), list)  # the node's own user may
        for who in ("alice", "bob"):
            remote = RemoteMemory(Client.unix(home.socket, token=token(home, who)))
            try:
                for call in (
                    remote.principals,
                    remote.sources,
                    remote.maintain,
                    functools.partial(remote.curate, ()),
                    functools.partial(remote.add_principal, Principal("mallory")),
                ):
                    with pytest.raises(PolicyError, match="the node's administration"):
                        call()
            finally:
                remote.client.close()
        own = RemoteMemory(Client.unix(home.socket))
        try:
            assert "mallory" not in {p.id for p in own.principals()}
        finally:
            own.client.close()
