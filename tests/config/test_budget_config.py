"""[budget] in config.toml: checked by the schema at load, with a line naming the key."""

from __future__ import annotations

import re
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


@pytest.mark.parametrize(("text", "says"), [
    ('[[budget.limits]]\nname = "x"\n', "budget.limits.0: needs either usd or tokens"),
    ('[[budget.limits]]\nname = "x"\nusd = 1\ntokens = 5\n', "budget.limits.0: needs either usd or tokens"),
    ('[[budget.limits]]\nname = "x"\nusd = -1\n', "budget.limits.0.usd"),
    ('[[budget.limits]]\nname = "x"\nusd = 1\nperiod = "year"\n', "budget.limits.0.period"),
    ('[[budget.limits]]\nname = "x"\nusd = 1\nhard = true\nproject = "shop"\n',
     "hard = true is only for a limit of a whole agent"),
    ('[[budget.limits]]\nname = "x"\nusd = 1\nhard = true\nperiod = "session"\n', "budget.limits.0.period"),
    ('[budget]\nwebhook = "ftp://example.com"\n', "budget.webhook"),
    ('[budget]\nwarn_at = 0\n', "budget.warn_at"),
])
def test_bad_limits_are_refused_with_the_key(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        load(tmp_path, text)
