"""Hook payloads of an external agent, made into the protocol's events by its own plugin. A payload reaches
``<data dir>/spool/<plugin name>/`` like any agent's (``hooks/agent-collector-hook.sh <plugin> <hook name>
<spool dir>`` with the payload on stdin, or a POST to the ingest server's ``/v1/hooks/<plugin>``); this
source tails that spool and runs ``parse-hook --hook <hook name>`` with the payload on stdin (only for a
plugin whose capabilities include ``hooks``). The answer, an Event or ``null`` (not relevant), becomes a
hook record whose event is the Event's type name (``SessionStart`` ... ``SubagentEnd``) and whose payload
is the Event, so the ``entire_plugin`` parser makes its entries and the status rules of the plugin's agent
(:func:`collector.external.agents.status_rules`) drive its session status. A failed call skips that
payload, counted and logged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import orjson

from collector.external.plugin import Caller, ExternalPlugin, PluginError
from collector.sources.base import Item, Source

log = logging.getLogger(__name__)

EVENT_TYPES = {1: "SessionStart", 2: "TurnStart", 3: "TurnEnd", 4: "Compaction", 5: "SessionEnd",
               6: "SubagentStart", 7: "SubagentEnd"}


class HookEvents:
    def __init__(self, spool: Source, plugin: ExternalPlugin, caller: Caller, repo: str) -> None:
        self.inner = spool
        self.plugin = plugin
        self.caller = caller
        self.repo = repo
        self.name = spool.name
        self.agent = spool.agent
        self.stats = spool.stats
        self.stats.extra.update(kind="external", plugin=plugin.path, parsed=0, not_relevant=0, failures=0)

    def watch_paths(self) -> list[str]:
        return self.inner.watch_paths()

    async def read(self) -> AsyncIterator[Item]:
        async for record, position in self.inner.read():
            if record is None:
                yield None, position
                continue
            event = await asyncio.to_thread(self._parse, record.data)
            if event is None:
                yield None, position
                continue
            data = {"ts": record.data.get("ts"), "agent": self.agent, "event": EVENT_TYPES[event["type"]],
                    "hook": record.data.get("event"), "payload": event}
            yield replace(record, data=data), position

    def _parse(self, envelope: dict[str, Any]) -> dict[str, Any] | None:
        hook, payload = envelope.get("event"), envelope.get("payload")
        if not isinstance(hook, str) or not hook:
            return None
        try:
            stdin = payload.encode() if isinstance(payload, str) else orjson.dumps(payload)
            event = self.caller.json(self.plugin, "parse-hook", ["--hook", hook], self.repo, stdin=stdin)
        except (PluginError, TypeError) as exc:
            self.stats.extra["failures"] += 1
            self.stats.errors += 1
            self.stats.last_error = f"parse-hook {hook}: {exc}"
            log.warning("%s: parse-hook %s: %s", self.name, hook, exc)
            return None
        if event is None:
            self.stats.extra["not_relevant"] += 1
            return None
        if not isinstance(event, dict) or event.get("type") not in EVENT_TYPES or not event.get("session_id"):
            self.stats.malformed += 1
            self.stats.last_error = f"parse-hook {hook}: not an Event (type 1-7 and session_id)"
            return None
        self.stats.extra["parsed"] += 1
        return event
