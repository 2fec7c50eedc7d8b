#!/usr/bin/env python3
"""Agentty panel for agent-collector: live sessions of your AI coding agents.

Agentty starts this program (``python3 agentty_panel.py``) in the plugin folder and speaks JSON-RPC 2.0
with it, one message per line (stdin: host -> plugin, stdout: plugin -> host; logs go to stderr). The
panel polls the local agent-collector daemon (``GET /v1/sessions`` on 127.0.0.1) and shows each session's
agent, status, tokens, tool calls and errors today; the badge counts sessions waiting for input; a
notification says when a session starts waiting. When the daemon is down the panel says so and keeps
polling.

Standard library only: Agentty installs nothing. Limits kept: ``ui/notify`` at most one per 750 ms
(Agentty drops faster ones), at most 20 messages a second in all (Agentty stops a plugin past 240), a
badge of at most 8 characters, a UI tree far below 2,000 nodes. Exits at once on ``shutdown`` or when
stdin closes.

The palette command ("Agent Collector: show sessions", command id ``open``) opens the panel: it draws
it, then sends ``ui/showPanel``. ``initialize`` names the plugin's folder (``plugin.dir``: where
``agent-collector.json`` with the daemon's URL lives) and its data folder (``plugin.dataDir``), which
keeps the plugin's own state, ``panel-state.json``: whether closed sessions are shown and the status each
session had, so a restart of Agentty does not announce the same waiting session again.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:4319"
LOOPBACK_HEX = {"0100007F", "00000000", "00000000000000000000000000000000",
                "0000000000000000FFFF00000100007F", "0000000000000000FFFF000000000000"}
CONFIG_FILE = "agent-collector.json"  # written by `agent-collector install --agent agentty`
STATE_FILE = "panel-state.json"  # in initialize's plugin.dataDir
OPEN_COMMANDS = {"open", "agent-collector.open"}  # the palette command, bare or qualified by the plugin id
POLL_OPEN_S = 1.0  # poll interval while the panel is open
POLL_CLOSED_S = 3.0  # ... and while it is closed (badge and notifications only)
FETCH_TIMEOUT_S = 0.5
NOTIFY_INTERVAL_S = 0.75
MAX_MESSAGES_PER_S = 20
MAX_ROWS = 40
MAX_TEXT = 200

TONES = {"waiting_for_input": "warning", "error": "error", "running": "info", "ready_for_review": "success",
         "idle": "neutral", "closed": "neutral"}
LABELS = {"waiting_for_input": "waiting for input", "ready_for_review": "ready for review"}


def log(message: str) -> None:
    sys.stderr.write(f"agent-collector panel: {message}\n")
    sys.stderr.flush()


# -- talking to Agentty --------------------------------------------------------------------------------

class Host:
    """Writes JSON-RPC messages to stdout, within Agentty's rate limits."""

    def __init__(self, out: Any = None, clock: Any = time.monotonic) -> None:
        self._out = out or sys.stdout
        self._clock = clock
        self._lock = threading.Lock()
        self._next_id = 0
        self._sent: deque[float] = deque()
        self._last_notify = -1e9
        self._pending_notify: str | None = None
        self._pending_kind = "info"

    def _write(self, message: dict[str, Any]) -> None:
        with self._lock:
            now = self._clock()
            while self._sent and now - self._sent[0] > 1.0:
                self._sent.popleft()
            if len(self._sent) >= MAX_MESSAGES_PER_S:
                time.sleep(max(0.0, 1.0 - (now - self._sent[0])))
            self._sent.append(self._clock())
            self._out.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n")
            self._out.flush()

    def respond(self, request_id: Any, result: Any = None, error: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            message["error"] = error
        else:
            message["result"] = result
        self._write(message)

    def request(self, method: str, params: dict[str, Any]) -> None:
        self._next_id += 1
        self._write({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})

    def notify(self, message: str, kind: str = "info") -> None:
        """Show a notification now, or as soon as the 750 ms spacing allows (later ones merge in)."""
        if self._pending_notify is not None:
            message = f"{self._pending_notify} · {message}"
        self._pending_notify = message[:300]
        self._pending_kind = kind
        self.flush_notify()

    def flush_notify(self) -> None:
        if self._pending_notify is None or self._clock() - self._last_notify < NOTIFY_INTERVAL_S:
            return
        self._last_notify = self._clock()
        message, self._pending_notify = self._pending_notify, None
        self.request("ui/notify", {"message": message, "kind": self._pending_kind})

    def notify_due_in(self) -> float | None:
        if self._pending_notify is None:
            return None
        return max(0.0, NOTIFY_INTERVAL_S - (self._clock() - self._last_notify))


# -- the daemon --------------------------------------------------------------------------------------

def daemon_url(plugin_dir: Path, env: dict[str, str]) -> str:
    """$AGENT_COLLECTOR_URL, else the port the daemon recorded (the marker's ``port_file``: it moves off a
    port another program holds), else the marker's ``url``."""
    if env.get("AGENT_COLLECTOR_URL"):
        return env["AGENT_COLLECTOR_URL"].rstrip("/")
    try:
        config = json.loads((plugin_dir / CONFIG_FILE).read_text(encoding="utf-8"))
        port_file = config.get("port_file")
        with contextlib.suppress(OSError, ValueError, TypeError):
            port = int(Path(str(port_file)).read_text(encoding="ascii").strip()) if port_file else 0
            if 0 < port < 65536:
                return f"http://127.0.0.1:{port}"
        return str(config.get("url") or DEFAULT_URL).rstrip("/")
    except (OSError, ValueError, AttributeError):
        return DEFAULT_URL


def listener_uid(port: int) -> int | None:
    """The uid of the socket listening on 127.0.0.1:``port`` (Linux ``/proc/net/tcp*``), None if unknown."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text(errors="replace").splitlines()[1:]:
                fields = line.split()
                if len(fields) > 7 and fields[3] == "0A" and fields[1].endswith(f":{port:04X}") \
                        and fields[1].split(":")[0] in LOOPBACK_HEX and fields[7].isdigit():
                    return int(fields[7])
    return None


def foreign_listener(url: str) -> str | None:
    """Why the token must not be sent to ``url``: another user listens on that loopback port."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.hostname not in ("127.0.0.1", "localhost") or not parsed.port:
        return None
    uid = listener_uid(parsed.port)
    if uid is None or uid == os.getuid():
        return None
    return f"port {parsed.port} is held by another user (uid {uid}); nothing sent"


def daemon_token(plugin_dir: Path, env: dict[str, str]) -> str:
    """The ingest secret (every request needs it): $AGENT_COLLECTOR_TOKEN_FILE, else the file the marker names."""
    try:
        name = env.get("AGENT_COLLECTOR_TOKEN_FILE") or json.loads(
            (plugin_dir / CONFIG_FILE).read_text(encoding="utf-8")).get("token_file")
        return Path(str(name)).read_text(encoding="ascii").strip() if name else ""
    except (OSError, ValueError, AttributeError):
        return ""


class Daemon:
    def __init__(self, url: str, token: str = "") -> None:
        self.url = url
        self.token = token
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
        self.budgets: dict[str, str] = {}  # the budgets at warn or over in the last answer

    def sessions(self) -> tuple[list[dict[str, Any]] | None, str | None]:
        """The sessions, or None and why not."""
        refused = foreign_listener(self.url)
        if refused:
            return None, refused
        try:
            request = urllib.request.Request(f"{self.url}/v1/sessions",
                                             headers={"X-Agent-Collector-Token": self.token})
            with self._opener.open(request, timeout=FETCH_TIMEOUT_S) as response:
                data = json.loads(response.read(8 * 1024 * 1024))
        except urllib.error.HTTPError as exc:
            return None, f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            return None, str(reason)[:MAX_TEXT]
        sessions = data.get("sessions") if isinstance(data, dict) else None
        if not isinstance(sessions, list):
            return None, "unexpected answer from the daemon"
        self.budgets = crossed_budgets(data.get("budget"))
        return [s for s in sessions if isinstance(s, dict)], None


# -- the panel ---------------------------------------------------------------------------------------

def _short(text: Any, limit: int = MAX_TEXT) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _count(n: Any) -> str:
    n = int(n or 0)
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)


def _row(session: dict[str, Any]) -> dict[str, Any]:
    status = str(session.get("status") or "unknown")
    workspace = os.path.basename(str(session.get("workspace") or "").rstrip("/")) or "?"
    sid = str(session.get("session_id") or "")
    tokens_in = _count(session.get("input_tokens_today"))
    tokens = f"in {tokens_in} · out {_count(session.get('output_tokens_today'))}"
    detail = (f"{tokens} tok · {int(session.get('tool_calls_today') or 0)} tools"
              f" · {int(session.get('errors_today') or 0)} errors")
    return {
        "id": _short(f"{session.get('agent')}:{sid}", 120),
        "title": _short(f"{session.get('agent')} — {LABELS.get(status, status)}"),
        "subtitle": _short(f"{workspace} · {sid[:8]}"),
        "detail": detail,
        "tone": TONES.get(status, "neutral"),
    }


def build_tree(sessions: list[dict[str, Any]] | None, error: str | None, url: str, show_closed: bool,
               updated: str) -> dict[str, Any]:
    header: dict[str, Any] = {"type": "row", "gap": "small", "children": [
        {"type": "badge", "text": "daemon up" if sessions is not None else "daemon down",
         "tone": "success" if sessions is not None else "error"},
        {"type": "text", "text": f"updated {updated}", "style": "muted"},
    ]}
    children: list[dict[str, Any]] = [header]
    if sessions is None:
        text = (f"The agent-collector daemon is not reachable at {url} ({error}). "
                "Start it with `agent-collector service start` (or `agent-collector run`); this panel keeps trying.")
        children.append({"type": "text", "style": "error", "text": _short(text, 600)})
    else:
        visible = [s for s in sessions if show_closed or s.get("status") != "closed"]
        waiting = sum(1 for s in sessions if s.get("status") == "waiting_for_input")
        tokens_in = sum(int(s.get("input_tokens_today") or 0) for s in sessions)
        tokens_out = sum(int(s.get("output_tokens_today") or 0) for s in sessions)
        tools = sum(int(s.get("tool_calls_today") or 0) for s in sessions)
        errors = sum(int(s.get("errors_today") or 0) for s in sessions)
        summary = (f"Today: {len(sessions)} sessions, {waiting} waiting · tokens in {_count(tokens_in)}"
                   f" / out {_count(tokens_out)} · {tools} tool calls · {errors} errors")
        children.append({"type": "text", "style": "small", "text": summary})
        children.append({"type": "section", "title": f"Sessions ({len(visible)})", "children": [
            {"type": "list", "id": "sessions", "items": [_row(s) for s in visible[:MAX_ROWS]],
             "empty": "No agent sessions yet."},
        ]})
    children.append({"type": "divider"})
    children.append({"type": "row", "gap": "small", "children": [
        {"type": "button", "id": "refresh", "label": "Refresh", "variant": "secondary"},
        {"type": "toggle", "id": "show-closed", "label": "Show closed sessions", "value": show_closed},
    ]})
    return {"type": "column", "gap": "small", "children": children}


def crossed_budgets(budget: Any) -> dict[str, str]:
    """The daemon's budgets at ``warn`` or ``over`` ([budget] in its config): name -> level."""
    crossed = budget.get("crossed") if isinstance(budget, dict) else None
    out: dict[str, str] = {}
    for item in crossed if isinstance(crossed, list) else []:
        if isinstance(item, dict) and item.get("level") in ("warn", "over"):
            out[_short(item.get("name"), 40)] = str(item["level"])
    return out


def badge_text(sessions: list[dict[str, Any]] | None, budgets: dict[str, str] | None = None) -> str:
    """Sessions waiting for input, then ``$!`` while a budget is over (``$`` at its warning), at most 8."""
    if sessions is None:
        return "off"
    waiting = sum(1 for s in sessions if s.get("status") == "waiting_for_input")
    levels = set((budgets or {}).values())
    mark = "$!" if "over" in levels else "$" if "warn" in levels else ""
    count = "" if waiting == 0 else str(min(waiting, 99_999))
    return " ".join(part for part in (count, mark) if part)


def newly_waiting(before: dict[str, str], sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in sessions if s.get("status") == "waiting_for_input"
            and before.get(_key(s)) != "waiting_for_input"]


def _key(session: dict[str, Any]) -> str:
    return f"{session.get('agent')}:{session.get('session_id')}"


class State:
    """The plugin's own state in Agentty's data folder for it; nothing is kept without one."""

    def __init__(self) -> None:
        self.path: Path | None = None

    def load(self, data_dir: Any) -> dict[str, Any]:
        if not isinstance(data_dir, str) or not data_dir:
            return {}
        self.path = Path(data_dir) / STATE_FILE
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def save(self, data: dict[str, Any]) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{STATE_FILE}.tmp")
            tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:
            log(f"cannot keep the panel state in {self.path}: {exc}")


class Plugin:
    def __init__(self, host: Host, daemon: Daemon) -> None:
        self.host = host
        self.daemon = daemon
        self.state = State()
        self.panel_open = False
        self.show_closed = False
        self.sessions: list[dict[str, Any]] | None = None
        self.error: str | None = "not asked yet"
        self.statuses: dict[str, str] = {}
        self.first_poll = True
        self.last_tree: str | None = None
        self.last_badge: str | None = None
        self.next_poll = float("inf")  # nothing is sent before Agentty's initialize

    def handle(self, message: dict[str, Any]) -> bool:
        """Handle one message from Agentty; False means stop."""
        method = message.get("method")
        raw_params = message.get("params")
        params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
        if method is None:  # a response to one of our requests
            if "error" in message:
                log(f"host answered an error: {message['error']}")
            return True
        if method == "shutdown":
            return False
        if method == "initialize":
            self.initialize(params)
            self.host.respond(message.get("id"), {})
            self.next_poll = 0.0
        elif "id" in message:
            self.host.respond(message["id"], error={"code": -32601, "message": f"unknown method {method}"})
        elif method == "panel/open":
            self.panel_open = True
            self.poll()
        elif method == "command/execute":
            self.on_command(params)
        elif method == "panel/close":
            self.panel_open = False
        elif method == "ui/event":
            self.on_event(params)
        return True

    def initialize(self, params: dict[str, Any]) -> None:
        plugin = params.get("plugin") if isinstance(params.get("plugin"), dict) else {}
        directory = plugin.get("dir")
        if isinstance(directory, str) and directory:  # where Agentty says the plugin is: its marker file
            env = dict(os.environ)
            self.daemon.url = daemon_url(Path(directory), env)
            self.daemon.token = daemon_token(Path(directory), env) or self.daemon.token
        saved = self.state.load(plugin.get("dataDir"))
        self.show_closed = bool(saved.get("show_closed", False))
        statuses = saved.get("statuses")
        if isinstance(statuses, dict):
            self.statuses = {str(k): str(v) for k, v in statuses.items()}
            self.first_poll = False  # we know what was announced before

    def on_command(self, params: dict[str, Any]) -> None:
        command = params.get("command")
        if command not in OPEN_COMMANDS:
            log(f"unknown command {command!r} ignored")
            return
        self.panel_open = True
        self.last_tree = None  # draw it even if nothing changed since it was last shown
        self.poll()
        self.host.request("ui/showPanel", {})  # then bring it up, with its content already there

    def on_event(self, params: dict[str, Any]) -> None:
        if params.get("element") == "refresh":
            self.poll()
        elif params.get("element") == "show-closed":
            self.show_closed = bool(params.get("value"))
            self.save()
            self.render()

    def save(self) -> None:
        self.state.save({"show_closed": self.show_closed, "statuses": self.statuses})

    def poll(self) -> None:
        before = dict(self.daemon.budgets)
        sessions, error = self.daemon.sessions()
        for name, level in self.daemon.budgets.items():
            if level == "over" and before.get(name) != "over":
                self.host.notify(_short(f"budget {name} is over"), "warning")
        if sessions is not None and not self.first_poll:
            for session in newly_waiting(self.statuses, sessions):
                where = os.path.basename(str(session.get("workspace") or "").rstrip("/"))
                self.host.notify(_short(f"{session.get('agent')} is waiting for input"
                                        f"{' in ' + where if where else ''}"), "warning")
        if sessions is not None:
            statuses = {_key(s): str(s.get("status")) for s in sessions}
            changed = statuses != self.statuses
            self.statuses = statuses
            self.first_poll = False
            if changed:
                self.save()
        elif self.sessions is not None:
            log(f"daemon not reachable: {error}")
        self.sessions, self.error = sessions, error
        self.next_poll = time.monotonic() + (POLL_OPEN_S if self.panel_open else POLL_CLOSED_S)
        self.render()

    def render(self) -> None:
        badge = badge_text(self.sessions, self.daemon.budgets)
        if badge != self.last_badge:
            self.last_badge = badge
            self.host.request("ui/setBadge", {"text": badge})
        if not self.panel_open:
            return
        tree = build_tree(self.sessions, self.error, self.daemon.url, self.show_closed,
                          time.strftime("%H:%M:%S"))
        encoded = json.dumps(tree, sort_keys=True)
        stamp = tree["children"][0]["children"][1]["text"]
        unchanged = self.last_tree is not None and encoded.replace(stamp, "") == self.last_tree
        if unchanged:
            return  # only the clock moved: no redraw
        self.last_tree = encoded.replace(stamp, "")
        self.host.request("ui/setPanel", {"tree": tree})


def read_stdin(inbox: queue.Queue[dict[str, Any] | None]) -> None:
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except ValueError:
            log("ignored a line that is not JSON")
            continue
        if isinstance(message, dict):
            inbox.put(message)
    inbox.put(None)  # stdin closed


def main() -> int:
    plugin_dir = Path(os.environ.get("AGENTTY_PLUGIN_DIR") or Path(__file__).resolve().parent)
    env = dict(os.environ)
    plugin = Plugin(Host(), Daemon(daemon_url(plugin_dir, env), daemon_token(plugin_dir, env)))
    inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
    threading.Thread(target=read_stdin, args=(inbox,), daemon=True).start()
    while True:
        waits = [max(0.0, plugin.next_poll - time.monotonic())]
        due = plugin.host.notify_due_in()
        if due is not None:
            waits.append(due)
        timeout = min(waits)
        try:
            message = inbox.get(timeout=None if timeout == float("inf") else timeout)
        except queue.Empty:
            message = {}
        if message is None:
            return 0
        if message and not plugin.handle(message):
            return 0
        plugin.host.flush_notify()
        if time.monotonic() >= plugin.next_poll:
            plugin.poll()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(0)
