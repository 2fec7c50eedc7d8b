"""The source of one external agent plugin: every ``interval_s`` it asks the plugin where each configured
repository's sessions live (``get-session-dir``, once per daemon), looks at the files there itself
(``stat`` only: an idle poll starts no process), and for each session file that changed asks the plugin
about the new part: ``resolve-session-file`` (the path checked by :mod:`collector.external.paths`),
``get-transcript-position``, ``extract-prompts`` and ``extract-modified-files`` from the stored offset,
and ``calculate-tokens`` when the plugin has ``token_calculator`` (the file's bytes on stdin).

One stream per (plugin, repository, session): its position ``{pos, size, mtime_ns, ino}`` holds the
plugin's own opaque cursor (``pos``, passed back as ``--offset``; never computed here) and what the file
looked like; a file that shrank or was replaced is read from offset 0 again. Positions are committed by
the Service after export, like every source's.

Yields ``RawRecord(kind="entire_session", data={session_id, session_ref, repo, offset, position, first,
prompts, files, tokens, mtime_ns})`` for the ``entire_plugin`` parser. A failed call (exit, timeout,
output cap, an answer that is not the protocol's, a refused path) ends the poll, is logged with its
reason, and counts towards the circuit breaker."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from collector.external.paths import PathRefused, checked_dir, checked_file
from collector.external.plugin import Caller, ExternalPlugin, PluginError
from collector.model.raw import RawRecord
from collector.sources.base import Item, Position, SourceStats
from collector.sources.breaker import Breaker

log = logging.getLogger(__name__)
MAX_FILES = 1000  # modified files kept per range
MAX_PROBLEMS = 5


class ExternalSource:
    def __init__(self, plugin: ExternalPlugin, repos: list[str], caller: Caller, interval_s: float,
                 positions: dict[str, dict[str, Any]], clock: Callable[[], float] = time.monotonic) -> None:
        self.plugin = plugin
        self.name = f"{plugin.name}:external"
        self.agent = plugin.name
        self.repos = repos
        self.caller = caller
        self.breaker = Breaker(interval_s)
        self.stats = SourceStats()
        self.stats.extra.update(kind="external", plugin=plugin.path, runs=0, failures=0, last_run=None,
                                last_exit_code=None, last_duration_ms=None, last_records=None, problems=[])
        self._positions = {k: v for k, v in positions.items() if k.startswith(self.name + ":")}
        self._dirs: dict[str, str] = {}
        self._clock = clock

    def watch_paths(self) -> list[str]:
        return list(self._dirs.values())

    async def read(self) -> AsyncIterator[Item]:
        now = self._clock()
        if not self.breaker.due(now):
            self.stats.extra.update(self.breaker.state(now))
            return
        items: list[Item] = []
        ok = await asyncio.to_thread(self._poll, items)
        done = self._clock()
        (self.breaker.succeeded if ok else self.breaker.failed)(done)
        self.stats.extra.update(self.breaker.state(done), runs=self.caller.runs, last_run=time.time(),
                                last_records=sum(1 for r, _ in items if r is not None))
        last = self.caller.last
        if last is not None:
            self.stats.extra.update(last_exit_code=last.exit_code, last_duration_ms=round(last.duration_s * 1000))
        for item in items:
            yield item

    def _poll(self, items: list[Item]) -> bool:
        try:
            for repo in self.repos:
                self._poll_repo(repo, items)
        except (PluginError, PathRefused) as exc:
            self._failed(str(exc))
            return False
        return True

    def _poll_repo(self, repo: str, items: list[Item]) -> None:
        directory = self._session_dir(repo)
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return  # no sessions yet
        for name in names:
            path = os.path.join(directory, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            try:
                self._poll_session(repo, directory, Path(name).stem, st, items)
            except PathRefused as exc:  # this session is not read; the others are
                self._failed(f"{Path(name).stem}: {exc}", breaker=False)

    def _session_dir(self, repo: str) -> str:
        if repo not in self._dirs:
            answer = self.caller.obj(self.plugin, "get-session-dir", ["--repo-path", repo], repo)
            self._dirs[repo] = checked_dir(answer.get("session_dir"))
        return self._dirs[repo]

    def _poll_session(self, repo: str, directory: str, session: str, st: os.stat_result, items: list[Item]) -> None:
        stream = f"{self.name}:{repo}:{session}"
        stored = self._positions.get(stream)
        look = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}
        if stored and all(stored.get(k) == v for k, v in look.items()):
            return
        offset = stored.get("pos") if stored else None
        if stored and (st.st_size < int(stored.get("size") or 0) or stored.get("ino") != st.st_ino):
            log.info("%s: %s shrank or was replaced; reading it from the start", self.name, session)
            offset = None
        answer = self.caller.obj(self.plugin, "resolve-session-file",
                                 ["--session-dir", directory, "--session-id", session], repo)
        path = checked_file(answer.get("session_file"), directory)
        position = self._position(path, repo, st.st_size)
        value = {"pos": position, **look}
        if stored is not None and offset is not None and position == offset:
            self._positions[stream] = value
            items.append((None, Position(stream, value)))
            return
        data = {"session_id": session, "session_ref": path, "repo": repo, "offset": offset, "position": position,
                "first": stored is None, "mtime_ns": st.st_mtime_ns, **self._facts(path, repo, offset)}
        self._positions[stream] = value
        self.stats.records += 1
        record = RawRecord(self.agent, "entire_session", data, stream, str(position), time.time_ns(),
                           {"path": path, "plugin": self.plugin.path})
        items.append((record, Position(stream, value)))

    def _position(self, path: str, repo: str, size: int) -> Any:
        if not self.plugin.allows("get-transcript-position"):
            return size
        answer = self.caller.obj(self.plugin, "get-transcript-position", ["--path", path], repo)
        position = answer.get("position")
        if not isinstance(position, (int, str)) or isinstance(position, bool):
            raise PluginError("get-transcript-position: 'position' is not a number or a string")
        return position

    def _facts(self, path: str, repo: str, offset: Any) -> dict[str, Any]:
        at = "0" if offset is None else str(offset)
        facts: dict[str, Any] = {"prompts": [], "files": [], "tokens": None}
        if self.plugin.allows("extract-prompts"):
            answer = self.caller.obj(self.plugin, "extract-prompts", ["--session-ref", path, "--offset", at], repo)
            facts["prompts"] = _strings(answer.get("prompts"), "extract-prompts", "prompts")
        if self.plugin.allows("extract-modified-files"):
            answer = self.caller.obj(self.plugin, "extract-modified-files", ["--path", path, "--offset", at], repo)
            facts["files"] = _strings(answer.get("files"), "extract-modified-files", "files")[:MAX_FILES]
        if self.plugin.allows("calculate-tokens"):
            transcript = _read_capped(path, self.caller.limits.max_stdout)
            facts["tokens"] = self.caller.obj(self.plugin, "calculate-tokens", ["--offset", at], repo,
                                              stdin=transcript)
        return facts

    def _failed(self, reason: str, breaker: bool = True) -> None:
        self.stats.errors += 1
        self.stats.extra["failures"] += int(breaker)
        self.stats.last_error = reason
        problems = self.stats.extra["problems"]
        problems[:] = [*problems, reason][-MAX_PROBLEMS:]
        log.warning("%s (%s): %s", self.name, self.plugin.path, reason)


def _strings(value: Any, subcommand: str, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PluginError(f"{subcommand}: {key!r} is not a list of strings")
    return [v for v in value if "\0" not in v]


def _read_capped(path: str, cap: int) -> bytes:
    with open(path, "rb") as f:
        data = f.read(cap + 1)
    if len(data) > cap:
        raise PluginError(f"calculate-tokens: the transcript is over {cap} bytes; not sent")
    return data
