"""Drive the real agent CLIs offline against the fake model server (see ``fake_llm.py``).

Per agent: ``write_agent_config`` writes the base configuration into a throwaway HOME (merging into files
that exist, so hooks added by ``agent-collector install`` survive), ``make_env`` builds an isolated
environment (HOME and XDG dirs under the throwaway home, no inherited API keys or proxies, every endpoint
on 127.0.0.1) and ``run_agent`` runs one non-interactive turn, optionally resuming the previous session.
``SCENARIOS`` holds the scripted scenarios; ``run_scenario`` runs all turns of one.

Agent ids: ``claude-code``, ``codex``, ``gemini-cli``, ``qwen-code``, ``opencode``, ``kilo-code``, ``copilot``, ``pi``,
``cline``.

Cline runs its sessions in a background "hub" process it starts on first use and leaves running; the
harness gives it a free port (``CLINE_HUB_PORT``, so tests never share a hub) and ends every hub started
under the throwaway HOME when the run ends (``end_lingering``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

try:
    from .npm_agents import agent_bin
except ImportError:  # imported as a top-level module (tests/e2e on sys.path)
    from npm_agents import agent_bin  # type: ignore[no-redef, unused-ignore]

AGENTS = ("claude-code", "codex", "gemini-cli", "qwen-code", "opencode", "kilo-code", "copilot", "pi", "cline")
FAKE_KEY = "sk-fake-key-for-e2e"
CLAUDE_MODEL = "claude-sonnet-4-5"
CODEX_MODEL = "gpt-5.5"  # a slug from codex's bundled model list: no "unknown model" warnings
GEMINI_MODEL = "gemini-2.5-pro"
QWEN_MODEL = "qwen3-coder-plus"
OPENCODE_MODEL = "fake/fake-model"  # also Kilo Code's (an OpenCode fork, same provider config)
COPILOT_MODEL = "gpt-4.1"
PI_MODEL = "fake/fake-model"
CLINE_MODEL = "fake-model"
# Background processes an agent leaves running after it exits, told by an argument of theirs.
LINGERING = {"cline": "--cline-hub-daemon"}
DEAD_REGISTRY = "http://127.0.0.1:9/"  # OpenCode's background `npm install` of plugin deps fails fast here
REAP_GRACE_S = 10.0  # how long children left in an agent's process group may run on after it exits
CODEX_MARK_BEGIN = "# >>> agent-collector e2e harness: base config (top-level keys) >>>"
CODEX_MARK_TABLES = "# >>> agent-collector e2e harness: base config (tables) >>>"


@dataclass(frozen=True)
class AgentHome:
    """A throwaway HOME and a project workdir next to it (``<root>/home``, ``<root>/work``)."""

    root: Path
    home: Path
    workdir: Path


class ServerLike(Protocol):
    @property
    def url(self) -> str: ...


def check_agent(agent: str) -> None:
    if agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r}; expected one of {AGENTS}")


# --------------------------------------------------------------------------------------------------
# Environment


def _base_env(home: Path) -> dict[str, str]:
    path_dirs = [str(agent_bin("codex").parent), str(Path(sys.executable).parent)]
    path_dirs += [p for p in os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(os.pathsep) if p]
    return {
        "HOME": str(home),
        "USER": os.environ.get("USER", "root"),
        "LOGNAME": os.environ.get("LOGNAME", os.environ.get("USER", "root")),
        "SHELL": "/bin/bash",
        "PATH": os.pathsep.join(dict.fromkeys(path_dirs)),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "TZ": "UTC",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def _claude_env(home: Path, server: ServerLike) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-e2e",
        "ANTHROPIC_MODEL": CLAUDE_MODEL,
        "ANTHROPIC_SMALL_FAST_MODEL": "claude-haiku-4-5",
        "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "IS_SANDBOX": "1",  # we run as root; --dangerously-skip-permissions refuses root otherwise
    }


def _codex_env(home: Path, server: ServerLike) -> dict[str, str]:
    return {"CODEX_HOME": str(home / ".codex"), "FAKE_OPENAI_API_KEY": FAKE_KEY, "RUST_LOG": "warn"}


def _gemini_env(home: Path, server: ServerLike) -> dict[str, str]:
    return {
        "GEMINI_API_KEY": "fake-gemini-key",
        "GOOGLE_GEMINI_BASE_URL": server.url,
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        "GEMINI_CLI_NO_RELAUNCH": "true",
    }


def _qwen_env(home: Path, server: ServerLike) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": FAKE_KEY,
        "OPENAI_BASE_URL": f"{server.url}/v1",
        "OPENAI_MODEL": QWEN_MODEL,
        "QWEN_CODE_DISABLE_PRECONNECT": "1",
    }


def _opencode_env(home: Path, server: ServerLike) -> dict[str, str]:
    env = {
        name: "1"
        for name in (
            "OPENCODE_DISABLE_AUTOUPDATE",
            "OPENCODE_DISABLE_MODELS_FETCH",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS",
            "OPENCODE_DISABLE_LSP_DOWNLOAD",
            "OPENCODE_DISABLE_SHARE",
            "OPENCODE_DISABLE_CLAUDE_CODE",
            "OPENCODE_DISABLE_EXTERNAL_SKILLS",
        )
    }
    # With a plugin in a config dir OpenCode runs `npm install @opencode-ai/plugin` in the background;
    # point every registry setting at a dead local port so that never leaves the machine.
    for name in ("npm_config_registry", "NPM_CONFIG_REGISTRY", "BUN_CONFIG_REGISTRY"):
        env[name] = DEAD_REGISTRY
    return env


def _kilo_env(home: Path, server: ServerLike) -> dict[str, str]:
    env = {
        name: "1"
        for name in (
            "KILO_DISABLE_AUTOUPDATE",
            "KILO_DISABLE_MODELS_FETCH",
            "KILO_DISABLE_DEFAULT_PLUGINS",
            "KILO_DISABLE_LSP_DOWNLOAD",
            "KILO_DISABLE_SHARE",
            "KILO_DISABLE_CLAUDE_CODE",
            "KILO_DISABLE_EXTERNAL_SKILLS",
            "KILO_DISABLE_SESSION_INGEST",
            "KILO_DISABLE_CODEBASE_INDEXING",
            "KILO_DISABLE_PRESENCE",
        )
    }
    env["KILO_TELEMETRY_LEVEL"] = "off"  # anything but "all" turns off its PostHog client
    for name in ("npm_config_registry", "NPM_CONFIG_REGISTRY", "BUN_CONFIG_REGISTRY"):
        env[name] = DEAD_REGISTRY
    return env


def _copilot_env(home: Path, server: ServerLike) -> dict[str, str]:
    return {
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": f"{server.url}/v1",
        "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_API_KEY": FAKE_KEY,
        "COPILOT_MODEL": COPILOT_MODEL,
    }
def _pi_env(home: Path, server: ServerLike) -> dict[str, str]:
    return {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1"}


def _cline_env(home: Path, server: ServerLike) -> dict[str, str]:
    """Its provider is in ~/.cline/data/settings/providers.json (``cline auth``); its hub gets a free port."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return {"CLINE_HUB_PORT": str(port)}


_AGENT_ENV: dict[str, Callable[[Path, ServerLike], dict[str, str]]] = {
    "claude-code": _claude_env,
    "codex": _codex_env,
    "gemini-cli": _gemini_env,
    "qwen-code": _qwen_env,
    "opencode": _opencode_env,
    "kilo-code": _kilo_env,
    "copilot": _copilot_env,
    "pi": _pi_env,
    "cline": _cline_env,
}


def make_env(
    agent: str, home: Path, workdir: Path, server: ServerLike, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A from-scratch environment for one agent run: nothing inherited except PATH/USER basics."""
    check_agent(agent)
    env = _base_env(Path(home))
    env.update(_AGENT_ENV[agent](Path(home), server))
    env["PWD"] = str(workdir)
    if extra:
        env.update(extra)
    return env


# --------------------------------------------------------------------------------------------------
# Config files (merged into what is there, so installer-added hooks survive)


def _deep_merge(dst: dict[str, Any], src: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in src.items():
        if isinstance(value, Mapping) and isinstance(dst.get(key), dict):
            _deep_merge(dst[key], value)
        else:
            dst[key] = value
    return dst


def merge_json(path: Path, values: Mapping[str, Any]) -> None:
    """Deep-merge ``values`` into the JSON object at ``path``; keys we do not set (hooks) are kept."""
    current: dict[str, Any] = {}
    if path.is_file() and path.read_text().strip():
        current = json.loads(path.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_deep_merge(current, values), indent=2) + "\n")
    tmp.replace(path)


def _write_claude(home: Path, workdir: Path, server: ServerLike) -> None:
    merge_json(home / ".claude" / "settings.json", {"cleanupPeriodDays": 365})


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def codex_top_level() -> list[str]:
    return [
        f"model = {_toml_str(CODEX_MODEL)}",
        'model_provider = "fake"',
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        "check_for_update_on_startup = false",
    ]


def codex_tables(workdir: Path, server: ServerLike) -> list[str]:
    return [
        "[model_providers.fake]",
        'name = "Fake local LLM"',
        f"base_url = {_toml_str(server.url + '/v1')}",
        'env_key = "FAKE_OPENAI_API_KEY"',
        'wire_api = "responses"',
        "request_max_retries = 1",
        "stream_max_retries = 1",
        "stream_idle_timeout_ms = 20000",
        "",
        "[features]",
        "hooks = true",
        "# plugins=true makes codex git-fetch https://github.com/openai/plugins.git (marketplace sync)",
        "plugins = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[feedback]",
        "enabled = false",
        "",
        *codex_project_table(workdir),
    ]


def codex_project_table(workdir: Path) -> list[str]:
    return [f"[projects.{_toml_str(str(workdir))}]", 'trust_level = "trusted"']


def _write_codex(home: Path, workdir: Path, server: ServerLike) -> None:
    """``~/.codex/config.toml``, edited so that lines others add (e.g. the installer's ``notify``) stay.

    First write: our top-level keys go before the file's first table header (TOML puts keys written
    after a header into that table) and our tables at the end. Later writes only update what can change
    (the provider's ``base_url``, the project trust table) and leave every other line alone.
    """
    path = home / ".codex" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = path.read_text().splitlines() if path.is_file() else []
    if CODEX_MARK_BEGIN in lines:
        lines = _refresh_codex(lines, workdir, server)
    else:
        lines = _insert_codex(lines, workdir, server)
    path.write_text("\n".join(lines).rstrip("\n") + "\n")


def _is_table_header(line: str) -> bool:
    return line.lstrip().startswith("[")


def _insert_codex(lines: list[str], workdir: Path, server: ServerLike) -> list[str]:
    first_table = next((i for i, line in enumerate(lines) if _is_table_header(line)), len(lines))
    top = [CODEX_MARK_BEGIN, *codex_top_level(), ""]
    tables = ["", CODEX_MARK_TABLES, *codex_tables(workdir, server)]
    return lines[:first_table] + top + lines[first_table:] + tables


def _refresh_codex(lines: list[str], workdir: Path, server: ServerLike) -> list[str]:
    table = None
    out = []
    for line in lines:
        if _is_table_header(line):
            table = line.strip()
        elif table == "[model_providers.fake]" and line.strip().startswith("base_url"):
            line = f"base_url = {_toml_str(server.url + '/v1')}"
        out.append(line)
    project = codex_project_table(workdir)
    if project[0] not in (line.strip() for line in out):
        out += ["", *project]
    return out


def _write_gemini(home: Path, workdir: Path, server: ServerLike) -> None:
    merge_json(
        home / ".gemini" / "settings.json",
        {
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        },
    )


def _write_qwen(home: Path, workdir: Path, server: ServerLike) -> None:
    merge_json(
        home / ".qwen" / "settings.json",
        {
            "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "enableAutoUpdate": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "model": {"name": QWEN_MODEL},
        },
    )


def _write_opencode(home: Path, workdir: Path, server: ServerLike) -> None:
    merge_json(home / ".config" / "opencode" / "opencode.json", _opencode_config(server))


def _write_kilo(home: Path, workdir: Path, server: ServerLike) -> None:
    """Kilo Code reads OpenCode's config format from ``~/.config/kilo/kilo.jsonc`` (plain JSON is JSONC)."""
    config = _opencode_config(server)
    config["$schema"] = "https://app.kilo.ai/config.json"
    merge_json(home / ".config" / "kilo" / "kilo.jsonc", config)


def _write_copilot(home: Path, workdir: Path, server: ServerLike) -> None:
    """Copilot takes its provider from the environment; settings only silence the first-run prompts."""
    merge_json(home / ".copilot" / "settings.json", {"trusted_folders": [str(workdir)]})


def _opencode_config(server: ServerLike) -> dict[str, Any]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": OPENCODE_MODEL,
        "small_model": OPENCODE_MODEL,
        "permission": {
            "edit": "allow",
            "bash": "allow",
            "webfetch": "allow",
            "external_directory": "allow",
        },
        "provider": {
            "fake": {
                # bundled in the opencode binary: nothing is downloaded
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake local LLM",
                "options": {"baseURL": f"{server.url}/v1", "apiKey": FAKE_KEY},
                "models": {
                    "fake-model": {
                        "name": "Fake Model",
                        "tool_call": True,
                        "limit": {"context": 200000, "output": 8192},
                    }
                },
            }
        },
    }


def _write_pi(home: Path, workdir: Path, server: ServerLike) -> None:
    """``~/.pi/agent/models.json``: provider ``fake`` on the Chat Completions API, and its model as default."""
    provider = {"baseUrl": f"{server.url}/v1", "api": "openai-completions", "apiKey": FAKE_KEY,
                "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                "models": [{"id": "fake-model", "contextWindow": 200000, "maxTokens": 8192}]}
    merge_json(home / ".pi" / "agent" / "models.json", {"providers": {"fake": provider}})
    provider_id, model = PI_MODEL.split("/")
    merge_json(home / ".pi" / "agent" / "settings.json", {"defaultProvider": provider_id, "defaultModel": model})


def _write_cline(home: Path, workdir: Path, server: ServerLike) -> None:
    """``cline auth -p openai -b <server>/v1 -k <key> -m <model>``: Cline's own command writes its provider
    (``openai-compatible``) into ~/.cline/data/settings/providers.json; it starts no hub."""
    env = make_env("cline", home, workdir, server)
    cmd = [str(agent_bin("cline")), "auth", "-p", "openai", "-b", f"{server.url}/v1", "-k", FAKE_KEY,
           "-m", CLINE_MODEL]
    result = subprocess.run(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=60, check=False, start_new_session=True)
    end_lingering("cline", home)
    if result.returncode != 0:
        raise RuntimeError(f"cline auth failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")


_AGENT_CONFIG: dict[str, Callable[[Path, Path, ServerLike], None]] = {
    "claude-code": _write_claude,
    "codex": _write_codex,
    "gemini-cli": _write_gemini,
    "qwen-code": _write_qwen,
    "opencode": _write_opencode,
    "kilo-code": _write_kilo,
    "copilot": _write_copilot,
    "pi": _write_pi,
    "cline": _write_cline,
}


def write_agent_config(agent: str, home: Path, workdir: Path, server: ServerLike) -> None:
    """Write (or refresh) the agent's base config under ``home``. Call before the collector installer."""
    check_agent(agent)
    _AGENT_CONFIG[agent](Path(home), Path(workdir), server)


# --------------------------------------------------------------------------------------------------
# Commands


def agent_command(agent: str, prompt: str, resume: bool) -> list[str]:
    check_agent(agent)
    exe = str(agent_bin(agent))
    if agent == "claude-code":
        cmd = [
            exe,
            "-p",
            prompt,
            "--dangerously-skip-permissions",
            "--output-format",
            "stream-json",
            "--verbose",
        ]
        return cmd + (["--continue"] if resume else [])
    if agent == "codex":
        flags = [
            "--json",
            "--dangerously-bypass-approvals-and-sandbox",
            "--dangerously-bypass-hook-trust",
            "--skip-git-repo-check",
        ]
        return [exe, "exec", *(["resume", "--last"] if resume else []), *flags, prompt]
    if agent == "gemini-cli":
        cmd = [exe, "-p", prompt, "--yolo", "-m", GEMINI_MODEL, "--output-format", "stream-json"]
        return cmd + (["--resume", "latest"] if resume else [])
    if agent == "qwen-code":
        cmd = [
            exe,
            "-p",
            prompt,
            "--yolo",
            "--auth-type",
            "openai",
            "-m",
            QWEN_MODEL,
            "--output-format",
            "stream-json",
        ]
        return cmd + (["--continue"] if resume else [])
    if agent == "copilot":
        cmd = [exe, "-p", prompt, "--allow-all", "--output-format", "json", "--no-auto-update"]
        return cmd + (["--continue"] if resume else [])
    if agent == "pi":
        return [exe, "-p", "--mode", "json", "--model", PI_MODEL, *(["--continue"] if resume else []), prompt]
    if agent == "cline":
        if resume:  # `cline --id <session>` resumes, but only in its interactive terminal UI (needs a TTY)
            raise ValueError("Cline resumes a session only interactively; no headless resume")
        return [exe, "--json", "--auto-approve", "true", prompt]
    cmd = [
        exe,
        "run",
        "--format",
        "json",
        "--auto",
        "-m",
        OPENCODE_MODEL,
        "--print-logs",
        "--log-level",
        "INFO",
    ]
    return cmd + (["--continue"] if resume else []) + [prompt]


class AgentTimeout(RuntimeError):
    """The agent did not finish in time; carries whatever it printed."""


def run_agent(
    agent: str,
    home: Path,
    workdir: Path,
    server: ServerLike,
    prompt: str,
    resume: bool = False,
    timeout: float = 120,
    extra_env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one non-interactive turn of ``agent`` in ``workdir``; never raises on a non-zero exit."""
    cmd = agent_command(agent, prompt, resume)
    env = make_env(agent, home, workdir, server, extra_env)
    proc = subprocess.Popen(
        cmd,
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, err = proc.communicate()
        raise AgentTimeout(
            f"{agent} did not finish within {timeout}s: {cmd}\n--- stdout ---\n{out[-4000:]}"
            f"\n--- stderr ---\n{err[-4000:]}"
        ) from None
    # What the agent leaves running on purpose (Cline's hub, in its process group) is ended first; other
    # children still in the group (e.g. a hook relay finishing its delivery) get a grace period; whatever
    # is left after it is killed so nothing outlives the test.
    end_lingering(agent, home)
    _reap_group(proc.pid, REAP_GRACE_S)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_agent_interrupted(
    agent: str,
    home: Path,
    workdir: Path,
    server: ServerLike,
    prompt: str,
    started: Callable[[], bool],
    resume: bool = False,
    settle: float = 2.0,
    grace: float = 5.0,
    timeout: float = 120,
    extra_env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one turn and interrupt it as a terminal's Ctrl-C would: once ``started()`` is true (e.g. the
    model asked for ``sleep 60``) and ``settle`` seconds more have passed (the tool runs), SIGINT goes to
    the agent's process group; whatever is still alive ``grace`` seconds later is killed."""
    cmd = agent_command(agent, prompt, resume)
    env = make_env(agent, home, workdir, server, extra_env)
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while not started() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(settle)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            out, err = proc.communicate()
    finally:
        _reap_group(proc.pid, 0.5)
        end_lingering(agent, home)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run_cline_resumed(
    home: Path,
    workdir: Path,
    server: ServerLike,
    session_id: str,
    prompt: str,
    done: Callable[[], bool],
    timeout: float = 120,
    settle: float = 1.5,
) -> subprocess.CompletedProcess[str]:
    """One more turn of a Cline session, as a user takes it up again: ``cline --id <session>`` opens its
    terminal UI (it refuses to resume without a TTY, and ``--json`` refuses ``--id``), so it runs on a
    pseudo-terminal; the prompt is typed once the input box shows, and once ``done()`` says the turn ended
    and Cline's files have not changed for ``settle`` seconds, two Ctrl-C leave the UI. Whatever is still
    running then is ended, the hub with it."""
    cmd = [str(agent_bin("cline")), "--auto-approve", "true", "--id", session_id]
    env = {**make_env("cline", home, workdir, server), "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    leader, follower = os.openpty()
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=follower, stdout=follower, stderr=follower,
                            start_new_session=True)
    os.close(follower)
    screen = bytearray()
    deadline = time.monotonic() + timeout
    try:
        _read_until(leader, screen, lambda: b"Ask anything" in screen, deadline)
        for char in prompt:
            os.write(leader, char.encode())
            time.sleep(0.01)
        time.sleep(0.3)
        os.write(leader, b"\r")
        _read_until(leader, screen, done, deadline)
        # Cline finishes the turn's bookkeeping after its last hook: wait until its files stop changing
        _read_until(leader, screen, _quiet_for(home / ".cline", settle), deadline)
        for _ in range(2):
            if proc.poll() is None:
                os.write(leader, b"\x03")
            with contextlib.suppress(AgentTimeout):  # what is still running then is ended below
                _read_until(leader, screen, lambda: proc.poll() is not None, time.monotonic() + 10)
    finally:
        end_lingering("cline", home)
        _reap_group(proc.pid, 2.0)
        proc.wait(timeout=10)
        os.close(leader)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.decode("utf-8", "replace"))
    return subprocess.CompletedProcess(cmd, proc.returncode, text, "")


def _quiet_for(root: Path, seconds: float) -> Callable[[], bool]:
    """A condition: nothing under ``root`` was written for ``seconds`` (checked as it is called)."""
    seen: int | None = None
    since = time.monotonic()

    def quiet() -> bool:
        nonlocal seen, since
        stamp = max((p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()), default=0)
        if stamp != seen:
            seen, since = stamp, time.monotonic()
        return time.monotonic() - since >= seconds

    return quiet


def _read_until(fd: int, screen: bytearray, condition: Callable[[], bool], deadline: float) -> None:
    import select

    while not condition():
        if time.monotonic() > deadline:
            raise AgentTimeout(f"the terminal UI did not get there in time; it showed: {bytes(screen[-3000:])!r}")
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                screen += os.read(fd, 65536)
            except OSError:  # the UI closed the terminal
                return


def lingering_pids(agent: str, home: Path) -> list[int]:
    """Processes the agent left running for this HOME (Cline's hub): found by their HOME and argument."""
    marker = LINGERING.get(agent)
    if marker is None:
        return []
    want = f"HOME={Path(home)}".encode()
    found = []
    for proc_dir in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc_dir / "cmdline").read_bytes().split(b"\0")
            environ = (proc_dir / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in argv and want in environ:
            found.append(int(proc_dir.name))
    return found


def end_lingering(agent: str, home: Path, grace: float = 5.0) -> None:
    """End what the agent left running for this HOME: TERM to each one's process group (Cline's hub stays in
    the group of the command that started it), KILL after ``grace``."""
    pids = lingering_pids(agent, home)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _reap_group(pgid: int, grace: float) -> None:
    deadline = time.monotonic() + grace
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    _kill_group(pgid)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


# --------------------------------------------------------------------------------------------------
# Scenarios


@dataclass(frozen=True)
class Turn:
    prompt: str  # may contain {workdir}
    resume: bool = False

    def render(self, workdir: Path) -> str:
        return self.prompt.format(workdir=workdir)


@dataclass(frozen=True)
class Scenario:
    name: str
    turns: tuple[Turn, ...]
    description: str = ""


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "tool_then_answer",
            (Turn("Please run `echo hi` in the shell and tell me what it printed."),),
            "shell tool call, then a text answer quoting its output",
        ),
        Scenario(
            "two_turns_resume",
            (
                Turn("Please write {workdir}/notes.md with a short note."),
                Turn("Now run `ls -la` and summarise.", resume=True),
            ),
            "write-file tool; then a second process resumes the session and runs a shell command",
        ),
        Scenario(
            "failing_command",
            (Turn("Please run `cat /nonexistent/file-xyz` in the shell and tell me what happened."),),
            "a shell command that exits non-zero",
        ),
        Scenario(
            "subagent",
            (Turn("Please ask a subagent to run a shell command and tell me what it reported."),),
            "the model starts the agent's sub-agent tool; the sub-agent runs `echo from-helper` (fake_llm)",
        ),
    )
}


def _resume12_prompt(n: int) -> str:
    if n % 2:
        return f"Turn {n}: please run `echo turn-{n}` in the shell and tell me what it printed."
    return f"Turn {n}: no tool this time, just answer in one line."


SCENARIOS["resume12"] = Scenario(
    "resume12",
    tuple(Turn(_resume12_prompt(n), resume=n > 1) for n in range(1, 13)),
    "twelve turns, each in a new process resuming the same session; odd turns run a shell command",
)

# Fake secrets in the providers' formats (none is a live credential; the random parts spell FAKE).
FAKE_PEM = "\n".join([
    "-----BEGIN RSA PRIVATE KEY-----",
    "MKZtsQ2KgaZSWpZfVRa6Ekfp6Zv7dcY3owNd2UsKkQXbAtYNESgTcDU8c6dtohtI",
    "jP2LTWykZZi8gv3Qlp9rAA3tejIfdCR5qdQIfVp2wSPuHJoXXtxO26xvWX6s2rEj",
    "+KS7xs9SZtr3MBiwE73WmXMNY+6YGfRKisJjuiDVh7QQ9sRlgmOzI+MdRnZxNKuU",
    "aCd7XtqpP96kp+NhU2TGtYxtkBoZptWAijPkwGdk4X4FCYA4bUi2hMnIQjv/MAvP",
    "-----END RSA PRIVATE KEY-----",
])
PLANTED_SECRETS: dict[str, str] = {  # where each appears in the "secrets" scenario
    "aws_access_key_id": "AKIAQ4FAKE7EXAMPLE2Z",  # prompt
    "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYFAKESECRET",  # prompt, written file
    "github_token": "ghp_FAKEMUrUXPyT9LpJIVb7UwQ2LVbTwBRyrtZ3",  # written file (write tool's arguments)
    **{f"private_key_line{i}": line for i, line in enumerate(FAKE_PEM.splitlines()[1:-1], 1)},  # written file
    "npm_token": "npm_FAKEYd2aMv4Z12MABPXwxGnmsVLxwz2nXZML",  # shell command's arguments, then the file
    "stripe_secret_key": "sk_live_FAKETNc0jFGyUboxxBcC1hbO",  # only in the tool's output (decoded there)
}
_STRIPE_B64 = "c2tfbGl2ZV9GQUtFVE5jMGpGR3lVYm94eEJjQzFoYk8="  # base64 of the Stripe key
_DEPLOY_ENV = "\n".join([
    f"GITHUB_TOKEN={PLANTED_SECRETS['github_token']}",
    f"AWS_SECRET_ACCESS_KEY={PLANTED_SECRETS['aws_secret_access_key']}",
    FAKE_PEM,
])
SCENARIOS["secrets"] = Scenario(
    "secrets",
    (
        Turn(f"My AWS access key is {PLANTED_SECRETS['aws_access_key_id']} and its secret is "
             f"{PLANTED_SECRETS['aws_secret_access_key']}. Please write {{workdir}}/deploy.env containing "
             f"`{_DEPLOY_ENV}`"),
        Turn(f"Please run `echo NPM_TOKEN={PLANTED_SECRETS['npm_token']} >> {{workdir}}/deploy.env && "
             f"cat {{workdir}}/deploy.env && echo {_STRIPE_B64} | base64 -d` in the shell and tell me what "
             "it printed.", resume=True),
    ),
    "fake secrets in the prompt, the write tool's arguments and the file it writes, a shell command's "
    "arguments and its output; the second turn resumes the session in a new process",
)


def run_scenario(
    agent: str,
    scenario: str | Scenario,
    home: Path,
    workdir: Path,
    server: ServerLike,
    timeout: float = 120,
    extra_env: Mapping[str, str] | None = None,
    log_dir: Path | None = None,
) -> list[subprocess.CompletedProcess[str]]:
    """Run every turn of a scenario, each in a new process; stops after a failing turn.

    With ``log_dir``, each turn's output is also saved as ``agent_turn<N>.out`` / ``.err`` (as in the
    samples).
    """
    spec = SCENARIOS[scenario] if isinstance(scenario, str) else scenario
    results = []
    for number, turn in enumerate(spec.turns, start=1):
        result = run_agent(
            agent,
            home,
            workdir,
            server,
            turn.render(Path(workdir)),
            resume=turn.resume,
            timeout=timeout,
            extra_env=extra_env,
        )
        results.append(result)
        if log_dir is not None:
            save_output(result, Path(log_dir), f"agent_turn{number}")
        if result.returncode != 0:
            break
    return results


def save_output(result: subprocess.CompletedProcess[str], log_dir: Path, stem: str) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / f"{stem}.out").write_text(result.stdout or "")
    (log_dir / f"{stem}.err").write_text(result.stderr or "")


def describe(results: list[subprocess.CompletedProcess[str]], tail: int = 3000) -> str:
    """Human-readable summary of agent runs for assertion messages."""
    parts = []
    for number, res in enumerate(results, start=1):
        parts.append(
            f"--- turn {number}: rc={res.returncode} cmd={res.args!r}\n"
            f"stdout (tail):\n{(res.stdout or '')[-tail:]}\nstderr (tail):\n{(res.stderr or '')[-tail:]}"
        )
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------------
# Workspace and where each agent writes


def init_workdir(workdir: Path, git: bool = True) -> Path:
    """A small project dir like the samples': README.md, optionally a git repo with one commit."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "README.md").write_text("# e2e test repo\n")
    if git and shutil.which("git"):
        ident = ["-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "-c", "commit.gpgsign=false"]
        for args in (["init", "-q", "-b", "main"], ["add", "README.md"], ["commit", "-q", "-m", "init"]):
            subprocess.run(
                ["git", *ident, *args],
                cwd=workdir,
                check=True,
                capture_output=True,
                env={
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": str(workdir.parent),
                    "GIT_CONFIG_NOSYSTEM": "1",
                },
            )
    return workdir


def path_slug(path: Path) -> str:
    """Claude Code / Qwen Code project folder name: every non-alphanumeric character becomes '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(path))


def session_files(agent: str, home: Path, workdir: Path) -> list[Path]:
    """The session transcripts/databases the agent wrote for ``workdir`` (see real-agents.md)."""
    check_agent(agent)
    home = Path(home)
    if agent == "claude-code":
        return sorted((home / ".claude" / "projects" / path_slug(workdir)).glob("*.jsonl"))
    if agent == "codex":
        return sorted((home / ".codex" / "sessions").glob("*/*/*/rollout-*.jsonl"))
    if agent == "gemini-cli":
        return sorted(
            (home / ".gemini" / "tmp" / gemini_project_name(home, workdir)).glob("chats/session-*.jsonl")
        )
    if agent == "qwen-code":
        return sorted((home / ".qwen" / "projects" / path_slug(workdir) / "chats").glob("*.jsonl"))
    if agent == "pi":
        return sorted((home / ".pi" / "agent" / "sessions").glob("*/*.jsonl"))
    if agent == "copilot":
        return sorted((home / ".copilot" / "session-state").glob("*/events.jsonl"))
    if agent == "cline":
        data = home / ".cline" / "data"
        db = data / "db" / "sessions.db"
        return sorted(data.glob("sessions/*/*.messages.json")) + ([db] if db.is_file() else [])
    name = "kilo" if agent == "kilo-code" else "opencode"
    db = home / ".local" / "share" / name / f"{name}.db"
    return [db] if db.is_file() else []


def gemini_project_name(home: Path, workdir: Path) -> str:
    """Gemini's short project name from ~/.gemini/projects.json (not a hash); falls back to the dir name."""
    registry = Path(home) / ".gemini" / "projects.json"
    if registry.is_file():
        name = json.loads(registry.read_text()).get("projects", {}).get(str(workdir))
        if name:
            return str(name)
    return Path(workdir).name
