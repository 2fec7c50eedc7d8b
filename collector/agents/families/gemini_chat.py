"""The Gemini-style chat content of the Gemini CLI's chat log and of Qwen Code's (a fork of it): a
message's ``parts`` list holds ``{text}``, ``{functionCall: {id, name, args}}`` and
``{functionResponse: {id, name, response: {output | error}}}`` objects; a shell tool's function response
text says ``Exit Code: <n>`` when the command exited.

A part of another type (not an object) says nothing and is passed over; the agent's parser counts the
faults of its own record shapes.
"""

from __future__ import annotations

import re
from typing import Any

EXIT_CODE = re.compile(r"^Exit Code:\s*(-?\d+)", re.MULTILINE | re.IGNORECASE)


def object_parts(parts: Any) -> list[dict[str, Any]]:
    """The parts of a ``parts`` list that are objects; none when it is no list."""
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def message_parts(message: Any) -> list[dict[str, Any]]:
    """The parts of a ``{role, parts}`` message."""
    return object_parts(message.get("parts")) if isinstance(message, dict) else []


def text_of(content: Any) -> str | None:
    """The text of a content that is a string or a parts list (its text parts joined by newlines); None
    when it has none."""
    if isinstance(content, str):
        return content or None
    texts = [p["text"] for p in object_parts(content) if isinstance(p.get("text"), str)]
    return "\n".join(texts) if texts else None


def function_calls(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``functionCall`` objects of ``parts`` that carry a call id (the id the response answers to)."""
    calls = (part.get("functionCall") for part in parts)
    return [call for call in calls if isinstance(call, dict) and isinstance(call.get("id"), str)]


def tool_call_attrs(call: dict[str, Any]) -> dict[str, Any]:
    """What a function call (``{id, name, args}``) says of the tool call."""
    return {"gen_ai.tool.name": call.get("name"), "gen_ai.tool.call.id": call["id"],
            "gen_ai.tool.call.arguments": call.get("args")}


def function_responses(parts: Any) -> list[dict[str, Any]]:
    """The ``functionResponse`` objects of a parts list."""
    responses = (part.get("functionResponse") for part in object_parts(parts))
    return [response for response in responses if isinstance(response, dict)]


def function_output(response: dict[str, Any]) -> tuple[Any, Any] | None:
    """(output, error) of a function response, when its ``response`` is an object."""
    body = response.get("response")
    return (body.get("output"), body.get("error")) if isinstance(body, dict) else None


def exit_code_in(output: Any, pattern: re.Pattern[str] = EXIT_CODE) -> int | None:
    """The exit code a shell tool's output text names (``pattern``: the member's way of writing it)."""
    if isinstance(output, str):
        match = pattern.search(output)
        if match:
            return int(match.group(1))
    return None
