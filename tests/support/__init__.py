"""Helpers shared by the tests: run the collector on a fixture, read its output, check it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from collector.config import Config
from collector.daemon.service import Service
from collector.definitions import load_definitions
from collector.paths import Paths
from collector.pipeline.status import SessionStatusTracker

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads((ROOT / "schemas" / "activity-event.schema.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def assert_schema_valid(entries: list[dict[str, Any]]) -> None:
    validator = _validator()
    for entry in entries:
        errors = list(validator.iter_errors(entry))
        assert not errors, f"{entry['event.name']} {entry.get('event.id')}: {[e.message for e in errors]}"


def make_paths(tmp: Path, home: Path | None = None) -> Paths:
    return Paths(home=home or tmp / "home", config_dir=tmp / "config", data_dir=tmp / "data")


def read_output(directory: Path) -> list[dict[str, Any]]:
    entries = []
    for path in sorted(directory.glob("activity-*.jsonl")):
        with path.open("rb") as f:
            entries.extend(json.loads(line) for line in f if line.strip())
    return entries


def collect(paths: Paths, output: Path | None = None, config: Config | None = None,
            clock: Callable[[], int] | None = None) -> list[dict[str, Any]]:
    """One `collect --once` pass in-process; returns everything in the output directory. ``clock`` is the
    idle rule's "now" (default: the real time)."""
    from collector.config import load_config

    cfg = config or load_config(paths.config_file, env={})
    service = Service(paths, cfg, output_dir=output or paths.output_dir, **({"clock": clock} if clock else {}))
    service.startup()
    try:
        asyncio.run(service.collect_once())
    finally:
        service.shutdown()
    return read_output(output or paths.output_dir)


def long_after() -> int:
    """The idle rule's "now" for fixtures: a year on, so every session the agent left open is closed,
    whatever the age of the capture."""
    return time.time_ns() + 365 * 86400 * 10**9


def prepare_fixture(case: Path, tmp: Path) -> Paths:
    """Copy a fixture case (home/ and spool/) into tmp so the run can write state next to it."""
    home = tmp / "home"
    if (case / "home").exists():
        shutil.copytree(case / "home", home, symlinks=True)
    else:
        home.mkdir(parents=True)
    paths = make_paths(tmp, home)
    if (case / "spool").exists():
        shutil.copytree(case / "spool", paths.spool_dir)
    return paths


# -- token ground truth ----------------------------------------------------------------------------


def usage_tuple(api: str, usage: dict[str, Any]) -> tuple[int, int, int, int]:
    """(input incl. cached, output, cache read, cache creation) from a model server's usage block."""
    if api == "anthropic":
        cr = usage.get("cache_read_input_tokens") or 0
        cc = usage.get("cache_creation_input_tokens") or 0
        return usage["input_tokens"] + cr + cc, usage["output_tokens"], cr, cc
    if api in ("openai-responses", "responses"):
        cached = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
        return usage["input_tokens"], usage["output_tokens"], cached, 0
    if api in ("openai-chat", "chat", "openai"):
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        return usage["prompt_tokens"], usage["completion_tokens"], cached, 0
    if api in ("gemini", "google"):
        cached = usage.get("cachedContentTokenCount") or 0
        out = (usage.get("candidatesTokenCount") or 0) + (usage.get("thoughtsTokenCount") or 0)
        return usage["promptTokenCount"], out, cached, 0
    raise ValueError(f"unknown api {api!r}")


def truth_from_lines(lines: list[dict[str, Any]]) -> Counter[tuple[int, int, int, int]]:
    return Counter(usage_tuple(d["api"], d["usage"]) for d in lines if d.get("kind") == "response_usage")


def truth_from_file(path: Path) -> Counter[tuple[int, int, int, int]]:
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return truth_from_lines(lines)


def entry_tokens(entries: list[dict[str, Any]]) -> Counter[tuple[int, int, int, int]]:
    return Counter(
        (
            e.get("gen_ai.usage.input_tokens", 0),
            e.get("gen_ai.usage.output_tokens", 0),
            e.get("gen_ai.usage.cache_read.input_tokens", 0),
            e.get("gen_ai.usage.cache_creation.input_tokens", 0),
        )
        for e in entries
        if e["event.name"] == "llm.response"
    )


def tool_pairs(entries: list[dict[str, Any]]) -> dict[str, tuple[int, int, str | None]]:
    """call id -> (number of tool.call, number of tool.result, status of the result)."""
    out: dict[str, list[Any]] = {}
    for e in entries:
        if e["event.name"] in ("tool.call", "tool.result"):
            slot = out.setdefault(e["gen_ai.tool.call.id"], [0, 0, None])
            if e["event.name"] == "tool.call":
                slot[0] += 1
            else:
                slot[1] += 1
                slot[2] = e.get("tool.result.status")
    return {k: (v[0], v[1], v[2]) for k, v in out.items()}


def assert_no_duplicates(entries: list[dict[str, Any]]) -> None:
    ids = Counter(e["event.id"] for e in entries)
    assert not [i for i, n in ids.items() if n > 1], "duplicate event ids in output"


def env_without_collector() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AGENT_COLLECTOR_")}


def builtin_tracker(**kwargs: Any) -> SessionStatusTracker:
    """A session status tracker with the status rules of the built-in agent definitions (agents.d)."""
    agents = load_definitions().agents
    return SessionStatusTracker({agent_id: d.status_rules for agent_id, d in agents.items()}, **kwargs)
