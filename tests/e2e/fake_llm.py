"""One scripted fake model server for the real agent CLIs, bound to 127.0.0.1.

It speaks four wire APIs, streaming as the real SDKs expect:

- Anthropic Messages            ``POST /v1/messages``                 (Claude Code)
- OpenAI Responses              ``POST /v1/responses``                (Codex)
- OpenAI Chat Completions       ``POST /v1/chat/completions``         (Qwen Code, OpenCode)
- Gemini                        ``POST /v1beta/models/<m>:streamGenerateContent?alt=sse`` (Gemini CLI)

The "model" is a small script that looks at the conversation it is sent (see ``decide``):

1. no tools offered (OpenCode's title call) or a known background sub-agent (Qwen's managed memory
   extraction) -> plain text;
2. a tool result after the latest user prompt -> text quoting that result;
3. the latest prompt says "run `<command>`" -> a call to the agent's shell tool;
4. the latest prompt asks to write an absolute path -> a call to the agent's write tool;
5. otherwise -> plain text.

Every response carries token usage including cached tokens, with numbers derived from the request size
plus a per-server call counter, so calls can be told apart. ``FakeLLMServer.responses`` records exactly
the usage block each response carried (``kind: "response_usage"``), ``FakeLLMServer.requests`` every
request with the decision taken; both can also be appended to a JSONL file in the samples' format.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

Json = dict[str, Any]

TITLE_TEXT = "Fake session title"
BACKGROUND_TEXT = "Nothing durable to record."
ANSWER_PREFIX = "Done. I ran the tool; its result was: "
NOTE_CONTENT = "# Notes\n\nThese notes were written by the fake model.\n"
BACKGROUND_MARKERS = (
    "managed memory extraction subagent",  # Qwen Code's forked memory agent
    "You are a title generator",  # OpenCode's title agent
)

# --------------------------------------------------------------------------------------------------
# Conversation model (normalised from each wire format)


@dataclass
class ToolResult:
    text: str
    is_error: bool | None = None
    name: str | None = None


@dataclass
class Conversation:
    prompt: str = ""
    results_after_prompt: list[ToolResult] = field(default_factory=list)
    all_results: list[ToolResult] = field(default_factory=list)
    tools: dict[str, str] = field(default_factory=dict)  # name -> kind ("function" | "custom")
    tool_params: dict[str, set[str]] = field(default_factory=dict)  # name -> its parameter names (Chat)
    system: str = ""

    def add_prompt(self, text: str) -> None:
        cleaned = strip_wrappers(text)
        if cleaned:
            self.prompt = cleaned
            self.results_after_prompt = []

    def add_result(self, result: ToolResult) -> None:
        self.results_after_prompt.append(result)
        self.all_results.append(result)


@dataclass
class Decision:
    kind: str  # "text" | "tool" | "error"
    text: str = ""
    tool: str = ""
    args: Json = field(default_factory=dict)
    raw_input: str | None = None  # freeform (custom) tools, e.g. Codex apply_patch
    more: list[tuple[str, Json]] = field(default_factory=list)  # further tool calls in the same reply

    def calls(self) -> list[tuple[str, Json]]:
        return [(self.tool, self.args), *self.more] if self.kind == "tool" else []

    def as_note(self) -> list[Any]:
        if self.kind == "text":
            return ["text", self.text]
        note = [
            "tool",
            self.tool,
            {"__raw_input__": self.raw_input} if self.raw_input is not None else self.args,
        ]
        return note + [list(call) for call in self.more]


_WRAPPER_RE = re.compile(r"<([A-Za-z_][\w:.-]*)(?:\s[^>]*)?>.*?</\1>", re.DOTALL)
_REMINDER_RE = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_COMMAND_RE = re.compile(r"\brun\s+`([^`]+)`", re.IGNORECASE)
_READ_RE = re.compile(r"\bread\s+(?:the\s+file\s+)?`?(/[^\s`'\"]+)", re.IGNORECASE)
_WRITE_RE = re.compile(r"\bwrite\s+(?:a\s+file\s+(?:at\s+|to\s+)?|to\s+)?`?(/[^\s`'\"]+)", re.IGNORECASE)
_CONTENT_RE = re.compile(r"\bcontaining\s+`([^`]+)`", re.IGNORECASE)


def strip_wrappers(text: str) -> str:
    """Drop agent-injected context blocks (<system-reminder>, <environment_context>, ...)."""
    return _WRAPPER_RE.sub("", text).strip()


def find_command(prompt: str) -> str | None:
    match = _COMMAND_RE.search(prompt)
    return match.group(1).strip() if match else None


def find_commands(prompt: str) -> list[str]:
    return [m.strip() for m in _COMMAND_RE.findall(prompt)]


def find_read_path(prompt: str) -> str | None:
    match = _READ_RE.search(prompt)
    return match.group(1).rstrip(".,;:") if match else None


def find_write_path(prompt: str) -> str | None:
    match = _WRITE_RE.search(prompt)
    return match.group(1).rstrip(".,;:") if match else None


def find_write_content(prompt: str) -> str:
    """The file's text when the prompt says "write <path> containing `<text>`"; else the fixed note."""
    match = _CONTENT_RE.search(prompt)
    return match.group(1).rstrip("\n") + "\n" if match else NOTE_CONTENT


def squash(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]


# --------------------------------------------------------------------------------------------------
# The script


SHELL_TOOLS: dict[str, Callable[[str], Json]] = {
    "Bash": lambda c: {"command": c, "description": f"Run {c}"},
    "exec_command": lambda c: {"cmd": c},
    "run_shell_command": lambda c: {"command": c, "description": f"Run {c}", "is_background": False},
    "bash": lambda c: {"command": c, "description": f"Run {c}"},
    "shell": lambda c: {"command": ["bash", "-lc", c]},
    "run_commands": lambda c: {"commands": [c]},  # Cline
    "terminal": lambda c: {"command": c},  # Hermes Agent
}
WRITE_TOOLS: dict[str, Callable[[str, str], Json]] = {  # (path, content) -> arguments
    "Write": lambda p, c: {"file_path": p, "content": c},
    "write_file": lambda p, c: {"file_path": p, "content": c},
    "write": lambda p, c: {"filePath": p, "content": c},
    "create": lambda p, c: {"path": p, "file_text": c},  # Copilot CLI
    "apply_patch": lambda p, c: {"input": _add_file_patch(p, c)},
    "editor": lambda p, c: {"path": p, "new_text": c},  # Cline: creates the file when missing
}


def _add_file_patch(path: str, content: str) -> str:
    body = "".join(f"+{line}\n" for line in content.splitlines())
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


API_ERROR_MARKER = "[fake-api-error]"  # a prompt holding this gets a non-retryable 400 from the model API
SUBAGENT_PROMPT = "Please run `echo from-helper` in the shell and report what it printed."
SUBAGENT_TOOLS: dict[str, Json] = {  # each agent's tool that starts a sub-agent, with its arguments
    "Agent": {"description": "Run a command", "prompt": SUBAGENT_PROMPT, "subagent_type": "general-purpose"},
    "Task": {"description": "Run a command", "prompt": SUBAGENT_PROMPT, "subagent_type": "general-purpose"},
    "agent": {"description": "Run a command", "prompt": SUBAGENT_PROMPT, "subagent_type": "general-purpose"},
    "task": {"description": "Run a command", "prompt": SUBAGENT_PROMPT, "subagent_type": "general"},
    "invoke_agent": {"agent_name": "generalist", "prompt": SUBAGENT_PROMPT},
    "spawn_agent": {"systemPrompt": "You are a helper that runs shell commands.", "task": SUBAGENT_PROMPT},  # Cline
}
COMPLETE_TASK = "complete_task"  # Gemini CLI's sub-agents end by calling it with their output
READ_TOOLS: dict[str, Callable[[str], Json]] = {
    "Read": lambda p: {"file_path": p},
    "read_file": lambda p: {"file_path": p},
    "read": lambda p: {"filePath": p},
}


def _shell_args(conv: Conversation, tool: str, command: str) -> Json:
    args = SHELL_TOOLS[tool](command)
    if conv.tool_params.get(tool) == {"command", "timeout_seconds"}:  # Mistral Vibe's bash allows no other field
        args.pop("description", None)
    return args


class ScriptedHTTPError(Exception):
    """The script answers this model call with an HTTP error instead of a completion."""

    def __init__(self, status: int, body: Json) -> None:
        super().__init__(f"scripted HTTP {status}")
        self.status = status
        self.body = body


def decide(conv: Conversation) -> Decision:
    if API_ERROR_MARKER in conv.prompt:
        return Decision("error", text="scripted invalid request: the prompt asked for an API error")
    if "subagent" in conv.prompt.lower() and not conv.results_after_prompt:
        tool = next((t for t in SUBAGENT_TOOLS if t in conv.tools), None)
        if tool:
            args = dict(SUBAGENT_TOOLS[tool])
            if "agent_type" in conv.tool_params.get(tool, set()):  # Copilot CLI's task: {name, agent_type, mode}
                args = {"description": args["description"], "prompt": SUBAGENT_PROMPT, "name": "helper",
                        "agent_type": "general-purpose", "mode": "sync"}
            return Decision("tool", tool=tool, args=args)
    if any(marker in conv.system for marker in BACKGROUND_MARKERS) or not conv.tools:
        return Decision("text", text=TITLE_TEXT if "title" in conv.system.lower() else BACKGROUND_TEXT)
    if conv.results_after_prompt:
        quoted = _REMINDER_RE.sub("", conv.results_after_prompt[-1].text)
        if COMPLETE_TASK in conv.tools:
            return Decision("tool", tool=COMPLETE_TASK, args={"result": {"response": squash(quoted)}})
        return Decision("text", text=ANSWER_PREFIX + squash(quoted))
    commands = find_commands(conv.prompt)
    if commands:
        tool = _first_offered(conv, SHELL_TOOLS)
        if tool:
            more = [(tool, _shell_args(conv, tool, c)) for c in commands[1:]]
            return Decision("tool", tool=tool, args=_shell_args(conv, tool, commands[0]), more=more)
    read = find_read_path(conv.prompt)
    if read:
        tool = _first_offered(conv, READ_TOOLS)
        if tool:
            args = READ_TOOLS[tool](read)
            if conv.tool_params.get(tool) == {"path", "offset", "limit"}:  # Mistral Vibe's read_file
                args = {"path": read}
            return Decision("tool", tool=tool, args=args)
        tool = _first_offered(conv, SHELL_TOOLS)
        if tool:  # Codex has no read tool: it reads with the shell
            return Decision("tool", tool=tool, args=SHELL_TOOLS[tool](f"cat {read}"))
    path = find_write_path(conv.prompt)
    if path:
        tool = _first_offered(conv, WRITE_TOOLS)
        if tool:
            args = WRITE_TOOLS[tool](path, find_write_content(conv.prompt))
            if "filePath" in args and {"path"} <= conv.tool_params.get(tool, set()) - {"filePath"}:
                args = {"path": args.pop("filePath"), **args}  # pi's write tool: {path, content}
            raw = args["input"] if conv.tools[tool] == "custom" else None
            return Decision("tool", tool=tool, args=args, raw_input=raw)
    return Decision("text", text=f"Done. Nothing to run for: {squash(conv.prompt, 120)}")


def _first_offered(conv: Conversation, table: Mapping[str, object]) -> str | None:
    return next((name for name in table if name in conv.tools), None)


# --------------------------------------------------------------------------------------------------
# Parsing each API's request into a Conversation


def _text_of(content: Any) -> str:
    """Text of a string or a list of content blocks/parts (anything with a ``text``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(part) for part in content)
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return content["text"]
        if "content" in content:
            return _text_of(content["content"])
    return ""


def parse_anthropic(body: Json) -> Conversation:
    conv = Conversation(system=_text_of(body.get("system")))
    conv.tools = {t["name"]: "function" for t in body.get("tools") or [] if t.get("name")}
    for msg in body.get("messages") or []:
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        for block in results:
            conv.add_result(ToolResult(_text_of(block.get("content")), block.get("is_error")))
        if not results:
            conv.add_prompt(_text_of([b for b in blocks if isinstance(b, dict) and b.get("type") == "text"]))
    return conv


def parse_responses(body: Json) -> Conversation:
    conv = Conversation(system=_text_of(body.get("instructions")))
    for tool in body.get("tools") or []:
        name = tool.get("name") or (tool.get("function") or {}).get("name")
        if name:
            conv.tools[name] = "custom" if tool.get("type") == "custom" else "function"
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    for item in items or []:
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            conv.add_prompt(_text_of(item.get("content")))
        elif kind == "message" and item.get("role") in ("system", "developer"):
            conv.system += "\n" + _text_of(item.get("content"))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            conv.add_result(ToolResult(output if isinstance(output, str) else _text_of(output)))
    return conv


def parse_chat(body: Json) -> Conversation:
    conv = Conversation()
    conv.tools = {(t.get("function") or {}).get("name", ""): "function" for t in body.get("tools") or []}
    conv.tool_params = {(t.get("function") or {}).get("name", ""): set(
        ((t.get("function") or {}).get("parameters") or {}).get("properties") or {})
        for t in body.get("tools") or []}
    conv.tools.pop("", None)
    for msg in body.get("messages") or []:
        role = msg.get("role")
        if role in ("system", "developer"):
            conv.system += "\n" + _text_of(msg.get("content"))
        elif role == "user":
            conv.add_prompt(_text_of(msg.get("content")))
        elif role == "tool":
            conv.add_result(ToolResult(_text_of(msg.get("content")), name=msg.get("name")))
    return conv


def parse_gemini(body: Json) -> Conversation:
    system = body.get("systemInstruction") or body.get("system_instruction") or {}
    conv = Conversation(system=_text_of(system.get("parts") if isinstance(system, dict) else system))
    for tool in body.get("tools") or []:
        for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
            conv.tools[decl["name"]] = "function"
    for content in body.get("contents") or []:
        if content.get("role", "user") != "user":
            continue
        parts = content.get("parts") or []
        responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
        for resp in responses:
            payload = resp.get("response") or {}
            error = "error" in payload
            text = payload.get("error") if error else payload.get("output", payload)
            conv.add_result(
                ToolResult(text if isinstance(text, str) else json.dumps(text), error, resp.get("name"))
            )
        if not responses:
            conv.add_prompt(
                "\n".join(p.get("text", "") for p in parts if "text" in p and not p.get("thought"))
            )
    return conv


# --------------------------------------------------------------------------------------------------
# Token usage (varied, derived from request size and a per-server counter)


@dataclass(frozen=True)
class Tokens:
    prompt: int  # total prompt tokens, cached included
    cached: int  # cache reads
    cache_write: int  # cache creation (Anthropic only)
    output: int


def make_tokens(request_bytes: int, call_no: int, output_chars: int) -> Tokens:
    prompt = max(64, request_bytes // 4) + 11 * call_no
    cached = prompt // 3 + 7 * call_no
    cache_write = prompt // 7 + 3 * call_no
    output = 12 + output_chars // 4 + 5 * call_no
    return Tokens(prompt, cached, cache_write, output)


def anthropic_usage(t: Tokens) -> Json:
    return {
        "input_tokens": t.prompt - t.cached - t.cache_write,
        "output_tokens": t.output,
        "cache_creation_input_tokens": t.cache_write,
        "cache_read_input_tokens": t.cached,
        "cache_creation": {"ephemeral_5m_input_tokens": t.cache_write, "ephemeral_1h_input_tokens": 0},
        "service_tier": "standard",
    }


def responses_usage(t: Tokens) -> Json:
    return {
        "input_tokens": t.prompt,
        "input_tokens_details": {"cached_tokens": t.cached},
        "output_tokens": t.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": t.prompt + t.output,
    }


def chat_usage(t: Tokens) -> Json:
    return {
        "prompt_tokens": t.prompt,
        "completion_tokens": t.output,
        "total_tokens": t.prompt + t.output,
        "prompt_tokens_details": {"cached_tokens": t.cached},
    }


def gemini_usage(t: Tokens) -> Json:
    return {
        "promptTokenCount": t.prompt,
        "candidatesTokenCount": t.output,
        "totalTokenCount": t.prompt + t.output,
        "cachedContentTokenCount": t.cached,
        "thoughtsTokenCount": 0,
    }


# --------------------------------------------------------------------------------------------------
# Response bodies (streaming and not)


def _hex() -> str:
    return uuid.uuid4().hex[:24]


def _sse(event: str | None, data: Json | str) -> str:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"


@dataclass
class Reply:
    """A rendered reply: body bytes, content type and the usage block it carries."""

    body: bytes
    content_type: str
    response_id: str
    usage: Json


def render_anthropic(d: Decision, model: str, t: Tokens, stream: bool) -> Reply:
    msg_id = f"msg_{_hex()}"
    usage = anthropic_usage(t)
    blocks: list[Json] = [
        {"type": "text", "text": d.text if d.kind == "text" else "I'll use a tool for that."}
    ]
    for name, args in d.calls():
        blocks.append({"type": "tool_use", "id": f"toolu_{_hex()}", "name": name, "input": args})
    stop = "tool_use" if d.kind == "tool" else "end_turn"
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    if not stream:
        return Reply(json.dumps(message).encode(), "application/json", msg_id, usage)
    start_usage = {**usage, "output_tokens": 1}
    out = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {**message, "content": [], "stop_reason": None, "usage": start_usage},
            },
        )
    ]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            out.append(
                _sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            out.append(
                _sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {
                            "type": "tool_use",
                            "id": block["id"],
                            "name": block["name"],
                            "input": {},
                        },
                    },
                )
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(
        _sse(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage},
        )
    )
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return Reply("".join(out).encode(), "text/event-stream", msg_id, usage)


def _responses_items(d: Decision) -> list[Json]:
    first = _responses_item(d)
    more = [{"type": "function_call", "id": f"fc_{_hex()}", "status": "completed", "call_id": f"call_{_hex()}",
             "name": name, "arguments": json.dumps(args)} for name, args in d.more]
    return [first, *more]


def _responses_item(d: Decision) -> Json:
    if d.kind == "text":
        return {
            "type": "message",
            "id": f"msg_{_hex()}",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": d.text, "annotations": []}],
        }
    call_id = f"call_{_hex()}"
    if d.raw_input is not None:
        return {
            "type": "custom_tool_call",
            "id": f"ctc_{_hex()}",
            "status": "completed",
            "call_id": call_id,
            "name": d.tool,
            "input": d.raw_input,
        }
    return {
        "type": "function_call",
        "id": f"fc_{_hex()}",
        "status": "completed",
        "call_id": call_id,
        "name": d.tool,
        "arguments": json.dumps(d.args),
    }


def render_responses(d: Decision, model: str, t: Tokens, stream: bool) -> Reply:
    resp_id = f"resp_{_hex()}"
    usage = responses_usage(t)
    items = _responses_items(d)
    created = int(time.time())
    base = {"id": resp_id, "object": "response", "created_at": created, "model": model}
    final = {**base, "status": "completed", "output": items, "usage": usage}
    if not stream:
        return Reply(json.dumps(final).encode(), "application/json", resp_id, usage)
    seq = iter(range(1000))
    events: list[tuple[str, Json]] = [
        ("response.created", {"response": {**base, "status": "in_progress", "output": []}}),
        ("response.in_progress", {"response": {**base, "status": "in_progress", "output": []}}),
    ]
    for index, item in enumerate(items):
        events += _responses_item_events(d, item, index)
    events.append(("response.completed", {"response": final}))
    body = "".join(_sse(name, {"type": name, "sequence_number": next(seq), **data}) for name, data in events)
    return Reply(body.encode(), "text/event-stream", resp_id, usage)


def _responses_item_events(d: Decision, item: Json, index: int) -> list[tuple[str, Json]]:
    events: list[tuple[str, Json]] = [
        ("response.output_item.added", {"output_index": index, "item": {**item, "status": "in_progress"}}),
    ]
    if item["type"] == "message":
        part = item["content"][0]
        ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
        events += [
            ("response.content_part.added", {**ids, "part": {**part, "text": ""}}),
            ("response.output_text.delta", {**ids, "delta": d.text}),
            ("response.output_text.done", {**ids, "text": d.text}),
            ("response.content_part.done", {**ids, "part": part}),
        ]
    elif item["type"] == "function_call":
        ids = {"item_id": item["id"], "output_index": index}
        events += [
            ("response.function_call_arguments.delta", {**ids, "delta": item["arguments"]}),
            ("response.function_call_arguments.done", {**ids, "arguments": item["arguments"]}),
        ]
    events.append(("response.output_item.done", {"output_index": index, "item": item}))
    return events


def render_chat(d: Decision, model: str, t: Tokens, stream: bool) -> Reply:
    resp_id = f"chatcmpl-{_hex()}"
    usage = chat_usage(t)
    created = int(time.time())
    tool_calls = [
        {"id": f"call_{_hex()}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for name, args in d.calls()
    ]
    finish = "tool_calls" if tool_calls else "stop"
    base = {"id": resp_id, "created": created, "model": model}
    if not stream:
        message: Json = {"role": "assistant", "content": d.text if d.kind == "text" else None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        completion = {
            **base,
            "object": "chat.completion",
            "usage": usage,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        return Reply(json.dumps(completion).encode(), "application/json", resp_id, usage)

    def chunk(delta: Json, finish_reason: str | None) -> Json:
        return {
            **base,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    chunks = [chunk({"role": "assistant", "content": ""}, None)]
    for index, tool_call in enumerate(tool_calls):
        chunks.append(chunk({"tool_calls": [{"index": index, **tool_call}]}, None))
    if not tool_calls:
        chunks.append(chunk({"content": d.text}, None))
    chunks.append(chunk({}, finish))
    chunks.append({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    stream_body = "".join(_sse(None, c) for c in chunks) + _sse(None, "[DONE]")
    return Reply(stream_body.encode(), "text/event-stream", resp_id, usage)


def render_gemini(d: Decision, model: str, t: Tokens, stream: bool) -> Reply:
    resp_id = f"gresp_{_hex()}"
    usage = gemini_usage(t)
    parts: list[Json] = [{"functionCall": {"name": name, "args": args}} for name, args in d.calls()]
    parts = parts or [{"text": d.text}]
    body = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage,
        "modelVersion": model,
        "responseId": resp_id,
    }
    if not stream:
        return Reply(json.dumps(body).encode(), "application/json", resp_id, usage)
    return Reply(_sse(None, body).encode(), "text/event-stream", resp_id, usage)


@dataclass(frozen=True)
class Api:
    name: str  # recorded as "api": anthropic | responses | chat | gemini
    parse: Callable[[Json], Conversation]
    render: Callable[[Decision, str, Tokens, bool], Reply]


ANTHROPIC = Api("anthropic", parse_anthropic, render_anthropic)
RESPONSES = Api("responses", parse_responses, render_responses)
CHAT = Api("chat", parse_chat, render_chat)
GEMINI = Api("gemini", parse_gemini, render_gemini)
_GEMINI_PATH = re.compile(
    r"^/v1(?:beta|alpha)?/models/([^/:]+):(streamGenerateContent|generateContent|countTokens)$"
)


def route(path: str) -> tuple[Api, str | None, bool | None] | None:
    """(api, model from path, streaming forced by path) for a model endpoint, else None."""
    clean = urlsplit(path).path.rstrip("/")
    if clean.endswith("/messages") and "count_tokens" not in clean:
        return ANTHROPIC, None, None
    if clean.endswith("/responses"):
        return RESPONSES, None, None
    if clean.endswith("/chat/completions"):
        return CHAT, None, None
    match = _GEMINI_PATH.match(clean)
    if match and match.group(2) != "countTokens":
        return GEMINI, match.group(1), match.group(2) == "streamGenerateContent"
    return None


# --------------------------------------------------------------------------------------------------
# The server


class FakeLLMServer:
    """Threaded fake model server on 127.0.0.1; use as a context manager."""

    def __init__(self, log_path: Path | str | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.requested_port = port
        self.log_path = Path(log_path) if log_path else None
        self.requests: list[Json] = []
        self.responses: list[Json] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._seq = 0
        self._calls = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> FakeLLMServer:
        httpd = ThreadingHTTPServer((self.host, self.requested_port), _Handler)
        httpd.daemon_threads = True
        httpd.fake = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("fake LLM server is not running")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # views for tests
    @property
    def model_calls(self) -> list[Json]:
        return [r for r in self.requests if r.get("api")]

    def tool_results(self) -> list[ToolResult]:
        """Every distinct tool result the agents sent back, in order of first appearance."""
        seen: dict[str, ToolResult] = {}
        for req in self.model_calls:
            for res in req.get("_results", []):
                seen.setdefault(res.text, res)
        return list(seen.values())

    def decisions(self) -> list[list[Any]]:
        return [r["decision"] for r in self.model_calls if "decision" in r]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self.responses.clear()
            self.errors.clear()

    # recording
    def _record(self, entry: Json, target: list[Json]) -> Json:
        with self._lock:
            self._seq += 1
            entry["seq"] = self._seq
            target.append(entry)
            if self.log_path is not None:
                public = {k: v for k, v in entry.items() if not k.startswith("_")}
                with self.log_path.open("a") as fh:
                    fh.write(json.dumps(public) + "\n")
        return entry

    def _next_call(self) -> int:
        with self._lock:
            self._calls += 1
            return self._calls

    def handle_model_call(
        self,
        api: Api,
        path_model: str | None,
        forced_stream: bool | None,
        raw: bytes,
        body: Json,
        request_meta: Json,
    ) -> Reply:
        conv = api.parse(body)
        decision = decide(conv)
        if decision.kind == "error":
            self._record({**request_meta, "api": api.name, "note": "decision=error", "decision": ["error"]},
                         self.requests)
            raise ScriptedHTTPError(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                     "message": decision.text}})
        model = path_model or str(body.get("model") or "fake-model")
        stream = forced_stream if forced_stream is not None else bool(body.get("stream"))
        out_len = (
            len(decision.text) + len(json.dumps(decision.args))
            if decision.kind == "tool"
            else len(decision.text)
        )
        tokens = make_tokens(len(raw), self._next_call(), out_len)
        reply = api.render(decision, model, tokens, stream)
        self._record(
            {
                **request_meta,
                "api": api.name,
                "note": "decision=" + json.dumps(decision.as_note()),
                "decision": decision.as_note(),
                "_results": conv.all_results,
            },
            self.requests,
        )
        self._record(
            {
                "ts": time.time(),
                "kind": "response_usage",
                "api": api.name,
                "response_id": reply.response_id,
                "model": model,
                "usage": reply.usage,
            },
            self.responses,
        )
        return reply


class _Handler(BaseHTTPRequestHandler):
    # NB: BaseHTTPRequestHandler.responses is a status-code table; never shadow it.
    protocol_version = "HTTP/1.1"
    server_version = "FakeLLM/1.0"

    @property
    def fake(self) -> FakeLLMServer:
        fake: FakeLLMServer = self.server.fake  # type: ignore[attr-defined]
        return fake

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._meta(b"", None)
        path = urlsplit(self.path).path.rstrip("/")
        if path.endswith("/models"):
            self._send_json(200, {"object": "list", "data": [], "models": []})
        else:
            self._send_json(404, {"error": {"type": "not_found", "message": f"no route {self.path}"}})

    def do_HEAD(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:  # noqa: N802
        try:
            raw = self._read_body()
            body = json.loads(raw or b"{}")
        except (ValueError, OSError) as exc:
            self._send_json(400, {"error": {"type": "invalid_request_error", "message": str(exc)}})
            return
        routed = route(self.path)
        if routed is None:
            self._handle_auxiliary(raw, body)
            return
        try:
            reply = self.fake.handle_model_call(*routed, raw, body, self._meta(raw, body, record=False))
        except ScriptedHTTPError as scripted:
            self._send_json(scripted.status, scripted.body)
            return
        except Exception:  # noqa: BLE001 - surface any scripting bug to the test, not to the agent's retries
            detail = traceback.format_exc()
            self.fake.errors.append(detail)
            print(f"[fake_llm] error handling {self.path}:\n{detail}", file=sys.stderr)
            self._send_json(500, {"error": {"type": "fake_llm_error", "message": detail[-500:]}})
            return
        self._send(200, reply.content_type, reply.body)

    def _handle_auxiliary(self, raw: bytes, body: Json) -> None:
        self._meta(raw, body)
        path = urlsplit(self.path).path
        if path.endswith("/count_tokens"):
            self._send_json(200, {"input_tokens": max(1, len(raw) // 4)})
        elif path.endswith(":countTokens"):
            self._send_json(200, {"totalTokens": max(1, len(raw) // 4)})
        else:
            self._send_json(404, {"error": {"type": "not_found", "message": f"no route {self.path}"}})

    def _meta(self, raw: bytes, body: Json | None, record: bool = True) -> Json:
        meta = {
            "ts": time.time(),
            "method": self.command,
            "path": self.path,
            "headers": dict(self.headers.items()),
            "body": body if body is not None else raw.decode(errors="replace"),
        }
        if record:
            self.fake._record(dict(meta), self.fake.requests)
        return meta

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b"".join(self._read_chunks())
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            data = gzip.decompress(data)
        return data

    def _read_chunks(self) -> Iterator[bytes]:
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()
                return
            yield self.rfile.read(size)
            self.rfile.readline()

    def _send_json(self, status: int, payload: Json) -> None:
        self._send(status, "application/json", json.dumps(payload).encode())

    def _send(self, status: int, content_type: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if content_type == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True
