"""README's "Adding an agent" done for real: the definition it shows for a member of the Claude Code hook
family (`acme-code`, files under ~/.acme), taken from the README itself, is installed as a user's
`agents.d` file alone, with no Python of its own. On a real Claude Code capture moved to its folders it
gives what Claude Code gives (the same entries and tokens, under its own id); the loader takes it with no problem;
`install` deploys its hooks into ~/.acme/settings.json and `uninstall` gives the file back byte for byte."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

from support import FIXTURES, ROOT, make_paths, prepare_fixture, read_output
from support.collect_once import collect_cli

from collector.definitions import load_definitions
from collector.deploy.engine import install_agent, uninstall_agent
from collector.paths import Paths

CLAUDE = FIXTURES / "claude-code" / "tool_then_answer"
MEMBER = "acme-code"


def _readme_definition() -> dict[str, object]:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- family-member-example -->\n```json\n(.*?)\n```", text, re.S)
    assert match, "README's family member example is where the test looks for it"
    return dict(json.loads(match.group(1)))


def _as_member(root: Path) -> Paths:
    """The Claude Code capture, moved where the member keeps its files, its spool lines under its id."""
    home = root / "home"
    shutil.copytree(CLAUDE / "home" / ".claude", home / ".acme")
    paths = make_paths(root, home)
    spool = paths.spool_dir / MEMBER
    spool.mkdir(parents=True)
    for file in (CLAUDE / "spool" / "claude-code").glob("*.jsonl"):
        lines = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
        for line in lines:
            line["agent"] = MEMBER
        (spool / file.name.replace("claude-code", MEMBER)).write_text("".join(json.dumps(x) + "\n" for x in lines))
    paths.config_dir.mkdir(parents=True, exist_ok=True)
    (paths.config_dir / "agents.d").mkdir(exist_ok=True)
    (paths.config_dir / "agents.d" / f"{MEMBER}.json").write_text(json.dumps(_readme_definition()))
    return paths


def _comparable(entries: list[dict[str, object]]) -> Counter[tuple[object, ...]]:
    return Counter((e["event.name"], e.get("gen_ai.tool.name"), e.get("gen_ai.usage.input_tokens"),
                    e.get("gen_ai.usage.output_tokens"), e.get("gen_ai.response.model"))
                   for e in entries if e["event.name"] != "session.status")


def test_the_readme_family_member_reads_like_the_agent_it_copies(tmp_path: Path) -> None:
    original = prepare_fixture(CLAUDE, tmp_path / "claude")
    collect_cli(original)
    claude = read_output(original.output_dir)
    member = _as_member(tmp_path / "member")
    status = collect_cli(member)
    mine = read_output(member.output_dir)
    assert {e["gen_ai.agent.type"] for e in mine} == {MEMBER}
    assert len(mine) > 10 and _comparable(mine) == _comparable(claude)
    assert {e["gen_ai.session.id"] for e in mine} == {e["gen_ai.session.id"] for e in claude}
    assert status["pipeline"]["unreadable"] == {}


def test_the_readme_family_member_is_listed_installed_and_removed(tmp_path: Path) -> None:
    member = _as_member(tmp_path)
    loaded = load_definitions(member.agents_override_dir)
    assert not loaded.problems, [str(p) for p in loaded.problems]
    definition = loaded.agents[MEMBER]
    settings = member.home / ".acme" / "settings.json"
    settings.write_text('{"theme": "dark"}\n')
    before = settings.read_bytes()
    changes = install_agent(definition, member)
    assert changes and not [c for c in changes if c.failed], changes
    hooks = json.loads(settings.read_text())["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"}
    assert MEMBER in json.dumps(hooks), "the hooks spool under the member's own id"
    uninstall_agent(definition, member)
    assert settings.read_bytes() == before
