"""A cheap test on a raw JSONL line, before it is decoded: can it make an entry at all?

Most bytes of some agents' files are lines their parser makes nothing of (in a Claude Code transcript, the
``attachment``, ``file-history-snapshot`` and ``queue-operation`` lines are ~94 % of the bytes). A
definition's ``jsonl`` source may say which values of one top-level field make entries
(``"decode_only": {"field": "type", "values": ["user", "assistant", ...]}``); a line is then decoded only
when it *may* have one of them, judged from its text:

- every occurrence of the key (``"type"`` followed by ``:``, spaces allowed) is looked at, nested ones
  included, since the text alone cannot tell the top level from the rest;
- a line is skipped undecoded only when each occurrence holds a plain string (no backslash escape) that is
  not one of the values, or when the key does not occur at all (the parser would find no kind);
- an occurrence holding anything else (a number, an object, ``true``, an escaped string) sends the line
  to the decoder, so a wrong-typed kind is still checked at the boundary and counted there.

A key inside a string value cannot match: its quotes are escaped there (``\\"type\\"``). The test errs one
way only: a line it does not skip is decoded and parsed as before. A skipped line's position moves like
any other's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class LineFilter:
    field: str
    values: frozenset[bytes]
    key: re.Pattern[bytes]

    @classmethod
    def of(cls, spec: dict[str, Any] | None) -> LineFilter | None:
        """The filter a source spec's ``decode_only`` declares, or None (every line is decoded)."""
        if not spec:
            return None
        name = str(spec["field"])
        key = re.compile(b'"' + re.escape(name.encode()) + rb'"\s*:\s*')
        return cls(name, frozenset(str(v).encode() for v in spec["values"]), key)

    def skips(self, line: bytes) -> bool:
        """True when ``line`` cannot make an entry (see the module's rules)."""
        find = line.find
        for match in self.key.finditer(line):
            at = match.end()
            if line[at:at + 1] != b'"':
                return False  # not a string: the boundary judges it
            end = find(b'"', at + 1)
            if end < 0:
                return False
            value = line[at + 1:end]
            if value in self.values or b"\\" in value:
                return False
        return True
