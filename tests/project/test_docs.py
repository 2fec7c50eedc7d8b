"""The README documents every field of the event schema and every command of the CLI, the CI runs the
README's test command, and nothing in the project points outside it."""

from __future__ import annotations

import argparse
import json
import re
import subprocess

from support import ROOT

from collector.cli.main import build_parser


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


# -- the README's command table and the CLI --------------------------------------------------------------

def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _positional_choices(parser: argparse.ArgumentParser) -> set[str]:
    return {str(c) for a in parser._actions if not a.option_strings and a.choices and
            not isinstance(a, argparse._SubParsersAction) for c in a.choices}


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {o: a for a in parser._actions for o in a.option_strings}


class _Table:
    """What the README's command table names: commands, subcommands, choices, options (checked as read)."""

    def __init__(self) -> None:
        self.top = _subcommands(build_parser())
        self.named: set[tuple[str, ...]] = set()
        self.problems: list[str] = []

    def row(self, cell: str) -> None:
        spans = re.findall(r"`([^`]+)`", cell)
        words = spans[0].split()
        assert words[0] == "agent-collector", cell
        command = words[1]
        self.words((command,), words[2:])
        for span in spans[1:]:
            first, *rest = span.split()
            nested = _subcommands(self.top.get(command, argparse.ArgumentParser()))
            if nested or first in _positional_choices(self.top.get(command, argparse.ArgumentParser())):
                self.words((command,), [first, *rest])
            else:
                self.words((first,), rest)

    def words(self, path: tuple[str, ...], tokens: list[str]) -> None:
        parser = self.top.get(path[0])
        if parser is None:
            self.problems.append(f"README names `{path[0]}`, which `agent-collector --help` does not list")
            return
        self.named.add(path)
        value_next = False
        for token in (t.strip("[]") for t in tokens):
            if value_next:  # the value of the option before (`--agent agentty`)
                value_next = False
            elif token.startswith("-"):
                action = _options(parser).get(token.split("=")[0])
                if action is None:
                    self.problems.append(f"{' '.join(path)}: no option {token}")
                value_next = action is not None and action.nargs != 0 and "=" not in token
            elif token in _subcommands(parser):
                path, parser = (*path, token), _subcommands(parser)[token]
                self.named.add(path)
            elif token.replace("\\|", "|").split("|")[0] in _positional_choices(parser):
                for choice in token.replace("\\|", "|").split("|"):
                    self.named.add((*path, choice))
                    if choice not in _positional_choices(parser):
                        self.problems.append(f"{' '.join(path)}: no choice {choice}")
            elif not token.isupper():
                self.problems.append(f"{' '.join(path)}: unknown word {token!r}")


def _readme_table() -> _Table:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    table = _Table()
    for line in section.splitlines():
        if line.startswith("| `agent-collector"):
            table.row(line.split(" | ")[0].lstrip("| "))
    return table


def test_readme_command_table_matches_the_cli() -> None:
    """Every command, subcommand and choice `--help` lists is in the table; every word the table uses exists."""
    table = _readme_table()
    assert not table.problems, table.problems
    wanted = {(name,) for name in table.top}
    for name, parser in table.top.items():
        wanted |= {(name, sub) for sub in _subcommands(parser)}
        wanted |= {(name, choice) for choice in _positional_choices(parser)}
    missing = sorted(" ".join(p) for p in wanted - table.named)
    assert not missing, f"README's command table lacks: {missing}"


def test_the_table_check_has_teeth() -> None:
    table = _Table()
    table.row("`agent-collector collect --once --nope` / `frobnicate`")
    table.row("`agent-collector agents list` / `explode`")
    assert table.problems == ["collect: no option --nope",
                              "README names `frobnicate`, which `agent-collector --help` does not list",
                              "agents: unknown word 'explode'"]


def test_no_reference_outside_the_project() -> None:
    """Users do not have the reference material the project was built from."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    offenders = []
    needles = ("../" + "shared", "/work/" + "shared")
    for name in tracked.stdout.splitlines():
        path = ROOT / name
        if not path.is_file() or path.suffix in {".sqlite", ".db", ".png", ".gz"}:
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        offenders += [f"{name}: {n}" for n in needles if n in text]
    assert not offenders, offenders


def test_every_module_the_docs_name_exists() -> None:
    """A module the README or docs/ names in backticks (`model/boundary.py`, `collector/daemon/service.py`)
    is a file of the project: the end of a path git tracks or would track (a module that moved leaves no
    name behind in the docs; issue 24 moved many)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True)
    files = ["/" + name for name in listed.stdout.splitlines()]
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]
    named = {(doc.name, p) for doc in docs for p in re.findall(r"`([A-Za-z0-9_./-]+\.py)`", doc.read_text())}
    assert len(named) > 50, "the docs are where the test looks"
    missing = sorted((doc, p) for doc, p in named if not any(f.endswith("/" + p.lstrip("./")) for f in files))
    assert missing == [], f"the docs name modules that are not there (moved? not written yet?): {missing}"
