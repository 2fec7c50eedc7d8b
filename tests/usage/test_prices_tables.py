"""Prices beyond genai-prices: the user's ``[prices]`` (config.toml) and what priced each figure."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from collector.config import ConfigError, load_config
from collector.usage.store import UsageStore


def _call(eid: str, model: str, provider: str, inp: int, out: int, cr: int = 0, cw: int = 0) -> dict[str, Any]:
    return {"event.id": eid, "event.name": "llm.response", "time_unix_nano": int(time.time() * 1e9),
            "gen_ai.agent.type": "qwen-code", "gen_ai.session.id": "s1",
            "gen_ai.response.model": model, "gen_ai.provider.name": provider,
            "gen_ai.usage.input_tokens": inp, "gen_ai.usage.output_tokens": out,
            "gen_ai.usage.cache_read.input_tokens": cr, "gen_ai.usage.cache_creation.input_tokens": cw}


def _store(tmp_path: Path, entries: list[dict[str, Any]]) -> Path:
    path = tmp_path / "u.sqlite"
    store = UsageStore(path)
    store.add(entries)
    store.close()
    return path


def _home(tmp_path: Path, config: str = "") -> Path:
    home = tmp_path / "home"
    (home / ".config" / "agent-collector").mkdir(parents=True)
    (home / ".config" / "agent-collector" / "config.toml").write_text(config)
    return home


def _report(home: Path, store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    from support import env_without_collector

    env = {**env_without_collector(), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local/share"), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "collector", "report", *args, "--store", str(store)],
                          capture_output=True, text=True, env=env, timeout=120)


def _rows(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    return {row["key"]: row for row in json.loads(result.stdout)["rows"]}


def test_a_config_price_wins_over_the_tables(tmp_path: Path) -> None:
    store = _store(tmp_path, [_call("a", "claude-sonnet-4-5", "anthropic", 100_000, 1000, cr=50_000, cw=10_000)])
    home = _home(tmp_path, '[prices."claude-sonnet-4-5"]\ninput = 1.0\noutput = 5.0\ncache_read = 0.1\n'
                           'cache_write = 1.25\n')
    (row,) = _rows(_report(home, store, "model", "--json")).values()
    want = (40_000 * 1.0 + 50_000 * 0.1 + 10_000 * 1.25 + 1000 * 5.0) / 1e6  # not the table's $3 / $15
    assert row["cost_usd"] == pytest.approx(want, abs=1e-12) and row["unpriced_calls"] == 0
    assert row["price_source"] == "config"


def test_a_config_price_without_cache_rates_prices_cache_at_the_input_rate(tmp_path: Path) -> None:
    store = _store(tmp_path, [_call("a", "my-local-model", "", 3000, 100, cr=1000, cw=500)])
    home = _home(tmp_path, '[prices."my-local-model"]\ninput = 2\noutput = 8\n')
    (row,) = _rows(_report(home, store, "model", "--json")).values()
    assert row["cost_usd"] == pytest.approx((3000 * 2 + 100 * 8) / 1e6, abs=1e-12)


def test_a_model_in_no_table_stays_unpriced_never_zero(tmp_path: Path) -> None:
    store = _store(tmp_path, [_call("a", "no-such-model-xyz", "", 1000, 10)])
    (row,) = _rows(_report(_home(tmp_path), store, "model", "--json")).values()
    assert row["cost_usd"] is None and row["unpriced_calls"] == 1


@pytest.mark.parametrize(("text", "key", "why"), [
    ('[prices."qwen3-coder-plus"]\ninput = "cheap"\noutput = 5\n', "prices.qwen3-coder-plus.input", "a number"),
    ('[prices."qwen3-coder-plus"]\ninput = -1\noutput = 5\n', "prices.qwen3-coder-plus.input", "between 0"),
    ('[prices."qwen3-coder-plus"]\ninput = 1\n', "prices.qwen3-coder-plus", "needs output"),
    ('[prices."qwen3-coder-plus"]\ninput = 1\noutput = 5\ncache_reed = 0.1\n', "prices.qwen3-coder-plus.cache_reed",
     "did you mean 'cache_read'?"),
    ('[prices]\nqwen = 3\n', "prices.qwen", "must be an object"),
])
def test_a_bad_price_is_a_config_error_naming_the_key(tmp_path: Path, text: str, key: str, why: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={}, known_agents=())
    message = str(caught.value)
    assert f": {key}: " in message and why in message, message


def test_a_bad_price_stops_the_report_with_that_error(tmp_path: Path) -> None:
    store = _store(tmp_path, [_call("a", "qwen3-coder-plus", "", 1000, 10)])
    home = _home(tmp_path, '[prices."qwen3-coder-plus"]\ninput = "cheap"\noutput = 5\n')
    result = _report(home, store, "model", "--json")
    assert result.returncode != 0 and "prices.qwen3-coder-plus.input" in result.stderr, result.stderr


# -- the LiteLLM table --------------------------------------------------------------------------------

VENDORED = Path(__file__).resolve().parents[2] / "collector" / "data" / "litellm-prices.json"


def _vendored() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(VENDORED.read_text())
    return data


def _tier_cost(tiers: list[dict[str, Any]], inp: int, out: int, cr: int) -> float:
    """By hand from the vendored numbers: the tier whose range holds the call's whole input."""
    (tier,) = [t for t in tiers if t["range"][0] < inp <= t["range"][1] or (t["range"][0] == 0 and inp == 0)]
    return ((inp - cr) * tier["input_cost_per_token"] + cr * tier["cache_read_input_token_cost"]
            + out * tier["output_cost_per_token"])


def test_the_vendored_table_says_where_it_comes_from_and_is_small() -> None:
    doc = _vendored()
    assert doc["version"] == "litellm 1.110.2" and "model_prices_and_context_window_backup.json" in doc["source"]
    assert doc["date"][:2] == "20" and VENDORED.stat().st_size < 1_000_000
    fields = {"litellm_provider", "input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost",
              "cache_creation_input_token_cost", "tiered_pricing"}
    assert all(set(entry) <= fields for entry in doc["models"].values())


def test_qwen3_coder_plus_is_priced_from_litellm_at_each_tier_rate(tmp_path: Path) -> None:
    tiers = _vendored()["models"]["dashscope/qwen3-coder-plus"]["tiered_pricing"]
    assert [t["range"][0] for t in tiers] == [0, 32000, 128000, 256000]  # what the cases below cross
    calls = [(10_000, 200, 4_000), (32_000, 100, 0), (50_000, 500, 20_000), (200_000, 1000, 100_000),
             (300_000, 2000, 0)]
    entries = [_call(f"q{i}", "qwen3-coder-plus", "", inp, out, cr=cr) for i, (inp, out, cr) in enumerate(calls)]
    entries.append(_call("x", "claude-sonnet-4-5", "anthropic", 1000, 10))
    rows = _rows(_report(_home(tmp_path), _store(tmp_path, entries), "model", "--json"))
    want = sum(_tier_cost(tiers, inp, out, cr) for inp, out, cr in calls)
    assert rows["qwen3-coder-plus"]["cost_usd"] == pytest.approx(want, rel=1e-12)
    assert rows["qwen3-coder-plus"]["unpriced_calls"] == 0
    flat = sum(_tier_cost(tiers[:1], min(inp, 32_000), out, min(cr, 32_000)) for inp, out, cr in calls)
    assert want != pytest.approx(flat)  # the tiers matter here


def test_the_rollup_bands_cover_every_litellm_tier() -> None:
    from collector.usage.rollup import EDGES

    starts = {t["range"][0] for e in _vendored()["models"].values() for t in e.get("tiered_pricing", [])}
    assert starts - {0} <= set(EDGES)


def test_a_provider_prefixed_key_is_found_by_the_model_name() -> None:
    from collector.usage.litellm_prices import LiteLLMPrices

    table = LiteLLMPrices()
    found = table.find("qwen3-coder-plus", None)
    assert found is not None and found[0] == "dashscope/qwen3-coder-plus"
    assert table.find("no-such-model-xyz", None) is None


def _qwen_case() -> Path:
    from support import FIXTURES

    return FIXTURES / "qwen-code" / "tool_then_answer"


@pytest.mark.skipif(not any('"model":"qwen3-coder-plus"' in p.read_text()
                            for p in (_qwen_case() / "home").rglob("*.jsonl")),
                    reason="the Qwen fixture names another model")
def test_the_real_qwen_history_is_fully_priced(tmp_path: Path) -> None:
    from support import read_output
    from support.usage import collected

    paths = collected(_qwen_case(), tmp_path)
    tiers = _vendored()["models"]["dashscope/qwen3-coder-plus"]["tiered_pricing"]
    calls = [e for e in read_output(paths.data_dir / "output") if e.get("event.name") == "llm.response"]
    want = sum(_tier_cost(tiers, e["gen_ai.usage.input_tokens"], e["gen_ai.usage.output_tokens"],
                          e.get("gen_ai.usage.cache_read.input_tokens", 0)) for e in calls)
    result = _report(paths.home, paths.data_dir / "usage.sqlite", "model", "--json")
    (row,) = _rows(result).values()
    assert row["key"] == "qwen3-coder-plus" and row["unpriced_calls"] == 0 and row["calls"] == len(calls) > 0
    assert row["price_source"] == "litellm"
    assert row["cost_usd"] == pytest.approx(want, rel=1e-12) and want > 0


# -- which table priced it ----------------------------------------------------------------------------

def _mixed(tmp_path: Path) -> tuple[Path, Path]:
    entries = [_call("a", "claude-sonnet-4-5", "anthropic", 1000, 10), _call("b", "qwen3-coder-plus", "", 2000, 20),
               _call("c", "my-local-model", "", 3000, 30), _call("d", "no-such-model-xyz", "", 4000, 40)]
    home = _home(tmp_path, '[prices."my-local-model"]\ninput = 2\noutput = 8\n')
    return home, _store(tmp_path, entries)


def test_every_model_row_says_which_table_priced_it(tmp_path: Path) -> None:
    home, store = _mixed(tmp_path)
    result = _report(home, store, "model", "--json")
    rows = _rows(result)
    assert {k: r["price_source"] for k, r in rows.items()} == {
        "claude-sonnet-4-5": "genai-prices", "qwen3-coder-plus": "litellm", "my-local-model": "config",
        "no-such-model-xyz": None}
    assert rows["no-such-model-xyz"]["cost_usd"] is None
    assert json.loads(result.stdout)["total"]["price_source"] == "config, genai-prices, litellm"


def test_the_human_report_names_the_table_of_each_model(tmp_path: Path) -> None:
    home, store = _mixed(tmp_path)
    result = _report(home, store, "daily", "--breakdown")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "Priced by: config: my-local-model; genai-prices: claude-sonnet-4-5; litellm: qwen3-coder-plus." in lines
    assert any(x.startswith("Prices: genai-prices ") and "litellm 1.110.2" in x for x in lines)
    assert any("no-such-model-xyz" in x and x.startswith("* 1 calls") for x in lines)


def test_the_dashboard_by_model_rows_say_which_table_priced_them(tmp_path: Path) -> None:
    from zoneinfo import ZoneInfo

    from collector.dashboard.data import usage_view

    _, store = _mixed(tmp_path)
    view = usage_view(store, {}, ZoneInfo("UTC"), "UTC", 7, False,
                      own_prices={"my-local-model": {"input": 2.0, "output": 8.0}})
    by_model = {r["key"]: r for r in view["by_model"]}
    assert by_model["my-local-model"]["price_source"] == "config"
    assert by_model["my-local-model"]["cost_usd"] == pytest.approx((3000 * 2 + 30 * 8) / 1e6, abs=1e-12)
    assert by_model["qwen3-coder-plus"]["price_source"] == "litellm"
    assert by_model["claude-sonnet-4-5"]["price_source"] == "genai-prices"
    assert by_model["no-such-model-xyz"]["price_source"] is None


def test_the_table_version_is_read_from_the_header_line_alone() -> None:
    from collector.usage.litellm_prices import LiteLLMPrices

    table = LiteLLMPrices()
    assert table.version == _vendored()["version"] and table._doc is None  # not parsed in full for it


def test_a_missing_litellm_table_leaves_its_models_unpriced(monkeypatch: pytest.MonkeyPatch) -> None:
    from collector.usage import litellm_prices
    from collector.usage.prices import PriceTable

    monkeypatch.setattr(litellm_prices, "FILE", "no-such-prices.json")
    table = PriceTable()
    assert table.version.endswith(", none")
    assert table.rates("qwen3-coder-plus", None, "2026-12-01", 1000) is None
    assert table.rates("claude-sonnet-4-5", "anthropic", "2026-12-01", 1000) is not None
