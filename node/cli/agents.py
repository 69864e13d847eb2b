"""The doors for agents: ``gaml mcp`` (an MCP server over stdio or HTTP), ``gaml proxy`` (an OpenAI-compatible memory
proxy in front of a local model) and ``gaml token`` (the access token a principal presents to them)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from gaml.node.cli._common import keychain, now_us, open_store
from gaml.node.cli.memory import _consensus, _daemon, _memory, own_user
from gaml.node.core.api import Memory
from gaml.node.core.errors import Unauthenticated
from gaml.node.core.service import MemoryService
from gaml.node.home import ACCESS_TOKEN_PREFIX, access_token, make_counter, memory_layers, token_principal
from gaml.node.local import LocalMemory
from gaml.policy.errors import InvalidInput


def listen_address(text: str, flag: str = "--listen") -> tuple[str, int]:
    """HOST:PORT (port 0: any free port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise InvalidInput(f"{flag} {text!r} is not HOST:PORT (e.g. 127.0.0.1:8765)")
    return host.strip("[]"), int(port)


def cmd_token(args: argparse.Namespace) -> None:
    """The access token of a principal (default: the node's own user) for the MCP and proxy doors."""
    kc = keychain(args)
    print(access_token(kc, args.principal or _own_user(args)))


def _own_user(args: argparse.Namespace) -> str:
    """The node's own user, as every door names it (the running daemon's socket principal, else the store's rule)."""
    client = _daemon(args)
    if client is not None:
        from gaml.node.serve.client import RemoteMemory

        with client:
            return RemoteMemory(client).status().principal
    with open_store(args, checkpoint=False) as node:
        return own_user(args.home, node)


@contextlib.contextmanager
def _doors(args: argparse.Namespace) -> Iterator[tuple[Callable[[str | None], Memory], Callable[[str], str]]]:
    """``(open_memory(principal), principal_of(token))`` for a door serving several principals: through the running
    daemon (which checks each token itself) or, when none runs, on the store (held while the door serves)."""
    client = _daemon(args)
    if client is not None:
        from gaml.node.serve.client import Client, RemoteMemory

        socket = _socket_of(args)
        client.close()
        remotes: dict[str, RemoteMemory] = {}
        known: dict[str, str] = {}  # token -> principal, once the daemon accepted it
        lock = threading.Lock()

        def principal_of(token: str) -> str:
            if not token.startswith(ACCESS_TOKEN_PREFIX) or len(token) > 512:
                raise Unauthenticated("not a GAML access token")  # refused here: no call, no channel
            with lock:
                if token in known:
                    return known[token]
            remote = RemoteMemory(Client.unix(socket, token=token))
            try:
                principal = remote.status().principal  # the daemon refuses a token it did not issue
            except BaseException:
                remote.client.close()
                raise
            with lock:
                known[token] = principal
                if principal in remotes:
                    remote.client.close()  # one channel per principal
                else:
                    remotes[principal] = remote
            return principal

        def open_remote(principal: str | None) -> Memory:
            if principal is None or principal not in remotes:
                raise InvalidInput("this door needs an access token (gaml token PRINCIPAL)")
            return remotes[principal]

        try:
            yield open_remote, principal_of
        finally:
            for r in remotes.values():
                r.client.close()
        return
    with open_store(args) as node:
        service = MemoryService(node, None, None, make_counter, layers=lambda: memory_layers(args.home, node))
        service.consensus = _consensus(node, args.home)  # the same weighing as every other door
        kc = node.store.keychain

        def open_local(principal: str | None) -> Memory:
            if principal is None:
                raise InvalidInput("this door needs an access token (gaml token PRINCIPAL)")
            return LocalMemory(service, service.ensure_user(principal), now_us)

        yield open_local, lambda token: token_principal(kc, token)


def _socket_of(args: argparse.Namespace) -> str:
    from gaml.node.serve.runfiles import read_info

    info = read_info(args.home) or {}
    return str(info["socket"])


def cmd_mcp(args: argparse.Namespace) -> None:
    from gaml.node.serve.mcp import serve_http, serve_stdio

    if not args.http:
        if args.listen:
            raise InvalidInput("--listen goes with --http (over stdio the client starts `gaml mcp` itself)")
        with _memory(args, args.as_) as mem:
            serve_stdio(lambda _who: mem, allow_grants=args.allow_grants)
        return
    if args.as_:
        raise InvalidInput("over HTTP each request acts as the principal of its access token: --as does not apply")
    host, port = listen_address(args.listen or "127.0.0.1:8765")

    def ready(url: str) -> None:
        print(json.dumps({"mcp": url}), flush=True)
        print(
            f"gaml: MCP over streamable HTTP at {url}; each request bears a token (`gaml token PRINCIPAL`)",
            file=sys.stderr,
            flush=True,
        )

    with _doors(args) as (open_memory, principal_of), contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_http(open_memory, principal_of, host, port, ready=ready, allow_grants=args.allow_grants))


def cmd_proxy(args: argparse.Namespace) -> None:
    from gaml.node.serve.proxy import serve_proxy

    host, port = listen_address(args.listen or "127.0.0.1:8766")

    def ready(url: str) -> None:
        print(json.dumps({"proxy": url, "upstream": args.upstream}), flush=True)
        print(
            f"gaml: OpenAI-compatible memory proxy at {url} (point your client's base URL here; its API key is a "
            f"`gaml token`), forwarding to {args.upstream}",
            file=sys.stderr,
            flush=True,
        )

    with _doors(args) as (open_memory, principal_of), contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            serve_proxy(
                open_memory,
                principal_of,
                args.upstream,
                host,
                port,
                budget=args.budget,
                upstream_key=_upstream_key(args),
                ready=ready,
            )
        )


def _upstream_key(args: argparse.Namespace) -> str:
    import os

    return os.environ.get(args.upstream_key_env, "") if args.upstream_key_env else ""


def add_parsers(sub: Any, positive: Callable[[str], int]) -> None:
    s = sub.add_parser("mcp", help="serve your memory to agents over MCP: stdio (default) or --http")
    s.add_argument("--http", action="store_true", help="streamable HTTP (each request bears a `gaml token`)")
    s.add_argument("--listen", metavar="HOST:PORT", help="with --http (default 127.0.0.1:8765; port 0: any)")
    s.add_argument("--as", dest="as_", metavar="PRINCIPAL", help="over stdio: whose memory (default: you)")
    s.add_argument(
        "--allow-grants",
        action="store_true",
        help="also offer the grant and revoke tools (off: an agent cannot share your memory on its own)",
    )
    s.set_defaults(func=cmd_mcp)

    s = sub.add_parser("proxy", help="an OpenAI-compatible proxy that gives a local model memory")
    s.add_argument(
        "--upstream", required=True, metavar="URL", help="the model's base URL (e.g. http://127.0.0.1:11434/v1)"
    )
    s.add_argument("--listen", metavar="HOST:PORT", help="where to serve (default 127.0.0.1:8766; port 0: any)")
    s.add_argument("--budget", type=positive, default=1000, help="tokens of memory per request (default 1000)")
    s.add_argument(
        "--upstream-key-env", metavar="VAR", help="an environment variable holding the upstream's API key, if any"
    )
    s.set_defaults(func=cmd_proxy)

    s = sub.add_parser("token", help="print the access token of a principal (for the MCP and proxy doors)")
    s.add_argument("principal", nargs="?", help="whose token (default: you, the node's own user)")
    s.set_defaults(func=cmd_token)


__all__ = ["add_parsers", "cmd_mcp", "cmd_proxy", "cmd_token", "listen_address"]
