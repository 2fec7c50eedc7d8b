"""Schema verdicts of earlier runs (``collector.definitions.verdicts``): a warm start skips the schema checks
of unchanged definitions, and a changed definition or schema is checked again as if there were none."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from support import ROOT

from collector.definitions import load_definitions, loader
from collector.definitions.verdicts import KEEP, Verdicts
from collector.paths import bundled_schema
from collector.util import shipped_verdicts


@pytest.fixture(autouse=True)
def _fresh_schema_caches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The validator and the meta-schema check are cached per process: each test starts without them.
    Nothing counts as shipped valid here (tests/definitions/test_shipped_verdicts.py tests those)."""
    monkeypatch.setattr(shipped_verdicts, "shipped", frozenset)
    loader._plain_validator.cache_clear()
    loader._check_schema.cache_clear()
    yield
    loader._plain_validator.cache_clear()
    loader._check_schema.cache_clear()


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Calls of jsonschema's walk (nested ones too): none means nothing was checked."""
    calls: list[int] = []
    cls = type(loader._plain_validator())
    real = cls.iter_errors

    def iter_errors(self: object, *args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cls, "iter_errors", iter_errors)
    return calls


def test_a_warm_start_checks_nothing_again_and_a_changed_override_is_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "state" / "schema-verdicts.json"
    file.parent.mkdir()
    overrides = tmp_path / "agents.d"
    overrides.mkdir()
    (overrides / "claude.json").write_text(json.dumps({"id": "claude-code", "content_capture": True}))
    calls = _counting(monkeypatch)
    cold = Verdicts(file)
    first = load_definitions(overrides, verdicts=cold)
    cold.save()
    assert not first.problems and calls, "the first start checks every definition"
    calls.clear()
    warm = load_definitions(overrides, verdicts=Verdicts(file))
    assert calls == [] and warm.agents.keys() == first.agents.keys()
    assert warm.agents["claude-code"].raw == first.agents["claude-code"].raw

    (overrides / "claude.json").write_text(json.dumps({"id": "claude-code", "content_capture": "yes"}))
    changed = load_definitions(overrides, verdicts=Verdicts(file))
    assert calls, "a changed file is checked again"
    assert [(Path(p.file).name, p.json_path) for p in changed.problems] == [("claude.json", "$.content_capture")]
    assert changed.agents["claude-code"].content_capture is False, "the built-in stands"
    again = load_definitions(overrides, verdicts=Verdicts(file))
    assert again.problems == changed.problems, "a definition with problems is never remembered as valid"


def test_a_changed_schema_is_checked_against_its_meta_schema_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "schema-verdicts.json"
    verdicts = Verdicts(file)
    load_definitions(None, verdicts=verdicts)
    verdicts.save()
    root = tmp_path / "root"
    shutil.copytree(ROOT / "agents.d", root / "agents.d")
    shutil.copytree(ROOT / "schemas", root / "schemas")
    schema_file = root / "schemas" / "agent-definition.schema.json"
    schema = json.loads(schema_file.read_text())
    schema["properties"]["name"] = {"type": 5}
    schema_file.write_text(json.dumps(schema))
    monkeypatch.setenv("AGENT_COLLECTOR_ROOT", str(root))
    bundled_schema.cache_clear()  # read once a process: this test changes it
    loader._plain_validator.cache_clear()
    try:
        with pytest.raises(jsonschema.SchemaError):
            load_definitions(None, verdicts=Verdicts(file))
    finally:
        bundled_schema.cache_clear()


def test_a_broken_cache_is_ignored_and_the_file_stays_bounded(tmp_path: Path) -> None:
    file = tmp_path / "schema-verdicts.json"
    for junk in (b"{not json", b"[1, 2]", b'{"valid": "x"}', b'{"valid": [1, null]}'):
        file.write_bytes(junk)
        verdicts = Verdicts(file)
        result = load_definitions(None, verdicts=verdicts)
        assert not result.problems and "claude-code" in result.agents
        verdicts.save()
        assert len(json.loads(file.read_text())["valid"]) == len(result.agents) + 1  # and the schema's
    many = Verdicts(file)
    for n in range(KEEP + 10):
        many.add(f"{n:064x}")
    many.save()
    kept = json.loads(file.read_text())["valid"]
    assert len(kept) == KEEP and kept[-1] == f"{KEEP + 9:064x}", "the latest are kept"


def test_no_folder_no_file(tmp_path: Path) -> None:
    verdicts = Verdicts(tmp_path / "missing" / "schema-verdicts.json")
    load_definitions(None, verdicts=verdicts)
    verdicts.save()
    assert not (tmp_path / "missing").exists(), "a cache never creates the state folder"


def test_a_fifo_or_garbage_in_place_of_the_cache_is_no_verdict(tmp_path: Path) -> None:
    """The cache is read only as a regular file: a FIFO there is refused at once, not waited on."""
    import os

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert "anything" not in Verdicts(fifo)
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\xff{not json")
    assert "anything" not in Verdicts(garbage)
