"""The verdicts shipped with the package (``collector.util.shipped_verdicts``): a cold start checks none of
the built-in definitions, their plug-in specs or the default exporters against a schema (jsonschema is not
even imported), and anything not exactly as shipped is checked as before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from support import ROOT

import collector.cli.ship_verdicts as shipping
from collector.daemon.plugins import check_definition
from collector.definitions import load_definitions
from collector.registry import PluginConfigError
from collector.sources.factory import source_kinds
from collector.util import shipped_verdicts


def test_the_shipped_list_is_the_built_in_files_as_they_are() -> None:
    """Fails after an edit of agents.d/ or the definition schema until scripts/ship_verdicts.py is run;
    ``current`` checks each file against its schema before it lists it."""
    shipped = orjson.loads(shipped_verdicts.FILE.read_bytes())["valid"]
    assert shipped == shipping.current()
    assert shipped_verdicts.shipped() == frozenset(shipped)


def test_a_cold_start_imports_no_jsonschema(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "AGENT_COLLECTOR_DATA_DIR": str(tmp_path / "data"),
           "AGENT_COLLECTOR_CONFIG_DIR": str(tmp_path / "cfg")}
    code = ("import sys\nfrom collector.cli.main import main\ntry:\n    main(['collect', '--once', '-q'])\n"
            "except SystemExit:\n    pass\nprint('jsonschema' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_an_override_or_an_edited_spec_is_still_checked(tmp_path: Path) -> None:
    overrides = tmp_path / "agents.d"
    overrides.mkdir()
    (overrides / "claude.json").write_text(json.dumps({"id": "claude-code", "content_capture": "yes"}))
    result = load_definitions(overrides, check=check_definition)
    assert [(Path(p.file).name, p.json_path) for p in result.problems] == [("claude.json", "$.content_capture")]
    assert result.agents["claude-code"].content_capture is False, "the built-in stands"
    shipped_spec = load_definitions(None).agents["codex"].sources[0]
    source_kinds().configure(shipped_spec["kind"], shipped_spec)  # as shipped: known valid
    with pytest.raises(PluginConfigError):
        source_kinds().configure(shipped_spec["kind"], {**shipped_spec, "no_such_option": 1})


def test_a_digest_covers_the_schema_and_the_document() -> None:
    schema, doc = {"type": "object"}, {"a": 1}
    assert shipped_verdicts.plain_digest(schema, doc) == shipped_verdicts.plain_digest(dict(schema), {"a": 1})
    assert shipped_verdicts.plain_digest(schema, doc) != shipped_verdicts.plain_digest(schema, {"a": 2})
    assert shipped_verdicts.plain_digest(schema, doc) != shipped_verdicts.plain_digest({"type": "array"}, doc)


def test_no_config_at_all_is_valid_without_a_check() -> None:
    """``collector.config`` skips the schema walk for an empty configuration: the schema accepts it."""
    import jsonschema

    from collector import config

    assert jsonschema.Draft202012Validator(config.schema()).is_valid({})
    assert config.load_config(Path("/nonexistent/config.toml"), env={}, known_agents=[]) == config.defaults()
