"""Minimal-edit helpers for TOML text: find a top-level key's line span, add or remove one line,
and a managed block appended at the end. tomllib checks every result; formatting is never rewritten."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from typing import Any

from collector.deploy.model import DeployError

_BARE_KEY = re.compile(r"[ \t]*(?:([A-Za-z0-9_-]+)|\"([^\"\\]*)\"|'([^']*)')[ \t]*=")


@dataclass(frozen=True, slots=True)
class KeySpan:
    key: str
    start: int  # start of the line holding the key
    end: int  # just after the newline that ends the value (or end of text)


def loads(text: str, file: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DeployError(f"{file}: not valid TOML ({exc}); left untouched") from None
    except RecursionError:
        raise DeployError(f"{file}: nested too deeply to be a config file; left untouched") from None


def _skip_string(text: str, i: int) -> int:
    """``i`` is at a quote; return the index just after the string."""
    for quote in ('"""', "'''"):
        if text.startswith(quote, i):
            j = i + 3
            while True:
                k = text.find(quote, j)
                if k < 0:
                    return len(text)
                if quote == '"""' and _escaped(text, k):
                    j = k + 1
                    continue
                k += 3
                while k < len(text) and text[k] == quote[0]:  # up to two extra quotes belong inside
                    k += 1
                return k
    quote = text[i]
    j = i + 1
    while j < len(text) and text[j] != "\n":
        if text[j] == "\\" and quote == '"':
            j += 2
            continue
        if text[j] == quote:
            return j + 1
        j += 1
    return j


def _escaped(text: str, k: int) -> bool:
    n = 0
    while k - n - 1 >= 0 and text[k - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def _value_end(text: str, i: int) -> int:
    """From inside a value, the index just after the line that ends it."""
    depth = 0
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            i = _skip_string(text, i)
            continue
        if ch == "#":
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
            continue
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "\n" and depth <= 0:
            return i + 1
        i += 1
    return len(text)


def top_level(text: str) -> tuple[list[KeySpan], int | None]:
    """Key/value lines before the first table header, and where that header's line starts."""
    spans: list[KeySpan] = []
    i = 0
    while i < len(text):
        line_end = text.find("\n", i)
        line_end = len(text) if line_end < 0 else line_end
        line = text[i:line_end]
        stripped = line.lstrip()
        if stripped.startswith("["):
            return spans, i
        match = _BARE_KEY.match(line)
        if match and not stripped.startswith("#"):
            key = next(g for g in match.groups() if g is not None)
            end = _value_end(text, i + match.end())
            spans.append(KeySpan(key, i, end))
            i = end
            continue
        i = line_end + 1
    return spans, None


def toml_string(value: str) -> str:
    out = []
    for ch in value:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_array(values: list[str]) -> str:
    return "[" + ", ".join(toml_string(v) for v in values) + "]"


def insert_top_level_line(text: str, line: str) -> str:
    """Put ``line`` after the last top-level key (before comments that lead into the first table)."""
    newline = "\r\n" if "\r\n" in text else "\n"
    spans, header = top_level(text)
    if spans:
        pos = spans[-1].end
        before = text[:pos]
        if not before.endswith("\n"):
            before += newline
        return before + line + newline + text[pos:]
    if header is None:
        sep = "" if not text or text.endswith("\n") else newline
        return text + sep + line + newline
    return text[:header] + line + newline + newline + text[header:]


def remove_span(text: str, span: KeySpan) -> str:
    return text[: span.start] + text[span.end :]


def without_block(text: str, start_marker: str, end_marker: str) -> str | None:
    """``text`` without its managed block (``find_block``), or None when it has none."""
    span = find_block(text, start_marker, end_marker)
    return None if span is None else text[: span[0]] + text[span[1] :]


def find_block(text: str, start_marker: str, end_marker: str) -> tuple[int, int] | None:
    """Span of a managed block (its marker lines included, plus one blank line we put before it)."""
    begin = text.find(start_marker)
    if begin < 0:
        return None
    begin = text.rfind("\n", 0, begin) + 1
    finish = text.find(end_marker, begin)
    if finish < 0:
        return None
    nl = text.find("\n", finish)
    finish = len(text) if nl < 0 else nl + 1
    if text[:begin].endswith("\n\n"):
        begin -= 1
    elif text[:begin].endswith("\r\n\r\n"):
        begin -= 2
    return begin, finish
