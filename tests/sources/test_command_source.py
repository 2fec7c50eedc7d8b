"""The ``command`` source (CLI polling) with small programs written by the tests: cursor handed back in
argv and environment, records beyond the cursor only, a restart from the committed position, the circuit
breaker opening after three failures and closing on a success, the timeout killing the whole process group,
the output cap, no shell. Then end to end through the Service: an agent defined by one agents.d file whose
command prints a real `opencode export` document (captured from OpenCode 1.18.33)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import collect, make_paths

from collector.cli.main import main
from collector.definitions.schema import kind_schema
from collector.registry import with_defaults
from collector.sources.base import Item
from collector.sources.commands import CommandSource, spec_of
from collector.sources.context import BuildContext

FIXTURES = Path(__file__).parent.parent / "fixtures" / "opencode_cli"


def program(tmp: Path, name: str, body: str) -> Path:
    path = tmp / name
    path.write_text(f"#!{sys.executable}\nimport json, os, sys, time\n{body}\n")
    path.chmod(0o755)
    return path


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def source(tmp: Path, spec: dict[str, Any], positions: dict[str, Any] | None = None,
           clock: Clock | None = None) -> CommandSource:
    full = with_defaults(kind_schema("source_command"), {"kind": "command", **spec})
    ctx = BuildContext(make_paths(tmp), positions or {}, 1 << 20)
    return CommandSource("poller:command", "poller", spec_of(full, ctx), positions or {},
                         clock=clock or time.monotonic)


def poll(src: CommandSource) -> list[Item]:
    async def drain() -> list[Item]:
        return [item async for item in src.read()]

    return asyncio.run(drain())


def records(items: list[Item]) -> list[dict[str, Any]]:
    return [r.data for r, _ in items if r is not None]


def test_cursor_in_argv_and_env_and_only_new_records(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_text("".join(json.dumps({"seq": n, "id": f"r{n}"}) + "\n" for n in (1, 2, 3)))
    calls = tmp_path / "calls.jsonl"
    # prints every line (not only the new ones): the source itself skips what the cursor has passed
    exe = program(tmp_path, "feed", f"""
open({str(calls)!r}, "a").write(json.dumps([sys.argv[1:], os.environ["AGENT_COLLECTOR_CURSOR"]]) + "\\n")
sys.stdout.write(open({str(feed)!r}).read())
print("not json")""")
    spec = {"argv": [str(exe), "--since={cursor}"], "cursor": {"field": "seq", "key": "id"}}
    first = source(tmp_path, spec)
    items = poll(first)
    assert [r["seq"] for r in records(items)] == [1, 2, 3]
    assert first.stats.malformed == 1 and first.stats.extra["last_records"] == 3
    committed = {items[-1][1].stream: items[-1][1].value}
    assert committed == {"poller:command": {"cursor": 3, "keys": ["r3"]}}

    with feed.open("a") as f:
        f.write(json.dumps({"seq": 3, "id": "r3b"}) + "\n" + json.dumps({"seq": 4, "id": "r4"}) + "\n")
    restarted = source(tmp_path, spec, committed)  # a new daemon from the committed position
    assert [r["id"] for r in records(poll(restarted))] == ["r3b", "r4"]  # same cursor value, other key: new
    seen = [json.loads(line) for line in calls.read_text().splitlines()]
    assert seen == [[["--since="], ""], [["--since=3"], "3"]]


def test_three_failures_back_off_and_a_success_recovers(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.touch()
    runs = tmp_path / "runs"
    exe = program(tmp_path, "flaky", f"""
open({str(runs)!r}, "a").write("x")
if os.path.exists({str(broken)!r}):
    print("backend down", file=sys.stderr); sys.exit(3)
print(json.dumps({{"ok": True}}))""")
    clock = Clock()
    src = source(tmp_path, {"argv": [str(exe)], "interval_s": 10}, clock=clock)
    for _attempt in range(3):
        assert poll(src) == []
        clock.now += 10
    assert runs.read_text() == "xxx"
    state = src.stats.extra
    assert state["breaker"] == "open" and state["consecutive_failures"] == 3 and state["last_exit_code"] == 3
    assert src.stats.last_error == "flaky: exit code 3: backend down"
    assert src.breaker.wait_s() == 20  # backed off: twice the interval
    assert poll(src) == [] and runs.read_text() == "xxx"  # 10 s later: still waiting, not run
    broken.unlink()
    clock.now += 10
    assert records(poll(src)) == [{"ok": True}]
    assert runs.read_text() == "xxxx"
    assert src.stats.extra["breaker"] == "closed" and src.stats.extra["consecutive_failures"] == 0
    assert src.stats.extra["last_exit_code"] == 0


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed child whose reaper has not come by yet is dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    child = tmp_path / "child.pid"
    exe = program(tmp_path, "hang", f"""
import subprocess
p = subprocess.Popen(["sleep", "60"])
open({str(child)!r}, "w").write(str(p.pid))
time.sleep(60)""")
    src = source(tmp_path, {"argv": [str(exe)], "timeout_s": 0.5})
    started = time.monotonic()
    assert poll(src) == []
    assert time.monotonic() - started < 10
    assert src.stats.last_error == "hang: timed out after 0.5s" and src.stats.errors == 1
    pid = int(child.read_text())
    deadline = time.monotonic() + 5
    while _running(pid) and time.monotonic() < deadline:  # SIGKILL to the group: no grace to wait for
        time.sleep(0.05)
    assert not _running(pid), "the program's child outlived it"


def test_output_over_the_cap_is_a_failure(tmp_path: Path) -> None:
    exe = program(tmp_path, "flood", "sys.stdout.write('x' * (20 * 1024 * 1024))")
    src = source(tmp_path, {"argv": [str(exe)], "max_output_bytes": 1 << 20})
    assert poll(src) == []
    assert src.stats.last_error == f"flood: stdout over {1 << 20} bytes"


def test_no_shell(tmp_path: Path) -> None:
    exe = program(tmp_path, "echo", "print(json.dumps({'args': sys.argv[1:]}))")
    src = source(tmp_path, {"argv": [str(exe), "$(touch pwned)", "; rm -rf x"], "cwd": str(tmp_path)})
    assert records(poll(src)) == [{"args": ["$(touch pwned)", "; rm -rf x"]}]
    assert not (tmp_path / "pwned").exists()


def test_missing_program_is_a_counted_failure(tmp_path: Path) -> None:
    src = source(tmp_path, {"argv": [str(tmp_path / "nope")]})
    assert poll(src) == []
    assert src.stats.errors == 1 and "cannot start" in str(src.stats.last_error)


def test_each_failure_keeps_the_cursor_before_the_failed_record(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.touch()
    lister = program(tmp_path, "list", "print(json.dumps([{'id': 'b', 't': 2}, {'id': 'a', 't': 1}]))")
    exporter = program(tmp_path, "export", f"""
if sys.argv[1] == "b" and os.path.exists({str(bad)!r}):
    sys.exit(1)
print(json.dumps({{"doc": sys.argv[1]}}))""")
    spec = {"argv": [str(lister)], "each": {"argv": [str(exporter), "{id}"]}, "cursor": {"field": "t", "key": "id"}}
    clock = Clock()
    src = source(tmp_path, spec, clock=clock)
    items = poll(src)
    assert records(items) == [{"doc": "a"}]
    assert items[-1][1].value == {"cursor": 1, "keys": ["a"]} and src.stats.errors == 1
    bad.unlink()
    clock.now += 60
    items = poll(source(tmp_path, spec, {items[-1][1].stream: items[-1][1].value}))
    assert records(items) == [{"doc": "b"}]
    assert items[-1][1].value == {"cursor": 2, "keys": ["b"]}


def _export_agent(tmp_path: Path) -> Any:
    """An agent of one agents.d file: OpenCode's parser over a program printing a real export."""
    paths = make_paths(tmp_path)
    (paths.home).mkdir(parents=True)
    lister = program(tmp_path, "list", f"sys.stdout.write(open({str(FIXTURES / 'session-list.json')!r}).read())")
    exporter = program(tmp_path, "export", f"sys.stdout.write(open({str(FIXTURES / 'export.json')!r}).read())")
    paths.agents_override_dir.mkdir(parents=True)
    (paths.agents_override_dir / "oc-cli.json").write_text(json.dumps({
        "id": "oc-cli", "name": "OpenCode via its CLI", "parser": "opencode", "detect": {}, "integrations": [],
        "sources": [{"kind": "command", "name": "cli", "argv": [str(lister)], "record_kind": "export",
                     "cursor": {"field": "updated", "key": "id"}, "each": {"argv": [str(exporter), "{id}"]}}]}))
    return paths


def test_end_to_end_through_the_service_and_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    paths = _export_agent(tmp_path)
    entries = collect(paths)
    names = sorted(e["event.name"] for e in entries if e["event.name"] != "session.status")
    assert names.count("user.prompt") == 2 and names.count("llm.response") == 4
    assert names.count("tool.call") == 2 and names.count("tool.result") == 2
    tokens = sorted(e["gen_ai.usage.output_tokens"] for e in entries if e["event.name"] == "llm.response")
    assert tokens == [42, 44, 52, 104]
    status = json.loads((paths.state_dir / "status.json").read_text())["sources"]["oc-cli:cli"]
    assert status["runs"] == 2 and status["last_records"] == 1 and status["records"] == 1
    again = collect(paths)  # a restart: the committed cursor says the session was read
    assert len(again) == len(entries)
    status = json.loads((paths.state_dir / "status.json").read_text())["sources"]["oc-cli:cli"]
    assert status["runs"] == 1 and status["last_records"] == 0
    monkeypatch.setenv("AGENT_COLLECTOR_DATA_DIR", str(paths.data_dir))
    monkeypatch.setenv("AGENT_COLLECTOR_CONFIG_DIR", str(paths.config_dir))
    capsys.readouterr()
    assert main(["status", "--home", str(paths.home)]) in (0, 3)  # 3: no daemon running
    out = capsys.readouterr().out
    polled = out[out.index("POLLED"):].splitlines()
    cells = next(line for line in polled if line.startswith("oc-cli:cli ")).split()
    # runs 1, last run "Ns ago", exit 0, its time in ms, 0 records (nothing new), 0 failures, breaker closed
    assert cells[1] == "1" and cells[3] == "ago" and cells[4] == "0" and cells[5].isdigit()
    assert cells[6:] == ["0", "0", "closed"]


@pytest.mark.parametrize("bad", [{"argv": []}, {"argv": ["x"], "interval_s": 0}, {"argv": ["x"], "shell": True}])
def test_the_schema_refuses_bad_specs(bad: dict[str, Any]) -> None:
    from collector.registry import PluginConfigError
    from collector.sources.factory import source_kinds

    with pytest.raises(PluginConfigError):
        source_kinds().configure("command", {"kind": "command", **bad})


def test_a_listed_id_that_looks_like_an_option_is_skipped_not_passed(tmp_path: Path) -> None:
    """Issue 22 item 7: a record field substituted into argv is never read as an option: without ``--``
    before it a value starting with '-' skips that record (counted), with ``--`` it is passed as data."""
    lister = program(tmp_path, "list", "print(json.dumps([{'id': '--output=/tmp/x', 't': 1}, {'id': 'b', 't': 2}]))")
    exporter = program(tmp_path, "export", "print(json.dumps({'argv': sys.argv[1:]}))")
    bare = {"argv": [str(lister)], "each": {"argv": [str(exporter), "{id}"]}, "cursor": {"field": "t", "key": "id"}}
    src = source(tmp_path, bare)
    items = poll(src)
    assert records(items) == [{"argv": ["b"]}]  # the other one was not run, and it did not stop the rest
    assert src.stats.malformed == 1 and "would be read as an option" in str(src.stats.last_error)
    assert items[-1][1].value == {"cursor": 2, "keys": ["b"]}  # moved past it: not tried again
    ended = {**bare, "each": {"argv": [str(exporter), "--", "{id}"]}}
    (tmp_path / "again").mkdir()
    assert records(poll(source(tmp_path / "again", ended))) == [{"argv": ["--", "--output=/tmp/x"]},
                                                                 {"argv": ["--", "b"]}]
