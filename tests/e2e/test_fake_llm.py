"""Fast tests of the fake model server itself (no agent CLIs, no npm)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from fake_llm import BACKGROUND_TEXT, TITLE_TEXT, FakeLLMServer

PROMPT = "Please run `echo hi` in the shell and tell me what it printed."


def _post(server: FakeLLMServer, path: str, body: dict[str, Any]) -> tuple[str, bytes]:
    req = urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers.get("Content-Type", ""), resp.read()


def _sse(raw: bytes) -> list[tuple[str | None, Any]]:
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        name = None
        data = ""
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        events.append((name, data if data == "[DONE]" else json.loads(data)))
    return events


def test_handler_status_table_not_shadowed() -> None:
    assert isinstance(BaseHTTPRequestHandler.responses, dict)


def test_anthropic_tool_then_text(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    with FakeLLMServer(log_path=log) as server:
        body: dict[str, Any] = {
            "model": "claude-sonnet-4-5",
            "stream": True,
            "tools": [{"name": "Bash"}, {"name": "Write"}],
            "messages": [{"role": "user", "content": PROMPT}],
        }
        ctype, raw = _post(server, "/v1/messages?beta=true", body)
        events = _sse(raw)
        assert ctype == "text/event-stream"
        assert [e[0] for e in events] == [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
        tool_start = events[4][1]["content_block"]
        assert tool_start["name"] == "Bash"
        assert json.loads(events[5][1]["delta"]["partial_json"])["command"] == "echo hi"
        usage = events[7][1]["usage"]
        assert usage == server.responses[0]["usage"]
        assert usage["cache_read_input_tokens"] > 0 and usage["cache_creation_input_tokens"] > 0

        body["messages"] += [
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": tool_start["id"],
                        "name": "Bash",
                        "input": {"command": "echo hi"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_start["id"],
                        "content": "hi\n",
                        "is_error": False,
                    }
                ],
            },
        ]
        _, raw = _post(server, "/v1/messages", body)
        text = "".join(e[1]["delta"].get("text", "") for e in _sse(raw) if e[0] == "content_block_delta")
        assert text.endswith("its result was: hi")
        assert server.responses[0]["usage"] != server.responses[1]["usage"]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line.get("kind") for line in lines] == [None, "response_usage", None, "response_usage"]
    assert [line["seq"] for line in lines] == [1, 2, 3, 4]


def test_responses_stream_and_custom_apply_patch() -> None:
    with FakeLLMServer() as server:
        body = {
            "model": "gpt-5.5",
            "stream": True,
            "tools": [
                {"type": "function", "name": "exec_command"},
                {"type": "custom", "name": "apply_patch"},
            ],
            "input": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Please write /tmp/x/notes.md with a note."}],
                }
            ],
        }
        _, raw = _post(server, "/v1/responses", body)
        events = _sse(raw)
        names = [e[0] for e in events]
        assert names[0] == "response.created" and names[-1] == "response.completed"
        item = next(e[1]["item"] for e in events if e[0] == "response.output_item.done")
        assert item["type"] == "custom_tool_call" and "*** Add File: /tmp/x/notes.md" in item["input"]
        usage = events[-1][1]["response"]["usage"]
        assert usage["input_tokens_details"]["cached_tokens"] > 0
        assert usage == server.responses[-1]["usage"]


def test_chat_stream_usage_chunk_and_title() -> None:
    with FakeLLMServer() as server:
        body = {
            "model": "fake-model",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [
                {"role": "system", "content": "You are a title generator. You output ONLY a title."},
                {"role": "user", "content": PROMPT},
            ],
        }
        _, raw = _post(server, "/v1/chat/completions", body)
        events = _sse(raw)
        assert events[-1] == (None, "[DONE]")
        assert events[-2][1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
        text = "".join(c["delta"].get("content") or "" for _, e in events[:-1] for c in e.get("choices", []))
        assert text == TITLE_TEXT


def test_chat_tool_call_and_background_agent() -> None:
    with FakeLLMServer() as server:
        tools = [{"type": "function", "function": {"name": "run_shell_command"}}]
        body: dict[str, Any] = {
            "model": "q",
            "stream": True,
            "tools": tools,
            "messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}],
        }
        events = _sse(_post(server, "/v1/chat/completions", body)[1])
        call = events[1][1]["choices"][0]["delta"]["tool_calls"][0]
        assert call["function"]["name"] == "run_shell_command"
        assert json.loads(call["function"]["arguments"])["command"] == "echo hi"
        assert events[2][1]["choices"][0]["finish_reason"] == "tool_calls"

        body["messages"].insert(
            0,
            {
                "role": "system",
                "content": "You are now acting as the managed memory extraction subagent for X.",
            },
        )
        events = _sse(_post(server, "/v1/chat/completions", body)[1])
        assert events[1][1]["choices"][0]["delta"]["content"] == BACKGROUND_TEXT


def test_gemini_function_call_and_error_result() -> None:
    with FakeLLMServer() as server:
        body: dict[str, Any] = {
            "contents": [
                {
                    "role": "user",
                    "parts": [{"text": "<session_context>x</session_context>"}, {"text": PROMPT}],
                }
            ],
            "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}],
        }
        path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        ((name, chunk),) = _sse(_post(server, path, body)[1])
        part = chunk["candidates"][0]["content"]["parts"][0]
        assert part["functionCall"]["name"] == "run_shell_command"
        assert chunk["usageMetadata"]["cachedContentTokenCount"] > 0
        body["contents"] += [
            {"role": "model", "parts": [part]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"error": "boom"}}}],
            },
        ]
        ((name, chunk),) = _sse(_post(server, path, body)[1])
        assert chunk["candidates"][0]["content"]["parts"][0]["text"].endswith("boom")
        assert server.tool_results()[0].is_error is True
        assert server.responses[-1]["model"] == "gemini-2.5-pro"


def test_unknown_route_is_404_and_recorded() -> None:
    with FakeLLMServer() as server:
        with pytest.raises(urllib.error.HTTPError) as err:
            _post(server, "/v2/whatever", {})
        assert err.value.code == 404
        assert server.requests[0]["path"] == "/v2/whatever" and not server.model_calls
