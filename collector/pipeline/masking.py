"""Secret masking: every string an entry carries (values and dictionary keys) is scanned with the rules of
``collector/data/masking-rules.toml`` plus those of ``masking.rules`` in the config, and each secret found
is replaced by ``[REDACTED:<rule id>]`` (or its keyed digest, or the field is dropped; per field class).

Speed comes from the prefilter, not from fewer rules: every rule names literal keywords, one of which each
of its matches contains. One RE2 set of all keywords runs over the whole entry serialised once; an entry
without any keyword (most of them) is done. Otherwise each string is checked against the set again and
only the rules whose keywords it holds run their regular expression on it. Fields that cannot hold a
secret (ids, digests, lengths, enums, model names) are never scanned. ``Masker(prefilter=False)`` runs
every rule on every string: the plain rule set, which the prefiltered one must equal.
"""

from __future__ import annotations

import hashlib
import hmac
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import orjson
import re2

from collector.model.entry import CONTENT_FIELDS
from collector.pipeline.mask_rules import MaskingRuleError, Rule, fold, parse_rules

__all__ = ["FIELD_CLASSES", "MODES", "Masker", "MaskingRuleError", "Rule", "RuleSet", "default_masker",
           "load_rules", "mask_entry", "mask_text", "mask_value", "shipped_rules"]

MODES = ("redact", "hash", "drop", "keep")
FIELD_CLASSES = ("content", "attributes")

# Fields we produce from identifiers, enums, digests or model names: never content, never scanned.
NO_SCAN = frozenset(
    {
        "schema.version", "event.id", "event.name", "user.id", "gen_ai.agent.type", "gen_ai.agent.id", "turn.key",
        "turn.ends",
        "gen_ai.agent.scope", "gen_ai.session.id", "gen_ai.turn.id", "gen_ai.provider.name",
        "gen_ai.operation.name", "gen_ai.request.model", "gen_ai.response.model", "gen_ai.request.id",
        "gen_ai.response.id", "gen_ai.response.finish_reasons", "gen_ai.tool.call.id", "gen_ai.tool.type",
        "tool.result.status", "tool.approve.decision", "error.type", "gen_ai.subagent.parent_tool_call.id",
        "gen_ai.subagent.id", "gen_ai.session.parent.id", "session.source", "session.reason", "prompt.origin",
        "session.status",
        "session.previous_status", "compaction.trigger", "source.kind", "agent.hook_event_name", "agent.model",
        "masking.dropped", "collector.invalid_fields", "collector.time_replaced", "collector.truncated",
    }
)
NO_SCAN_SUFFIXES = (".length", ".hmac", ".id", "_unix_nano")
STRUCTURAL_KEYS = NO_SCAN  # the name earlier versions used
_CONTENT = frozenset(CONTENT_FIELDS)
_CONTAINERS = (str, list, dict)
_PLAN_SIZE = 4096
_CLEAN_SIZE = 4096  # strings remembered as clean at once (then forgotten all together)
_CLEAN_LENGTH = 256  # the longest one remembered
_RE2_MEMORY = 256 << 20  # the set's DFA never runs out on long texts (a test checks)


def _keyword_pattern(rule: Rule) -> str:
    if rule.prefilter is not None:
        return f"(?:{rule.prefilter})"
    body = "|".join(re2.escape(k) for k in rule.keywords)
    return f"(?:{body})" if rule.case_sensitive else f"(?i:{body})"


class RuleSet:
    """Rules in order, with one RE2 set over their keywords (set index = rule index)."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        ids = [r.id for r in self.rules]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise MaskingRuleError(f"masking rule {dup!r} is defined twice")
        options = re2.Options()
        options.case_sensitive = True
        options.max_mem = _RE2_MEMORY
        self._set = re2.Set.SearchSet(options)
        for rule in self.rules:
            self._set.Add(_keyword_pattern(rule))
        self._set.Compile()
        self._all = list(range(len(self.rules)))

    def ids(self) -> list[str]:
        return [r.id for r in self.rules]

    def candidates(self, text: str | bytes) -> list[int]:
        """Indices of the rules one of whose keywords ``text`` contains."""
        found: list[int] | None = self._set.Match(text)
        return found or []

    def spans(self, text: str, indices: Iterable[int] | None = None) -> list[tuple[int, int, str]]:
        """The secrets in ``text`` as (start, end, rule id), overlaps merged (the earliest start names
        the merged span; on a tie, the rule listed first). ``indices`` None: every rule."""
        found: list[tuple[int, int, int]] = []
        folded = fold(text)
        for index in self._all if indices is None else indices:
            found.extend((s, e, index) for s, e in self.rules[index].spans(text, folded))
        if not found:
            return []
        found.sort(key=lambda span: (span[0], span[2]))
        merged: list[list[Any]] = []
        for start, end, index in found:
            if merged and start < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end, self.rules[index].id])
        return [(s, e, k) for s, e, k in merged]


@lru_cache(maxsize=1)
def shipped_rules() -> tuple[Rule, ...]:
    text = resources.files("collector").joinpath("data/masking-rules.toml").read_text(encoding="utf-8")
    return tuple(parse_rules(tomllib.loads(text).get("rule", []), "masking-rules.toml"))


def load_rules(extra: Iterable[Mapping[str, Any]] = (), disabled: Iterable[str] = ()) -> RuleSet:
    """The shipped rules less ``disabled`` (ids), then ``extra`` (config ``masking.rules``)."""
    shipped = shipped_rules()
    known = {r.id for r in shipped}
    off = set(disabled)
    unknown = sorted(off - known)
    if unknown:
        raise MaskingRuleError(f"masking.disabled_rules: no shipped rule {unknown[0]!r}")
    return RuleSet([r for r in shipped if r.id not in off] + parse_rules(list(extra), "masking.rules"))


@dataclass(slots=True)
class _Found:
    any: bool = False


class Masker:
    """Masks entries. ``modes`` maps a field class (content, attributes) to redact, hash, drop or keep;
    ``key`` is the install's content key (needed for hash)."""

    def __init__(self, rules: RuleSet, modes: Mapping[str, str] | None = None, key: bytes | None = None,
                 prefilter: bool = True) -> None:
        self.rules = rules
        self.modes = {c: "redact" for c in FIELD_CLASSES} | dict(modes or {})
        for field_class, mode in self.modes.items():
            if field_class not in FIELD_CLASSES or mode not in MODES:
                raise MaskingRuleError(f"masking mode {field_class}={mode!r}: classes {FIELD_CLASSES}, modes {MODES}")
        if key is None and "hash" in self.modes.values():
            raise MaskingRuleError("masking mode hash needs the install's content key")
        self.key = key
        self.prefilter = prefilter
        self._plan: dict[str, str] = {}  # field name -> mode, so each entry costs a lookup per field
        self._shapes: dict[tuple[str, ...], list[str]] = {}  # an entry's keys -> those scanned
        self._clean: set[str] = set()  # short field values known to hold no secret (``_remember_clean``)

    # -- text --------------------------------------------------------------------------------------

    def mask_text(self, text: str, mode: str = "redact") -> str:
        return self._text(text, mode, _Found())

    def _text(self, text: str, mode: str, found: _Found) -> str:
        if self.prefilter:
            indices = self.rules.candidates(text)
            if not indices:
                return text
            spans = self.rules.spans(text, indices)
        else:
            spans = self.rules.spans(text)
        if not spans:
            return text
        found.any = True
        parts: list[str] = []
        last = 0
        for start, end, kind in spans:
            parts.append(text[last:start])
            parts.append(self._replacement(kind, text[start:end], mode))
            last = end
        parts.append(text[last:])
        return "".join(parts)

    def _replacement(self, kind: str, secret: str, mode: str) -> str:
        if mode == "hash" and self.key is not None:
            digest = hmac.new(self.key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
            return f"[HMAC:{kind}:{digest[:16]}]"
        return f"[REDACTED:{kind}]"

    # -- values and entries ------------------------------------------------------------------------

    def mask_value(self, value: Any, mode: str = "redact") -> Any:
        return self._value(value, mode, _Found())

    def _value(self, value: Any, mode: str, found: _Found) -> Any:
        if isinstance(value, str):
            return self._text(value, mode, found)
        if isinstance(value, list):
            return [self._value(v, mode, found) for v in value]
        if isinstance(value, dict):
            return {(self._text(k, mode, found) if isinstance(k, str) else k): self._value(v, mode, found)
                    for k, v in value.items()}
        return value

    def mask_entry(self, entry: dict[str, Any]) -> dict[str, Any]:
        plan = self._plan
        clean = self._clean
        fields = []
        for key in self._scanned_of(tuple(entry)):
            value = entry[key]
            if value.__class__ in _CONTAINERS and (value.__class__ is not str or value not in clean):
                fields.append(key)
        if not fields:
            return entry
        if self.prefilter and not self._may_hold_secret(entry, fields):
            self._remember_clean(entry[k] for k in fields)
            return entry
        dropped = []
        for key in fields:
            mode = plan.get(key) or self._plan_key(key)
            found = _Found()
            masked = self._value(entry[key], mode, found)
            if not found.any:
                self._remember_clean((masked,))
                continue
            if mode == "drop":
                del entry[key]
                dropped.append(key)
            else:
                entry[key] = masked
        if dropped:
            entry["masking.dropped"] = dropped
        return entry

    def _remember_clean(self, values: Iterable[Any]) -> None:
        """Short strings found to hold no secret (host names, tool names, versions, paths: a few dozen
        values fill the non-content fields of a whole backfill), so the next entry's are not scanned
        again. Only with the prefilter: the plain rule set, the prefilter's reference, scans everything."""
        if not self.prefilter:
            return
        clean = self._clean
        for value in values:
            if value.__class__ is str and len(value) <= _CLEAN_LENGTH:
                if len(clean) >= _CLEAN_SIZE:
                    clean.clear()
                clean.add(value)

    def _scanned_of(self, keys: tuple[str, ...]) -> list[str]:
        """The fields of an entry with these keys that are scanned (not ``keep``), worked out once per
        set of keys: entries come in a few dozen shapes, each with a few scanned fields of twenty."""
        scanned = self._shapes.get(keys)
        if scanned is None:
            scanned = [k for k in keys if (self._plan.get(k) or self._plan_key(k)) != "keep"]
            if len(self._shapes) >= _PLAN_SIZE:
                self._shapes.clear()
            self._shapes[keys] = scanned
        return scanned

    def _plan_key(self, key: str) -> str:
        """The mode for a field: its class's, or keep for fields that cannot hold a secret (cached)."""
        mode = self.modes[_field_class(key)] if _scanned(key) else "keep"
        if len(self._plan) < _PLAN_SIZE:
            self._plan[key] = mode
        return mode

    def _may_hold_secret(self, entry: Mapping[str, Any], fields: list[str]) -> bool:
        """One keyword pass over the fields serialised together. JSON escapes only quotes, backslashes and
        control characters, which no keyword holds, so a keyword in any string is found here too."""
        try:
            blob = orjson.dumps([entry[k] for k in fields])
        except TypeError:  # e.g. a lone surrogate: look at each string instead
            return True
        return bool(self.rules.candidates(blob))


def _scanned(key: str) -> bool:
    return key not in NO_SCAN and not key.endswith(NO_SCAN_SUFFIXES)


def _field_class(key: str) -> str:
    return "content" if key in _CONTENT else "attributes"


@lru_cache(maxsize=1)
def default_masker() -> Masker:
    """The shipped rules, redacting everywhere."""
    return Masker(load_rules())


def mask_text(text: str) -> str:
    return default_masker().mask_text(text)


def mask_value(value: Any) -> Any:
    return default_masker().mask_value(value)


def mask_entry(entry: dict[str, Any]) -> dict[str, Any]:
    return default_masker().mask_entry(entry)
