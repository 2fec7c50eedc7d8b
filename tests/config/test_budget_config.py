"""[budget] in config.toml: checked by the schema at load, with a line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.config import ConfigError, load_config


def load(tmp_path: Path, text: str) -> dict:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_config(path, env={}, known_agents=["claude-code"]).budget


def test_defaults_and_a_limit(tmp_path: Path) -> None:
    got = load(tmp_path, '[[budget.limits]]\nname = "daily"\nusd = 5\nhard = true\n')
    assert got["warn_at"] == 0.8 and got["notify"] is True and got["webhook"] == ""
    assert got["limits"] == [{"name": "daily", "usd": 5.0, "hard": True, "period": "day"}]


@pytest.mark.parametrize("text", [
    '[[budget.limits]]\nname = "x"\n',                                  # neither usd nor tokens
    '[[budget.limits]]\nname = "x"\nusd = 1\ntokens = 5\n',             # both
    '[[budget.limits]]\nname = "x"\nusd = -1\n',
    '[[budget.limits]]\nname = "x"\nusd = 1\nperiod = "year"\n',
    '[[budget.limits]]\nname = "x"\nusd = 1\nhard = true\nproject = "shop"\n',  # hard only for a whole agent
    '[[budget.limits]]\nname = "x"\nusd = 1\nhard = true\nperiod = "session"\n',
    '[budget]\nwebhook = "ftp://example.com"\n',
    '[budget]\nwarn_at = 0\n',
])
def test_bad_limits_are_refused_with_the_key(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="budget"):
        load(tmp_path, text)
