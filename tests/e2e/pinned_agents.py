"""How the agents pinned in sets of their own (``npm_agents.PINNED_SETS``) run offline: environment,
configuration, command line and where they write. ``harness`` hands these agents' steps to the
``PinnedAgent`` of this table, so the nine's code stays as it was.

Oh My Pi (``omp``, npm ``@oh-my-pi/pi-coding-agent``) is a Bun program: ``dist/cli.js`` starts with
``#!/usr/bin/env bun``. npm's ``bun`` package ships the binary in its optional dependencies
``@oven/bun-linux-x64*``, and its postinstall (which npm 11 does not run unless allowed) only links it;
the first of those binaries that runs here is used. omp refreshes a model catalog from the internet at
every start and probes local model servers; every proxy variable points at a discard port (with
``NO_PROXY`` for 127.0.0.1), and so do its Ollama / llama.cpp / LM Studio base URLs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from npm_agents import set_dir

FAKE_KEY = "sk-fake-key-for-e2e"
OMP_MODEL = "fake/fake-model"
DISCARD = "http://127.0.0.1:9"  # nothing listens there: a request to it fails at once


@dataclass(frozen=True)
class PinnedAgent:
    env: Callable[[Path, str], dict[str, str]]  # (home, server url) -> variables
    config: Callable[[Path, Path, str], None]  # (home, workdir, server url)
    command: Callable[[str, bool], list[str]]  # (prompt, resume) -> argv
    sessions: Callable[[Path, Path], list[Path]]  # (home, workdir) -> the files holding its sessions


def _offline_env() -> dict[str, str]:
    proxies = {name: DISCARD for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")}
    return {**proxies, "OTEL_SDK_DISABLED": "true"}


# ------------------------------------------------------------------------------------------ Oh My Pi


@cache
def bun() -> Path:
    """The first of npm's Bun binaries in the Oh My Pi set that runs on this machine."""
    oven = set_dir("oh-my-pi") / "node_modules" / "@oven"
    for flavour in ("bun-linux-x64", "bun-linux-x64-baseline", "bun-linux-x64-musl", "bun-linux-x64-musl-baseline"):
        exe = oven / flavour / "bin" / "bun"
        if exe.is_file() and _runs(exe):
            return exe
    raise RuntimeError(f"no Bun binary under {oven} runs here")


def _runs(exe: Path) -> bool:
    try:
        return subprocess.run([str(exe), "--version"], capture_output=True, timeout=30, check=False).returncode == 0
    except OSError:
        return False


def _omp_env(home: Path, url: str) -> dict[str, str]:
    local = {name: DISCARD for name in ("OLLAMA_BASE_URL", "LLAMA_CPP_BASE_URL", "LM_STUDIO_BASE_URL")}
    return {**_offline_env(), **local, "PI_AUTO_QA": "0"}


def _write_omp(home: Path, workdir: Path, url: str) -> None:
    """``~/.omp/agent/models.yml``: provider ``fake`` on the Chat Completions API (omp's own format)."""
    provider, model = OMP_MODEL.split("/")
    path = home / ".omp" / "agent" / "models.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([
        "providers:",
        f"  {provider}:",
        f"    baseUrl: {url}/v1",
        f"    apiKey: {FAKE_KEY}",
        "    api: openai-completions",
        "    compat: {supportsDeveloperRole: false, supportsReasoningEffort: false}",
        "    models:",
        f"      - id: {model}",
        "        name: Fake Model",
        "        reasoning: false",
        "        input: [text]",
        "        contextWindow: 200000",
        "        maxTokens: 8192",
        "        cost: {input: 0, output: 0, cacheRead: 0, cacheWrite: 0}",
        "",
    ]))


def _omp_command(prompt: str, resume: bool) -> list[str]:
    cli = set_dir("oh-my-pi") / "node_modules" / "@oh-my-pi" / "pi-coding-agent" / "dist" / "cli.js"
    flags = ["-p", "--model", OMP_MODEL, "--mode", "json", "--auto-approve"]
    return [str(bun()), str(cli), *flags, *(["--continue"] if resume else []), prompt]


def _omp_sessions(home: Path, workdir: Path) -> list[Path]:
    return sorted((home / ".omp" / "agent" / "sessions").glob("*/*.jsonl"))


PINNED: dict[str, PinnedAgent] = {
    "oh-my-pi": PinnedAgent(_omp_env, _write_omp, _omp_command, _omp_sessions),
}
