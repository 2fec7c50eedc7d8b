"""The usage store keeps each entry's git attribution (repository, branch, worktree) and `report` groups and
filters by it: real repositories (a main tree and a linked worktree), entries stamped by the real pipeline
of `collect --once`, the CLI's `--by repo|branch|worktree`, `--repo`, `--branch`; a store rebuilt from the
JSONL output has the same; a store from before the columns keeps its rows."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from support import ROOT, make_paths
from support.collect_once import collect_cli
from support.git_repos import git, make_repo

from collector.paths import Paths
from collector.usage.query import Filters
from collector.usage.report import ReportRequest, build_report
from collector.usage.store import _COLUMNS, SCHEMA_VERSION, UsageStore, connect, event_row, git_labels

URL = "https://github.com/acme/shop"


def _call(eid: str, session: str, where: Path, inp: int, out: int) -> dict[str, Any]:
    return {"event.name": "llm.response", "event.id": eid, "gen_ai.session.id": session,
            "workspace.path": str(where), "gen_ai.response.model": "claude-sonnet-4-5",
            "gen_ai.provider.name": "anthropic", "gen_ai.usage.input_tokens": inp, "gen_ai.usage.output_tokens": out}


@pytest.fixture
def collected(tmp_path: Path) -> tuple[Paths, Path, Path]:
    """Two sessions of a canonical agent: one in the main tree (main), one in a linked worktree (feature/x)."""
    main = make_repo(tmp_path / "shop")
    worktree = tmp_path / "shop-x"
    git(main, "worktree", "add", "-q", "-b", "feature/x", str(worktree))
    paths = make_paths(tmp_path)
    (paths.home / ".acme").mkdir(parents=True)
    paths.agents_override_dir.mkdir(parents=True)
    (paths.agents_override_dir / "acme.json").write_text(json.dumps({
        "id": "acme", "name": "Acme", "parser": "canonical", "detect": {}, "integrations": [],
        "sources": [{"kind": "jsonl", "name": "log", "globs": ["~/.acme/*.jsonl"]}]}))
    records = [_call("a1", "s1", main, 100, 10), _call("a2", "s1", main, 100, 20), _call("b1", "s2", worktree, 7, 3)]
    (paths.home / ".acme" / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    collect_cli(paths)
    return paths, main, worktree


def _cli(paths: Paths, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}
    env.update({"HOME": str(paths.home), "AGENT_COLLECTOR_DATA_DIR": str(paths.data_dir),
                "AGENT_COLLECTOR_CONFIG_DIR": str(paths.config_dir), "COLUMNS": "200"})
    return subprocess.run([sys.executable, "-m", "collector", "report", *args], env=env, capture_output=True,
                          text=True, timeout=60, cwd=ROOT)


def _rows(paths: Paths, *args: str) -> dict[str, tuple[int, int, int]]:
    done = _cli(paths, *args, "--json")
    assert done.returncode == 0, done.stderr
    return {r["key"]: (r["calls"], r["input_tokens"], r["output_tokens"]) for r in json.loads(done.stdout)["rows"]}


def test_entries_carry_repo_branch_and_worktree_into_the_store(collected: tuple[Paths, Path, Path]) -> None:
    paths, main, worktree = collected
    with closing(sqlite3.connect(paths.data_dir / "usage.sqlite")) as db:
        stored = db.execute("SELECT repo, branch, worktree, SUM(input) FROM events WHERE name = 'llm.response' "
                            "GROUP BY 1, 2, 3 ORDER BY 4").fetchall()
    assert stored == [(URL, "feature/x", str(worktree), 7), (URL, "main", str(main), 200)]


def test_report_by_repo_branch_and_worktree_with_filters(collected: tuple[Paths, Path, Path]) -> None:
    paths, main, worktree = collected
    assert _rows(paths, "--by", "branch") == {"feature/x": (1, 7, 3), "main": (2, 200, 30)}
    assert _rows(paths, "branch") == _rows(paths, "--by", "branch", "branch")  # the positional form is the same
    assert _rows(paths, "--by", "repo") == {URL: (3, 207, 33)}
    assert _rows(paths, "--by", "worktree") == {str(worktree): (1, 7, 3), str(main): (2, 200, 30)}
    assert _rows(paths, "--by", "agent", "--branch", "feature/x") == {"acme": (1, 7, 3)}
    for repo in ("shop", "acme/shop", URL):
        assert _rows(paths, "--by", "branch", "--repo", repo) == {"feature/x": (1, 7, 3), "main": (2, 200, 30)}
    assert _rows(paths, "--by", "branch", "--repo", "sho%") == {}
    both = json.loads(_cli(paths, "--by", "repo", "--repo", "shop", "--branch", "main", "--json").stdout)
    assert (both["repo"], both["branch"], both["total"]["input_tokens"]) == ("shop", "main", 200)
    table = _cli(paths, "--by", "branch").stdout.splitlines()
    assert table[0].split()[0] == "Branch" and [line.split()[0] for line in table[2:4]] == ["feature/x", "main"]


def test_the_rollup_and_the_entries_agree_on_the_git_kinds(collected: tuple[Paths, Path, Path]) -> None:
    paths, _, _ = collected
    db = connect(paths.data_dir / "usage.sqlite", readonly=True)
    for kind in ("repo", "branch", "worktree"):
        for filters in (Filters(), Filters(repo="shop", branch="main")):
            raw = Filters(repo=filters.repo, branch=filters.branch, raw=True)
            made = [build_report(db, ReportRequest(kind, f, ZoneInfo("UTC"), "UTC"), now=0) for f in (filters, raw)]
            for report in made:
                report.pop("generated_unix")
            assert made[0] == made[1] and made[0]["total"]["calls"] > 0


def test_bad_groupings_are_named(collected: tuple[Paths, Path, Path]) -> None:
    paths, _, _ = collected
    clash = _cli(paths, "daily", "--by", "branch")
    assert clash.returncode == 2 and "two groupings" in clash.stderr
    none = _cli(paths)
    assert none.returncode == 2 and "report --by KIND" in none.stderr
    unknown = _cli(paths, "--by", "colour")
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr


def test_a_store_rebuilt_from_the_output_has_the_git_columns(collected: tuple[Paths, Path, Path]) -> None:
    paths, _, _ = collected
    before = _rows(paths, "--by", "worktree")
    store = paths.data_dir / "usage.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    status = collect_cli(paths)
    assert status["exporters"]["usage_store"]["rebuilt"]["added"] > 0 and status["pipeline"]["entries"] == 0
    assert _rows(paths, "--by", "worktree") == before and len(before) == 2


_V4_SLOTS = """CREATE TABLE slots (
  slot INTEGER NOT NULL, agent TEXT NOT NULL, session TEXT NOT NULL, model TEXT NOT NULL,
  provider TEXT NOT NULL, band INTEGER NOT NULL,
  calls INTEGER NOT NULL, input INTEGER NOT NULL, cache_read INTEGER NOT NULL, cache_write INTEGER NOT NULL,
  output INTEGER NOT NULL, reasoning INTEGER NOT NULL, tool_calls INTEGER NOT NULL,
  tool_failures INTEGER NOT NULL, errors INTEGER NOT NULL, agent_cost REAL, agent_cost_calls INTEGER NOT NULL,
  a_input INTEGER NOT NULL, a_cache_read INTEGER NOT NULL, a_cache_write INTEGER NOT NULL,
  a_output INTEGER NOT NULL, first_ns INTEGER NOT NULL, last_ns INTEGER NOT NULL,
  PRIMARY KEY (slot, agent, session, model, provider, band)
) WITHOUT ROWID;
CREATE INDEX slots_session ON slots(agent, session);"""


def _as_schema_4(path: Path) -> None:
    """The store as version 4 wrote it: no git columns in ``events``, the rollup without them, keyed by its
    edges alone (what version 4 kept in ``meta``)."""
    from collector.usage.rollup import EDGES_KEY

    with closing(sqlite3.connect(path)) as db:
        db.executescript("ALTER TABLE events DROP COLUMN repo; ALTER TABLE events DROP COLUMN branch; "
                         f"ALTER TABLE events DROP COLUMN worktree; DROP TABLE slots; {_V4_SLOTS}; "
                         "UPDATE meta SET value = '4' WHERE key = 'schema_version';")
        db.execute("UPDATE meta SET value = ? WHERE key = 'rollup_edges'", (EDGES_KEY,))
        db.commit()


def test_a_store_from_before_the_git_columns_keeps_its_rows(collected: tuple[Paths, Path, Path]) -> None:
    """Read as it is (a report opens it read-only): everything is of no repository. Opened by the writer:
    the columns are added (empty in the old rows), the rollup rebuilt, every report the same as before, an
    entry already in it still not added twice, and new entries carry their branch."""
    paths, main, _ = collected
    path = paths.data_dir / "usage.sqlite"
    names = ",".join(_COLUMNS)
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute(f"SELECT id, k, {names} FROM events ORDER BY id").fetchall()
    daily = _rows(paths, "daily")
    _as_schema_4(path)
    assert _rows(paths, "--by", "branch") == {"": (3, 207, 33)}, "an old store read as it is: no repository"
    assert _rows(paths, "--by", "agent", "--branch", "main") == {}
    assert _rows(paths, "daily") == daily
    store = UsageStore(path)
    old = [{"event.id": r[2], "event.name": r[3], "time_unix_nano": r[4], "gen_ai.agent.type": r[6]} for r in rows]
    assert store.add(old) == 0, "the rows it holds still dedupe"
    new = {"event.id": "n1", "event.name": "llm.response", "time_unix_nano": rows[-1][4] + 1,
           "gen_ai.agent.type": "acme", "gen_ai.usage.input_tokens": 5, "vcs.repository.url.full": URL,
           "vcs.ref.head.name": "main", "git.worktree.path": str(main)}
    assert store.add([new]) == 1
    store.close()
    with closing(sqlite3.connect(path)) as db:
        assert db.execute(f"SELECT id, k, {names} FROM events WHERE id <= ? ORDER BY id",
                          (rows[-1][0],)).fetchall() == rows
        assert db.execute("SELECT COUNT(*) FROM events WHERE repo IS NOT NULL OR branch IS NOT NULL").fetchone() == (1,)
        assert {r[1] for r in db.execute("PRAGMA table_info(slots)")} >= {"repo", "branch", "worktree"}
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert _rows(paths, "--by", "branch") == {"": (3, 207, 33), "main": (1, 5, 0)}


@pytest.mark.parametrize(("fields", "expected"), [
    ({"vcs.repository.url.full": "git@GitHub.com:acme/shop.git", "vcs.repository.name": "shop",
      "vcs.ref.head.name": "main", "git.worktree.path": "/w"}, (URL, "main", "/w")),
    ({"vcs.repository.url.full": "not a url\x00", "vcs.repository.name": "shop"}, ("shop", "", "")),
    ({"vcs.repository.url.full": 7, "vcs.ref.head.name": ["x"], "git.worktree.path": {"a": 1}}, ("", "", "")),
    ({}, ("", "", "")),
])
def test_git_labels_take_one_form_and_nothing_but_text(fields: dict[str, Any], expected: tuple[str, ...]) -> None:
    """A URL the agent sent in another form is stored in the one form; one that is no address gives way to
    the name; values that are not text are left out (the row binds ``''`` as NULL)."""
    assert git_labels(fields) == expected
    entry = {"event.id": "x", "event.name": "llm.response", "time_unix_nano": 1, "gen_ai.agent.type": "a", **fields}
    git_end = 1 + len(_COLUMNS) + 3  # the key, the columns of schema 4, then repo, branch, worktree
    assert event_row(entry)[git_end - 3:git_end] == expected
