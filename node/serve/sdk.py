"""The Python SDK: ``gaml.node.connect()`` and ``gaml.node.connect_async()``.

A connection is a :class:`gaml.node.core.api.Memory` — the same calls, domain types and typed errors as every other
door (:class:`~gaml.node.core.api.Hit`, :class:`~gaml.node.core.hydrate.Hydration`, ``Grant``, ``Status``;
``NotFound``, ``PolicyError``, ``InvalidInput``, ``Unavailable``, … all :class:`gaml.policy.errors.GamlError`)::

    from gaml.node import connect

    with connect() as memory:                       # the daemon of $GAML_HOME (or ~/.gaml), over its socket
        memory.remember([{"role": "user", "content": "Alice prefers green tea"}])
        for hit in memory.search("what does alice drink", k=3):
            print(hit.score, hit.asset.payload["text"])
        frame = memory.hydrate("tea", 300).frame

Where it connects: the running daemon of ``home`` over its Unix socket (you are the node's own user, or the principal
of ``token``); or a node at ``address`` over TCP with mutual TLS, with the client certificate ``gaml certs issue``
wrote into ``certs`` (``PRINCIPAL.key``, ``PRINCIPAL.crt``, ``ca.crt``). Nothing running is an
:class:`~gaml.node.core.errors.Unavailable` that says how to start it.

The async client runs the same calls off the event loop (one worker thread per connection, calls in order), so an
``asyncio`` agent awaits them without blocking its loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from gaml.node.core.api import Hit, Status
from gaml.node.core.errors import Unavailable
from gaml.node.core.hydrate import Hydration
from gaml.node.core.memory.ladder import ErasureReceipt
from gaml.node.home import default_home
from gaml.node.serve.client import Client, RemoteMemory
from gaml.node.serve.web import Runner
from gaml.node.shells import certs
from gaml.policy.access import Grant
from gaml.policy.model import Asset, Level

T = TypeVar("T")


class Connection(RemoteMemory):
    """A synchronous connection to a node: :class:`~gaml.node.core.api.Memory`, and a context manager that closes
    it."""

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.client.close()


def connect(
    home: str | Path | None = None,
    *,
    token: str = "",
    address: str = "",
    principal: str = "",
    certs_dir: str | Path | None = None,
    timeout_s: float = 30.0,
    wait_s: float = 5.0,
) -> Connection:
    """A connection to a node: its daemon's socket (``home``: default ``$GAML_HOME`` or ``~/.gaml``), or
    ``address`` (``host:port``) with mutual TLS as ``principal``, whose certificate is in ``certs_dir``."""
    if address:
        if token:
            raise ValueError("over TCP the caller is its certificate's principal: a token goes with the socket only")
        if not principal or certs_dir is None:
            raise ValueError("a TLS address needs principal= and certs_dir= (the output of `gaml certs issue`)")
        key, cert, ca = certs.load_client(*certs.client_paths(Path(certs_dir).expanduser(), principal))
        client = Client.mtls(address, key, cert, ca, timeout_s=timeout_s)
    else:
        from gaml.node.serve.runfiles import read_info, serves

        where = Path(home).expanduser() if home is not None else default_home()
        info = read_info(where)
        if not info or not serves(info):
            raise Unavailable(f"no daemon serves {where}: start one with `gaml --home {where} run`")
        client = Client.unix(info["socket"], timeout_s=timeout_s, token=token)
    try:
        client.wait_ready(wait_s)
    except BaseException:
        client.close()
        raise
    return Connection(client)


class AsyncConnection:
    """The asynchronous face of a :class:`Connection`: the same calls, awaited. Use ``async with``."""

    def __init__(self, sync: Connection) -> None:
        self.sync = sync
        self._runner = Runner()  # one worker thread: the calls run in order, off the event loop

    async def _run(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        return await self._runner(functools.partial(fn, *args, **kw))

    async def __aenter__(self) -> AsyncConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._run(self.sync.close)
        self._runner.close()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """Every other call of :class:`~gaml.node.core.api.Memory` (grants, access_log, ingest, override, …),
        awaited the same way."""
        fn = getattr(self.sync, name)
        if name.startswith("_") or not callable(fn):
            raise AttributeError(name)

        async def call(*args: Any, **kw: Any) -> Any:
            return await self._run(fn, *args, **kw)

        return call

    async def status(self) -> Status:
        return await self._run(self.sync.status)

    async def remember(
        self, turns: Sequence[Mapping[str, Any]], *, session: str = "", curate: bool = False
    ) -> dict[str, Any]:
        return await self._run(self.sync.remember, turns, session=session, curate=curate)

    async def list_own(self, **options: Any) -> list[Asset]:
        return await self._run(self.sync.list_own, **options)

    async def put(self, drafts: Sequence[Mapping[str, Any]], *, check_only: bool = False) -> list[str]:
        return await self._run(self.sync.put, drafts, check_only=check_only)

    async def get(self, id_: str, **options: Any) -> Asset:
        return await self._run(self.sync.get, id_, **options)

    async def search(self, text: str, **options: Any) -> list[Hit]:
        return await self._run(self.sync.search, text, **options)

    async def hydrate(self, goal: str, budget: int, **options: Any) -> Hydration:
        return await self._run(self.sync.hydrate, goal, budget, **options)

    async def forget(self, id_: str) -> ErasureReceipt:
        return await self._run(self.sync.forget, id_)

    async def grant(self, grantee: str, max_level: Level, **options: Any) -> Grant:
        return await self._run(self.sync.grant, grantee, max_level, **options)

    async def revoke(self, grant_id: str) -> Grant:
        return await self._run(self.sync.revoke, grant_id)

    async def conflicts(self, slot: str = "", **options: Any) -> list[dict[str, Any]]:
        return await self._run(self.sync.conflicts, slot, **options)


async def connect_async(home: str | Path | None = None, **options: Any) -> AsyncConnection:
    """:func:`connect`, for ``asyncio``: ``async with await connect_async() as memory: await memory.search(…)``."""
    loop = asyncio.get_running_loop()
    sync = await loop.run_in_executor(None, functools.partial(connect, home, **options))
    return AsyncConnection(sync)


__all__ = ["AsyncConnection", "Connection", "connect", "connect_async"]
