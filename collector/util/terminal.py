"""Text for a terminal: control characters escaped, so a value from an agent's record (a model name, a
path, a session title) cannot move the cursor, set the window title (OSC), ring the bell or reverse the
text that follows it (bidi overrides).

Escaped: C0 controls (U+0000-001F) but the kept layout characters (newline and tab for whole outputs,
none in a table cell), DEL, C1 controls (U+0080-009F), the bidi embeddings and overrides U+202A-202E and
isolates U+2066-2069, and the line and paragraph separators U+2028-2029; each becomes ``\\xNN`` or
``\\uNNNN``. JSON output is not passed through here: it escapes C0 itself, and its consumers are not
terminals.
"""

from __future__ import annotations

import io
from typing import Any, TextIO

_CODES = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A),
          0x2028, 0x2029]
_TABLE: dict[int, str] = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CODES}
_LAYOUT = {c: chr(c) for c in (0x09, 0x0A)}
_LAYOUT_TABLE: dict[int, str] = {**_TABLE, **_LAYOUT}


def escape(text: Any) -> str:
    """``text`` as a string with every control character escaped (newline and tab too: one table cell)."""
    return str(text).translate(_TABLE)


def escape_output(text: str) -> str:
    """Like ``escape`` but newline and tab kept: a whole output of many lines."""
    return text.translate(_LAYOUT_TABLE)


class TerminalWriter(io.TextIOBase):
    """A text stream that escapes what is written to it (``escape_output``) before passing it on."""

    def __init__(self, target: TextIO) -> None:
        super().__init__()
        self._target = target

    def write(self, text: str) -> int:
        self._target.write(escape_output(text))
        return len(text)

    def flush(self) -> None:
        self._target.flush()

    def isatty(self) -> bool:
        return self._target.isatty()

    def fileno(self) -> int:
        return self._target.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._target, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)
