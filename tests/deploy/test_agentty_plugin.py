"""The Agentty plugin, driven the way Agentty drives it: a real process on stdin/stdout, a real daemon
(the ingest server) to read from, and every message checked against the documented protocol."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.live import ThreadedIngest

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_SRC = ROOT / "integrations" / "agentty" / "agent-collector"  # named after the id, as Agentty wants

# The documented UI tree (API version 1): element types, their fields and allowed values.
ELEMENTS: dict[str, set[str]] = {
    "column": {"children", "gap"}, "row": {"children", "gap", "wrap"}, "section": {"title", "children"},
    "text": {"text", "style"}, "button": {"id", "label", "icon", "variant", "disabled"},
    "input": {"id", "placeholder", "value"}, "list": {"id", "items", "empty"},
    "choice": {"id", "options", "value"}, "toggle": {"id", "label", "value"}, "badge": {"text", "tone"},
    "spinner": {"text"}, "divider": set(),
}
REQUIRED = {"section": {"title", "children"}, "text": {"text"}, "button": {"id", "label"},
            "list": {"id", "items"}, "toggle": {"id", "label"}, "badge": {"text"}, "input": {"id"},
            "column": {"children"}, "row": {"children"}, "choice": {"id", "options"}}
GAPS = {"none", "small", "medium", "large"}
STYLES = {"body", "title", "muted", "small", "code", "error", "success"}
VARIANTS = {"primary", "secondary", "ghost", "danger"}
TONES = {"neutral", "info", "success", "warning", "error"}
ITEM_FIELDS = {"id", "title", "subtitle", "detail", "icon", "tone", "actions"}
PLUGIN_METHODS = {"ui/setPanel", "ui/showPanel", "ui/notify", "ui/setBadge", "context/get", "host/info"}


def check_tree(tree: dict[str, Any]) -> None:
    """Raise AssertionError unless ``tree`` is a valid UI tree within Agentty's limits."""
    ids: list[str] = []
    count = 0

    def walk(node: Any, depth: int) -> None:
        nonlocal count
        count += 1
        assert depth <= 12, "tree deeper than 12"
        assert isinstance(node, dict) and node.get("type") in ELEMENTS, f"unknown element {node!r:.80}"
        kind = node["type"]
        unknown = set(node) - {"type"} - ELEMENTS[kind]
        assert not unknown, f"{kind} has unknown fields {unknown}"
        assert REQUIRED.get(kind, set()) <= set(node), f"{kind} lacks {REQUIRED[kind] - set(node)}"
        for value in node.values():
            assert not isinstance(value, str) or len(value) <= 20_000
        if "id" in node:
            ids.append(node["id"])
        if "gap" in node:
            assert node["gap"] in GAPS
        if kind == "text" and "style" in node:
            assert node["style"] in STYLES
        if kind == "button" and "variant" in node:
            assert node["variant"] in VARIANTS
        if kind == "badge":
            assert node.get("tone", "neutral") in TONES
        if kind == "toggle" and "value" in node:
            assert isinstance(node["value"], bool)
        if kind == "list":
            for item in node["items"]:
                assert set(item) <= ITEM_FIELDS and "id" in item and "title" in item
                assert item.get("tone", "neutral") in TONES
                count += 1
        for child in node.get("children", []):
            walk(child, depth + 1)

    walk(tree, 1)
    assert count <= 2000
    assert len(ids) == len(set(ids)), "element ids must be unique"


class FakeDaemon(ThreadedIngest):
    """The real ingest server, answering whatever sessions the test sets."""

    def __init__(self) -> None:
        self.sessions: list[dict[str, Any]] = []
        self.snapshot_extra: dict[str, Any] = {}
        super().__init__(snapshot=lambda: {"sessions": list(self.sessions), **self.snapshot_extra})


def write_marker(plugin_dir: Path, daemon: FakeDaemon) -> None:
    """What `install --agent agentty` writes: the daemon's URL and where the user's ingest secret is."""
    token_file = plugin_dir.parent / "ingest.token"
    token_file.write_text(daemon.token + "\n")
    (plugin_dir / "agent-collector.json").write_text(json.dumps({"url": daemon.url, "token_file": str(token_file)}))


class FakeHost:
    """Plays Agentty: writes to the plugin's stdin, answers its requests, records what it writes."""

    def __init__(self, plugin_dir: Path, program_dir: Path | None = None) -> None:
        """``program_dir``: run the program from another copy (then only initialize names the plugin dir)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_COLLECTOR", "AGENTTY_"))}
        if program_dir is None:
            env.update(AGENTTY_PLUGIN_DIR=str(plugin_dir), AGENTTY_PLUGIN_ID="agent-collector")
        self.proc = subprocess.Popen([sys.executable, "agentty_panel.py"], cwd=program_dir or plugin_dir, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.messages: list[tuple[float, dict[str, Any]]] = []
        self.inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)  # every stdout line must be JSON
            self.messages.append((time.monotonic(), message))
            if "method" in message and "id" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            self.inbox.put(message)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def request(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def expect(self, predicate: Any, timeout: float = 5.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                message = self.inbox.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if predicate(message):
                return message
        raise AssertionError(f"no matching message; got {[m for _, m in self.messages][-5:]}")


def method(name: str) -> Any:
    return lambda m: m.get("method") == name


def panel_text(message: dict[str, Any]) -> str:
    return json.dumps(message["params"]["tree"])


def session(sid: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"agent": "claude-code", "session_id": sid, "status": status, "workspace": f"/work/{sid}",
            "input_tokens_today": 12_345, "output_tokens_today": 678, "tool_calls_today": 3,
            "errors_today": 1, **extra}


@pytest.fixture
def daemon() -> Iterator[FakeDaemon]:
    d = FakeDaemon()
    yield d
    d.stop()


@pytest.fixture
def host(tmp_path: Path, daemon: FakeDaemon) -> Iterator[FakeHost]:
    plugin_dir = tmp_path / "agent-collector"  # Agentty wants the folder named after the id
    shutil.copytree(PLUGIN_SRC, plugin_dir)
    write_marker(plugin_dir, daemon)
    h = FakeHost(plugin_dir)
    yield h
    if h.proc.poll() is None:
        h.proc.kill()
    h.proc.wait(5)


def test_manifest_is_what_agentty_documents() -> None:
    manifest = json.loads((PLUGIN_SRC / "agentty-plugin.json").read_text())
    assert manifest["id"] == "agent-collector"
    assert manifest["runtime"] == "python" and (PLUGIN_SRC / manifest["main"]).is_file()
    assert manifest["apiVersion"] == 1
    assert [int(p) for p in manifest["version"].split(".")] and len(manifest["version"].split(".")) == 3
    assert manifest["permissions"] == []  # reading the loopback daemon needs none
    assert manifest["contributes"]["panel"]["surface"] in ("pane", "sidebar", "status")


def test_plugin_speaks_the_protocol(host: FakeHost, daemon: FakeDaemon) -> None:
    daemon.sessions = [session("a1", "running"), session("b2", "closed")]
    init = host.request("initialize", {"apiVersion": 1, "agentty": {"version": "1.0.0"},
                                       "plugin": {"id": "agent-collector"}, "language": "en", "context": {}})
    assert host.expect(lambda m: m.get("id") == init and "result" in m)["result"] == {}
    host.notify("panel/open", {"context": {}})
    panel = host.expect(method("ui/setPanel"))
    assert "claude-code" in panel_text(panel) and "a1" in panel_text(panel)
    assert "b2" not in panel_text(panel)  # closed sessions are hidden by default

    # unknown requests get the documented error
    bogus = host.request("tools/call", {})
    reply = host.expect(lambda m: m.get("id") == bogus and "error" in m)
    assert reply["error"]["code"] == -32601

    # two sessions start waiting, one poll apart: two notifications, 700 ms or more apart, badge "2"
    daemon.sessions = [session("a1", "waiting_for_input"), session("b2", "closed")]
    host.notify("ui/event", {"element": "refresh", "event": "click", "context": {}})
    first = host.expect(method("ui/notify"))
    assert "waiting for input" in first["params"]["message"] and first["params"]["kind"] == "warning"
    daemon.sessions.append(session("c3", "waiting_for_input"))
    host.notify("ui/event", {"element": "refresh", "event": "click", "context": {}})
    host.expect(method("ui/notify"))
    badges = [m["params"]["text"] for _, m in host.messages if m.get("method") == "ui/setBadge"]
    assert badges[-1] == "2"

    host.notify("ui/event", {"element": "show-closed", "event": "change", "value": True, "context": {}})
    assert "b2" in panel_text(host.expect(method("ui/setPanel")))

    # the daemon goes away: the panel says so and the badge shows it
    daemon.stop()
    host.notify("ui/event", {"element": "refresh", "event": "click", "context": {}})
    down = host.expect(method("ui/setPanel"))
    assert "not reachable" in panel_text(down) and "agent-collector run" in panel_text(down)
    badges = [m["params"]["text"] for _, m in host.messages if m.get("method") == "ui/setBadge"]
    assert badges[-1] == "off"

    host.notify("shutdown", {})
    started = time.monotonic()
    host.proc.wait(10)
    assert time.monotonic() - started < 5  # promptly: a plugin that ignored shutdown would wait for the host
    assert host.proc.returncode == 0
    check_all(host.messages)


def check_all(messages: list[tuple[float, dict[str, Any]]]) -> None:
    notifies = [t for t, m in messages if m.get("method") == "ui/notify"]
    assert len(notifies) >= 2
    assert all(b - a >= 0.7 for a, b in zip(notifies, notifies[1:], strict=False)), notifies
    times = [t for t, _ in messages]
    assert max(sum(1 for u in times if t <= u < t + 1.0) for t in times) < 240
    for _, m in messages:
        assert m["jsonrpc"] == "2.0"
        if "method" not in m:
            continue
        assert m["method"] in PLUGIN_METHODS
        assert isinstance(m.get("id"), int)  # we send requests, so errors come back
        if m["method"] == "ui/setPanel":
            check_tree(m["params"]["tree"])
        if m["method"] == "ui/setBadge":
            assert isinstance(m["params"]["text"], str) and len(m["params"]["text"]) <= 8
        if m["method"] == "ui/notify":
            assert m["params"]["kind"] in ("info", "success", "warning", "error")
            assert len(m["params"]["message"]) <= 300
    request_ids = [m["id"] for _, m in messages if "method" in m]
    assert request_ids == sorted(set(request_ids)), "request ids count up, one per request"


def initialize(host: FakeHost, plugin_dir: Path, data_dir: Path) -> None:
    init = host.request("initialize", {"apiVersion": 1, "agentty": {"version": "1.0.0"}, "language": "en",
                                       "plugin": {"id": "agent-collector", "name": "Agent Collector",
                                                  "version": "0.1.0", "dir": str(plugin_dir),
                                                  "dataDir": str(data_dir)}, "context": {}})
    host.expect(lambda m: m.get("id") == init and "result" in m)


def test_the_palette_command_shows_the_panel(host: FakeHost, daemon: FakeDaemon, tmp_path: Path) -> None:
    daemon.sessions = [session("a1", "running")]
    initialize(host, tmp_path / "agent-collector", tmp_path / "data")
    command = json.loads((PLUGIN_SRC / "agentty-plugin.json").read_text())["contributes"]["commands"][0]
    assert command["palette"] is True
    host.notify("command/execute", {"command": "nope", "args": [], "context": {}})
    host.notify("command/execute", {"command": command["id"], "args": [], "context": {}})
    drawn = host.expect(method("ui/setPanel"))
    assert "a1" in panel_text(drawn)
    shown = host.expect(method("ui/showPanel"))
    assert shown["params"] == {} and isinstance(shown["id"], int)
    assert [m["method"] for _, m in host.messages if m.get("method") == "ui/showPanel"] == ["ui/showPanel"]
    host.notify("command/execute", {"command": command["id"], "args": [], "context": {}})  # again: shown again
    host.expect(method("ui/setPanel"))
    host.expect(method("ui/showPanel"))
    host.notify("shutdown", {})
    host.proc.wait(1.5)
    assert host.proc.stderr is not None and "unknown command 'nope'" in host.proc.stderr.read()


def test_initialize_names_the_plugin_folder(tmp_path: Path, daemon: FakeDaemon) -> None:
    """The program runs from a copy without the marker file: the folder initialize names has it."""
    plugin_dir = tmp_path / "agent-collector"
    shutil.copytree(PLUGIN_SRC, plugin_dir)
    token_file = tmp_path / "ingest.token"
    token_file.write_text(daemon.token + "\n")
    (plugin_dir / "agent-collector.json").write_text(json.dumps({"url": daemon.url, "token_file": str(token_file)}))
    bare = tmp_path / "bare" / "agent-collector"
    shutil.copytree(PLUGIN_SRC, bare)
    daemon.sessions = [session("a1", "running")]
    h = FakeHost(plugin_dir, program_dir=bare)
    try:
        initialize(h, plugin_dir, tmp_path / "data")
        h.notify("panel/open", {"context": {}})
        assert "a1" in panel_text(h.expect(method("ui/setPanel")))  # it reached the daemon, secret and all
        h.notify("shutdown", {})
        h.proc.wait(1.5)
    finally:
        if h.proc.poll() is None:
            h.proc.kill()
            h.proc.wait()


def test_the_plugin_keeps_its_state_in_the_data_dir(tmp_path: Path, daemon: FakeDaemon) -> None:
    plugin_dir = tmp_path / "agent-collector"
    shutil.copytree(PLUGIN_SRC, plugin_dir)
    write_marker(plugin_dir, daemon)
    data_dir = tmp_path / "agentty-data" / "agent-collector"
    daemon.sessions = [session("a1", "waiting_for_input"), session("b2", "closed")]
    for run in (1, 2):
        h = FakeHost(plugin_dir)
        try:
            initialize(h, plugin_dir, data_dir)
            h.notify("panel/open", {"context": {}})
            text = panel_text(h.expect(method("ui/setPanel")))
            if run == 1:
                assert "b2" not in text
                h.notify("ui/event", {"element": "show-closed", "event": "change", "value": True, "context": {}})
                assert "b2" in panel_text(h.expect(method("ui/setPanel")))
            else:
                assert "b2" in text, "the choice survived the restart"
                # the statuses seen before the restart are known: only the new wait is announced
                notes = [m["params"]["message"] for _, m in h.messages if m.get("method") == "ui/notify"]
                assert notes == ["claude-code is waiting for input in c3"]
            h.notify("shutdown", {})
            h.proc.wait(1.5)
        finally:
            if h.proc.poll() is None:
                h.proc.kill()
                h.proc.wait()
        notified = [m["params"]["message"] for _, m in h.messages if m.get("method") == "ui/notify"]
        assert not [n for n in notified if "in a1" in n], "a1 was waiting already"
        daemon.sessions.append(session("c3", "waiting_for_input"))
    state = json.loads((data_dir / "panel-state.json").read_text())
    assert state["show_closed"] is True and state["statuses"]["claude-code:a1"] == "waiting_for_input"
    assert sorted(p.name for p in plugin_dir.iterdir()) == sorted(
        [*(p.name for p in PLUGIN_SRC.iterdir() if p.name != "__pycache__"), "agent-collector.json"]
    ), "nothing written into the plugin folder"


def test_plugin_waits_for_initialize_and_exits_when_stdin_closes(host: FakeHost) -> None:
    host.request("initialize", {"apiVersion": 1, "context": {}})
    host.expect(lambda m: m.get("id") == 1)
    # nothing before initialize: whatever the plugin wrote before it read the request precedes the answer
    assert host.messages[0][1].get("id") == 1, host.messages[:3]
    host.expect(method("ui/setBadge"))  # the badge works without an open panel
    assert host.proc.stdin is not None
    host.proc.stdin.close()
    host.proc.wait(1.5)
    assert host.proc.returncode == 0


def test_plugin_started_with_the_daemon_down(tmp_path: Path) -> None:
    plugin_dir = tmp_path / "agent-collector"
    shutil.copytree(PLUGIN_SRC, plugin_dir)
    (plugin_dir / "agent-collector.json").write_text(json.dumps({"url": "http://127.0.0.1:9"}))
    h = FakeHost(plugin_dir)
    try:
        h.request("initialize", {"apiVersion": 1, "context": {}})
        h.notify("panel/open", {"context": {}})
        assert "not reachable" in panel_text(h.expect(method("ui/setPanel")))
        h.send({"jsonrpc": "2.0", "method": "shutdown", "params": {}})
        h.proc.wait(1.5)
    finally:
        if h.proc.poll() is None:
            h.proc.kill()
            h.proc.wait()
    assert h.proc.returncode == 0
    assert h.proc.stderr is not None and "Traceback" not in h.proc.stderr.read()


def test_tree_checker_rejects_bad_trees() -> None:
    with pytest.raises(AssertionError):
        check_tree({"type": "marquee"})
    with pytest.raises(AssertionError):
        check_tree({"type": "column", "children": [{"type": "text", "text": "x", "style": "blink"}]})
    with pytest.raises(AssertionError):
        check_tree({"type": "row", "children": [{"type": "button", "id": "a", "label": "A"},
                                                {"type": "button", "id": "a", "label": "B"}]})


# -- `agent-collector install --agent agentty` ---------------------------------------------------------

def test_install_copies_the_plugin_only_when_agentty_is_present(tmp_path: Path) -> None:
    from collector.deploy.agentty import install_agentty, plugin_dir, uninstall_agentty
    from collector.deploy.model import Action
    from collector.paths import Paths

    paths = Paths(home=tmp_path / "home", config_dir=tmp_path / "c", data_dir=tmp_path / "d")
    paths.home.mkdir()
    assert install_agentty(paths, 4319).action is Action.UNCHANGED  # no ~/.agentty: nothing written
    assert not plugin_dir(paths).exists()

    (paths.home / ".agentty").mkdir()
    assert install_agentty(paths, 4400).action is Action.CREATE
    target = plugin_dir(paths)
    assert target.name == json.loads((target / "agentty-plugin.json").read_text())["id"]
    assert json.loads((target / "agent-collector.json").read_text())["url"] == "http://127.0.0.1:4400"
    assert install_agentty(paths, 4400).action is Action.UNCHANGED
    assert uninstall_agentty(paths).action is Action.DELETE
    assert not target.exists()

    target.mkdir(parents=True)
    (target / "agentty-plugin.json").write_text('{"id": "agent-collector", "publisher": "someone else"}')
    assert install_agentty(paths, 4400).action is Action.CONFLICT
    assert uninstall_agentty(paths).action is Action.CONFLICT
    assert "someone else" in (target / "agentty-plugin.json").read_text()


def test_a_budget_over_marks_the_badge_and_notifies_once(host: FakeHost, daemon: FakeDaemon) -> None:
    """The daemon's /v1/sessions carries its budgets' state ([budget] in config): at warn the badge shows
    ``$``, over ``$!`` (after the count of waiting sessions) and one notification names the budget."""
    budget: dict[str, Any] = {"limits": 1, "crossed": []}
    daemon.snapshot_extra = {"budget": budget}
    daemon.sessions = [session("a1", "waiting_for_input")]
    host.request("initialize", {"apiVersion": 1, "agentty": {"version": "1.0.0"},
                                "plugin": {"id": "agent-collector"}, "language": "en", "context": {}})
    host.expect(lambda m: m.get("method") == "ui/setBadge" and m["params"]["text"] == "1")
    budget["crossed"] = [{"name": "daily", "level": "warn"}]
    host.notify("ui/event", {"element": "refresh", "event": "click", "context": {}})
    host.expect(lambda m: m.get("method") == "ui/setBadge" and m["params"]["text"] == "1 $")
    budget["crossed"] = [{"name": "daily", "level": "over"}]
    host.notify("ui/event", {"element": "refresh", "event": "click", "context": {}})
    note = host.expect(method("ui/notify"))
    assert note["params"]["message"] == "budget daily is over" and note["params"]["kind"] == "warning"
    host.expect(lambda m: m.get("method") == "ui/setBadge" and m["params"]["text"] == "1 $!")
    host.notify("ui/event", {"element": "refresh", "event": "click", "context": {}})
    host.notify("ui/event", {"element": "refresh", "event": "click", "context": {}})
    marker = host.request("tools/call", {})  # answered after the two refreshes were handled
    host.expect(lambda m: m.get("id") == marker and "error" in m)
    notes = [m for _, m in host.messages if m.get("method") == "ui/notify" and "budget" in m["params"]["message"]]
    assert len(notes) == 1
