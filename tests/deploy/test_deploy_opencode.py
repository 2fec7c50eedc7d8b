"""OpenCode: the plugin we drop in really appends envelope lines when node runs it, never throws;
and plugin_inject (a plugin spec in a JSONC list)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support.deploy import agent_snapshot, clear_env, definition, definitions, make_home, paths_for

from collector.deploy import Action, State, install_agent, integration_state, uninstall_agent
from collector.deploy.jsonc import parse

NODE = shutil.which("node")
DRIVER = """
const mod = await import(process.argv[1]);
const hooks = await mod.AgentCollectorPlugin({ directory: "/w" });
const call = { tool: "bash", sessionID: "ses_1", callID: "c1" };
const message = { message: { id: "m1" }, parts: [{ text: "hi\\nthere" }] };
await hooks["chat.message"]({ sessionID: "ses_1" }, message);
await hooks["tool.execute.before"](call, { args: { command: "ls" } });
await hooks["tool.execute.after"](call, { output: "x", metadata: {} });
await hooks.event({ event: { type: "message.part.delta", properties: { delta: "h" } } });
await hooks.event({ event: { type: "session.idle", properties: { sessionID: "ses_1" } } });
await hooks.event({ event: { type: "file.edited", properties: { file: "a" } } });
const cyclic = {}; cyclic.self = cyclic;
await hooks.event({ event: { type: "session.error", properties: cyclic } });
await hooks.event({});
console.log("done");
"""


@pytest.fixture
def opencode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, object]:
    clear_env(monkeypatch)
    home = make_home(tmp_path, ["opencode"])
    return home, paths_for(home)


def is_epoch_seconds(value: object) -> bool:
    """A plugin's `ts` is `Date.now() / 1000`: JSON writes it without a fraction once in 1000 ms."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 1e9 < value < 1e10


def _run_plugin(plugin: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    assert NODE
    return subprocess.run([NODE, "--input-type=module", "-e", DRIVER, str(plugin)], capture_output=True,
                          text=True, timeout=60, env={"PATH": "/usr/bin:/bin", **(env or {})})


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_plugin_appends_one_envelope_line_per_event(opencode: tuple[Path, object]) -> None:
    home, paths = opencode
    install_agent(definitions()["opencode"], paths)  # type: ignore[arg-type]
    plugin = home / ".config" / "opencode" / "plugin" / "agent-collector.js"
    result = _run_plugin(plugin)
    assert result.returncode == 0 and result.stdout.strip() == "done", result.stderr
    day = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    spool = paths.spool_dir / "opencode" / f"opencode-{day}.jsonl"  # type: ignore[attr-defined]
    lines = [json.loads(line) for line in spool.read_text().splitlines()]
    assert [line["event"] for line in lines] == [
        "chat.message", "tool.execute.before", "tool.execute.after", "session.idle", "session.error"
    ]
    assert all(line["agent"] == "opencode" and is_epoch_seconds(line["ts"]) for line in lines)
    assert lines[0]["payload"]["output"]["parts"][0]["text"] == "hi\nthere"
    assert lines[3]["payload"] == {"type": "session.idle", "properties": {"sessionID": "ses_1"}}
    assert lines[4]["payload"] is None and "circular" in lines[4]["payload_error"].lower()


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_plugin_never_throws_and_honours_env_override(opencode: tuple[Path, object], tmp_path: Path) -> None:
    home, paths = opencode
    install_agent(definitions()["opencode"], paths)  # type: ignore[arg-type]
    plugin = home / ".config" / "opencode" / "plugin" / "agent-collector.js"
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = _run_plugin(plugin, {"AGENT_COLLECTOR_SPOOL_DIR": str(blocker / "spool")})  # cannot mkdir
    assert result.returncode == 0 and result.stdout.strip() == "done", result.stderr
    other = tmp_path / "other-spool"
    assert _run_plugin(plugin, {"AGENT_COLLECTOR_SPOOL_DIR": str(other)}).returncode == 0
    assert len(list((other / "opencode").glob("opencode-*.jsonl"))) == 1


def _inject_defn() -> dict:
    raw = dict(definitions()["opencode"].raw)
    raw["integrations"] = [{"kind": "plugin_inject", "file": "~/.config/opencode/opencode.jsonc",
                            "format": "jsonc", "list_key": "plugin", "asset": "opencode/agent-collector.js"}]
    return raw


def test_plugin_inject_adds_a_spec_to_the_list_and_copies_the_asset(opencode: tuple[Path, object]) -> None:
    home, paths = opencode
    config = home / ".config" / "opencode" / "opencode.jsonc"
    text = '{\n  // mine\n  "plugin": ["opencode-wakatime"],\n  "model": "fake/fake-model"\n}\n'
    config.write_text(text)
    before = agent_snapshot(home, paths)  # type: ignore[arg-type]
    defn = definition(_inject_defn())
    changes = install_agent(defn, paths)  # type: ignore[arg-type]
    assert [c.action for c in changes] == [Action.CREATE, Action.UPDATE]
    copy = paths.data_dir / "integrations" / "opencode" / "agent-collector.js"  # type: ignore[attr-defined]
    assert copy.exists()
    value = parse(config.read_text()).value()
    assert value["plugin"] == ["opencode-wakatime", copy.as_uri()]
    assert "// mine" in config.read_text()
    assert integration_state(defn, paths)[0].state is State.IN_PLACE  # type: ignore[arg-type]
    uninstall_agent(defn, paths)  # type: ignore[arg-type]
    assert config.read_text() == text and not copy.exists()
    assert not (paths.data_dir / "integrations").exists()  # type: ignore[attr-defined]
    assert agent_snapshot(home, paths) == before  # type: ignore[arg-type]


def test_plugin_inject_creates_the_list_when_absent(opencode: tuple[Path, object]) -> None:
    home, paths = opencode
    config = home / ".config" / "opencode" / "opencode.jsonc"
    config.write_text('{"model": "m"}')
    defn = definition(_inject_defn())
    install_agent(defn, paths)  # type: ignore[arg-type]
    assert len(parse(config.read_text()).value()["plugin"]) == 1
    config.write_text(config.read_text().replace('"model": "m"', '"model": "n"'))  # foreign edit
    uninstall_agent(defn, paths)  # type: ignore[arg-type]
    assert parse(config.read_text()).value() == {"model": "n"}


# OpenCode 1.18.33 calls a plugin as `await plugin(input)` and gives every bus event to its `event` hook as
# `{ event: { id, type, properties } }` (properties: the event's data); at exit it runs the hooks' `dispose`.
# The event shapes are OpenCode's own (its QuestionRequest, QuestionReplied and Session.Info schemas).
LIFECYCLE = """
const mod = await import(process.argv[1]);
const hooks = await mod.AgentCollectorPlugin({ directory: "/w", worktree: "/w", project: { id: "p" } });
const send = (id, type, properties) => hooks.event({ event: { id, type, properties } });
const session = { id: "ses_q", slug: "s", projectID: "p", directory: "/w", title: "t", version: "1.18.33",
                  time: { created: 1796040000000, updated: 1796040000000 } };
await send("evt_1", "session.created", { sessionID: "ses_q", info: session });
await hooks["chat.message"]({ sessionID: "ses_q" }, { message: { id: "msg_1", role: "user" }, parts: [] });
const call = { tool: "question", sessionID: "ses_q", callID: "call_q" };
if (process.argv[3] === "hook") await hooks["tool.execute.before"](call, { args: { questions: [] } });
await send("evt_2", "question.asked", { id: "que_1", sessionID: "ses_q", tool: { messageID: "msg_2", callID: "call_q" },
  questions: [{ question: "Which file?", header: "File", options: [{ label: "a.txt", description: "the first" }] }] });
if (process.argv[2] === "answer") {
  await send("evt_3", "question.replied", { sessionID: "ses_q", requestID: "que_1", answers: [["a.txt"]] });
  await send("evt_4", "session.deleted", { sessionID: "ses_q", info: session });
}
await hooks.dispose();
console.log("done");
"""


def _statuses(entries: list[dict[str, object]]) -> list[object]:
    ordered = sorted(entries, key=lambda e: e["time_unix_nano"])  # type: ignore[arg-type, return-value]
    return [e["session.status"] for e in ordered if e["event.name"] == "session.status"]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("answer", [True, False], ids=["answered-then-deleted", "open-at-exit"])
def test_question_asked_is_waiting_for_input_and_the_session_closes(
    opencode: tuple[Path, object], answer: bool
) -> None:
    """Answered: the question tool's hook comes first, as in OpenCode. Open at exit: question.asked alone."""
    from support import collect

    home, paths = opencode
    install_agent(definitions()["opencode"], paths)  # type: ignore[arg-type]
    plugin = home / ".config" / "opencode" / "plugin" / "agent-collector.js"
    assert NODE
    run = subprocess.run([NODE, "--input-type=module", "-e", LIFECYCLE, str(plugin), "answer" if answer else "-",
                          "hook" if answer else "-"],
                         capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert run.returncode == 0 and run.stdout.strip() == "done", run.stderr
    day = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    spool = paths.spool_dir / "opencode" / f"opencode-{day}.jsonl"  # type: ignore[attr-defined]
    lines = [json.loads(line) for line in spool.read_text().splitlines()]
    entries = collect(paths)  # type: ignore[arg-type]
    ends = [e for e in entries if e["event.name"] == "session.end"]
    if answer:
        replied = next(line for line in lines if line["event"] == "question.replied")
        assert replied["payload"]["properties"]["tool"] == {"callID": "call_q"}  # the plugin names the call
        assert _statuses(entries) == ["idle", "running", "waiting_for_input", "running", "closed"]
        assert [e["session.reason"] for e in ends] == ["deleted"]
        assert "plugin.dispose" not in [line["event"] for line in lines], "a deleted session is not closed again"
    else:  # OpenCode ended with the question open: dispose closes the session
        assert _statuses(entries) == ["idle", "running", "waiting_for_input", "closed"]
        assert [e["session.reason"] for e in ends] == ["exit"]
        assert lines[-1] == {**lines[-1], "event": "plugin.dispose", "payload": {"properties": {"sessionID": "ses_q"}}}
