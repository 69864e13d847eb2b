"""What the HTTP doors (MCP over HTTP, the memory proxy) share: an ASGI app served by uvicorn on one address, and a
runner that keeps the blocking memory calls off the event loop, one at a time and in order."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from gaml.policy.errors import InvalidInput

T = TypeVar("T")


class Runner:
    """Runs the blocking memory calls on one worker thread, in the order they are submitted (a store is used by one
    thread at a time), and off the event loop that serves the door."""

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="gaml-door")

    async def __call__(self, fn: Callable[[], T]) -> T:
        return await asyncio.wrap_future(self._pool.submit(fn))

    def close(self) -> None:
        self._pool.shutdown(wait=True)


GRACE_S = 5


def _stop(web: Any) -> None:
    if web.should_exit:
        web.force_exit = True
    web.should_exit = True


def url_host(host: str) -> str:
    """``host`` as it stands in a URL (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


async def serve_asgi(app: Any, host: str, port: int, *, ready: Callable[[str, int], None] | None = None) -> None:
    """Serve ``app`` on ``host:port`` (port 0: a free one) until cancelled; ``ready(host, port)`` once it is bound. A
    bind failure raises :class:`InvalidInput` naming the address."""
    import uvicorn

    # Open streams (MCP's event streams, a proxied completion) get GRACE_S to finish at a stop; a second signal ends
    # them at once.
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=GRACE_S
    )
    web = uvicorn.Server(config)
    # SIGINT and SIGTERM drain the server and return from here (uvicorn's own capture would re-raise them after the
    # drain, killing the process before the caller closes its store).
    web.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    try:
        sockets = [config.bind_socket()]
    except SystemExit:  # uvicorn exits on a bind error after logging it
        raise InvalidInput(
            f"cannot listen on {host}:{port}: the address is in use or not available here; choose another --listen"
        ) from None
    loop = asyncio.get_running_loop()
    stops = [sig for sig in (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread()]
    for sig in stops:
        loop.add_signal_handler(sig, functools.partial(_stop, web))
    sockets[0].listen(config.backlog)  # connections queue from now on, before the server's first accept
    serving = asyncio.create_task(web.serve(sockets=sockets))
    try:
        bound = sockets[0].getsockname()
        if ready is not None:
            ready(host, int(bound[1]))
        await serving
    finally:
        web.should_exit = True
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await serving
        for s in sockets:
            s.close()
        for sig in stops:
            loop.remove_signal_handler(sig)


__all__ = ["Runner", "serve_asgi"]
