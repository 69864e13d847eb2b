"""The MCP door: a node's memory as tools for agents (Claude Code, Cursor, Claude Desktop, any MCP client), over stdio
(``gaml mcp``) or streamable HTTP (``gaml mcp --http``), with the official Python SDK (``mcp``).

Every tool is one call of :class:`gaml.node.core.api.Memory`, so the MCP door keeps the rules of every other door:
privacy before ranking, the caller's own memory only, the same typed errors (an error is a tool result marked as one,
naming the problem). Who the caller is:

- over **stdio**, the node's own user (or ``--as`` on the store): the agent runs as you, on your machine;
- over **HTTP**, the principal whose access token (``gaml token PRINCIPAL``) the request bears: a request without a
  token this node issued is refused (401) before any tool runs, and each principal sees only its own memory.

A frame from ``hydrate`` comes inside its ``<gaml-memory>`` envelope; anything sent back to ``remember`` has every
envelope stripped before it is stored (the ingest path does it), so memory does not feed on its own frames.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import AnyHttpUrl

from gaml.node.core.api import VERSION, Memory
from gaml.node.core.node import display_text
from gaml.node.serve.web import Runner, serve_asgi, url_host
from gaml.policy.errors import GamlError
from gaml.policy.model import AssetType, Level

T = TypeVar("T")

DEFAULT_HTTP: Final = "127.0.0.1:8765"
INSTRUCTIONS: Final = (
    "GAML is the user's long-term memory. Call `hydrate` with the task's goal before answering to get a context frame "
    "(what is known, with receipts); call `recall` to search; call `remember` with what is worth keeping (a fact, a "
    "preference, a decision, the user's question with your answer); `forget` erases an item by id."
)

# ``open_memory(principal)``: the memory as ``principal`` sees it (None: the door's own caller, over stdio).
OpenMemory = Callable[[str | None], Memory]


class TokenVerifier:
    """The bearer tokens of the HTTP door: ``principal_of(token)`` (raises when the node did not issue it)."""

    def __init__(self, principal_of: Callable[[str], str]) -> None:
        self._principal_of = principal_of

    async def verify_token(self, token: str) -> AccessToken | None:
        try:  # off the event loop: through a daemon it is a call to its socket
            principal = await anyio.to_thread.run_sync(self._principal_of, token)
        except GamlError:
            return None
        return AccessToken(token=token, client_id=principal, scopes=["memory"], subject=principal)


def _caller() -> str | None:
    """The principal of the HTTP request being served (its token's), or None over stdio."""
    token = get_access_token()
    return None if token is None else token.client_id


def _hit(h: Any) -> dict[str, Any]:
    row = h.row()
    return {k: row[k] for k in ("id", "score", "type", "level", "owner", "text") if k in row}


def build_server(
    open_memory: OpenMemory,
    run: Runner,
    *,
    principal_of: Callable[[str], str] | None = None,
    url: str = "",
    allow_grants: bool = False,
) -> MCPServer[Any]:
    """The MCP server over ``open_memory``. ``principal_of``: the HTTP door's token check (``url`` is where it is
    served); None over stdio."""
    auth = None
    verifier = None
    if principal_of is not None:
        verifier = TokenVerifier(principal_of)
        auth = AuthSettings(
            issuer_url=AnyHttpUrl(url or "http://127.0.0.1"),  # the node issues its tokens itself (`gaml token`)
            resource_server_url=AnyHttpUrl(url) if url else None,
            validate_token_resource=False,  # the verifier checks the node's own MAC: valid on this node only
            required_scopes=["memory"],
        )
    server: MCPServer[Any] = MCPServer(
        "gaml",
        title="GAML memory",
        instructions=INSTRUCTIONS,
        version=VERSION,
        token_verifier=verifier,
        auth=auth,
        log_level="WARNING",
    )

    async def call(fn: Callable[[Memory], T]) -> T:
        who = _caller()

        def job() -> T:
            return fn(open_memory(who))

        try:
            return await run(job)
        except GamlError as e:
            raise ToolError(f"{type(e).__name__}: {e}") from None

    @server.tool(
        description="Remember something worth keeping: a fact, a preference, a decision, or a chat turn "
        "(the user's message with the assistant's reply). Returns the ids of the items kept."
    )
    async def remember(text: str, role: str = "user", reply: str = "", session: str = "") -> dict[str, Any]:
        turns = [{"role": role, "content": text}]
        if reply:
            turns.append({"role": "assistant", "content": reply})
        report = await call(lambda m: m.remember(turns, session=session))
        return {"ids": report["ids"], "source": report["source"], "facts": int(report.get("facts", 0))}

    @server.tool(
        description="Search the memory you may read (privacy is applied before ranking). Returns hits with "
        "id, score, type, level, owner and text."
    )
    async def recall(query: str, k: int = 10, types: list[str] | None = None) -> list[dict[str, Any]]:
        try:
            kinds = [AssetType.parse(t) for t in types or []]
        except GamlError as e:
            raise ToolError(f"{type(e).__name__}: {e}") from None
        hits = await call(lambda m: m.search(query, k=k, types=kinds))
        return [_hit(h) for h in hits]

    @server.tool(
        description="A context frame for a goal within a token budget: what memory holds for it, inside a "
        "<gaml-memory> envelope, with its receipt id. Put the frame in your context as it is."
    )
    async def hydrate(goal: str, budget: int = 1000) -> dict[str, Any]:
        out = await call(lambda m: m.hydrate(goal, budget))
        r = out.receipt
        return {"frame": out.frame, "receipt": r["receipt"], "facts": len(r["facts"]), "spent": r["budget"]["spent"]}

    @server.tool(
        description="Erase one of your items (by id) and its influence: what was derived from it is "
        "rebuilt without it. Returns the erasure receipt."
    )
    async def forget(id: str) -> dict[str, Any]:
        receipt = await call(lambda m: m.forget(id))
        return dict(receipt.to_json())

    @server.tool(
        name="list",
        description="List your own memory, newest last (optionally only some asset types, or since a time in "
        "microseconds): id, type, level, created_at and text of each.",
    )
    async def list_memory(types: list[str] | None = None, since: int = 0, limit: int = 50) -> list[dict[str, Any]]:
        assets = await call(lambda m: m.list_own(types=types or [], since=since, limit=limit))
        return [
            {
                "id": a.id,
                "type": a.asset_type.value,
                "level": a.level.value,
                "created_at": a.created_at,
                "text": display_text(a),
            }
            for a in assets
        ]

    if allow_grants:  # sharing memory is the user's decision: an agent gets these tools only when asked

        @server.tool(
            description="Grant a principal (or a team) read access to your memory up to a level of detail "
            "(l0 verbatim … l3 skeleton). Returns the grant."
        )
        async def grant(to: str, max_level: str = "l2") -> dict[str, Any]:
            try:
                level = Level.parse(max_level)
            except GamlError as e:
                raise ToolError(f"{type(e).__name__}: {e}") from None
            g = await call(lambda m: m.grant(to, level))
            return dict(g.to_json())

        @server.tool(description="Revoke one of your grants (by its id).")
        async def revoke(grant_id: str) -> dict[str, Any]:
            g = await call(lambda m: m.revoke(grant_id))
            return dict(g.to_json())

    @server.tool(
        description="Where nodes you share memory with disagree: contested slots, their candidates and the "
        "winner, as your frames resolve them."
    )
    async def conflicts(slot: str = "") -> list[dict[str, Any]]:
        return await call(lambda m: m.conflicts(slot))

    return server


def serve_stdio(open_memory: OpenMemory, *, allow_grants: bool = False) -> None:
    """Serve MCP on stdin/stdout until the client closes it (the SDK's transport keeps stray prints off the wire)."""
    runner = Runner()
    try:
        anyio.run(build_server(open_memory, runner, allow_grants=allow_grants).run_stdio_async)
    finally:
        runner.close()


async def serve_http(
    open_memory: OpenMemory,
    principal_of: Callable[[str], str],
    host: str,
    port: int,
    *,
    ready: Callable[[str], None] | None = None,
    allow_grants: bool = False,
) -> None:
    """Serve MCP over streamable HTTP at ``http://host:port/mcp`` until cancelled; ``ready(url)`` once bound."""
    runner = Runner()
    try:
        url = f"http://{url_host(host)}:{port}/mcp"
        server = build_server(
            open_memory, runner, principal_of=principal_of, url=url if port else "", allow_grants=allow_grants
        )
        app = server.streamable_http_app(host=host)
        await serve_asgi(
            app, host, port, ready=None if ready is None else (lambda h, p: ready(f"http://{url_host(h)}:{p}/mcp"))
        )
    finally:
        runner.close()


__all__ = ["DEFAULT_HTTP", "INSTRUCTIONS", "OpenMemory", "TokenVerifier", "build_server", "serve_http", "serve_stdio"]
