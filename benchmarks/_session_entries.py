"""Realistic session text: the entries the real pipeline makes of every agent's fixture cases in
tests/fixtures (transcripts, session files, hook spools), with content capture on and masking off."""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
AGENTS = ("claude-code", "codex", "gemini-cli", "qwen-code", "opencode")


def fixture_cases() -> list[Path]:
    return sorted(p.parent for agent in AGENTS for p in (FIXTURES / agent).glob("*/expected.json"))


def session_entries(env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every entry of every fixture case, content kept, secrets not masked (the masker's input); ``env``
    replaces those settings (``{}``: the default configuration, content capture off)."""
    sys.path.insert(0, str(ROOT))
    import logging

    from collector.config import load_config
    from collector.daemon.service import Service
    from collector.paths import Paths

    logging.getLogger("collector").setLevel(logging.ERROR)  # the fixtures' own warnings are not the figure
    entries: list[dict[str, Any]] = []
    if env is None:
        env = {"AGENT_COLLECTOR_CONTENT__CAPTURE": "true", "AGENT_COLLECTOR_MASKING__ENABLED": "false"}
    for case in fixture_cases():
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "home"
            if (case / "home").exists():
                shutil.copytree(case / "home", home, symlinks=True)
            else:
                home.mkdir()
            paths = Paths(home=home, config_dir=Path(tmp) / "config", data_dir=Path(tmp) / "data")
            if (case / "spool").exists():
                shutil.copytree(case / "spool", paths.spool_dir)
            service = Service(paths, load_config(paths.config_file, env=env), output_dir=paths.output_dir)
            service.startup()
            try:
                asyncio.run(service.collect_once())
            finally:
                service.shutdown()
            entries.extend(_read(paths.output_dir))
    return entries


def _read(directory: Path) -> list[dict[str, Any]]:
    import orjson

    out = []
    for path in sorted(directory.glob("activity-*.jsonl")):
        out.extend(orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip())
    return out


def string_bytes(value: Any) -> int:
    """UTF-8 bytes of every string in ``value``, dictionary keys included."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, list):
        return sum(string_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(string_bytes(k) + string_bytes(v) for k, v in value.items())
    return 0


def real_texts(min_chars: int = 16) -> list[str]:
    """The distinct strings of the agents' own files in the fixtures (prompts, answers, tool output, the
    agents' system prompts and tool descriptions), in file order."""
    import orjson

    seen: dict[str, None] = {}

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if len(value) >= min_chars:
                seen.setdefault(value)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    for agent in AGENTS:
        for path in sorted((FIXTURES / agent).glob("*/home/**/*.json*")):
            for line in path.read_bytes().splitlines() if path.suffix == ".jsonl" else [path.read_bytes()]:
                try:
                    walk(orjson.loads(line))
                except orjson.JSONDecodeError:
                    continue
    return list(seen)


def realistic_entries(target_bytes: int) -> list[dict[str, Any]]:
    """Entries of the real shapes (the fixture pipeline's output, cycled) whose content fields hold real
    session text, until their strings add up to ``target_bytes``."""
    import orjson

    from collector.model.entry import CONTENT_FIELDS

    templates = session_entries()
    texts = real_texts()
    out: list[dict[str, Any]] = []
    total = 0
    cursor = 0

    def refill(value: Any, chunk: int) -> Any:
        nonlocal cursor
        if isinstance(value, str):
            parts, size = [], 0
            while size < chunk:
                parts.append(texts[cursor % len(texts)])
                size += len(parts[-1])
                cursor += 1
            return "\n".join(parts)
        if isinstance(value, list):
            return [refill(v, chunk) for v in value]
        if isinstance(value, dict):
            return {k: refill(v, chunk) if k in ("text", "content", "stdout", "output", "command") else v
                    for k, v in value.items()}
        return value

    while total < target_bytes:
        for template in templates:
            entry = orjson.loads(orjson.dumps(template))
            for field in CONTENT_FIELDS:
                if field in entry:
                    entry[field] = refill(entry[field], 4000 if field.endswith("result") else 600)
            out.append(entry)
            total += string_bytes(entry)
    return out
