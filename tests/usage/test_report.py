"""`report`: totals per day, model and session equal the model server's own usage records of real
sessions of all five agents; cost equals a hand computation from the genai-prices table; Claude Code's
own cost figure is matched; long-context tiers, time zones, filters and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from support import FIXTURES, entry_tokens, read_output, usage_tuple
from support.usage import REAL_CASES, collected, recorded, report

from collector.usage.store import UsageStore

IDS = [f"{c.parent.name}/{c.name}" for c in REAL_CASES]


def _sums(records: list[dict[str, Any]]) -> dict[str, int]:
    out = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0}
    for record in records:
        inp, outp, cr, cw = usage_tuple(record["api"], record["usage"])
        out["calls"] += 1
        out["input_tokens"] += inp
        out["output_tokens"] += outp
        out["cache_read_tokens"] += cr
        out["cache_write_tokens"] += cw
    return out


def _pick(row: dict[str, Any]) -> dict[str, int]:
    return {k: row[k] for k in ("calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")}


@pytest.mark.parametrize("case", REAL_CASES, ids=IDS)
def test_totals_per_day_model_and_session_equal_the_model_server(case: Path, tmp_path: Path) -> None:
    paths = collected(case, tmp_path)
    truth = recorded(case, entry_tokens(read_output(paths.output_dir)))
    expected = json.loads((case / "expected.json").read_text())
    assert len(truth) == len(_served_all(case)) - expected.get("unrecorded_model_calls", 0)

    daily = report(paths, "daily")
    by_day: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in truth:
        by_day[datetime.fromtimestamp(record["ts"], UTC).date().isoformat()].append(record)
    assert {r["key"]: _pick(r) for r in daily["rows"] if r["calls"]} == {d: _sums(v) for d, v in by_day.items()}
    assert _pick(daily["total"]) == _sums(truth)

    by_model = report(paths, "model")
    served_models = {r["model"] for r in truth}
    assert {r["key"] for r in by_model["rows"] if r["calls"]} == served_models
    for row in by_model["rows"]:
        assert _pick(row) == _sums([r for r in truth if r["model"] == row["key"]])

    sessions = report(paths, "session")
    assert {r["session"] for r in sessions["rows"]} <= set(expected["sessions"])
    assert sum(r["calls"] for r in sessions["rows"]) == len(truth)
    if len(expected["sessions"]) == 1:
        assert _pick(sessions["rows"][0]) == _sums(truth)
        assert sessions["rows"][0]["project"], "the session's workspace is its project"


def _served_all(case: Path) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in (case / "response_usage.jsonl").read_text().splitlines() if x.strip()]
    return [d for d in lines if d.get("kind") == "response_usage"]


def _hand_cost(record: dict[str, Any]) -> Decimal | None:
    """One call priced by hand from the table: the rate of the tier its whole input falls in, times the
    uncached input, cache reads, cache writes and output."""
    from genai_prices import data_snapshot
    from genai_prices.types import TieredPrices

    try:
        _, model = data_snapshot.get_snapshot().find_provider_model(record["model"], None, None, None)
    except LookupError:
        return _hand_cost_litellm(record)
    price = model.get_prices(datetime.fromtimestamp(record["ts"], UTC))
    inp, outp, cr, cw = usage_tuple(record["api"], record["usage"])

    def rate(name: str, fallback: str | None = None) -> Decimal:
        value = getattr(price, name) or (getattr(price, fallback) if fallback else None) or Decimal(0)
        if isinstance(value, TieredPrices):
            tier = [t for t in value.tiers if inp > t.start]
            return tier[-1].price if tier else value.base
        return Decimal(value)

    uncached = inp - cr - cw
    per_m = (rate("input_mtok") * uncached + rate("cache_read_mtok", "input_mtok") * cr
             + rate("cache_write_mtok", "input_mtok") * cw + rate("output_mtok") * outp)
    return per_m / Decimal(1_000_000)


def _hand_cost_litellm(record: dict[str, Any]) -> Decimal | None:
    """A model genai-prices lacks, by hand from the vendored LiteLLM file: its key or ``<provider>/<model>``,
    the tier whose range start the whole input passes."""
    table = json.loads((Path(__file__).parents[2] / "collector/data/litellm-prices.json").read_text())["models"]
    keys = [k for k in table if k == record["model"] or k.endswith("/" + record["model"])]
    if not keys:
        return None
    entry = table[min(keys, key=lambda k: (k.count("/"), len(k), k))]
    inp, outp, cr, cw = usage_tuple(record["api"], record["usage"])
    tiers = [t for t in entry.get("tiered_pricing", []) if t["range"][0] == 0 or inp > t["range"][0]]
    price = tiers[-1] if tiers else entry
    rate = {k: Decimal(repr(v)) for k, v in price.items() if k != "range"}
    inrate = rate["input_cost_per_token"]
    return ((inp - cr - cw) * inrate + cr * rate.get("cache_read_input_token_cost", inrate)
            + cw * rate.get("cache_creation_input_token_cost", inrate) + outp * rate["output_cost_per_token"])


@pytest.mark.parametrize("case", REAL_CASES, ids=IDS)
def test_cost_equals_a_hand_computation_from_the_price_table(case: Path, tmp_path: Path) -> None:
    paths = collected(case, tmp_path)
    truth = recorded(case, entry_tokens(read_output(paths.output_dir)))
    total = report(paths, "daily")["total"]
    costs = [_hand_cost(r) for r in truth]
    if not truth:  # the agent stored no usage at all (OpenCode killed mid-step): nothing to price
        assert total["unpriced_calls"] == 0 and not total["cost_usd"]
        return
    if all(c is None for c in costs):
        assert total["cost_usd"] is None, "a model the table does not know is unpriced, never zero"
        assert total["unpriced_calls"] == len(truth) > 0
        return
    assert None not in costs
    assert total["unpriced_calls"] == 0
    assert total["cost_usd"] == pytest.approx(float(sum(c for c in costs if c is not None)), abs=1e-12)


@pytest.mark.parametrize("case", ["tool_then_answer", "two_turns_resume"])
def test_claude_code_cost_equals_its_own_figure(case: str, tmp_path: Path) -> None:
    """Claude Code printed total_cost_usd for the session (its `-p --output-format stream-json` result,
    kept in agent_results.json); the last one covers the whole (resumed) session."""
    fixture = FIXTURES / "claude-code" / case
    paths = collected(fixture, tmp_path)
    own = json.loads((fixture / "agent_results.json").read_text())[-1]
    (row,) = report(paths, "session")["rows"]
    assert row["session"] == own["session_id"]
    assert row["cost_usd"] == pytest.approx(own["total_cost_usd"], abs=1e-12)


def _call(eid: str, model: str, provider: str, inp: int, out: int, cr: int = 0, cw: int = 0,
          when: float | None = None, **extra: Any) -> dict[str, Any]:
    return {"event.id": eid, "event.name": "llm.response", "time_unix_nano": int((when or time.time()) * 1e9),
            "gen_ai.agent.type": extra.pop("agent", "claude-code"), "gen_ai.session.id": extra.pop("session", "s1"),
            "gen_ai.response.model": model, "gen_ai.provider.name": provider,
            "gen_ai.usage.input_tokens": inp, "gen_ai.usage.output_tokens": out,
            "gen_ai.usage.cache_read.input_tokens": cr, "gen_ai.usage.cache_creation.input_tokens": cw, **extra}


def _store_report(tmp_path: Path, entries: list[dict[str, Any]], kind: str = "daily", tz: str = "UTC",
                  **filters: Any) -> dict[str, Any]:
    from zoneinfo import ZoneInfo

    from collector.usage.query import Filters
    from collector.usage.report import ReportRequest, build_report
    from collector.usage.store import connect

    store = UsageStore(tmp_path / "u.sqlite")
    store.add(entries)
    store.close()
    db = connect(tmp_path / "u.sqlite", readonly=True)
    return build_report(db, ReportRequest(kind, Filters(**filters), ZoneInfo(tz), tz))


def test_long_context_tier_prices_the_whole_call_at_the_higher_rate(tmp_path: Path) -> None:
    when = datetime(2026, 11, 30, 12, tzinfo=UTC).timestamp()
    entries = [_call("a", "claude-sonnet-4-5", "anthropic", 250_000, 1000, cr=200_000, cw=10_000, when=when),
               _call("b", "claude-sonnet-4-5", "anthropic", 100_000, 1000, cr=50_000, when=when),
               _call("c", "gpt-5.5", "openai", 300_000, 2000, cr=100_000, when=when, agent="codex", session="s2")]
    total = _store_report(tmp_path, entries)["total"]
    # Sonnet 4.5 over 200k input: $6 / $0.6 / $7.5 / $22.5 per MTok; under: $3 / $0.3 / $3.75 / $15.
    # GPT-5.5 over 272k: $10 input, $1 cache read, $45 output.
    a = (40_000 * 6 + 200_000 * 0.6 + 10_000 * 7.5 + 1000 * 22.5) / 1e6
    b = (50_000 * 3 + 50_000 * 0.3 + 1000 * 15) / 1e6
    c = (200_000 * 10 + 100_000 * 1 + 2000 * 45) / 1e6
    assert total["cost_usd"] == pytest.approx(a + b + c, abs=1e-12)


def test_unknown_model_is_unpriced_and_the_rest_still_priced(tmp_path: Path) -> None:
    entries = [_call("a", "claude-sonnet-4-5", "anthropic", 1000, 10),
               _call("b", "my-local-llama", "openai", 5000, 10, session="s2")]
    result = _store_report(tmp_path, entries, kind="model")
    rows = {r["key"]: r for r in result["rows"]}
    assert rows["my-local-llama"]["cost_usd"] is None and rows["my-local-llama"]["unpriced_calls"] == 1
    assert rows["claude-sonnet-4-5"]["cost_usd"] == pytest.approx((1000 * 3 + 10 * 15) / 1e6)
    assert result["total"]["unpriced_calls"] == 1
    assert result["price_table"].startswith("genai-prices ")


def test_agent_reported_cost_shown_and_a_difference_flagged(tmp_path: Path) -> None:
    ours = (1000 * 3 + 100 * 15) / 1e6
    entries = [_call("a", "claude-sonnet-4-5", "anthropic", 1000, 100,
                     **{"gen_ai.usage.cost_usd": ours}),
               _call("b", "claude-sonnet-4-5", "anthropic", 1000, 100, session="s2",
                     **{"gen_ai.usage.cost_usd": ours * 3})]
    rows = {r["session"]: r for r in _store_report(tmp_path, entries, kind="session")["rows"]}
    assert rows["s1"]["agent_cost_usd"] == pytest.approx(ours) and rows["s1"]["cost_differs"] is False
    assert rows["s2"]["agent_cost_usd"] == pytest.approx(3 * ours) and rows["s2"]["cost_differs"] is True


def test_days_follow_the_time_zone(tmp_path: Path) -> None:
    late = datetime(2026, 11, 30, 23, 30, tzinfo=UTC).timestamp()
    entries = [_call("a", "claude-sonnet-4-5", "anthropic", 10, 1, when=late)]
    assert [r["key"] for r in _store_report(tmp_path / "1", entries)["rows"]] == ["2026-11-30"]
    assert [r["key"] for r in _store_report(tmp_path / "2", entries, tz="Asia/Kolkata")["rows"]] == ["2026-12-01"]
    weekly = _store_report(tmp_path / "3", entries, kind="weekly", tz="Asia/Kolkata")
    assert [r["key"] for r in weekly["rows"]] == ["2026-11-30"], "weeks start on Monday"


def test_blocks_are_five_hours_from_the_first_activity(tmp_path: Path) -> None:
    base = datetime(2026, 11, 30, 8, 20, tzinfo=UTC).timestamp()
    entries = [_call(str(i), "claude-sonnet-4-5", "anthropic", 10, 1, when=base + h * 3600)
               for i, h in enumerate((0, 1, 4.5, 5.2, 12))]
    rows = _store_report(tmp_path, entries, kind="blocks")["rows"]
    assert [(r["start"], r["calls"]) for r in rows] == [
        ("2026-11-30T08:00+00:00", 3), ("2026-11-30T13:00+00:00", 1), ("2026-11-30T20:00+00:00", 1)]


def test_agent_and_project_filters(tmp_path: Path) -> None:
    entries = [_call("a", "claude-sonnet-4-5", "anthropic", 10, 1),
               _call("b", "gpt-5.5", "openai", 20, 2, agent="codex", session="s2"),
               {"event.id": "w", "event.name": "session.start", "time_unix_nano": time.time_ns(),
                "gen_ai.agent.type": "codex", "gen_ai.session.id": "s2", "workspace.path": "/src/shop_app"}]
    assert _store_report(tmp_path / "1", entries, agents=("codex",))["total"]["input_tokens"] == 20
    assert _store_report(tmp_path / "2", entries, project="shop_app")["total"]["input_tokens"] == 20
    assert _store_report(tmp_path / "3", entries, project="/src/shop_app")["total"]["input_tokens"] == 20
    assert _store_report(tmp_path / "4", entries, project="shop%")["total"]["calls"] == 0


def _cli(*args: str, env_home: Path) -> subprocess.CompletedProcess[str]:
    from support import env_without_collector

    env = {**env_without_collector(), "HOME": str(env_home), "XDG_CONFIG_HOME": str(env_home / ".config"),
           "XDG_DATA_HOME": str(env_home / ".local/share"), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "collector", "report", *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_cli_table_json_and_errors(tmp_path: Path) -> None:
    paths = collected(FIXTURES / "gemini-cli" / "two_turns_resume", tmp_path)
    home = paths.home
    store = ["--store", str(paths.data_dir / "usage.sqlite")]
    table = _cli("daily", "--breakdown", "--timezone", "UTC", *store, env_home=home)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["Date", "Input", "Cache"] and any("gemini-2.5-pro" in x for x in lines)
    assert max(len(x) for x in lines) <= 120
    data = json.loads(_cli("session", "--json", *store, env_home=home).stdout)
    assert data["rows"][0]["calls"] == 4 and data["version"] == 1
    missing = _cli("daily", "--store", str(tmp_path / "nope.sqlite"), env_home=home)
    assert missing.returncode == 1 and "no usage store" in missing.stderr
    bad = _cli("daily", "--since", "yesterday", *store, env_home=home)
    assert bad.returncode == 2 and "not a date" in bad.stderr
    badtz = _cli("daily", "--timezone", "Mars/Olympus", *store, env_home=home)
    assert badtz.returncode == 2 and "unknown time zone" in badtz.stderr


def test_docs_name_every_json_field(tmp_path: Path) -> None:
    """docs/reports.md documents the --json shape; every field a report can produce is in its table."""
    import re

    from support import ROOT

    documented = set(re.findall(r"^\| `([^`]+)` \|", (ROOT / "docs" / "reports.md").read_text(), flags=re.M))
    entries = [_call("a", "claude-sonnet-4-5", "anthropic", 10, 1)]
    fields: set[str] = set()
    for n, kind in enumerate(("daily", "session", "blocks")):
        data = _store_report(tmp_path / str(n), entries, kind=kind)
        fields |= set(data) | set(data["total"]) | {k for r in data["rows"] for k in r}
        fields |= {k for r in data["rows"] for m in r["models"] for k in m}
    assert fields - documented == set()


@pytest.mark.parametrize("kind", ["daily", "weekly", "monthly", "session", "model", "agent", "project", "blocks"])
def test_the_rollup_gives_what_a_pass_over_the_entries_gives(kind: str, tmp_path: Path) -> None:
    """Reports read the rollup; the same report computed from the entries themselves is identical, for
    every real session collected into one store, in a time zone with a 45-minute offset too."""
    from zoneinfo import ZoneInfo

    from support import collect
    from support.usage import merged_fixtures, store_db

    from collector.usage.query import Filters
    from collector.usage.report import ReportRequest, build_report

    paths = merged_fixtures(tmp_path)
    collect(paths)
    db = store_db(paths)
    assert db.execute("SELECT COUNT(*) FROM slots").fetchone()[0] > 0
    for zone in ("UTC", "Asia/Kathmandu"):
        for filters in (Filters(), Filters(agents=("claude-code", "codex"), since_ns=1796040000 * 10**9)):
            raw = Filters(filters.since_ns, filters.until_ns, filters.agents, filters.project, raw=True)
            rolled = build_report(db, ReportRequest(kind, filters, ZoneInfo(zone), zone), now=0)
            entries = build_report(db, ReportRequest(kind, raw, ZoneInfo(zone), zone), now=0)
            for made in (rolled, entries):
                made.pop("generated_unix")
            assert rolled == entries
            assert rolled["total"]["calls"] > 0


def test_rollup_bands_cover_every_tier_of_the_price_table() -> None:
    """A price table with a threshold the rollup's bands do not know would make reports fall back to
    the entries; this says when a genai-prices update brings one (add it to rollup.EDGES)."""
    from genai_prices import data_snapshot

    from collector.usage.rollup import EDGES

    starts = set()
    for provider in data_snapshot.get_snapshot().providers:
        for model in provider.models:
            for price in model.prices if isinstance(model.prices, list) else [model.prices]:
                for value in getattr(price, "prices", price).__dict__.values():
                    starts |= {int(t.start) for t in getattr(value, "tiers", ())}
    assert starts and starts <= set(EDGES)


def test_tables_fit_the_terminal(tmp_path: Path) -> None:
    """Exact numbers when they fit; compact ones (12.6k, 1.2M) in a narrow terminal."""
    from collector.usage.render import table_lines

    entries = [_call("a", "claude-sonnet-4-5", "anthropic", 12_345_678, 654_321, cr=2_000_000, cw=345_678)]
    data = _store_report(tmp_path, entries)
    wide = table_lines(data, breakdown=True, width=200)
    assert "10,000,000" in wide[2] and max(len(x) for x in wide[:6]) <= 200
    narrow = table_lines(data, breakdown=True, width=80)
    assert "10.0M" in narrow[2] and "654.3k" in narrow[2]
    assert max(len(x) for x in narrow[:6]) <= 80
    assert any(line.startswith("Prices: genai-prices") for line in narrow)


def test_a_call_without_a_model_is_named_unknown_in_the_models_table(tmp_path: Path) -> None:
    """The Models table showed an empty name where its footnote says `unknown`."""
    from collector.usage.render import table_lines

    rep = _store_report(tmp_path, [_call("e1", "", "anthropic", 100, 10, session="no-model"),
                                   _call("e2", "claude-sonnet-4-5", "anthropic", 100, 10)], kind="model")
    labels = [line.split()[0] for line in table_lines(rep, False, 200)[2:4]]
    assert sorted(labels) == ["claude-sonnet-4-5", "unknown"]
    assert "unknown" in "\n".join(table_lines(rep, False, 200)[4:])  # the footnote names it the same
