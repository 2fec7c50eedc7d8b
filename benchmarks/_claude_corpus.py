"""Generate Claude Code-format transcripts by replaying the real fixture transcripts with fresh ids."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "claude-code" / "two_turns_resume"


def template_lines() -> list[str]:
    path = next(FIXTURE.glob("home/.claude/projects/*/*.jsonl"))
    return path.read_text(encoding="utf-8").splitlines()


def _remap(text: str, mapping: dict[str, str]) -> str:
    for old, new in mapping.items():
        text = text.replace(old, new)
    return text


def generate(directory: Path, target_bytes: int, per_file: int = 4 * 1024 * 1024) -> tuple[int, int]:
    """Write files of ~per_file bytes until target_bytes; returns (files, bytes)."""
    lines = template_lines()
    records = [json.loads(x) for x in lines]
    ids = set()
    for r in records:
        for key in ("sessionId", "uuid", "promptId", "requestRef"):
            if isinstance(r.get(key), str):
                ids.add(r[key])
        msg = r.get("message") or {}
        if isinstance(msg, dict) and isinstance(msg.get("id"), str):
            ids.add(msg["id"])
            for block in msg.get("content") or []:
                if isinstance(block, dict) and isinstance(block.get("id"), str):
                    ids.add(block["id"])
        if r.get("type") == "api-request":
            ids.add(r["id"])
    directory.mkdir(parents=True, exist_ok=True)
    written = files = 0
    while written < target_bytes:
        project = directory / f"-tmp-bench-{files:04d}"
        project.mkdir(exist_ok=True)
        path = project / f"{uuid.uuid4()}.jsonl"
        size = 0
        with path.open("w", encoding="utf-8") as f:
            while size < per_file:
                mapping = {old: str(uuid.uuid4()) for old in ids}
                chunk = "\n".join(_remap(x, mapping) for x in lines) + "\n"
                f.write(chunk)
                size += len(chunk.encode())
        written += size
        files += 1
    return files, written
