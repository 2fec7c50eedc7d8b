"""TOML text from plain data: read back, it is the data; what has no TOML form is refused."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from collector.util.toml_write import dumps


def test_tables_lists_of_tables_and_awkward_keys_read_back() -> None:
    data: dict[str, Any] = {
        "collector": {"user_id": 'a "quoted"\\ name\t\u2028', "poll_interval_s": 2.5, "batch_size": 10},
        "agents": {"claude-code": {"content_capture": True}},
        "otlp": {"enabled": True, "backends": [
            {"name": "a", "signals": ["traces"], "headers": {"x key": "1"}, "traces": {"endpoint": "http://h"}},
            {"name": "b", "endpoint": "http://b"}]},
        "attributes": {"team.name": "platform"},
    }
    text = dumps(data)
    assert tomllib.loads(text) == data
    assert "[agents]" not in text  # a table of tables alone gets no empty header


@pytest.mark.parametrize("value", [None, float("nan"), object(), [1, None]])
def test_what_has_no_toml_form_is_refused(value: Any) -> None:
    with pytest.raises((ValueError, tomllib.TOMLDecodeError)):
        dumps({"s": {"k": value}})
