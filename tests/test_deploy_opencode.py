"""OpenCode: the plugin we drop in really appends envelope lines when node runs it, never throws;
and plugin_inject (a plugin spec in a JSONC list)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from deploy_support import agent_snapshot, clear_env, definition, definitions, make_home, paths_for

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
    assert all(line["agent"] == "opencode" and isinstance(line["ts"], float) for line in lines)
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
