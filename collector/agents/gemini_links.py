"""Gemini CLI sub-agent chat logs: which session and which tool call a ``chats/<session>/<agent>.jsonl``
file belongs to.

The file's folder is the parent session's id; its name is the sub-agent's id. The tool call that started
it is the parent's ``invoke_agent`` call whose ``agentId`` is that id, in the parent's chat log
(``chats/session-<time>-<first 8 of the session id>.jsonl``). That call is written when the sub-agent has
finished, so the lookup finds nothing while it runs. Answers are cached per file size (append-only).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import Any

import orjson

from collector.model.decode import loads

MAX_SCAN = 32 * 1024 * 1024  # bytes of a parent log searched for the call, from its end
_SUBAGENT_FILE = re.compile(r"/chats/([0-9a-fA-F-]{36})/([0-9a-fA-F-]{36})\.jsonl$")


@dataclass(frozen=True, slots=True)
class SubagentFile:
    chats_dir: str
    session: str
    agent_id: str

    def parent_call(self) -> tuple[str, str | None] | None:
        """(the invoke_agent call id, the parent's turn it belongs to), once the parent wrote the call."""
        return _parent_call(self.chats_dir, self.session, self.agent_id)


def subagent_of(path: str) -> SubagentFile | None:
    """The sub-agent a chat log path belongs to, or None for a main session's log."""
    match = _SUBAGENT_FILE.search(path)
    if not match:
        return None
    return SubagentFile(path[: match.start()] + "/chats", match.group(1), match.group(2))


def _parent_call(chats_dir: str, session: str, agent_id: str) -> tuple[str, str | None] | None:
    try:
        st = os.stat(chats_dir)
        names = _parent_logs(chats_dir, st.st_ino, st.st_mtime_ns).get(session[:8], ())
    except OSError:
        return None
    for name in names:
        path = os.path.join(chats_dir, name)
        try:
            st = os.stat(path)
            found = _call_in(path, agent_id, st.st_ino, st.st_size)
        except OSError:
            continue
        if found:
            return found
    return None


@functools.lru_cache(maxsize=64)
def _parent_logs(chats_dir: str, ino: int, mtime_ns: int) -> dict[str, tuple[str, ...]]:
    """The main sessions' logs of a chats folder by the short session id in their names, sorted; cached
    while the folder is unchanged (a file added or removed changes its mtime), so a folder of thousands of
    sessions is listed once, not once per sub-agent line."""
    logs: dict[str, list[str]] = {}
    for name in os.listdir(chats_dir):
        if name.startswith("session-") and name.endswith(".jsonl") and name[-15:-14] == "-":
            logs.setdefault(name[-14:-6], []).append(name)
    return {short: tuple(sorted(names)) for short, names in logs.items()}


@functools.lru_cache(maxsize=1024)
def _call_in(path: str, agent_id: str, ino: int, size: int) -> tuple[str, str | None] | None:
    """The id of the call naming ``agent_id`` in the first ``size`` bytes (an append-only file: the same
    size is the same content, so the answer, found or not, is cached)."""
    needle = agent_id.encode()
    with open(path, "rb") as f:
        f.seek(max(0, size - MAX_SCAN))
        data = f.read(min(size, MAX_SCAN))
    turn = None
    for line in data.splitlines():
        if line.startswith(b'{"$set"'):
            continue
        if b'"type":"user"' in line.replace(b" ", b""):
            turn = _prompt_id(line) or turn
        if needle not in line or b'"toolCalls"' not in line:
            continue
        for call in _decode(line).get("toolCalls") or []:
            if isinstance(call, dict) and call.get("agentId") == agent_id and isinstance(call.get("id"), str):
                return str(call["id"]), turn
    return None


def _decode(line: bytes) -> dict[str, Any]:
    try:
        data = loads(line)
    except orjson.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _prompt_id(line: bytes) -> str | None:
    """The id of a user message that is a prompt (text, not a function response or the context)."""
    message = _decode(line)
    content = message.get("content")
    texts = [p.get("text") for p in content if isinstance(p, dict)] if isinstance(content, list) else [content]
    text = next((t for t in texts if isinstance(t, str) and t), None)
    if text is None or text.startswith("<session_context>") or not isinstance(message.get("id"), str):
        return None
    return str(message["id"])
