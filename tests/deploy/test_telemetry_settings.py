"""``install --telemetry``: each agent's own telemetry settings pointed at our receiver, on the agents' real
config files (tests/fixtures/deploy), opt-in, idempotent, holding no secret, kept by later installs and
the watchdog, and taken out byte for byte (a user's own endpoint put back, and saved to forward to)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from support.deploy import (
    StateSlots,
    agent_snapshot,
    clear_env,
    definitions,
    make_home,
    paths_for,
    watchdog_thread,
)
from support.waits import wait_for

from collector.cli.main import main
from collector.deploy import integration_state
from collector.deploy.jsonc import parse as parse_jsonc
from collector.deploy.telemetry_choice import forward_targets, load
from collector.deploy.watchdog import STATE_KEY, Watchdog
from collector.ingest.secret import ensure_token, ingest_port

FILES = {"claude-code": ".claude/settings.json", "codex": ".codex/config.toml", "qwen-code": ".qwen/settings.json"}
USER_ENDPOINT = "https://otel.example.com:4318"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    clear_env(monkeypatch)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    return make_home(tmp_path, ["claude-code", "codex", "qwen-code"])


def _read(home: Path, agent: str) -> dict[str, Any]:
    text = (home / FILES[agent]).read_text()
    if agent == "codex":
        return tomllib.loads(text)
    value = parse_jsonc(text, comments=True).value()
    assert isinstance(value, dict)
    return value


def _endpoint(home: Path) -> str:
    return f"http://127.0.0.1:{ingest_port(paths_for(home), 0)}"


def _ours(home: Path, agent: str) -> Any:
    data = _read(home, agent)
    if agent == "claude-code":
        return data.get("env")
    if agent == "codex":
        return data.get("otel")
    return data.get("telemetry")


def _install(home: Path, *extra: str) -> int:
    return main(["install", "--home", str(home), *extra])


@pytest.mark.parametrize("agent", sorted(FILES))
def test_telemetry_is_opt_in_then_in_place_idempotent_and_uninstalled_byte_for_byte(
        home: Path, agent: str, capsys: pytest.CaptureFixture[str]) -> None:
    paths = paths_for(home)
    original = agent_snapshot(home, paths)
    assert _install(home, "--agent", agent) == 0
    assert "127.0.0.1" not in json.dumps(_ours(home, agent) or {})  # not without --telemetry
    assert _install(home, "--agent", agent, "--telemetry") == 0
    url = _endpoint(home)
    ours = _ours(home, agent)
    if agent == "claude-code":
        assert ours["CLAUDE_CODE_ENABLE_TELEMETRY"] == "1" and ours["OTEL_EXPORTER_OTLP_ENDPOINT"] == url
        assert ours["OTEL_LOGS_EXPORTER"] == "otlp" and ours["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/json"
    elif agent == "codex":
        assert ours["exporter"] == {"otlp-http": {"endpoint": f"{url}/v1/logs", "protocol": "json"}}
        assert ours["trace_exporter"]["otlp-http"]["endpoint"] == f"{url}/v1/traces"
        assert ours["log_user_prompt"] is False
    else:
        assert ours["enabled"] is True and ours["otlpEndpoint"] == url and ours["otlpProtocol"] == "http"
        assert ours["otlpLogsEndpoint"] == f"{url}/v1/logs" and ours["logPrompts"] is False
    token = ensure_token(paths)
    assert token.encode() not in (home / FILES[agent]).read_bytes()  # no secret in the agent's config
    states = {s.kind: s.state.value for s in integration_state(definitions()[agent], paths)}
    assert states["telemetry_settings"] == "in_place"
    before = (home / FILES[agent]).read_bytes()
    capsys.readouterr()
    assert _install(home, "--agent", agent) == 0  # remembered: a later install keeps it, changes nothing
    assert (home / FILES[agent]).read_bytes() == before
    assert "already in place" in capsys.readouterr().out
    assert main(["uninstall", "--home", str(home), "--agent", agent]) == 0
    assert agent_snapshot(home, paths) == original
    assert agent not in load(paths)


def test_no_telemetry_takes_it_out_and_leaves_the_hooks(home: Path) -> None:
    paths = paths_for(home)
    assert _install(home, "--agent", "qwen-code") == 0
    hooked = (home / FILES["qwen-code"]).read_bytes()
    assert _install(home, "--agent", "qwen-code", "--telemetry") == 0
    assert (home / FILES["qwen-code"]).read_bytes() != hooked
    assert _install(home, "--agent", "qwen-code", "--no-telemetry") == 0
    assert (home / FILES["qwen-code"]).read_bytes() == hooked
    assert "qwen-code" not in load(paths)


def _with_user_endpoint(home: Path) -> None:
    settings = home / FILES["claude-code"]
    data = json.loads(settings.read_text())
    data["env"] = {"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": USER_ENDPOINT,
                   "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer abc,x-team=7", "OTHER": "kept"}
    settings.write_text(json.dumps(data, indent=2) + "\n")


def test_a_users_own_endpoint_is_saved_to_forward_to_and_put_back(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = paths_for(home)
    _with_user_endpoint(home)
    original = agent_snapshot(home, paths)
    assert _install(home, "--agent", "claude-code", "--telemetry") == 0
    assert f"your telemetry endpoint {USER_ENDPOINT} is kept" in capsys.readouterr().out
    env = _ours(home, "claude-code")
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == _endpoint(home) and env["OTHER"] == "kept"
    assert forward_targets(paths)["claude-code"] == {
        "endpoint": USER_ENDPOINT, "headers": {"authorization": "Bearer abc", "x-team": "7"}}
    assert _install(home, "--agent", "claude-code", "--telemetry") == 0  # ours there now: the saved one stays
    assert forward_targets(paths)["claude-code"]["endpoint"] == USER_ENDPOINT
    assert main(["uninstall", "--home", str(home), "--agent", "claude-code"]) == 0
    assert agent_snapshot(home, paths) == original


def test_after_someone_else_edits_the_file_uninstall_puts_the_users_endpoint_back(home: Path) -> None:
    _with_user_endpoint(home)
    assert _install(home, "--agent", "claude-code", "--telemetry") == 0
    settings = home / FILES["claude-code"]
    data = json.loads(settings.read_text())
    data["model"] = "opus"  # another program's edit: the saved bytes no longer apply
    settings.write_text(json.dumps(data, indent=4))
    assert main(["uninstall", "--home", str(home), "--agent", "claude-code"]) == 0
    after = json.loads(settings.read_text())
    assert after["model"] == "opus"
    assert after["env"] == {"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": USER_ENDPOINT,
                            "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer abc,x-team=7", "OTHER": "kept"}


@pytest.mark.parametrize(("env", "forwarded"), [
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, False),  # the pass-through speaks OTLP/HTTP only
    ({"CLAUDE_CODE_ENABLE_TELEMETRY": "0"}, False),  # an endpoint the user was not sending to
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, True),
])
def test_only_a_backend_the_user_was_sending_to_over_http_is_forwarded_to(
        home: Path, env: dict[str, str], forwarded: bool) -> None:
    _with_user_endpoint(home)
    settings = home / FILES["claude-code"]
    data = json.loads(settings.read_text())
    data["env"].update(env)
    settings.write_text(json.dumps(data))
    assert _install(home, "--agent", "claude-code", "--telemetry") == 0
    assert ("claude-code" in forward_targets(paths_for(home))) is forwarded


def test_qwen_code_forwards_only_when_its_telemetry_was_on_over_http(home: Path) -> None:
    settings = home / FILES["qwen-code"]
    data = parse_jsonc(settings.read_text(), comments=True).value()
    data["telemetry"] = {"enabled": True, "otlpEndpoint": "http://collector.internal:4318", "otlpProtocol": "http"}
    settings.write_text(json.dumps(data, indent=2))
    assert _install(home, "--agent", "qwen-code", "--telemetry") == 0
    assert forward_targets(paths_for(home))["qwen-code"]["endpoint"] == "http://collector.internal:4318"
    assert main(["uninstall", "--home", str(home), "--agent", "qwen-code"]) == 0
    data["telemetry"].pop("otlpProtocol")  # Qwen's default is gRPC
    settings.write_text(json.dumps(data, indent=2))
    assert _install(home, "--agent", "qwen-code", "--telemetry") == 0
    assert "qwen-code" not in forward_targets(paths_for(home))


def test_codex_with_its_own_otel_section_is_left_alone(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = home / FILES["codex"]
    config.write_text(config.read_text() + '\n[otel]\nexporter = { otlp-http = { endpoint = "https://mine/v1/logs", '
                      'protocol = "binary" } }\n')
    before = config.read_bytes()
    _install(home, "--agent", "codex", "--telemetry")
    assert "[otel] is yours" in capsys.readouterr().err
    assert b"agent-collector telemetry" not in config.read_bytes()
    assert tomllib.loads(config.read_text())["otel"] == tomllib.loads(before.decode())["otel"]


WIPE_ENV = r"""
import json, sys
path = sys.argv[1]
data = json.loads(open(path).read())
data.pop("env", None)
data["otherTool"] = 1
open(path, "w").write(json.dumps(data, indent=4))
"""


def test_the_watchdog_puts_the_telemetry_settings_back(home: Path) -> None:
    paths = paths_for(home)
    assert _install(home, "--agent", "claude-code", "--telemetry") == 0
    settings = home / FILES["claude-code"]
    slots = StateSlots(paths)
    dog = Watchdog(definitions({"claude-code": "plugin"}), paths, slots(STATE_KEY))
    try:
        with watchdog_thread(dog):
            subprocess.run([sys.executable, "-c", WIPE_ENV, str(settings)], check=True)
            wait_for(lambda: b"OTEL_EXPORTER_OTLP_ENDPOINT" in settings.read_bytes(), timeout=10)
            wait_for(lambda: dog.stats()["repairs_total"] == 1, timeout=5)
    finally:
        slots.close()
    data = json.loads(settings.read_text())
    assert data["otherTool"] == 1 and data["env"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == _endpoint(home)
