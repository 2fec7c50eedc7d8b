"""The contract of an optional daemon part (the loopback ingest server, the watchdog).

A part is built by the CLI with what it needs as constructor arguments (never the Service itself),
after the Service's ``startup``; ``Service.serve(parts)`` starts every part on its event loop before the
first cycle and stops them, in reverse order, before it returns, whatever ended it. ``start`` returns
once the part is running (or has logged why it cannot: a part that cannot start must not stop the
daemon); ``stop`` releases everything the part holds and may be called when ``start`` failed.
"""

from __future__ import annotations

from typing import Protocol


class DaemonPart(Protocol):
    name: str

    async def start(self) -> None: ...

    async def stop(self) -> None: ...
