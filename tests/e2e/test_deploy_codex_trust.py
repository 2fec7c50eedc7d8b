"""Our Codex trust check against the real Codex CLI 0.171 (its app-server, `hooks/list`): the keys and
hashes we compute for our hooks are Codex's own; untrusted until the user trusts them; once Codex itself
records the trust (`config/batchWrite`, what its /hooks screen does), `agent-collector` reports the hooks
as in place and trusted; uninstall leaves Codex's trust records alone."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.definitions import load_definitions
from collector.deploy import State, install_agent, integration_state, uninstall_agent
from collector.deploy.codex_trust import event_label, handler_hash
from collector.paths import resolve_paths

pytestmark = pytest.mark.e2e


class AppServer:
    def __init__(self, codex: Path, home: Path) -> None:
        env = {"HOME": str(home), "CODEX_HOME": str(home / ".codex"), "PATH": os.environ["PATH"],
               "RUST_LOG": "warn"}
        self.proc = subprocess.Popen([str(codex), "app-server"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=home,
                                     text=True)
        self.next_id = 0
        self.call("initialize", {"clientInfo": {"name": "agent-collector-test", "version": "0"}})
        self.send({"method": "initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 1)
            if not ready:
                continue
            line = self.proc.stdout.readline()
            assert line, "codex app-server exited"
            message = json.loads(line)
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message["result"]
        raise AssertionError(f"no answer to {method}")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def codex_home(
    e2e_agents_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, AppServer]]:
    for name in ("CODEX_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "AGENT_COLLECTOR_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    config = 'model = "gpt-5.5"\n\n[features]\nhooks = true\nplugins = false\n'
    (home / ".codex" / "config.toml").write_text(config)
    server = AppServer(e2e_agents_bin / "codex", home)
    try:
        yield home, server
    finally:
        server.close()


def test_trust_as_codex_sees_it(codex_home: tuple[Path, AppServer]) -> None:
    home, server = codex_home
    paths = resolve_paths(home, env={})
    defn = load_definitions().agents["codex"]
    install_agent(defn, paths)
    hooks_file = home / ".codex" / "hooks.json"

    listed = server.call("hooks/list", {"cwds": [str(home)]})["data"][0]["hooks"]
    ours = [h for h in listed if "agent-collector-hook.sh" in h["command"]]
    assert len(ours) == len(defn.integrations[0]["events"]) == 12
    doc = json.loads(hooks_file.read_text())
    mine = {
        f"{hooks_file}:{event_label(event)}:{gi}:{hi}": handler_hash(event, group.get("matcher"), hook)
        for event, groups in doc["hooks"].items()
        for gi, group in enumerate(groups) for hi, hook in enumerate(group["hooks"])
    }
    assert {h["key"]: h["currentHash"] for h in ours} == mine  # Codex's own keys and hashes
    assert {h["trustStatus"] for h in ours} == {"untrusted"}
    assert integration_state(defn, paths)[0].state is State.UNTRUSTED

    # the user trusts them in Codex: Codex writes [hooks.state."<key>"] trusted_hash itself
    state = {h["key"]: {"trusted_hash": h["currentHash"]} for h in ours}
    server.call("config/batchWrite", {"edits": [{"keyPath": "hooks.state", "value": state,
                                                 "mergeStrategy": "upsert"}]})
    relisted = server.call("hooks/list", {"cwds": [str(home)]})["data"][0]["hooks"]
    assert {h["trustStatus"] for h in relisted if "agent-collector" in h["command"]} == {"trusted"}
    [hooks_status, notify_status] = integration_state(defn, paths)
    assert hooks_status.state is State.IN_PLACE and "trusts all 12" in hooks_status.hint
    assert notify_status.state is State.IN_PLACE

    uninstall_agent(defn, paths)
    assert not hooks_file.exists()  # we created it
    config = (home / ".codex" / "config.toml").read_text()
    assert config.count("trusted_hash") == 12  # Codex's own records stay
    assert "notify" not in config and "agent-collector" not in config  # our notify line is gone
