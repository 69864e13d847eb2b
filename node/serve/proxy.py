"""The OpenAI-compatible memory proxy (``gaml proxy --upstream URL``): a local model (llama.cpp's server, Ollama,
vLLM — anything that speaks ``/v1/chat/completions``) gets memory without a line of glue.

For each chat completion the proxy

1. names the caller by the API key the client sends, which is a GAML access token (``gaml token PRINCIPAL``); a
   request without one is refused (401) before anything is read or forwarded;
2. hydrates a frame for the conversation's latest user message (envelopes stripped from it first) within
   ``--budget`` tokens, and puts it into the request as system context, inside its ``<gaml-memory>`` envelope;
3. forwards the request to the upstream (streaming or not) and relays its answer unchanged, with the receipt of the
   frame in the ``X-GAML-Receipt`` header;
4. remembers the turn — the user's message and the reply — for that principal (the ingest path strips every envelope,
   so the frame never comes back in as memory). The turn is queued before the answer is relayed, so the next request
   of the same principal hydrates with it.

If hydration fails (an unknown principal's empty memory is no failure), the request is forwarded without a frame and
the ``X-GAML-Frame`` header says why; a request the proxy cannot read is refused with an OpenAI-style error body.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

from gaml.node.core.api import Memory
from gaml.node.core.text.envelope import strip
from gaml.node.home import bearer_token
from gaml.node.serve.mcp import OpenMemory
from gaml.node.serve.web import Runner, serve_asgi, url_host
from gaml.node.shells.llm_curator import chat_completions_url
from gaml.policy.errors import GamlError

MAX_BODY_BYTES: Final = 8 << 20
UPSTREAM_TIMEOUT_S: Final = 600.0


def _error(status: int, message: str, kind: str) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def latest_user_text(messages: list[Any]) -> str:
    """The conversation's latest user message, with any memory envelope stripped (what hydration is for)."""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return strip(_text(m.get("content"))).text.strip()
    return ""


def with_frame(messages: list[Any], frame: str) -> list[Any]:
    """The messages with the frame as system context: appended to a leading system message (chat templates that
    allow one system message stay valid), else as a new first system message."""
    out = list(messages)
    if out and isinstance(out[0], dict) and out[0].get("role") == "system" and isinstance(out[0].get("content"), str):
        out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{frame}"}
    else:
        out.insert(0, {"role": "system", "content": frame})
    return out


class _Turn:
    """What the proxy remembers of one exchange once the reply is known."""

    def __init__(self, memory: Memory, user_text: str, session: str) -> None:
        self.memory, self.user_text, self.session = memory, user_text, session

    def job(self, reply: str) -> Callable[[], Any]:
        turns = [{"role": "user", "content": self.user_text}]
        if reply.strip():
            turns.append({"role": "assistant", "content": reply})

        def remember() -> Any:
            try:
                return self.memory.remember(turns, session=self.session)
            except GamlError as e:
                print(f"gaml proxy: warning: the turn was not remembered: {e}", file=sys.stderr, flush=True)
                return None

        return remember


def build_app(
    open_memory: OpenMemory,
    principal_of: Callable[[str], str],
    upstream: str,
    run: Runner,
    *,
    budget: int = 1000,
    upstream_key: str = "",
) -> Any:
    """The proxy's ASGI app (Starlette)."""
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    target = chat_completions_url(upstream)
    models_url = target.removesuffix("/chat/completions") + "/models"
    client = httpx.AsyncClient(timeout=httpx.Timeout(UPSTREAM_TIMEOUT_S, connect=10.0))
    forward_headers = {"content-type": "application/json"}
    if upstream_key:
        forward_headers["authorization"] = f"Bearer {upstream_key}"

    def submit(job: Callable[[], Any]) -> asyncio.Future[Any]:
        return asyncio.ensure_future(run(job))  # queued now, in order with the next request's hydration

    async def who(request: Request) -> str | None:
        token = bearer_token(request.headers.get("authorization", ""))
        if token is None:
            return None
        try:
            return await run(lambda: principal_of(token))
        except GamlError:
            return None

    async def chat(request: Request) -> Response:
        principal = await who(request)
        if principal is None:
            return _error(401, "the API key must be a GAML access token (`gaml token PRINCIPAL`)", "invalid_api_key")
        too_big = _error(413, f"the request is over {MAX_BODY_BYTES} bytes", "invalid_request_error")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return too_big
        pieces, size = [], 0
        async for piece in request.stream():  # read no more than the limit, whatever the header said
            size += len(piece)
            if size > MAX_BODY_BYTES:
                return too_big
            pieces.append(piece)
        raw = b"".join(pieces)
        try:
            body = json.loads(raw)
        except ValueError as e:
            return _error(400, f"the request body is not JSON: {e}", "invalid_request_error")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "a chat completion needs a non-empty 'messages' list", "invalid_request_error")
        memory = await run(lambda: open_memory(principal))
        goal = latest_user_text(body["messages"])
        headers: dict[str, str] = {}
        if goal:
            try:
                hydration = await run(lambda: memory.hydrate(goal, budget))
            except GamlError as e:
                headers["X-GAML-Frame"] = f"none: {type(e).__name__}"
                print(f"gaml proxy: warning: forwarded without memory: {e}", file=sys.stderr, flush=True)
            else:
                body = {**body, "messages": with_frame(body["messages"], hydration.frame)}
                headers["X-GAML-Receipt"] = str(hydration.receipt["receipt"])
        session = body.get("user") if isinstance(body.get("user"), str) else ""
        # A turn is remembered when it answers the user (the conversation ends with the user's message); a tool
        # round-trip after it would otherwise remember the same message again.
        last = body["messages"][-1]
        ends_with_user = isinstance(last, dict) and last.get("role") == "user"
        turn = _Turn(memory, goal, session or "proxy") if goal and ends_with_user else None
        if body.get("stream"):
            return await _stream(body, headers, turn)
        try:
            r = await client.post(target, json=body, headers=forward_headers)
        except httpx.HTTPError as e:
            return _error(502, f"the upstream {target} did not answer: {e}", "upstream_error")
        if r.status_code == 200 and turn is not None:
            try:
                reply = _text(r.json()["choices"][0]["message"].get("content"))
            except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                reply = ""
            submit(turn.job(reply))
        media = r.headers.get("content-type", "application/json")
        return Response(r.content, status_code=r.status_code, headers=headers, media_type=media)

    async def _stream(body: dict[str, Any], headers: dict[str, str], turn: _Turn | None) -> Response:
        req = client.build_request("POST", target, json=body, headers=forward_headers)
        try:
            upstream_r = await client.send(req, stream=True)
        except httpx.HTTPError as e:
            return _error(502, f"the upstream {target} did not answer: {e}", "upstream_error")
        if upstream_r.status_code != 200:
            content = await upstream_r.aread()
            await upstream_r.aclose()
            media = upstream_r.headers.get("content-type", "application/json")
            return Response(content, status_code=upstream_r.status_code, headers=headers, media_type=media)

        async def relay() -> AsyncIterator[bytes]:
            parts: list[str] = []
            remembered = False

            def read(line: bytes) -> None:
                """Take one SSE line into the reply; at ``[DONE]``, queue the turn before the line goes out."""
                nonlocal remembered
                data = line.strip()
                if not data.startswith(b"data:"):
                    return
                payload = data[5:].strip()
                if payload == b"[DONE]":
                    if turn is not None and not remembered:
                        submit(turn.job("".join(parts)))  # before the client can send its next request
                        remembered = True
                elif payload:
                    with contextlib.suppress(ValueError, KeyError, IndexError, TypeError, AttributeError):
                        parts.append(_text(json.loads(payload)["choices"][0].get("delta", {}).get("content")))

            buffer = b""
            try:
                async for chunk in upstream_r.aiter_bytes():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        read(line)
                    if lines:
                        yield b"".join(line + b"\n" for line in lines)
                if buffer:  # a last line without its newline
                    read(buffer)
                    yield buffer
                if turn is not None and not remembered:
                    submit(turn.job("".join(parts)))
            finally:
                await upstream_r.aclose()

        return StreamingResponse(relay(), headers=headers, media_type="text/event-stream")

    async def models(request: Request) -> Response:
        if await who(request) is None:
            return _error(401, "the API key must be a GAML access token (`gaml token PRINCIPAL`)", "invalid_api_key")
        try:
            r = await client.get(models_url, headers=forward_headers)
        except httpx.HTTPError as e:
            return _error(502, f"the upstream {models_url} did not answer: {e}", "upstream_error")
        return Response(r.content, status_code=r.status_code, media_type=r.headers.get("content-type"))

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "upstream": target})

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await client.aclose()

    routes = [
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/chat/completions", chat, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/healthz", health, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


async def serve_proxy(
    open_memory: OpenMemory,
    principal_of: Callable[[str], str],
    upstream: str,
    host: str,
    port: int,
    *,
    budget: int = 1000,
    upstream_key: str = "",
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the proxy at ``http://host:port/v1`` until cancelled; ``ready(base_url)`` once bound."""
    runner = Runner()
    try:
        app = build_app(open_memory, principal_of, upstream, runner, budget=budget, upstream_key=upstream_key)
        await serve_asgi(
            app, host, port, ready=None if ready is None else (lambda h, p: ready(f"http://{url_host(h)}:{p}/v1"))
        )
    finally:
        runner.close()


__all__ = ["MAX_BODY_BYTES", "build_app", "latest_user_text", "serve_proxy", "with_frame"]
