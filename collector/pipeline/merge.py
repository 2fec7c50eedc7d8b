"""One model call is one ``llm.response``, whichever of its sources arrives first (docs/merge.md).

An agent's transcript line, a later line of the same message, and the agent's own telemetry can all
describe one call. The first to arrive is delivered; a later one that pairs with it (the same
``event.id``, or a pairing key in ``collector.call_keys`` the parser set) takes its id and is merged into
it: every field the first lacked is added, and the usage fields (tokens, cost, duration) come from the
more exact source. The exactness ranks: a line known incomplete (``gen_ai.usage.incomplete``) 1, an
agent's file or hook 2, the agent's own telemetry (``source.kind`` ``otel_*``) 3. When the merge changes
what was delivered, it is delivered again as a correction (``collector.correction``, with the earlier
values it replaces in ``collector.replaces``); otherwise the later one is a duplicate and is dropped.
``collector.sources_of`` names the source of each usage field.

The merge remembers the last ``RECENT`` calls (in memory: a call whose sources arrive across a restart of
the daemon is not paired, the limit docs/merge.md names).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

RECENT = 2_000  # an entry with its content (output text, before the content policy) can be tens of kilobytes
CALL_KEYS = "collector.call_keys"
INCOMPLETE = "gen_ai.usage.incomplete"
CORRECTION = "collector.correction"
REPLACES = "collector.replaces"
SOURCES_OF = "collector.sources_of"
USAGE = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
         "gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.reasoning_tokens", "gen_ai.usage.total_tokens",
         "gen_ai.usage.cost_usd", "duration_ms")
_OWN = frozenset({"event.id", "time_unix_nano", "observed_time_unix_nano", "source.kind", CALL_KEYS, INCOMPLETE,
                  SOURCES_OF, CORRECTION, REPLACES})


def rank(entry: dict[str, Any]) -> int:
    if entry.get(INCOMPLETE):
        return 1
    kind = entry.get("source.kind")
    return 3 if isinstance(kind, str) and kind.startswith("otel_") else 2


@dataclass(slots=True)
class _Call:
    entry: dict[str, Any]  # the merged entry as delivered (before the pipeline's later stages)
    ranks: dict[str, int]  # usage field -> the rank of the source its value came from
    keys: list[str]  # its pairing keys
    kinds: set[str] = field(default_factory=set)  # the source kinds merged into it


@dataclass(slots=True)
class Review:
    """What ``Merger.review`` decided for the entries of one batch (by ``id()`` of the entry)."""

    dropped: set[int] = field(default_factory=set)
    corrections: set[int] = field(default_factory=set)


class Merger:
    def __init__(self) -> None:
        self._calls: OrderedDict[str, _Call] = OrderedDict()  # event id -> the call
        self._keys: dict[str, str] = {}  # pairing key -> event id
        self.corrections = 0
        self.merged = 0

    def review(self, entries: list[dict[str, Any]]) -> Review:
        """Pair, merge and mark the ``llm.response`` entries of a batch, in place; entries of other names
        pass untouched. A later entry merged into one of the same batch is dropped (the earlier carries
        the merge); merged into one delivered before, it becomes the correction."""
        out = Review()
        batch: dict[str, dict[str, Any]] = {}  # event id -> the entry of this batch that carries it
        for entry in entries:
            if entry.get("event.name") != "llm.response":
                continue
            keys = entry.pop(CALL_KEYS, None)
            keys = [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []
            eid = self._paired(entry["event.id"], keys, str(entry.get("source.kind")))
            call = self._calls.get(eid)
            if call is None:
                self._remember(entry, keys)
                batch[entry["event.id"]] = entry
                continue
            self._calls.move_to_end(eid)
            call.kinds.add(str(entry.get("source.kind")))
            if entry["event.id"] != eid:  # the other lines of its message follow it there
                keys.append(f"id:{entry['event.id']}")
                entry["event.id"] = eid
            # an agent's own bookkeeping (agent.hook_event_name, ...) filled in is not worth a correction
            changed = {k: v for k, v in _merge(call, entry).items() if not k.startswith("agent.")}
            self._alias(keys, eid)
            self.merged += 1
            earlier = batch.get(eid)
            if earlier is not None or not changed:
                if earlier is not None and changed:
                    _refill(earlier, call.entry)
                out.dropped.add(id(entry))
                continue
            self.corrections += 1
            _refill(entry, call.entry)
            entry[CORRECTION] = _digest(entry)
            entry[REPLACES] = {k: v for k, v in changed.items() if k in USAGE}  # None: it had none
            batch[eid] = entry
            out.corrections.add(id(entry))
        return out

    def _paired(self, eid: str, keys: list[str], kind: str) -> str:
        """The same id; else a call another kind of source made that shares a key, unless both name a
        request id and they differ (two calls alike in their input side stay two)."""
        if eid in self._calls:
            return eid
        renamed = self._keys.get(f"id:{eid}")
        if renamed is not None and renamed in self._calls:
            return renamed
        mine = next((k for k in keys if k.startswith("req:")), None)
        for key in keys:
            call = self._calls.get(self._keys.get(key, ""))
            if call is None or kind in call.kinds:
                continue
            theirs = next((k for k in call.keys if k.startswith("req:")), None)
            if mine and theirs and mine != theirs:
                continue
            return str(call.entry["event.id"])
        return eid

    def _remember(self, entry: dict[str, Any], keys: list[str]) -> None:
        eid = entry["event.id"]
        source = entry.get("source.kind")
        mine = rank(entry)
        entry[SOURCES_OF] = {k: source for k in USAGE if k in entry}
        self._calls[eid] = _Call(dict(entry), {k: mine for k in USAGE if k in entry}, [], {str(source)})
        self._alias(keys, eid)
        while len(self._calls) > RECENT:
            _, old = self._calls.popitem(last=False)
            for key in old.keys:
                self._keys.pop(key, None)

    def _alias(self, keys: list[str], eid: str) -> None:
        call = self._calls[eid]
        for key in keys:
            if self._keys.setdefault(key, eid) == eid and key not in call.keys:
                call.keys.append(key)


def _merge(call: _Call, entry: dict[str, Any]) -> dict[str, Any]:
    """Fold ``entry`` into ``call``; returns the delivered values it changed (field -> earlier value, None
    for a field that was absent), empty when it brought nothing new."""
    merged, mine, source = call.entry, rank(entry), entry.get("source.kind")
    sources = dict(merged.get(SOURCES_OF) or {})
    changed: dict[str, Any] = {}
    usage_wins = any(mine > call.ranks.get(k, 0) for k in USAGE if k in entry)
    for key, value in entry.items():
        if key in _OWN or value is None:
            continue
        if key in USAGE:
            if mine > call.ranks.get(key, 0):  # an equal value now has the more exact source
                if merged.get(key) != value:
                    changed[key] = merged.get(key)
                merged[key], call.ranks[key], sources[key] = value, mine, source
            elif key not in merged:
                changed[key] = None
                merged[key], call.ranks[key], sources[key] = value, mine, source
        elif key not in merged:
            changed[key] = None
            merged[key] = value
    if merged.get(INCOMPLETE) and usage_wins and not entry.get(INCOMPLETE):
        changed[INCOMPLETE] = True
        del merged[INCOMPLETE]
    merged[SOURCES_OF] = sources
    return changed


def _digest(entry: dict[str, Any]) -> str:
    """The correction's own name: a digest of the usage it delivers (the same correction twice, a replay,
    has the same; collector.model.entry.delivery_id)."""
    text = "\x1f".join(f"{k}={entry.get(k)}" for k in USAGE)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _refill(target: dict[str, Any], merged: dict[str, Any]) -> None:
    target.clear()
    target.update(merged)
