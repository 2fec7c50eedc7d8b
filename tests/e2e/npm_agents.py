"""Install the pinned real agent CLIs from npm into a cache folder the e2e tests own.

The versions are pinned in ``tests/e2e/agents/package.json`` + ``package-lock.json``. ``ensure_agents()``
copies both files into the cache folder (default ``<repo>/.cache/e2e-agents``, overridable with the env
var ``AGENT_COLLECTOR_E2E_CACHE``), runs ``npm ci`` there, verifies the installed versions against the
lock file and writes a stamp holding the hash of the two files. npm's download cache is
``<cache folder>/.npm-cache``, not the user's ``~/.npm``. Later calls with an unchanged lock file
return immediately. A file lock serialises parallel test processes.

Registry quirk: a lock file generated against a registry (or mirror) that does not carry every platform's
optional binary package (e.g. ``opencode-darwin-arm64``) lacks entries for them, and ``npm ci`` then
refuses the lock as "out of sync". In that case we fall back to ``npm install --no-save`` in the cache
folder, which still takes every version from the lock file, and then verify every installed package
against the lock, so the result is as frozen as ``npm ci`` would be.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

E2E_DIR = Path(__file__).resolve().parent
PIN_DIR = E2E_DIR / "agents"
REPO_ROOT = E2E_DIR.parents[1]
CACHE_ENV = "AGENT_COLLECTOR_E2E_CACHE"
STAMP_NAME = ".e2e-agents.stamp"
LOCK_NAME = ".e2e-agents.install-lock"
NPM_CACHE_NAME = ".npm-cache"
NPM_TIMEOUT_S = 1800

# agent id -> (npm package, executable name in node_modules/.bin)
AGENT_PACKAGES: dict[str, tuple[str, str]] = {
    "claude-code": ("@anthropic-ai/claude-code", "claude"),
    "codex": ("@openai/codex", "codex"),
    "gemini-cli": ("@google/gemini-cli", "gemini"),
    "qwen-code": ("@qwen-code/qwen-code", "qwen"),
    "opencode": ("opencode-ai", "opencode"),
    "kilo-code": ("@kilocode/cli", "kilo"),
    "copilot": ("@github/copilot", "copilot"),
    "pi": ("@mariozechner/pi-coding-agent", "pi"),
    "cline": ("cline", "cline"),
}
# Packages whose npm postinstall copies a platform binary (shipped as an optional registry package)
# over a placeholder: after install the bin must be a real executable, not the small stub.
NATIVE_BINS = {"claude": 1_000_000, "opencode": 1_000_000}


class AgentInstallError(RuntimeError):
    """npm could not install the pinned agents (message carries npm's output)."""


def cache_dir() -> Path:
    """Folder holding package.json, package-lock.json and node_modules of the agents."""
    override = os.environ.get(CACHE_ENV)
    return Path(override).expanduser().resolve() if override else REPO_ROOT / ".cache" / "e2e-agents"


def pins_hash() -> str:
    """Hash of the pinned package.json + package-lock.json: the stamp's content."""
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update(name.encode())
        digest.update((PIN_DIR / name).read_bytes())
    return digest.hexdigest()


def bin_dir() -> Path:
    return cache_dir() / "node_modules" / ".bin"


def agent_bin(name: str) -> Path:
    """Path of an agent's executable; ``name`` is an agent id (``codex``) or a bin name (``claude``)."""
    exe = AGENT_PACKAGES[name][1] if name in AGENT_PACKAGES else name
    if exe not in {b for _, b in AGENT_PACKAGES.values()}:
        raise KeyError(f"unknown agent {name!r}; known: {sorted(AGENT_PACKAGES)}")
    return bin_dir() / exe


def ensure_agents() -> Path:
    """Install the pinned agent CLIs if needed; return the ``node_modules/.bin`` directory."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    wanted = pins_hash()
    with _file_lock(root / LOCK_NAME):
        if _stamp_ok(root, wanted):
            return bin_dir()
        _install(root)
        _verify_against_lock(root)
        (root / STAMP_NAME).write_text(wanted + "\n")
    return bin_dir()


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with path.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _stamp_ok(root: Path, wanted: str) -> bool:
    stamp = root / STAMP_NAME
    if not stamp.is_file() or stamp.read_text().strip() != wanted:
        return False
    return all((root / "node_modules" / ".bin" / exe).exists() for _, exe in AGENT_PACKAGES.values())


def _install(root: Path) -> None:
    (root / STAMP_NAME).unlink(missing_ok=True)
    shutil.rmtree(root / "node_modules", ignore_errors=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(PIN_DIR / name, root / name)
    ci = _npm(root, "ci")
    if ci.returncode == 0:
        return
    if not _lock_out_of_sync(ci.stdout):
        raise AgentInstallError(f"`npm ci` failed in {root} (rc={ci.returncode}):\n{ci.stdout}")
    print(
        "[npm_agents] `npm ci` refused the lock file (optional platform packages missing from the "
        f"registry); falling back to `npm install --no-save` in {root} and verifying against the lock",
        file=sys.stderr,
    )
    shutil.rmtree(root / "node_modules", ignore_errors=True)
    shutil.copyfile(PIN_DIR / "package-lock.json", root / "package-lock.json")
    fallback = _npm(root, "install", "--no-save")
    if fallback.returncode != 0:
        raise AgentInstallError(
            f"`npm ci` refused the lock file and `npm install --no-save` failed in {root} "
            f"(rc={fallback.returncode}).\n--- npm ci ---\n{ci.stdout}\n"
            f"--- npm install ---\n{fallback.stdout}"
        )


def _npm(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    npm = shutil.which("npm")
    if npm is None:
        raise AgentInstallError("npm is not on PATH; the e2e tests need node >= 20 and npm")
    cmd = [npm, *args, "--no-audit", "--no-fund", "--no-update-notifier"]
    # npm's own download cache stays beside the install, never in the user's ~/.npm; so does the HOME the
    # packages' install scripts see (OpenCode's and Kilo's write ~/.config, ~/.cache, ~/.local, ~/.bun)
    home = root / "install-home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(npm_config_cache=str(root / NPM_CACHE_NAME), HOME=str(home))
    try:
        return subprocess.run(
            cmd,
            cwd=root,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=NPM_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AgentInstallError(f"{' '.join(cmd)} timed out after {NPM_TIMEOUT_S}s:\n{exc.stdout!r}") from exc


def _lock_out_of_sync(output: str) -> bool:
    return "EUSAGE" in output and "from lock file" in output


def _verify_against_lock(root: Path) -> None:
    """Every package present must have the lock's version; every non-optional one must be present."""
    lock = json.loads((PIN_DIR / "package-lock.json").read_text())
    problems: list[str] = []
    for rel, entry in lock["packages"].items():
        if not rel:
            continue
        manifest = root / rel / "package.json"
        if not manifest.is_file():
            if not entry.get("optional") and not entry.get("dev"):
                problems.append(f"missing {rel}")
            continue
        got = json.loads(manifest.read_text()).get("version")
        if got != entry.get("version"):
            problems.append(f"{rel}: installed {got}, lock says {entry.get('version')}")
    problems += _check_bins(root)
    if problems:
        raise AgentInstallError(
            f"agent install in {root} does not match the lock file:\n" + "\n".join(problems)
        )


def _check_bins(root: Path) -> list[str]:
    problems = []
    for pkg, exe in AGENT_PACKAGES.values():
        path = root / "node_modules" / ".bin" / exe
        if not path.exists():
            problems.append(f"{pkg}: no executable {path}")
        elif exe in NATIVE_BINS and path.resolve().stat().st_size < NATIVE_BINS[exe]:
            problems.append(
                f"{pkg}: {path} is still the placeholder; its postinstall did not copy the binary"
            )
    return problems
