"""Surgical edits of JSON and JSONC text: change what must change, keep every other byte.

A small parser records where each value, key and member starts and ends; edits splice text at those
offsets and copy the surrounding layout (indent unit, inline vs one-per-line, CRLF), so a user's file
keeps its comments, key order, spacing and trailing newline. Every edit returns new text; callers re-parse
for the next edit (config files are small).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}


class JsoncError(ValueError):
    """Text that is not valid JSON (or JSONC): message says where and why."""

    def __init__(self, reason: str, text: str, pos: int) -> None:
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"line {line} column {col}: {reason}")
        self.reason = reason
        self.line = line
        self.column = col


@dataclass
class Node:
    kind: str  # object | array | string | number | literal
    start: int
    end: int
    scalar: Any = None
    members: list[Member] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)

    def member(self, key: str) -> Member | None:
        found = None
        for m in self.members:  # the last duplicate wins, as in JSON.parse
            if m.key == key:
                found = m
        return found

    def value(self) -> Any:
        if self.kind == "object":
            return {m.key: m.value.value() for m in self.members}
        if self.kind == "array":
            return [i.value() for i in self.items]
        return self.scalar


@dataclass
class Member:
    key: str
    key_start: int
    value: Node

    @property
    def start(self) -> int:
        return self.key_start

    @property
    def end(self) -> int:
        return self.value.end


class _Parser:
    def __init__(self, text: str, comments: bool) -> None:
        self.text = text
        self.pos = 0
        self.comments = comments

    def fail(self, reason: str, pos: int | None = None) -> JsoncError:
        return JsoncError(reason, self.text, self.pos if pos is None else pos)

    def skip(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            ch = text[self.pos]
            if ch in " \t\r\n":
                self.pos += 1
            elif ch == "/" and self.comments and text.startswith("//", self.pos):
                nl = text.find("\n", self.pos)
                self.pos = n if nl < 0 else nl + 1
            elif ch == "/" and self.comments and text.startswith("/*", self.pos):
                close = text.find("*/", self.pos + 2)
                if close < 0:
                    raise self.fail("unterminated /* comment")
                self.pos = close + 2
            elif ch == "/":
                raise self.fail("comments are not allowed in JSON")
            else:
                return

    def parse_document(self) -> Node:
        if self.text.startswith("\ufeff"):
            self.pos = 1
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("empty document")
        node = self.parse_value()
        self.skip()
        if self.pos != len(self.text):
            raise self.fail("unexpected text after the document")
        return node

    def parse_value(self) -> Node:
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of text")
        ch = self.text[self.pos]
        if ch == "{":
            return self.parse_container("object", "}")
        if ch == "[":
            return self.parse_container("array", "]")
        if ch == '"':
            start = self.pos
            text = self.parse_string()
            return Node("string", start, self.pos, scalar=text)
        for word, value in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                start = self.pos
                self.pos += len(word)
                return Node("literal", start, self.pos, scalar=value)
        match = _NUMBER.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return Node("number", match.start(), match.end(), scalar=json.loads(match.group()))
        raise self.fail(f"unexpected character {ch!r}")

    def parse_string(self) -> str:
        start = self.pos
        i = start + 1
        text = self.text
        while True:
            j = text.find('"', i)
            if j < 0:
                raise self.fail("unterminated string", start)
            backslashes = 0
            k = j - 1
            while text[k] == "\\":
                backslashes += 1
                k -= 1
            if backslashes % 2 == 0:
                break
            i = j + 1
        self.pos = j + 1
        try:
            value = json.loads(text[start : self.pos])
        except json.JSONDecodeError as exc:
            raise self.fail(f"bad string: {exc.msg}", start) from None
        assert isinstance(value, str)
        return value

    def parse_container(self, kind: str, close: str) -> Node:
        node = Node(kind, self.pos, -1)
        self.pos += 1
        self.skip()
        if self.text.startswith(close, self.pos):
            self.pos += 1
            node.end = self.pos
            return node
        while True:
            if kind == "object":
                if not self.text.startswith('"', self.pos):
                    raise self.fail("expected a quoted key")
                key_start = self.pos
                key = self.parse_string()
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("expected ':'")
                self.pos += 1
                self.skip()
                node.members.append(Member(key, key_start, self.parse_value()))
            else:
                node.items.append(self.parse_value())
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                self.skip()
                if self.text.startswith(close, self.pos):
                    if not self.comments:
                        raise self.fail("trailing comma")
                    break
                continue
            if self.text.startswith(close, self.pos):
                break
            raise self.fail(f"expected ',' or '{close}'")
        self.pos += 1
        node.end = self.pos
        return node


def parse(text: str, comments: bool = True) -> Node:
    """Parse JSON (``comments=False``) or JSONC (comments and trailing commas) keeping positions."""
    return _Parser(text, comments).parse_document()


# ----------------------------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class Layout:
    newline: str
    unit: str  # one level of indentation

    @staticmethod
    def of(text: str) -> Layout:
        newline = "\r\n" if "\r\n" in text else "\n"
        unit = "  "
        for match in re.finditer(r"\n([ \t]+)\S", text):
            lead = match.group(1)
            if lead.startswith("\t"):
                unit = "\t"
                break
            unit = " " * min(len(lead), 8)
            break
        return Layout(newline, unit)


def _line_indent(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    match = re.match(r"[ \t]*", text[line_start:pos])
    return match.group() if match else ""


def _children(node: Node) -> list[tuple[int, int]]:
    if node.kind == "object":
        return [(m.start, m.end) for m in node.members]
    return [(i.start, i.end) for i in node.items]


def render(value: Any, indent: str, layout: Layout, inline: bool) -> str:
    if inline:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    text = json.dumps(value, ensure_ascii=False, indent=layout.unit)
    return text.replace("\n", layout.newline + indent)


def _is_multiline(text: str, node: Node) -> bool:
    children = _children(node)
    if not children:
        return "\n" in text
    first_start = children[0][0]
    return "\n" in text[node.start : first_start]


def _insert(text: str, node: Node, item_text_for: Any) -> str:
    """Insert a new last child into container ``node``; ``item_text_for(indent, inline)`` renders it."""
    layout = Layout.of(text)
    children = _children(node)
    multiline = _is_multiline(text, node)
    if not children:
        outer = _line_indent(text, node.start)
        inner = text[node.start + 1 : node.end - 1]
        if not multiline:
            item = item_text_for("", True)
            new_inner = item if not inner.strip() else item + inner
            return text[: node.start + 1] + new_inner + text[node.end - 1 :]
        child_indent = outer + layout.unit
        item = item_text_for(child_indent, False)
        if inner.strip():  # keep comments that sit inside the empty container
            head = text[: node.start + 1] + layout.newline + child_indent + item
            return head + inner + text[node.end - 1 :]
        body = layout.newline + child_indent + item + layout.newline + outer
        return text[: node.start + 1] + body + text[node.end - 1 :]
    last_start, last_end = children[-1]
    if multiline:
        child_indent = _line_indent(text, last_start)
        separator = "," + layout.newline + child_indent
        item = item_text_for(child_indent, False)
    else:
        separator = ", "
        item = item_text_for("", True)
    return text[:last_end] + separator + item + text[last_end:]


def append_item(text: str, array: Node, value: Any) -> str:
    assert array.kind == "array"
    return _insert(text, array, lambda indent, inline: render(value, indent, Layout.of(text), inline))


def add_member(text: str, obj: Node, key: str, value: Any) -> str:
    assert obj.kind == "object"

    def item(indent: str, inline: bool) -> str:
        return json.dumps(key, ensure_ascii=False) + ": " + render(value, indent, Layout.of(text), inline)

    return _insert(text, obj, item)


def _remove_child(text: str, node: Node, index: int) -> str:
    children = _children(node)
    start, end = children[index]
    if len(children) == 1:
        before, after = text[node.start + 1 : start], text[end : node.end - 1]
        if not before.strip() and not after.strip(" \t\r\n,"):
            return text[: node.start + 1] + text[node.end - 1 :]
        trailing = re.match(r"[ \t\r\n]*,", after)  # a JSONC trailing comma must go with the child
        return text[:start] + text[end + (trailing.end() if trailing else 0) :]
    if index > 0:
        return text[: children[index - 1][1]] + text[end:]
    return text[:start] + text[children[1][0] :]


def remove_item(text: str, array: Node, index: int) -> str:
    assert array.kind == "array"
    return _remove_child(text, array, index)


def remove_member(text: str, obj: Node, key: str) -> str:
    assert obj.kind == "object"
    for index in range(len(obj.members) - 1, -1, -1):
        if obj.members[index].key == key:
            return _remove_child(text, obj, index)
    return text


def replace_value(text: str, node: Node, value: Any) -> str:
    inline = "\n" not in text[node.start : node.end]
    indent = _line_indent(text, node.start)
    return text[: node.start] + render(value, indent, Layout.of(text), inline) + text[node.end :]


def find(root: Node, path: list[str]) -> Node | None:
    node: Node | None = root
    for key in path:
        if node is None or node.kind != "object":
            return None
        member = node.member(key)
        node = member.value if member else None
    return node
