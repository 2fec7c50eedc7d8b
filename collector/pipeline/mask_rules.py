"""A masking rule as data: its keywords (the prefilter), its regular expression and the checks of what it
matched. ``parse_rules`` turns the rule file's tables (or config ``masking.rules``) into Rules, refusing
anything malformed with a message naming the rule."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collector.pipeline.mask_checks import CHECKS, Check, char_classes, shannon
from collector.pipeline.mask_reach import reach, windows


def fold(text: str) -> str:
    """Lower case with every character at its place, for the keyword search. Rule patterns are compiled
    with re.ASCII, so their (?i) folds only ASCII letters, which lower() folds too; what else lower() folds
    only adds windows. U+0130 is the one character lower() makes two of."""
    return text.lower() if "\u0130" not in text else text.replace("\u0130", "i").lower()

_ID = re.compile(r"^[a-z0-9][a-z0-9_]*$")
_KEYS = {"id", "keywords", "prefilter", "pattern", "case_sensitive", "entropy", "classes", "check", "description"}


class MaskingRuleError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    keywords: tuple[str, ...]
    regex: re.Pattern[str]
    case_sensitive: bool = False
    entropy: float | None = None
    classes: int | None = None
    check: Check | None = None
    prefilter: str | None = None  # RE2 syntax; None: the keywords
    reach: tuple[int, int] | None = None  # (width, look-ahead): see mask_reach

    def spans(self, text: str, folded: str | None = None) -> Iterator[tuple[int, int]]:
        """(start, end) of each secret this rule finds in ``text`` (``folded``: ``fold(text)``, if at
        hand). Bounded patterns run only on windows around their keywords, with the same result."""
        if self.reach is None:
            yield from self._spans(text, 0, len(text))
            return
        haystack = text if self.case_sensitive else (folded if folded is not None else fold(text))
        needles = self.keywords if self.case_sensitive else tuple(k.lower() for k in self.keywords)
        for start, end in windows(haystack, needles, *self.reach):
            yield from self._spans(text, start, end)

    def _spans(self, text: str, pos: int, endpos: int) -> Iterator[tuple[int, int]]:
        grouped = "secret" in self.regex.groupindex
        for match in self.regex.finditer(text, pos, endpos):
            start, end = match.span("secret") if grouped else match.span()
            if start < 0 or start == end:
                continue
            value = text[start:end]
            if self.entropy is not None and shannon(value) < self.entropy:
                continue
            if self.classes is not None and char_classes(value) < self.classes:
                continue
            if self.check is not None and not self.check(match, value):
                continue
            yield start, end


def parse_rules(tables: Sequence[Mapping[str, Any]], source: str) -> list[Rule]:
    return [_parse(table, f"{source}[{i}]") for i, table in enumerate(tables)]


def _parse(table: Mapping[str, Any], where: str) -> Rule:
    if not isinstance(table, Mapping):
        raise MaskingRuleError(f"{where}: a rule is a table with id, keywords and pattern")
    rule_id = table.get("id")
    if not isinstance(rule_id, str) or not _ID.match(rule_id):
        raise MaskingRuleError(f"{where}: id must be lower-case letters, digits and _, not {rule_id!r}")
    where = f"{where} ({rule_id})"
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise MaskingRuleError(f"{where}: unknown key {unknown[0]!r} (valid: {', '.join(sorted(_KEYS))})")
    regex = _pattern(table.get("pattern"), where)
    return Rule(rule_id, _keywords(table.get("keywords"), where), regex,
                _flag(table.get("case_sensitive", False), where), _number(table, "entropy", 0, 8, where),
                _integer(table, "classes", 1, 4, where), _check(table.get("check"), where),
                _prefilter(table.get("prefilter"), where), reach(regex.pattern))


def _keywords(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(k, str) and k for k in value):
        raise MaskingRuleError(f"{where}: keywords must be a non-empty list of non-empty strings")
    for keyword in value:
        if any(c in '"\\' or not c.isprintable() for c in keyword):
            raise MaskingRuleError(f"{where}: keyword {keyword!r} may not hold quotes, backslashes or controls")
    return tuple(value)


def _pattern(value: Any, where: str) -> re.Pattern[str]:
    if not isinstance(value, str) or not value:
        raise MaskingRuleError(f"{where}: pattern must be a regular expression")
    try:
        return re.compile(value, re.ASCII)
    except re.error as exc:
        raise MaskingRuleError(f"{where}: pattern does not compile: {exc}") from exc


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise MaskingRuleError(f"{where}: case_sensitive must be true or false")
    return value


def _number(table: Mapping[str, Any], key: str, lo: float, hi: float, where: str) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise MaskingRuleError(f"{where}: {key} must be a number from {lo} to {hi}")
    return float(value)


def _integer(table: Mapping[str, Any], key: str, lo: int, hi: int, where: str) -> int | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise MaskingRuleError(f"{where}: {key} must be an integer from {lo} to {hi}")
    return value


def _check(value: Any, where: str) -> Check | None:
    if value is None:
        return None
    if value not in CHECKS:
        raise MaskingRuleError(f"{where}: check must be one of {', '.join(sorted(CHECKS))}, not {value!r}")
    return CHECKS[value]


def _prefilter(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise MaskingRuleError(f"{where}: prefilter must be an RE2 regular expression")
    import re2

    try:
        re2.compile(value)
    except re2.error as exc:
        raise MaskingRuleError(f"{where}: prefilter is not valid RE2: {exc}") from exc
    return value
