"""Install a pinned real agent CLI from PyPI into a virtual environment the e2e tests own.

``ensure_pip_agent(agent_id)`` makes ``<cache>/<agent id>-<version>/`` (cache: ``<repo>/.cache/e2e-pip``,
or ``$AGENT_COLLECTOR_E2E_PIP_CACHE``) with the Python the agent needs (``python3.<minor>`` on PATH, else
pyenv's install of it), ``pip install <package>==<version>`` into it, checks the installed version and writes a
stamp; later calls return at once. A file lock serialises parallel test processes. Only the agent itself
is pinned (pip resolves its dependencies from the registry); its version is checked after install.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_ENV = "AGENT_COLLECTOR_E2E_PIP_CACHE"
INSTALL_TIMEOUT_S = 1200


@dataclass(frozen=True)
class PipAgent:
    package: str
    version: str
    python: str  # the interpreter it needs, found on PATH
    executable: str


PIP_AGENTS = {
    "mistral-vibe": PipAgent("mistral-vibe", "3.0.2", "python3.12", "vibe"),  # needs Python >= 3.12
    "hermes": PipAgent("hermes-agent", "0.19.0", "python3.12", "hermes"),  # needs Python >= 3.11, < 3.14
}


class PipInstallError(RuntimeError):
    """The pinned agent could not be installed (the message carries pip's output)."""


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or REPO_ROOT / ".cache" / "e2e-pip")


def ensure_pip_agent(agent_id: str) -> Path:
    """The agent's executable, installed first when its stamp is missing."""
    agent = PIP_AGENTS[agent_id]
    venv = cache_dir() / f"{agent_id}-{agent.version}"
    stamp, exe = venv / ".installed", venv / "bin" / agent.executable
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{agent_id}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and exe.exists():
            return exe
        python = find_python(agent.python)
        if python is None:
            raise PipInstallError(f"{agent.package} {agent.version} needs {agent.python}, not on PATH")
        shutil.rmtree(venv, ignore_errors=True)
        _run([python, "-m", "venv", str(venv)])
        _run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
              f"{agent.package}=={agent.version}"])
        shown = _run([str(venv / "bin" / "pip"), "show", agent.package])
        if f"Version: {agent.version}" not in shown:
            raise PipInstallError(f"{agent.package}: installed version is not {agent.version}:\n{shown}")
        stamp.write_text(f"{agent.package}=={agent.version}\n")
        return exe


def find_python(name: str) -> str | None:
    """``name`` (``python3.12``) on PATH when it runs (a pyenv shim of a version not selected does not),
    else the newest pyenv install of that version."""
    found = shutil.which(name)
    roots = {Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")}
    if found and Path(found).parent.name == "shims":  # the tests' HOME is not the one pyenv lives in
        roots.add(Path(found).parent.parent)
    minor = name.removeprefix("python")
    installed = sorted((p for root in roots for p in root.glob(f"versions/{minor}.*/bin/{name}")), reverse=True)
    candidates = [found] + [str(p) for p in installed]
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True, timeout=60).returncode == 0:
            return candidate
    return None


def _run(cmd: list[str]) -> str:
    env = {**os.environ, "PIP_CACHE_DIR": str(cache_dir() / ".pip-cache")}  # not the (test) HOME's
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, stdin=subprocess.DEVNULL,
                          env=env)
    if done.returncode != 0:
        raise PipInstallError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout
