"""Every fixture case: real agent output in, entries out, compared with expected.json and the model
server's own token records (response_usage.jsonl)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from e2e.harness import PLANTED_SECRETS
from support import (
    FIXTURES,
    assert_no_duplicates,
    assert_schema_valid,
    collect,
    entry_tokens,
    long_after,
    prepare_fixture,
    tool_pairs,
    truth_from_file,
)

CASES = sorted(p.parent for p in FIXTURES.glob("*/*/expected.json"))


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_fixture_case(case: Path, tmp_path: Path) -> None:
    expected = json.loads((case / "expected.json").read_text())
    entries = collect(prepare_fixture(case, tmp_path), clock=long_after)

    assert_schema_valid(entries)
    assert_no_duplicates(entries)
    assert {e["gen_ai.agent.type"] for e in entries} == {expected["agent"]}
    counts = Counter(e["event.name"] for e in entries)
    assert dict(counts) == expected["counts"]
    assert sorted({e["gen_ai.session.id"] for e in entries if "gen_ai.session.id" in e}) == sorted(expected["sessions"])
    prompts = [e for e in entries if e["event.name"] == "user.prompt"]
    assert sorted(e.get("gen_ai.turn.id") for e in prompts) == sorted(expected["turns"])
    turned = [e for e in entries if e["event.name"] in ("llm.response", "tool.call", "tool.result")]
    assert all(e.get("gen_ai.turn.id") in expected["turns"] for e in turned), "every call belongs to a turn"

    truth = case / "response_usage.jsonl"
    if truth.exists() and truth.read_text().strip():
        served, seen = truth_from_file(truth), entry_tokens(entries)
        assert not seen - served, "every reported model call is one the server answered, with its exact numbers"
        assert sum((served - seen).values()) == expected.get("unrecorded_model_calls", 0)

    if "statuses" in expected:
        ordered = sorted(entries, key=lambda e: e["time_unix_nano"])
        assert [e["session.status"] for e in ordered if e["event.name"] == "session.status"] == expected["statuses"]

    for agent_id, parent in expected.get("subagents", {}).items():
        inside = [e for e in entries if e.get("gen_ai.agent.id") == agent_id]
        assert {"subagent.start", "subagent.end", "llm.response"} <= {e["event.name"] for e in inside}
        assert {e.get("gen_ai.subagent.parent_tool_call.id") for e in inside} == {parent}
        assert all(e["gen_ai.agent.scope"] == "subagent" for e in inside)
    errors = [{k: e.get(k) for k in ("error.type", "http.response.status_code")}
              for e in entries if e["event.name"] == "error"]
    assert errors == expected.get("errors", []), "error entries"

    pairs = tool_pairs(entries)
    assert set(pairs) == set(expected["tools"])
    for call_id, want in expected["tools"].items():
        calls, results, status = pairs[call_id]
        assert (calls, results, status) == (1, 1, want["status"]), call_id
        if "error_type" in want:
            (result,) = [e for e in entries if e["event.name"] == "tool.result" and e["gen_ai.tool.call.id"] == call_id]
            assert result.get("error.type") == want["error_type"], call_id
        names = {e.get("gen_ai.tool.name") for e in entries if e.get("gen_ai.tool.call.id") == call_id}
        assert names == {want["name"]}


FILE_CASES = [c for c in CASES if (c / "spool").exists() and (c / "home").exists()]


def _facts(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """What files alone must give as well as hooks + files: turns, tokens per call, pairing and status,
    error flags, subagent links."""
    prompts = [e for e in entries if e["event.name"] == "user.prompt"]
    results = {e["gen_ai.tool.call.id"]: (e.get("tool.result.status"), e.get("error.type"))
               for e in entries if e["event.name"] == "tool.result"}
    return {
        "turns": sorted(e["gen_ai.turn.id"] for e in prompts),
        "prompts": {e["event.id"]: (e["gen_ai.turn.id"], e.get("gen_ai.input.messages.length")) for e in prompts},
        "tokens": entry_tokens(entries),
        "pairs": tool_pairs(entries),
        "results": results,
        "errors": sorted(str(e.get("error.type")) for e in entries if e["event.name"] == "error"),
        "subagents": sorted({(e.get("gen_ai.agent.id"), e.get("gen_ai.subagent.parent_tool_call.id"))
                             for e in entries if e.get("gen_ai.agent.scope") == "subagent"}),
        "turned": all(e.get("gen_ai.turn.id") in {p["gen_ai.turn.id"] for p in prompts}
                      for e in entries if e["event.name"] in ("llm.response", "tool.call", "tool.result")),
    }


@pytest.mark.parametrize("case", FILE_CASES, ids=[f"{c.parent.name}/{c.name}" for c in FILE_CASES])
def test_files_alone_give_the_same_facts(case: Path, tmp_path: Path) -> None:
    """A backfill of the agent's own files (no hook spool) yields the same turns, tokens, tool pairs and
    statuses, errors and subagents as hooks + files; facts only a hook gives are listed per case."""
    both = _facts(collect(prepare_fixture(case, tmp_path / "both"), clock=long_after))
    shutil.rmtree(tmp_path / "both")
    alone_paths = prepare_fixture(case, tmp_path / "alone")
    shutil.rmtree(alone_paths.spool_dir)
    alone = _facts(collect(alone_paths, clock=long_after))
    hook_only = json.loads((case / "expected.json").read_text()).get("hook_only", {})  # fact -> why
    assert set(hook_only) <= set(both)
    for key in hook_only:
        assert alone[key] != both[key], f"{key} is listed as hook-only but the files give it"
        alone[key] = both[key]
    assert alone == both


def _prompts_with_text(case: Path, tmp: Path, hooks: bool) -> dict[str, Any]:
    """Each prompt (by event id) with its turn and text, collected with content capture on (masking on)."""
    paths = prepare_fixture(case, tmp)
    if not hooks:
        shutil.rmtree(paths.spool_dir)
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text("[content]\ncapture = true\n")
    return {e["event.id"]: (e["gen_ai.session.id"], e["gen_ai.turn.id"], e.get("gen_ai.input.messages"))
            for e in collect(paths, clock=long_after) if e["event.name"] == "user.prompt"}


@pytest.mark.parametrize("case", FILE_CASES, ids=[f"{c.parent.name}/{c.name}" for c in FILE_CASES])
def test_files_alone_give_the_prompt_text(case: Path, tmp_path: Path) -> None:
    """With content capture on, files alone give every prompt the text hooks + files give it: same entry
    (event id, session, turn), same masked text."""
    both = _prompts_with_text(case, tmp_path / "both", hooks=True)
    alone = _prompts_with_text(case, tmp_path / "alone", hooks=False)
    assert both and all(text for _, _, text in both.values()), "hooks + files give every prompt's text"
    assert alone == both


def test_replay_adds_nothing(tmp_path: Path) -> None:
    """A second pass over the same data (a restart) writes no entry twice."""
    case = FIXTURES / "claude-code" / "two_turns_resume"
    paths = prepare_fixture(case, tmp_path)
    first = collect(paths)
    second = collect(paths)
    assert len(first) == len(second) > 0
    assert_no_duplicates(second)


def test_content_capture_off_keeps_no_prompt_text(tmp_path: Path) -> None:
    case = FIXTURES / "claude-code" / "tool_then_answer"
    entries = collect(prepare_fixture(case, tmp_path))
    out = (tmp_path / "data" / "output")
    text = "".join(p.read_text() for p in out.glob("*.jsonl"))
    assert "echo hi" not in text and "tell me what it printed" not in text
    prompt = next(e for e in entries if e["event.name"] == "user.prompt")
    assert prompt["gen_ai.input.messages.length"] > 0 and len(prompt["gen_ai.input.messages.hmac"]) == 64


SECRET_CASES = sorted(p for p in FIXTURES.glob("*/secrets") if (p / "expected.json").exists())
# Text of the "secrets" scenario that only content capture may keep: its prompts, the tool's arguments
# and output, the model's answers.
CONTENT_MARKERS = ("My AWS access key is", "deploy.env containing", "base64 -d", "GITHUB_TOKEN=",
                   "BEGIN RSA PRIVATE KEY", "tell me what it printed", "its result was")


def _written(paths: Any) -> dict[str, str]:
    """Every file the collector wrote (output, state, queues), the spool it read excepted."""
    spool = paths.spool_dir
    return {str(p): p.read_text(errors="replace") for p in paths.data_dir.rglob("*")
            if p.is_file() and spool not in p.parents and p.suffix == ".jsonl"}


@pytest.mark.parametrize("hooks", [True, False], ids=["hooks_and_files", "files_alone"])
@pytest.mark.parametrize("case", SECRET_CASES, ids=[f"{c.parent.name}/{c.name}" for c in SECRET_CASES])
def test_secrets_session_masked_or_not_kept(case: Path, hooks: bool, tmp_path: Path) -> None:
    """Real sessions with fake secrets in the prompt, tool arguments, tool output and a written file: with
    content capture on and masking on (the default), none of the planted secrets is in any JSONL file we
    write while the rest of the text is kept; with capture off (the default), no prompt or tool text is."""
    source = "".join(p.read_text(errors="replace") for p in (case / "home").rglob("*") if p.is_file())
    planted = list(PLANTED_SECRETS.values())
    assert all(s in source for s in planted), "the capture holds every planted secret"
    for capture in (True, False):
        paths = prepare_fixture(case, tmp_path / str(capture))
        if not hooks:
            shutil.rmtree(paths.spool_dir)
        paths.config_file.parent.mkdir(parents=True, exist_ok=True)
        paths.config_file.write_text(f"[content]\ncapture = {'true' if capture else 'false'}\n")
        entries = collect(paths, clock=long_after)
        assert len([e for e in entries if e["event.name"] == "user.prompt"]) == 2
        written = _written(paths)
        text = "".join(written.values())
        assert text and any("output" in name for name in written), sorted(written)
        for name, data in written.items():
            leaked = [k for k, v in PLANTED_SECRETS.items() if v in data]
            assert not leaked, f"capture={capture}: {leaked} in {name}"
        kept = [m for m in CONTENT_MARKERS if m in text]
        if not capture:
            assert not kept, f"capture off: {kept} written"
            continue
        assert "GITHUB_TOKEN=[REDACTED:github_token]" in text, "capture on keeps the tool text, masked"
        assert "My AWS access key is [REDACTED:aws_access_key_id]" in text, "the prompt text, masked"


RESUME_CASES = sorted(p for p in FIXTURES.glob("*/resume12") if (p / "expected.json").exists())


@pytest.mark.parametrize("hooks", [True, False], ids=["hooks_and_files", "files_alone"])
@pytest.mark.parametrize("case", RESUME_CASES, ids=[f"{c.parent.name}/{c.name}" for c in RESUME_CASES])
def test_twelve_processes_one_session(case: Path, hooks: bool, tmp_path: Path) -> None:
    """Twelve processes each resuming the same session: one session, twelve turns in prompt order, each
    with its own model calls; odd turns' shell command paired with its result."""
    paths = prepare_fixture(case, tmp_path)
    if not hooks:
        shutil.rmtree(paths.spool_dir)
    entries = sorted(collect(paths, clock=long_after), key=lambda e: e["time_unix_nano"])
    assert len({e["gen_ai.session.id"] for e in entries if "gen_ai.session.id" in e}) == 1
    turns = [e["gen_ai.turn.id"] for e in entries if e["event.name"] == "user.prompt"]
    assert len(turns) == len(set(turns)) == 12
    calls = Counter(e["gen_ai.turn.id"] for e in entries if e["event.name"] == "llm.response")
    assert all(calls[t] >= 1 for t in turns), calls
    tools = Counter(e["gen_ai.turn.id"] for e in entries if e["event.name"] == "tool.result")
    assert [tools[t] for t in turns] == [1, 0] * 6, "the odd turns ran one command each"
    assert {s for _, _, s in tool_pairs(entries).values()} == {"success"}
