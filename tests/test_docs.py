"""The README documents every field of the event schema, and the CI runs the README's test command."""

from __future__ import annotations

import json
import re

from support import ROOT


def test_readme_documents_every_schema_field() -> None:
    readme = (ROOT / "README.md").read_text()
    schema = json.loads((ROOT / "schemas" / "activity-event.schema.json").read_text())
    documented = set(re.findall(r"^\| `([^`]+)` \|", readme, flags=re.M))
    missing = set(schema["properties"]) - documented
    assert not missing, f"README lacks: {sorted(missing)}"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "sh scripts/test.sh" in readme and "sh scripts/test.sh" in ci
