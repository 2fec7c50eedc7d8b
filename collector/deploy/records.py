"""Per-file deploy records in ``<state_dir>/deploy/``.

For every file we write into, we keep: the *baseline* (the file as it is without our entries: the
original bytes, or "absent"), the hash of the bytes we wrote, the directories we created, and the
integration specs that produced it. Uninstall restores the baseline byte for byte when the file still
holds exactly what we wrote; otherwise it removes our entries structurally and keeps everyone else's.
The very first original of each file is also kept, never overwritten, under ``backups/``.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from collector.deploy.fsutil import read_or_none, remove_file, sha256_of, write_atomic
from collector.paths import Paths
from collector.util.private import private_dir


def deploy_dir(paths: Paths) -> Path:
    return paths.state_dir / "deploy"


def _key(agent: str, file: Path) -> str:
    digest = hashlib.sha256(str(file).encode()).hexdigest()[:16]
    return f"{agent}--{file.name}--{digest}"


@dataclass(slots=True)
class DeployRecord:
    agent: str
    file: str
    specs: list[dict[str, Any]]
    baseline_exists: bool
    baseline_sha256: str
    written_sha256: str
    created_dirs: list[str] = field(default_factory=list)
    updated_unix: float = 0.0

    @property
    def path(self) -> Path:
        return Path(self.file)

    def holds_what_we_wrote(self, current: bytes | None) -> bool:
        return sha256_of(current) == self.written_sha256


class RecordStore:
    def __init__(self, paths: Paths) -> None:
        self.root = deploy_dir(paths)

    def _json(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def _base(self, key: str) -> Path:
        return self.root / f"{key}.base"

    def load(self, agent: str, file: Path) -> DeployRecord | None:
        return self._load_key(_key(agent, file))

    def _load_key(self, key: str) -> DeployRecord | None:
        raw = read_or_none(self._json(key))
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            return DeployRecord(**data)
        except (ValueError, TypeError):
            return None  # a damaged record is treated as no record: structural removal still works

    def baseline(self, record: DeployRecord) -> bytes | None:
        if not record.baseline_exists:
            return None
        data = read_or_none(self._base(_key(record.agent, record.path)))
        if data is None or sha256_of(data) != record.baseline_sha256:
            raise FileNotFoundError(f"baseline copy of {record.file} is missing or damaged")
        return data

    def save(
        self,
        agent: str,
        file: Path,
        specs: list[dict[str, Any]],
        baseline: bytes | None,
        written: bytes | None,
        created_dirs: list[Path],
    ) -> DeployRecord:
        key = _key(agent, file)
        private_dir(self.root / "backups")
        first = self.root / "backups" / f"{key}.orig"
        if baseline is not None and not first.exists():
            write_atomic(first, baseline, mode=0o600)  # backup before our first edit, kept for good
        if baseline is not None:
            write_atomic(self._base(key), baseline, mode=0o600)
        else:
            remove_file(self._base(key))
        previous = self._load_key(key)
        dirs = sorted({*(previous.created_dirs if previous else []), *(str(d) for d in created_dirs)})
        record = DeployRecord(
            agent=agent,
            file=str(file),
            specs=specs,
            baseline_exists=baseline is not None,
            baseline_sha256=sha256_of(baseline),
            written_sha256=sha256_of(written),
            created_dirs=dirs,
            updated_unix=time.time(),
        )
        write_atomic(self._json(key), json.dumps(asdict(record), indent=2).encode() + b"\n", mode=0o600)
        return record

    def delete(self, record: DeployRecord) -> None:
        key = _key(record.agent, record.path)
        remove_file(self._json(key))
        remove_file(self._base(key))

    def all(self, agent: str | None = None) -> list[DeployRecord]:
        if not self.root.is_dir():
            return []
        out = []
        for path in sorted(self.root.glob("*.json")):
            record = self._load_key(path.stem)
            if record and (agent is None or record.agent == agent):
                out.append(record)
        return out
