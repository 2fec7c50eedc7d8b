"""The JSON and JSONC reads and edits the file edits share: a config parsed with an error that names
the file (so it is left untouched), and one dotted key set in place keeping the rest of the text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collector.deploy.jsonc import JsoncError, Node, add_member, replace_value
from collector.deploy.jsonc import parse as parse_jsonc
from collector.deploy.model import DeployError


def parse_json(text: str, path: Path, comments: bool) -> Node:
    try:
        return parse_jsonc(text, comments=comments)
    except JsoncError as exc:
        kind = "JSONC" if comments else "JSON"
        raise DeployError(f"{path}: not valid {kind} ({exc}); left untouched") from None
    except RecursionError:
        raise DeployError(f"{path}: nested too deeply to be a config file; left untouched") from None


def set_dotted(text: str, path: Path, comments: bool, keys: list[str], value: Any) -> str:
    root = parse_json(text, path, comments)
    node = root
    for depth, key in enumerate(keys):
        if node.kind != "object":
            raise DeployError(f"{path}: {'.'.join(keys[:depth])} is not an object; left untouched")
        member = node.member(key)
        if member is None:
            nested: Any = value
            for inner in reversed(keys[depth + 1 :]):
                nested = {inner: nested}
            return add_member(text, node, key, nested)
        node = member.value
    if node.value() == value:
        return text
    return replace_value(text, node, value)

