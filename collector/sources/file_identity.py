"""File identity: device + inode, plus a fingerprint of the first line (as Vector's checksum)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

FINGERPRINT_BYTES = 1024


@dataclass(frozen=True, slots=True)
class FileIdentity:
    dev: int
    ino: int
    fingerprint: str

    def same_file(self, dev: int, ino: int) -> bool:
        return self.dev == dev and self.ino == ino


def fingerprint(fd: int) -> str | None:
    """Hash of the first line (at most FINGERPRINT_BYTES); None until a first line is complete."""
    head = os.pread(fd, FINGERPRINT_BYTES, 0)
    newline = head.find(b"\n")
    if newline >= 0:
        head = head[: newline + 1]
    elif len(head) < FINGERPRINT_BYTES:
        return None
    return hashlib.sha256(head).hexdigest()[:16]


def identify(fd: int) -> FileIdentity | None:
    st = os.fstat(fd)
    fp = fingerprint(fd)
    return None if fp is None else FileIdentity(st.st_dev, st.st_ino, fp)


def tail_digest(data: bytes, size: int = 256) -> str:
    """Hash of the last ``size`` bytes of ``data``: with the first-line fingerprint, it tells a file that
    was rewritten in place (same first line, same or larger size) from one that only grew."""
    return hashlib.sha256(data[-size:]).hexdigest()[:16]
