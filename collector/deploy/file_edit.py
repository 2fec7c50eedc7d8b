"""The contract of a deploy edit: what one integration does to one file, and what a check of it finds.

Every edit is a pure function of bytes (``None`` = the file does not exist), so the engine can plan,
dry-run, restore and verify without caring which kind it holds. The built-in kinds' edits are in
``settings_hooks``, ``toml_notify``, ``plugin_files``, ``http_plugin`` and ``hooks_dir``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from collector.deploy.model import DeployError


@dataclass(frozen=True, slots=True)
class Check:
    level: str  # ok | missing | partial | outdated | conflict
    hint: str


class FileEdit(Protocol):
    path: Path
    spec: dict[str, Any]

    def apply(self, current: bytes | None) -> bytes | None: ...

    def strip(self, current: bytes | None) -> bytes | None: ...

    def check(self, current: bytes | None) -> Check: ...


MAX_CONFIG_BYTES = 8 * 1024 * 1024
"""The largest config file we edit: an agent's settings are kilobytes; more is not a settings file."""


def file_text(data: bytes, path: Path) -> str:
    """The file's bytes as text; a file that is not UTF-8, or larger than :data:`MAX_CONFIG_BYTES`, is not
    ours to edit (DeployError)."""
    if len(data) > MAX_CONFIG_BYTES:
        raise DeployError(f"{path}: {len(data)} bytes, more than a config file holds "
                          f"({MAX_CONFIG_BYTES}); left untouched")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DeployError(f"{path}: not UTF-8 text ({exc}); left untouched") from None
