"""`agent-collector doctor`: one test per finding (daemon down, plugin removed, Codex hook trust missing,
http hooks blocked by policy, a data gap, bad config), each with its exit status and message; and a
healthy setup with a real daemon passes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.deploy import clear_env
from support.waits import free_port

from collector.cli.main import main


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    clear_env(monkeypatch)
    for name in [k for k in os.environ if k.startswith("AGENT_COLLECTOR_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AGENT_COLLECTOR_SYSTEM_ROOT", str(tmp_path / "root"))
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    return home


def doctor(home: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, dict]:
    code = main(["doctor", "--home", str(home)])
    text = capsys.readouterr().out
    assert main(["doctor", "--home", str(home), "--json"]) == code
    return code, text, json.loads(capsys.readouterr().out)


def failed(report: dict) -> dict[str, str]:
    return {f["check"]: f["message"] + " | fix: " + f["fix"] for f in report["findings"] if f["level"] == "error"}


def install(home: Path, agent: str) -> None:
    assert main(["install", "--home", str(home), "--agent", agent]) == 0


def test_daemon_down(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    install(home, "claude-code")
    capsys.readouterr()
    code, text, report = doctor(home, capsys)
    assert code == 1 and report["ok"] is False
    assert set(failed(report)) == {"daemon"}
    assert "FAIL  daemon: the collector daemon is not running" in text
    assert "fix: start it: `agent-collector service start`" in text and "`agent-collector run`" in text


def test_plugin_removed(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    install(home, "claude-code")
    plugin = home / ".claude" / "skills" / "agent-collector"
    for path in sorted(plugin.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    plugin.rmdir()
    capsys.readouterr()
    code, text, report = doctor(home, capsys)
    problem = failed(report)["agent claude-code: integration"]
    assert code == 1
    assert problem.startswith("http_plugin_dir ") and ("foreign modified" in problem or "missing" in problem)
    assert "agent-collector install --agent claude-code" in problem
    assert "FAIL  agent claude-code: integration:" in text


def test_codex_hook_trust_missing(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / ".codex").mkdir()
    install(home, "codex")
    capsys.readouterr()
    code, text, report = doctor(home, capsys)
    problem = failed(report)["agent codex: integration"]
    assert code == 1
    assert "untrusted" in problem and "Codex will skip our hooks" in problem and "not trusted yet" in problem
    assert "/hooks" in problem, "the fix says how to trust them"


@pytest.mark.parametrize("policy", [{"allowedHttpHookUrls": ["https://hooks.corp.example/*"]},
                                    {"allowedHttpHookUrls": []}])
def test_an_http_hook_url_policy_does_not_touch_our_command_hooks(home: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  policy: dict) -> None:
    """The plugin's hooks spool (no http hooks since issue 22): a policy on http hook URLs leaves them be."""
    install(home, "claude-code")
    managed = tmp_path / "root" / "etc" / "claude-code" / "managed-settings.json"
    managed.parent.mkdir(parents=True)
    managed.write_text(json.dumps(policy))
    capsys.readouterr()
    _, _, report = doctor(home, capsys)
    assert "agent claude-code: loaded" not in failed(report)


@pytest.mark.parametrize("policy, expected", [
    ({"allowManagedHooksOnly": True}, "allowManagedHooksOnly"),
    ({"enabledPlugins": {"agent-collector@skills-dir": False}}, "turns the plugin off"),
    ({"disableAllHooks": True}, "disableAllHooks"),
])
def test_http_hooks_blocked_by_managed_policy(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              policy: dict, expected: str) -> None:
    install(home, "claude-code")
    managed = tmp_path / "root" / "etc" / "claude-code" / "managed-settings.json"
    managed.parent.mkdir(parents=True)
    managed.write_text(json.dumps(policy))
    capsys.readouterr()
    code, text, report = doctor(home, capsys)
    problem = failed(report)["agent claude-code: loaded"]
    port = (home / ".local" / "share" / "agent-collector" / "state" / "ingest.port").read_text().strip()
    expected = expected.format(port=port)  # the port install chose for this user
    assert code == 1 and expected in problem and str(managed) in problem
    assert "FAIL  agent claude-code: loaded:" in text


def test_policy_that_allows_our_url_passes(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    install(home, "claude-code")
    managed = tmp_path / "root" / "etc" / "claude-code" / "managed-settings.json"
    managed.parent.mkdir(parents=True)
    managed.write_text(json.dumps({"allowedHttpHookUrls": ["http://127.0.0.1:*"], "allowManagedHooksOnly": True,
                                   "enabledPlugins": {"agent-collector@skills-dir": True}}))
    capsys.readouterr()
    _, _, report = doctor(home, capsys)
    assert "agent claude-code: loaded" not in failed(report)


def test_data_gap_transcripts_grow_but_no_hooks(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    install(home, "claude-code")
    transcript = home / ".claude" / "projects" / "-src-app" / "3717dcf6.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text('{"type":"user"}\n')
    capsys.readouterr()
    code, text, report = doctor(home, capsys)
    problem = failed(report)["agent claude-code: hooks"]
    assert code == 1 and "data gap" in problem and "no hook event ever arrived" in problem
    spool = home / ".local" / "share" / "agent-collector" / "spool" / "claude-code"
    spool.mkdir(parents=True)
    old = spool / "claude-code-2026-11-30.http.jsonl"
    old.write_text("{}\n")
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    _, _, report = doctor(home, capsys)
    assert "the last hook event arrived 60 min ago" in failed(report)["agent claude-code: hooks"]
    old.touch()
    _, _, report = doctor(home, capsys)
    assert "agent claude-code: hooks" not in failed(report)


def test_history_from_before_the_install_is_no_data_gap(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Day one: sessions 33 h old, hooks installed now. No FAIL until activity after the install lacks hooks."""
    transcript = home / ".claude" / "projects" / "-src-app" / "3717dcf6.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text('{"type":"user"}\n')
    day_ago = time.time() - 33 * 3600
    os.utime(transcript, (day_ago, day_ago))
    install(home, "claude-code")
    capsys.readouterr()
    code, text, report = doctor(home, capsys)
    assert "agent claude-code: hooks" not in failed(report), text
    assert "agent claude-code: integration" not in failed(report), text
    transcript.touch()  # the agent is used after the install, and no hook arrives: now it is a gap
    code, text, report = doctor(home, capsys)
    problem = failed(report)["agent claude-code: hooks"]
    assert code == 1 and "after our hooks were put in place" in problem and "start a new claude-code session" in problem


def test_config_error(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = home / ".config" / "agent-collector" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[collector]\nbatch_size = 'many'\n")
    code, text, report = doctor(home, capsys)
    assert code == 1 and "config.toml" in failed(report)["config"]
    assert "agent-collector config check" in failed(report)["config"]


def test_ingest_unreachable_and_disk_full() -> None:
    from collector.doctor.system import check_disk, check_ingest
    from collector.paths import Paths

    paths = Paths(Path("/nonexistent/h"), Path("/nonexistent/c"), Path("/nonexistent/d"))

    def refused(port: int, token: str | None) -> int:
        raise ConnectionRefusedError(111, "Connection refused")

    from collector.doctor.system import ingest_port

    finding = check_ingest(paths, None, 1234, refused)
    port = ingest_port(paths, None)  # nothing recorded, none configured: the port chosen for this user
    assert finding is not None and finding.level == "error"
    assert f"nothing answers on 127.0.0.1:{port} (Connection refused)" in finding.message

    class Usage:
        free = 10 * 1024 * 1024

    full = check_disk(paths, lambda p: Usage())
    assert full.level == "error" and "0.0 GiB free" in full.message


def test_ingest_check_probes_the_recorded_port(tmp_path: Path) -> None:
    """With ingest.port = 0 (chosen per user) doctor probes the port the daemon recorded in
    <state dir>/ingest.port at start-up, not the server's old default 4319."""
    from collector.config import load_config
    from collector.doctor.system import check_ingest
    from collector.ingest.secret import record_port
    from collector.paths import Paths

    paths = Paths(tmp_path / "h", tmp_path / "c", tmp_path / "d")
    recorded = 4711
    record_port(paths, recorded)
    probed: list[int] = []

    def answers(port: int, token: str | None) -> int:
        probed.append(port)
        return 200

    config = load_config(paths.config_file, env={})
    assert config.ingest.port == 0
    for cfg in (config, None):  # None: the config file does not load
        finding = check_ingest(paths, cfg, 1234, answers)
        assert finding is not None and finding.level == "ok" and f"127.0.0.1:{recorded}" in finding.message
    assert probed == [recorded, recorded]


def test_healthy_with_a_real_daemon(home: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_COLLECTOR_INGEST__PORT", str(free_port()))
    install(home, "claude-code")
    environ = {**os.environ, "AGENT_COLLECTOR_WATCHDOG__ENABLED": "false"}
    with (home.parent / "daemon.log").open("wb") as log:  # a file: an unread pipe could fill and stall it
        daemon = subprocess.Popen([sys.executable, "-m", "collector", "run", "--home", str(home)], env=environ,
                                  stdout=subprocess.DEVNULL, stderr=log, cwd=Path(__file__).parents[2])
    try:
        status = home / ".local" / "share" / "agent-collector" / "state" / "status.json"
        deadline = time.time() + 30
        while not status.exists() and time.time() < deadline:
            time.sleep(0.1)
        capsys.readouterr()
        code, text, report = doctor(home, capsys)
        levels = {f["check"]: f["level"] for f in report["findings"]}
        assert levels["daemon"] == "ok" and levels["ingest"] == "ok", report
        assert code == 0, text
        assert "doctor: all good" in text or "doctor: working, with warnings" in text
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.communicate()


def test_clock_skew_and_exporter_backlog_warn() -> None:
    from collector.doctor.system import check_backlog, check_clock

    now = time.time()
    skewed = check_clock(int((now + 3600) * 1e9), now)
    assert skewed.level == "warn" and "60 min in the future" in skewed.message and "timedatectl" in skewed.fix
    assert check_clock(int(now * 1e9), now).level == "ok"
    backed = check_backlog({"exporters": {"otlp:logs": {"queued": 25_000}, "jsonl": {"written": 5}}})
    assert backed.level == "warn" and "otlp:logs: 25000" in backed.message
    assert check_backlog({"exporters": {"otlp:logs": {"queued": 3}}}).level == "ok"
