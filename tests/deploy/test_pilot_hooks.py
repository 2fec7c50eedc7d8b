"""Pilot's hooks cut out of one config file: JSON groups and flat lists, JSONC with comments, TOML tables;
a hook of anyone else stays; a file that is not what its format says is refused, not rewritten."""

from __future__ import annotations

import json
import tomllib

import pytest

from collector.deploy.pilot_hooks import without_pilot

PILOT = "/h/.loongsuite-pilot/hooks/cursor-loongsuite-pilot-hook.sh"


def test_a_flat_list_keeps_other_hooks() -> None:  # Cursor's hooks.json (Pilot's agents.d/cursor.json: flat)
    text = json.dumps({"version": 1, "hooks": {"stop": [{"command": PILOT, "timeout": 30}, {"command": "mine"}],
                                               "preToolUse": [{"command": PILOT}]}}, indent=2)
    new, removed = without_pilot(text.encode(), "json")
    assert removed == 2
    assert json.loads(new) == {"version": 1, "hooks": {"stop": [{"command": "mine"}]}}


def test_jsonc_comments_outside_the_removed_hook_stay() -> None:
    text = '{\n  // my settings\n  "hooks": {"Stop": [{"matcher": "*", "hooks": [{"command": "' + PILOT + '"}]}]}\n}\n'
    new, removed = without_pilot(text.encode(), "jsonc")
    assert removed == 1 and b"// my settings" in new


def test_toml_tables_of_others_stay() -> None:
    text = f'[[hooks]]\nevent = "Stop"\ncommand = "{PILOT}"\n\n[[hooks]]\nevent = "Stop"\ncommand = "mine"\n'
    new, removed = without_pilot(text.encode(), "toml")
    assert removed == 1 and tomllib.loads(new.decode())["hooks"] == [{"event": "Stop", "command": "mine"}]


def test_nothing_of_pilots_changes_nothing() -> None:
    text = b'{"hooks": {"Stop": [{"matcher": "*", "hooks": [{"command": "mine"}]}]}, "x": [1, 2]}'
    assert without_pilot(text, "json") == (text, 0)


@pytest.mark.parametrize(("data", "fmt"), [(b"{not json", "json"), (b"\xff\xfe", "json"), (b"[[hooks]\n", "toml"),
                                           (b"[" * 100000, "json")])
def test_a_broken_file_is_refused(data: bytes, fmt: str) -> None:
    with pytest.raises(ValueError):
        without_pilot(data, fmt)


def test_a_toml_value_that_looks_like_a_table_stops_the_cut() -> None:
    text = f'note = """\n[[hooks]]\ncommand = "{PILOT}"\n"""\n'  # a multi-line string, not a table
    with pytest.raises(ValueError):
        without_pilot(text.encode(), "toml")
