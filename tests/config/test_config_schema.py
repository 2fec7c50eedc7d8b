"""The typed configuration: one schema for config.toml and AGENT_COLLECTOR_* variables. Every bad value a
new user actually wrote is refused with one line naming the key (and the nearest valid one); `run`,
`install`, `status` and the background start script exit 2 on it instead of starting half-configured."""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from collector.cli.main import main
from collector.config import SECTIONS, Config, ConfigError, load_config, load_for, schema
from collector.paths import Paths

ROOT = Path(__file__).resolve().parents[2]
ACCEPTED = {"true": True, "false": False, "TRUE": True, "False": False, "1": True, "0": False, "yes": True,
            "no": False, "on": True, "off": False, "Yes": True, "OFF": False}
REFUSED = ["maybe", "2", "", "t", "y", "enabled", "-1", "nope"]


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "expected"), sorted(ACCEPTED.items()))
def test_booleans_in_the_environment(tmp_path: Path, text: str, expected: bool) -> None:
    config = load_config(tmp_path / "none.toml", env={"AGENT_COLLECTOR_CONTENT__CAPTURE": text})
    assert config.content.capture is expected


@pytest.mark.parametrize(("text", "expected"), sorted(ACCEPTED.items()))
def test_booleans_in_the_file_as_strings(tmp_path: Path, text: str, expected: bool) -> None:
    config = load_config(_file(tmp_path, f'[content]\ncapture = "{text}"\n'), env={})
    assert config.content.capture is expected, "capture = \"false\" must not turn capture on"


@pytest.mark.parametrize("value", ["true", "false", "1", "0"])
def test_booleans_in_the_file_as_toml_values(tmp_path: Path, value: str) -> None:
    config = load_config(_file(tmp_path, f"[masking]\nenabled = {value}\n"), env={})
    assert config.masking.enabled is (value in ("true", "1"))


@pytest.mark.parametrize("text", REFUSED)
def test_anything_else_is_not_a_boolean(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "none.toml", env={"AGENT_COLLECTOR_CONTENT__CAPTURE": text})
    message = str(caught.value)
    assert message.startswith("AGENT_COLLECTOR_CONTENT__CAPTURE: content.capture: must be true or false")
    assert "\n" not in message


@pytest.mark.parametrize(("text", "key", "reason"), [
    ('[collector]\npoll_interval_s = "fast"\n', "collector.poll_interval_s", "must be a number"),
    ('[collector]\nbatch_size = "abc"\n', "collector.batch_size", "must be an integer"),
    ("[collector]\nbatch_size = 0\n", "collector.batch_size", "must be between 1 and"),
    ("[ingest]\nport = 99999\n", "ingest.port", "must be between 0 and 65535, not 99999"),
    ('[ingest]\nport = "abc"\n', "ingest.port", "must be an integer"),
    ("[ingest]\nport = true\n", "ingest.port", "must be an integer"),
    ("[content]\ncaptur = true\n", "content.captur", "unknown key (did you mean 'capture'?)"),
    ("[contnet]\ncapture = true\n", "contnet", "unknown key (did you mean 'content'?)"),
    ("[ingest]\nprot = 5000\n", "ingest.prot", "did you mean 'port'?"),
    ("[agents.claude-cod]\nenabled = false\n", "agents.claude-cod", "unknown agent (did you mean 'claude-code'?)"),
    ("[agents.codex]\nidle_timeout = 5\n", "agents.codex.idle_timeout", "did you mean 'idle_timeout_s'?"),
    ("[agents.codex]\nidle_timeout_s = -5\n", "agents.codex.idle_timeout_s", "must be between 0 and"),
    ('[otlp]\nendpiont = "http://x"\n', "otlp.endpiont", "did you mean 'endpoint'?"),
    ('[[otlp.backends]]\nendpoint = "http://x"\ninsecure = "sure"\n', "otlp.backends.0.insecure",
     "must be true or false"),
])
def test_bad_values_in_the_file_name_the_key(tmp_path: Path, text: str, key: str, reason: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert str(caught.value).startswith(f"{path}: {key}: ")
    assert reason in str(caught.value)


@pytest.mark.parametrize(("name", "value", "reason"), [
    ("AGENT_COLLECTOR_INGEST__PORT", "99999", "ingest.port: must be between 0 and 65535"),
    ("AGENT_COLLECTOR_INGEST__PORT", "abc", "ingest.port: must be an integer, not 'abc'"),
    ("AGENT_COLLECTOR_COLLECTOR__BATCH_SIZE", "abc", "collector.batch_size: must be an integer"),
    ("AGENT_COLLECTOR_COLLECTOR__POLL_INTERVAL_S", "fast", "collector.poll_interval_s: must be a number"),
    ("AGENT_COLLECTOR_CONTNET__CAPTURE", "true", "contnet: unknown key (did you mean 'content'?)"),
    ("AGENT_COLLECTOR_AGENTS__CLAUDE_CODE__ENABLD", "no", "did you mean 'enabled'?"),
])
def test_bad_environment_values_name_the_variable(tmp_path: Path, name: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "none.toml", env={name: value})
    assert str(caught.value).startswith(f"{name}: ")
    assert reason in str(caught.value)


def test_environment_types_follow_the_schema(tmp_path: Path) -> None:
    config = load_config(tmp_path / "none.toml", env={
        "AGENT_COLLECTOR_COLLECTOR__USER_ID": "1234",  # a string key keeps digits as text
        "AGENT_COLLECTOR_COLLECTOR__POLL_INTERVAL_S": "1",
        "AGENT_COLLECTOR_AGENTS__CLAUDE_CODE__CONTENT_CAPTURE": "off",
        "AGENT_COLLECTOR_HOME": "/elsewhere",  # not a setting (no __): ignored
    })
    assert config.collector.user_id == "1234"
    assert config.collector.poll_interval_s == 1.0 and isinstance(config.collector.poll_interval_s, float)
    assert config.agent("claude-code").content_capture is False
    assert config.agent("codex").content_capture is None


def test_several_problems_are_one_line(tmp_path: Path) -> None:
    path = _file(tmp_path, '[content]\ncapture = "maybe"\n[ingest]\nport = -1\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert "\n" not in str(caught.value) and str(caught.value).endswith("(and 1 more)")


def test_dataclasses_and_schema_list_the_same_keys() -> None:
    props = schema()["properties"]
    assert set(props) == set(SECTIONS) | {"agents", "otlp", "prices", "attributes", "budget"}
    for name, cls in SECTIONS.items():
        assert {f.name for f in dataclasses.fields(cls)} == set(props[name]["properties"]), name
        for key, node in props[name]["properties"].items():
            assert "default" in node, f"{name}.{key} has no default"
    assert {f.name for f in dataclasses.fields(Config)} == set(props)


def _paths(tmp_path: Path) -> Paths:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return Paths(home=home, config_dir=tmp_path / "config", data_dir=tmp_path / "data")


def _override(paths: Paths, text: str) -> None:
    paths.agents_override_dir.mkdir(parents=True, exist_ok=True)
    (paths.agents_override_dir / "claude-code.json").write_text(text)


def test_unknown_integration_variant_is_an_error(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    _override(paths, '{"id": "claude-code", "integration_variant": "setings"}')
    with pytest.raises(ConfigError, match=r"integration_variant: unknown variant 'setings' "
                                          r"\(did you mean 'settings'\? valid: plugin, settings\)"):
        load_for(paths, env={})
    _override(paths, '{"id": "claude-code", "integration_variant": "settings"}')
    assert load_for(paths, env={}).ingest.port == 0, "0: the port is chosen per user"


def _env_for(paths: Paths) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR_", "XDG_"))}
    env.update({"HOME": str(paths.home), "AGENT_COLLECTOR_CONFIG_DIR": str(paths.config_dir),
                "AGENT_COLLECTOR_DATA_DIR": str(paths.data_dir)})
    return env


@pytest.mark.parametrize("command", [["run"], ["install", "--agent", "codex"], ["status"],
                                     ["collect", "--once"], ["config", "check"], ["config", "show"],
                                     ["service", "start"],
                                     ["service", "restart"]])
@pytest.mark.parametrize("problem", ["config", "override"])
def test_commands_refuse_a_bad_config_with_exit_2(tmp_path: Path, command: list[str], problem: str,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    paths = _paths(tmp_path)
    if problem == "config":
        paths.config_dir.mkdir(parents=True)
        paths.config_file.write_text("[ingest]\nport = 99999\n")
    else:
        _override(paths, '{"id": "claude-code", "integration_variant": "setings"}')
    for key, value in _env_for(paths).items():
        monkeypatch.setenv(key, value)
    assert main([*command, "--home", str(paths.home)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert ("ingest.port: must be between 0 and 65535" if problem == "config" else "unknown variant 'setings'") in err
    assert err.startswith("agent-collector: error: " + ("not started: " if command[0] == "service" else ""))
    assert not (paths.data_dir / "state" / "collector.lock").exists(), "nothing was started"


def test_background_start_reports_a_bad_config(tmp_path: Path) -> None:
    """deploy/agent-collector-bg.sh start: one line saying why, exit 2, no daemon, no 'started'."""
    paths = _paths(tmp_path)
    venv = paths.data_dir / "venv"
    script = venv / "share" / "agent-collector" / "deploy" / "agent-collector-bg.sh"
    script.parent.mkdir(parents=True)
    shutil.copy(ROOT / "deploy" / "agent-collector-bg.sh", script)
    program = venv / "bin" / "agent-collector"
    program.parent.mkdir(parents=True)
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m collector.cli.main "$@"\n')
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    paths.config_dir.mkdir(parents=True)
    paths.config_file.write_text('[content]\ncapture = "maybe"\n')
    env = {**_env_for(paths), "PYTHONPATH": str(ROOT)}
    result = subprocess.run(["sh", str(script), "start"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result
    assert "started" not in result.stdout
    assert result.stderr.startswith("agent-collector: not started: ") and "content.capture" in result.stderr
    assert not (paths.data_dir / "agent-collector.pid").exists()
    paths.config_file.write_text("[content]\ncapture = false\n")
    check = subprocess.run([str(program), "config", "check"], env=env, capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and check.stdout.startswith("config ok")


def test_custom_attributes_and_the_trace_link_switch(tmp_path: Path) -> None:
    from collector.config import ConfigError, defaults, load_config

    assert defaults().attributes == {} and defaults().collector.upstream_trace_link is False
    path = tmp_path / "config.toml"
    path.write_text('[attributes]\nteam = "platform"\n"cost.centre" = "42"\n[collector]\nupstream_trace_link = true\n')
    config = load_config(path, env={"AGENT_COLLECTOR_ATTRIBUTES__SITE": "berlin"}, known_agents=[])
    assert config.attributes == {"team": "platform", "cost.centre": "42", "site": "berlin"}
    assert config.collector.upstream_trace_link is True
    for body, where in (('[attributes]\nteam = 1\n', "attributes.team: must be a string"),
                        ('[attributes]\n"a b" = "x"\n', "attributes"),
                        (f'[attributes]\nteam = "{"x" * 513}"\n', "attributes.team")):
        path.write_text(body)
        with pytest.raises(ConfigError, match=where):
            load_config(path, env={}, known_agents=[])
