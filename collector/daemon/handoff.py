"""``collect --once`` beside a running daemon: the work is handed to the daemon, which is the only writer
of the checkpoints and the output, so nothing can be read or written twice.

The client drops a request file into ``<state dir>/requests/`` and waits; the daemon takes every pending
request at the start of its next cycle (within ``collector.poll_interval_s``), reports its progress while
it reads every source to its current end, then writes the result. Files, all per request token::

    requests/<token>.request   {"token", "requested_at"}         written by the client
    requests/<token>.progress  ProgressState as JSON              written by the daemon, about 4 times a second
    requests/<token>.done      {"records", "entries", "by_agent"} written by the daemon after the cycle
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from collector.daemon.backfill import Meter, ProgressState
from collector.sources.base import Source
from collector.util.atomic import atomic_write
from collector.util.private import private_dir

PROGRESS_EVERY_S = 0.25
STALE_S = 600.0


class HandoffError(RuntimeError):
    """The daemon did not take the request, or stopped before it finished."""


def requests_dir(state_dir: Path) -> Path:
    return state_dir / "requests"


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(orjson.dumps(data))
    os.replace(tmp, path)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


# -- the daemon's side --------------------------------------------------------------------------------

@dataclass(slots=True)
class RequestDesk:
    """Takes pending requests at the start of a cycle, reports progress for them, and answers them."""

    state_dir: Path
    clock: Callable[[], float] = time.monotonic
    _last_write: float = field(default=0.0)

    def take(self) -> list[str]:
        folder = requests_dir(self.state_dir)
        try:
            names = os.listdir(folder)
        except OSError:
            return []
        tokens = sorted(n[: -len(".request")] for n in names if n.endswith(".request"))
        self._sweep(folder, names, set(tokens))
        return tokens

    @staticmethod
    def _sweep(folder: Path, names: list[str], live: set[str]) -> None:
        """Answers nobody waits for any more (a client that gave up mid-cycle), after STALE_S."""
        for name in names:
            token, _, suffix = name.rpartition(".")
            if suffix in ("progress", "done") and token not in live:
                with contextlib.suppress(OSError):
                    if time.time() - (folder / name).stat().st_mtime > STALE_S:
                        (folder / name).unlink()

    def _waiting(self, tokens: list[str]) -> list[str]:
        """Tokens whose client still waits (it removes its request when it gives up)."""
        folder = requests_dir(self.state_dir)
        return [t for t in tokens if (folder / f"{t}.request").exists()]

    def meter(self, tokens: list[str], sources: Sequence[Source]) -> Meter:
        def report(state: ProgressState) -> None:
            now = self.clock()
            if now - self._last_write < PROGRESS_EVERY_S:
                return
            self._last_write = now
            for token in self._waiting(tokens):
                with contextlib.suppress(OSError):
                    _write(requests_dir(self.state_dir) / f"{token}.progress", state.as_dict())

        meter = Meter(sources, report, self.clock)
        for token in tokens:  # the request is taken: the client stops waiting for an answer to that
            with contextlib.suppress(OSError):
                _write(requests_dir(self.state_dir) / f"{token}.progress", meter.state.as_dict())
        return meter

    def finish(self, tokens: list[str], records: int, entries: int, by_agent: dict[str, int]) -> None:
        folder = requests_dir(self.state_dir)
        for token in self._waiting(tokens):
            with contextlib.suppress(OSError):
                atomic_write(folder / f"{token}.done",
                             orjson.dumps({"records": records, "entries": entries, "by_agent": by_agent}))


# -- the client's side --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class HandoffResult:
    records: int
    entries: int
    by_agent: dict[str, int]


def request(state_dir: Path) -> str:
    folder = private_dir(requests_dir(state_dir))
    token = f"{int(time.time())}-{os.getpid()}-{secrets.token_hex(4)}"
    atomic_write(folder / f"{token}.request", orjson.dumps({"token": token, "requested_at": time.time()}))
    return token


def wait(state_dir: Path, token: str, daemon_alive: Callable[[], bool], accept_within_s: float,
         on_progress: Callable[[ProgressState], None] | None = None, poll_s: float = 0.1) -> HandoffResult:
    """Until the daemon answers ``token``; HandoffError if it never takes it or dies before answering."""
    folder = requests_dir(state_dir)
    asked = time.monotonic()
    taken = False
    try:
        while True:
            done = _read(folder / f"{token}.done")
            if done is not None:
                return HandoffResult(int(done["records"]), int(done["entries"]), dict(done["by_agent"]))
            progress = _read(folder / f"{token}.progress")
            if progress is not None:
                taken = True
                if on_progress is not None:
                    on_progress(ProgressState.from_dict(progress))
            if not daemon_alive():
                raise HandoffError("the daemon stopped before it finished; run `collect --once` again")
            if not taken and time.monotonic() - asked > accept_within_s:
                raise HandoffError(f"the running daemon did not take the request within {accept_within_s:.0f}s "
                                   "(an older version?); restart it: `agent-collector service restart`")
            time.sleep(poll_s)
    finally:
        for suffix in ("request", "progress", "done"):
            with contextlib.suppress(OSError):
                (folder / f"{token}.{suffix}").unlink()
