"""Session titles: the start of the first prompt, kept by the usage store only when content capture put the
prompt's text in the entry — checked on a real Claude Code session collected with capture on and with it off —
and shown by the dashboard only while capture is on; the text is read defensively (any JSON shape)."""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

from support import FIXTURES, collect, prepare_fixture

from collector.config import load_config
from collector.dashboard.sessions import WorkViews
from collector.usage.store import UsageStore, connect
from collector.usage.titles import MAX_TITLE, prompt_text, title_rows

CASE = FIXTURES / "claude-code" / "tool_then_answer"


def test_prompt_text_takes_the_first_text_of_any_shape() -> None:
    assert prompt_text([{"role": "user", "parts": [{"type": "text", "content": "  fix\n the  bug "}]}]) == "fix the bug"
    assert prompt_text("plain words") == "plain words"
    long = prompt_text("x " * 500)
    assert long is not None and len(long) == MAX_TITLE and long.endswith("…")
    for hostile in (None, 7, {"parts": "x"}, [1, "a", {"parts": [{"content": 3}]}], [{"parts": [{"content": " "}]}]):
        assert prompt_text(hostile) is None, hostile


def _collected(tmp: Path, capture: bool) -> Path:
    paths = prepare_fixture(CASE, tmp)
    env = {"AGENT_COLLECTOR_CONTENT__CAPTURE": str(capture).lower()}
    collect(paths, config=load_config(paths.config_file, env=env))
    return paths.data_dir / "usage.sqlite"


def test_the_store_keeps_a_title_only_with_capture_on(tmp_path: Path) -> None:
    on, off = _collected(tmp_path / "on", True), _collected(tmp_path / "off", False)
    db = connect(on, readonly=True)
    try:
        kept = db.execute("SELECT agent, session, title FROM session_titles").fetchall()
    finally:
        db.close()
    assert kept and all(title for _, _, title in kept)
    db = connect(off, readonly=True)
    try:
        assert db.execute("SELECT COUNT(*) FROM session_titles").fetchone()[0] == 0, "capture off: no text kept"
    finally:
        db.close()
    shown = WorkViews(on, True, None).sessions({"days": ["3660"]}, ZoneInfo("UTC"), {})["rows"]
    assert {r["title"] for r in shown} == {t for _, _, t in kept}
    hidden = WorkViews(on, False, None).sessions({"days": ["3660"]}, ZoneInfo("UTC"), {})["rows"]
    assert all(r["title"] == f"{r['agent']} session {r['label']}" for r in hidden), "capture off now: a neutral label"


def test_the_earliest_prompt_wins_and_retention_drops_it(tmp_path: Path) -> None:
    store = UsageStore(tmp_path / "u.sqlite", retention_days=1)

    def prompt(i: str, t: int, text: str) -> dict[str, object]:
        return {"event.id": i, "event.name": "user.prompt", "gen_ai.agent.type": "codex", "time_unix_nano": t,
                "gen_ai.session.id": "s1", "gen_ai.input.messages": text}
    t = 2_000_000_000 * 10**9
    store.add([prompt("b", t + 5, "second")])
    store.add([prompt("a", t, "first"), prompt("c", t + 9, "third")])
    assert title_rows([prompt("x", t, "y") | {"gen_ai.session.id": 3}]) == []
    assert store._db.execute("SELECT title FROM session_titles").fetchall() == [("first",)]
    store.prune(now=t / 1e9 + 5 * 86400)
    assert store._db.execute("SELECT COUNT(*) FROM session_titles").fetchone()[0] == 0
    store.close()
