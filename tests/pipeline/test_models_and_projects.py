"""Issue 23 items 1 and 3 on the real fixture homes: every model call names its model (Codex takes it
from the rollout's ``turn_context``), every session is in its project (the transcripts' ``cwd``, Gemini's
project index), a working directory inside a repository counts as the repository root."""

from __future__ import annotations

import json
import shutil
import sqlite3
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

from support import FIXTURES, collect, long_after, prepare_fixture

from collector.pipeline.workspace import WorkspaceRoots, repository_root
from collector.usage.prices import PriceTable
from collector.usage.query import Filters
from collector.usage.report import ReportRequest, build_report
from collector.usage.store import store_file


def _history_only(case: Path, tmp: Path):  # the agent's own files, no hook ever arrived
    paths = prepare_fixture(case, tmp)
    shutil.rmtree(paths.spool_dir, ignore_errors=True)
    return paths


def _first_line(path: Path) -> dict:
    return json.loads(path.read_text().splitlines()[0])


def _report(paths, kind: str) -> dict:
    db = sqlite3.connect(store_file(paths.data_dir))
    try:
        return build_report(db, ReportRequest(kind, Filters(), ZoneInfo("UTC"), "UTC"), PriceTable())
    finally:
        db.close()


def test_codex_history_names_its_model_and_is_priced_from_the_table(tmp_path: Path) -> None:
    case = FIXTURES / "codex" / "tool_then_answer"
    (rollout,) = (case / "home").rglob("rollout-*.jsonl")
    contexts = [json.loads(x)["payload"] for x in rollout.read_text().splitlines() if '"turn_context"' in x]
    assert {c["model"] for c in contexts} == {"gpt-5.5"}  # what the raw rollout says
    paths = _history_only(case, tmp_path)
    entries = collect(paths, clock=long_after)
    calls = [e for e in entries if e["event.name"] == "llm.response"]
    assert len(calls) == 2 and {e.get("gen_ai.request.model") for e in calls} == {"gpt-5.5"}

    report = _report(paths, "model")
    (row,) = report["rows"]
    assert row["key"] == "gpt-5.5" and row["unpriced_calls"] == 0
    rates = PriceTable().rates("gpt-5.5", "openai", "2026-11-30", 0)
    assert rates is not None
    want = sum((rates.cost(e["gen_ai.usage.input_tokens"], e.get("gen_ai.usage.cache_read.input_tokens", 0),
                           e.get("gen_ai.usage.cache_creation.input_tokens", 0), e["gen_ai.usage.output_tokens"])
                for e in calls), Decimal(0))
    assert want > 0 and abs(Decimal(str(row["cost_usd"])) - want) < Decimal("1e-9")


def test_a_model_call_without_a_model_is_counted_per_agent(tmp_path: Path) -> None:
    from collector.config import load_config
    from collector.daemon.service import Service

    case = FIXTURES / "codex" / "tool_then_answer"
    paths = _history_only(case, tmp_path)
    (rollout,) = paths.home.rglob("rollout-*.jsonl")
    lines = [x for x in rollout.read_text().splitlines() if '"turn_context"' not in x]
    rollout.write_text("\n".join(lines) + "\n")  # a rollout that names no model anywhere
    service = Service(paths, load_config(paths.config_file, env={}), output_dir=paths.output_dir,
                      clock=long_after)
    service.startup()
    try:
        import asyncio

        asyncio.run(service.collect_once())
        assert service.snapshot()["pipeline"]["without_model"] == {"codex": 2}
    finally:
        service.shutdown()


def _session_projects(paths) -> dict[str, str | None]:
    return {r["session"]: r["project"] for r in _report(paths, "session")["rows"]}


def test_claude_history_sessions_are_in_their_transcripts_cwd(tmp_path: Path) -> None:
    case = FIXTURES / "claude-code" / "tool_then_answer"
    (transcript,) = (case / "home").rglob("*.jsonl")
    cwds = {json.loads(x).get("cwd") for x in transcript.read_text().splitlines()} - {None}
    assert len(cwds) == 1
    paths = _history_only(case, tmp_path)
    collect(paths, clock=long_after)
    assert _session_projects(paths) == {transcript.stem: cwds.pop()}


def test_qwen_history_sessions_are_in_their_chat_cwd(tmp_path: Path) -> None:
    case = FIXTURES / "qwen-code" / "tool_then_answer"
    (chat,) = (case / "home").rglob("*.jsonl")
    cwd = _first_line(chat)["cwd"]
    paths = _history_only(case, tmp_path)
    collect(paths, clock=long_after)
    assert _session_projects(paths) == {chat.stem: cwd}


def test_gemini_history_sessions_are_in_the_project_its_index_names(tmp_path: Path) -> None:
    case = FIXTURES / "gemini-cli" / "tool_then_answer"
    index = json.loads((case / "home" / ".gemini" / "projects.json").read_text())["projects"]
    (project,) = [p for p, short in index.items() if short == "work"]
    (chat,) = (case / "home").rglob("session-*.jsonl")
    assert _first_line(chat)["projectHash"] == __import__("hashlib").sha256(project.encode()).hexdigest()
    paths = _history_only(case, tmp_path)
    (paths.home / ".gemini" / "tmp" / "work" / ".project_root").unlink()  # the index alone answers too
    collect(paths, clock=long_after)
    assert _session_projects(paths) == {_first_line(chat)["sessionId"]: project}


def test_a_working_directory_inside_a_repository_is_the_repository_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "src" / "deep").mkdir(parents=True)
    (repo / ".git").mkdir()
    worktree = tmp_path / "wt"
    (worktree / "pkg").mkdir(parents=True)
    (worktree / ".git").write_text("gitdir: ../repo/.git/worktrees/wt\n")  # a worktree's .git is a file
    outside = tmp_path / "plain"
    outside.mkdir()
    assert repository_root(str(repo / "src" / "deep")) == str(repo)
    assert repository_root(str(repo) + "/") == str(repo)
    assert repository_root(str(worktree / "pkg")) == str(worktree)
    assert repository_root(str(tmp_path / "gone" / "dir")) == str(tmp_path / "gone" / "dir")
    roots = WorkspaceRoots()
    entry = {"workspace.path": str(repo / "src")}
    roots.apply(entry)
    assert entry["workspace.root"] == str(repo)
    bare = {"workspace.path": str(outside)}
    roots.apply(bare)
    assert bare["workspace.root"] == str(outside)  # in no repository: its own project


def test_a_fifo_where_gemini_keeps_its_project_root_is_not_waited_on(tmp_path: Path) -> None:
    """A FIFO at ``.project_root`` (a file another program writes) is read as empty: the index answers."""
    import json
    import os
    import threading

    from collector.agents.gemini_projects import project_of

    folder = tmp_path / ".gemini" / "tmp" / "fifo-case"
    (folder / "chats").mkdir(parents=True)
    os.mkfifo(folder / ".project_root")
    (tmp_path / ".gemini" / "projects.json").write_text(json.dumps({"projects": {"/src/app": "fifo-case"}}))
    found: list[str | None] = []
    worker = threading.Thread(target=lambda: found.append(project_of(str(folder / "chats" / "session-1.json"))),
                              daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert found == ["/src/app"], "project_of waited on the FIFO"
