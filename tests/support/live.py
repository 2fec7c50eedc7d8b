"""A real ingest server on its own event loop in a thread, for tests that are not async themselves."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

from collector.ingest import IngestConfig, IngestServer
from collector.ingest.server import Route

TOKEN = "5e" * 32


class ThreadedIngest:
    def __init__(self, submit: Callable[[str, bytes, float], None] = lambda *a: None,
                 agents: frozenset[str] = frozenset(), snapshot: Callable[[], dict[str, Any]] = dict,
                 routes: Sequence[Route] = (), token: str = TOKEN) -> None:
        self.loop = asyncio.new_event_loop()
        self.token = token
        self.server = IngestServer(submit, lambda: set(agents), snapshot, IngestConfig(token=token, port=0),
                                   routes=routes)
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(self.server.start())
            started.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        started.wait(5)

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(5)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
