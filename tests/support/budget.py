"""Usage-store entries for the budget and status-line tests: one model call of a priced test model."""

from __future__ import annotations

from typing import Any


def call(i: int, at: float, tokens_in: int, tokens_out: int, agent: str = "claude-code",
         session: str = "s1") -> dict[str, Any]:
    return {"event.id": f"{i:032x}", "event.name": "llm.response", "time_unix_nano": int(at * 1e9),
            "gen_ai.agent.type": agent, "gen_ai.session.id": session, "gen_ai.request.model": "m-test",
            "gen_ai.response.model": "m-test", "gen_ai.usage.input_tokens": tokens_in,
            "gen_ai.usage.output_tokens": tokens_out}
