"""Helpers of the external agent tests: a git repository, a temporary PATH of chosen entire-agent-*
executables, and collector runs over it (in-process Services: each run is a start and a stop)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from collector.config import load_config
from collector.daemon.service import Service
from collector.paths import Paths
from support import make_paths, read_output

VENV_BIN = Path(sys.executable).parent


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True, timeout=30)
    return path.resolve()


def path_dir(tmp: Path, names: dict[str, Path]) -> Path:
    """A directory holding the given executables under the given names (symlinks)."""
    bin_dir = tmp / "plugins-bin"
    bin_dir.mkdir(exist_ok=True)
    for name, target in names.items():
        (bin_dir / name).symlink_to(target)
    return bin_dir


class Collector:
    def __init__(self, tmp: Path, repos: list[Path], path_entries: list[str], **section: Any) -> None:
        self.paths: Paths = make_paths(tmp)
        self.paths.home.mkdir(parents=True, exist_ok=True)
        self.paths.config_dir.mkdir(parents=True, exist_ok=True)
        table = {"enabled": True, "repos": [str(r) for r in repos], **section}
        lines = ["[collector]", "export_agent_fields = true",  # the tests read the plugins' agent.<id>.* fields
                 "[external_agents]"] + [f"{k} = {json.dumps(v)}" for k, v in table.items()]
        self.paths.config_file.write_text("\n".join(lines) + "\n")
        self.path_env = os.pathsep.join(path_entries + ["/usr/bin", "/bin"])

    def collect(self, monkeypatch: Any) -> list[dict[str, Any]]:
        monkeypatch.setenv("PATH", self.path_env)
        service = Service(self.paths, load_config(self.paths.config_file, env={}), output_dir=self.paths.output_dir)
        service.startup()
        try:
            asyncio.run(service.collect_once())
        finally:
            service.shutdown()
        return [e for e in read_output(self.paths.output_dir) if e["event.name"] != "session.status"]

    def status(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.paths.state_dir / "status.json").read_text())
        return data
