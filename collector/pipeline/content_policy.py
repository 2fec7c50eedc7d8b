"""Content capture policy: unless capture is on for the agent, prompts, completions, tool arguments and
results leave nothing but their length and a keyed digest behind.

The digest is an HMAC-SHA256 under a per-install key (``<state dir>/content.key``, 0600, made on first
use), so two equal texts still compare equal on one machine but a short prompt cannot be found by hashing
guesses. ``content.digest = "none"`` keeps the length only.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import Any

from collector.model.entry import CONTENT_FIELDS
from collector.util.content_bytes import content_bytes

KEY_FILE = "content.key"
KEY_BYTES = 32
DIGEST_MODES = ("hmac", "none")
_BLOCK = 64  # SHA-256's block size
_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))


class ContentKeyError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class ContentPolicy:
    """``key`` None: only lengths are kept."""

    key: bytes | None = None
    # HMAC-SHA256 (RFC 2104) as its two hashes with the padded key taken in, copied for each digest:
    # hmac.new padded and hashed the key every time, and its Python wrapper costs more than the hashing
    _keyed: tuple[Any, Any] | None = dc_field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.key is not None:
            key = self.key if len(self.key) <= _BLOCK else hashlib.sha256(self.key).digest()
            key = key.ljust(_BLOCK, b"\0")
            inner, outer = hashlib.sha256(key.translate(_IPAD)), hashlib.sha256(key.translate(_OPAD))
            object.__setattr__(self, "_keyed", (inner, outer))

    @classmethod
    def ephemeral(cls) -> ContentPolicy:
        """A policy with a key of its own (tests, one-off runs): digests compare equal only within it."""
        return cls(secrets.token_bytes(KEY_BYTES))

    def digest(self, data: bytes) -> str | None:
        if self._keyed is None:
            return None
        inner, outer = self._keyed[0].copy(), self._keyed[1].copy()
        inner.update(data)
        outer.update(inner.digest())
        return outer.hexdigest()

    def digest_value(self, value: Any) -> str | None:
        return self.digest(content_bytes(value))

    def apply(self, entry: dict[str, Any], capture: bool) -> dict[str, Any]:
        if capture:
            return entry
        for field in CONTENT_FIELDS:
            value = entry.pop(field, None)
            if value is None:
                continue
            data = content_bytes(value)
            entry[f"{field}.length"] = len(data)
            digest = self.digest(data)
            if digest is not None:
                entry[f"{field}.hmac"] = digest
        return entry


def policy_for(state_dir: Path, mode: str) -> ContentPolicy:
    """The policy for ``content.digest = mode``; "hmac" reads (or creates) the install's key."""
    if mode not in DIGEST_MODES:
        raise ContentKeyError(f"content.digest must be one of {', '.join(DIGEST_MODES)}, not {mode!r}")
    return ContentPolicy(load_or_create_key(state_dir / KEY_FILE) if mode == "hmac" else None)


def load_or_create_key(path: Path) -> bytes:
    """The key in ``path`` (hex), made with 0600 on first use. A planted symlink is refused."""
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, secrets.token_hex(KEY_BYTES).encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # never replaces a key another process made first
    except FileExistsError:
        pass
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ContentKeyError(f"{path}: cannot be read safely ({exc.strerror})") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ContentKeyError(f"{path}: not a regular file")
        if st.st_mode & 0o077:
            os.fchmod(fd, 0o600)
        text = os.read(fd, 4 * KEY_BYTES).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise ContentKeyError(f"{path}: not a content key ({KEY_BYTES} bytes in hex); remove it to make a new one")
    return key
