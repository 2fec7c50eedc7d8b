"""The masking engine: rules as data (shipped and from config), modes per field class, dictionary keys,
fields that are never scanned, the keyword prefilter and its windows (same result as the plain rules)."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest
from support import collect, make_paths

from collector.config import ConfigError, load_config
from collector.pipeline.content_policy import ContentPolicy
from collector.pipeline.mask_reach import reach, windows
from collector.pipeline.mask_rules import parse_rules
from collector.pipeline.masking import Masker, MaskingRuleError, RuleSet, load_rules, shipped_rules

TOKEN = "ghp_FAKE0123456789abcdefghijABCDEFGHIJ01"
KEY = b"k" * 32


def _entry() -> dict:
    return {
        "event.id": "e1", "event.name": "tool.call", "gen_ai.session.id": "s1",
        "gen_ai.tool.name": "Bash",
        "gen_ai.tool.call.arguments": {"command": f"git push https://x:{TOKEN}@github.com/o/r", TOKEN: "k"},
        "workspace.path": f"/tmp/{TOKEN}",
        "gen_ai.request.model": "claude-sonnet-4-5",
    }


def test_rules_are_data_with_a_keyword_each() -> None:
    rules = shipped_rules()
    assert len(rules) >= 60
    assert all(r.keywords for r in rules)
    assert len({r.id for r in rules}) == len(rules)


def test_redact_everywhere_including_dictionary_keys() -> None:
    masker = Masker(load_rules())
    entry = masker.mask_entry(_entry())
    text = json.dumps(entry)
    assert TOKEN not in text
    assert entry["gen_ai.tool.call.arguments"]["[REDACTED:github_token]"] == "k"
    assert entry["workspace.path"] == "/tmp/[REDACTED:github_token]"


def test_hash_mode_is_keyed_and_stable() -> None:
    masker = Masker(load_rules(), {"content": "hash", "attributes": "hash"}, KEY)
    one = masker.mask_text(f"a {TOKEN} b", "hash")
    assert one == masker.mask_text(f"a {TOKEN} b", "hash") and TOKEN not in one
    assert one.startswith("a [HMAC:github_token:")
    other = Masker(load_rules(), {"content": "hash"}, b"j" * 32).mask_text(f"a {TOKEN} b", "hash")
    assert other != one
    with pytest.raises(MaskingRuleError, match="key"):
        Masker(load_rules(), {"content": "hash"}, None)


def test_drop_and_keep_per_field_class() -> None:
    masker = Masker(load_rules(), {"content": "drop", "attributes": "keep"})
    entry = masker.mask_entry(_entry())
    assert "gen_ai.tool.call.arguments" not in entry
    assert entry["masking.dropped"] == ["gen_ai.tool.call.arguments"]
    assert entry["workspace.path"] == f"/tmp/{TOKEN}", "attributes kept as they are"
    clean = masker.mask_entry({"gen_ai.tool.call.arguments": {"command": "ls"}, "event.id": "e"})
    assert clean == {"gen_ai.tool.call.arguments": {"command": "ls"}, "event.id": "e"}, "nothing to drop"


def test_fields_that_cannot_hold_a_secret_are_not_scanned() -> None:
    """Ids, digests, lengths and model names are left alone even by a rule that would match them; with
    capture off, what the content policy leaves (length and digest) is not scanned at all."""
    hexes = RuleSet(parse_rules([{"id": "hex_run", "keywords": list("0123456789abcdef"),
                                  "pattern": r"[0-9a-f]{16,}"}], "test"))
    masker = Masker(hexes)
    entry = {"event.id": "0123456789abcdef0123", "gen_ai.session.id": "abcdef0123456789abcd",
             "gen_ai.request.model": "model-0123456789abcdef", "gen_ai.tool.call.arguments": "x 0123456789abcdef"}
    ContentPolicy(KEY).apply(entry, capture=False)
    before = dict(entry)
    assert masker.mask_entry(entry) == before
    assert len(entry["gen_ai.tool.call.arguments.hmac"]) == 64
    captured = masker.mask_entry({"event.id": "0123456789abcdef0123", "error.message": "0123456789abcdef"})
    assert captured == {"event.id": "0123456789abcdef0123", "error.message": "[REDACTED:hex_run]"}


def test_an_entry_without_a_keyword_runs_no_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    masker = Masker(load_rules())
    original = RuleSet.spans

    def spy(self: RuleSet, text: str, indices: object = None) -> list:
        calls.append(text)
        return original(self, text, indices)  # type: ignore[arg-type]

    monkeypatch.setattr(RuleSet, "spans", spy)
    masker.mask_entry({"gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]})
    assert calls == []
    masker.mask_entry({"gen_ai.input.messages": ["hi", f"use {TOKEN}"]})
    assert calls == [f"use {TOKEN}"], "only the string with a keyword is searched"


def test_extra_rules_from_config_and_disabled_rules(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[content]\ncapture = true\n[masking]\ndisabled_rules = ["github_token"]\n'
        '[[masking.rules]]\nid = "acme_token"\nkeywords = ["acme_"]\npattern = \'\\bacme_[a-z0-9]{12}\\b\'\n')
    spool = tmp_path / "data" / "spool" / "claude-code"
    spool.mkdir(parents=True)
    payload = {"session_id": "5e55a0c1-0000-4000-8000-00000000aaaa", "hook_event_name": "UserPromptSubmit",
               "cwd": "/w", "prompt": f"tokens acme_abcdef123456 and {TOKEN}", "prompt_id": "p1"}
    (spool / "claude-code-2026-11-30.jsonl").write_text(json.dumps(
        {"ts": 1796037000, "agent": "claude-code", "event": "UserPromptSubmit", "payload": payload}) + "\n")
    paths = make_paths(tmp_path)
    collect(paths, config=load_config(config, env={}))
    text = "".join(p.read_text() for p in paths.output_dir.glob("*.jsonl"))
    assert "acme_abcdef123456" not in text and "[REDACTED:acme_token]" in text
    assert TOKEN in text, "the disabled shipped rule no longer masks"


@pytest.mark.parametrize(("rule", "message"), [
    ({"id": "x", "keywords": ["a"], "pattern": "("}, "does not compile"),
    ({"id": "x", "keywords": ['a"b'], "pattern": "a"}, "quotes"),
    ({"id": "x", "keywords": [], "pattern": "a"}, "keywords"),
    ({"id": "X y", "keywords": ["a"], "pattern": "a"}, "id must be"),
    ({"id": "x", "keywords": ["a"], "pattern": "a", "check": "nope"}, "check must be"),
    ({"id": "x", "keywords": ["a"], "pattern": "a", "prefilter": "(?<=a)b"}, "RE2"),
    ({"id": "x", "keywords": ["a"], "pattern": "a", "colour": "red"}, "unknown key"),
])
def test_malformed_rules_are_refused_by_name(rule: dict, message: str) -> None:
    with pytest.raises(MaskingRuleError, match=message):
        parse_rules([rule], "masking.rules")


def test_config_refuses_a_bad_rule_or_an_unknown_disabled_id(tmp_path: Path) -> None:
    _spool_one(tmp_path / "a")
    bad = load_config(tmp_path / "x.toml", env={"AGENT_COLLECTOR_MASKING__DISABLED_RULES": '["github_tokn"]'})
    with pytest.raises(ConfigError, match="github_tokn"):
        collect(make_paths(tmp_path / "a"), config=bad)
    _spool_one(tmp_path / "b")
    (tmp_path / "c.toml").write_text('[[masking.rules]]\nid = "y"\nkeywords = ["a"]\npattern = "("\n')
    with pytest.raises(ConfigError, match=r"masking.rules\[0\] \(y\)"):
        collect(make_paths(tmp_path / "b"), config=load_config(tmp_path / "c.toml", env={}))
    with pytest.raises(ConfigError, match="content_mode"):
        load_config(tmp_path / "x.toml", env={"AGENT_COLLECTOR_MASKING__CONTENT_MODE": "scramble"})


def _spool_one(tmp: Path) -> None:
    spool = tmp / "data" / "spool" / "claude-code"
    spool.mkdir(parents=True, exist_ok=True)
    payload = {"session_id": "5e55a0c1-0000-4000-8000-00000000bbbb", "hook_event_name": "UserPromptSubmit",
               "cwd": "/w", "prompt": "hi", "prompt_id": "p1"}
    (spool / "claude-code-2026-11-30.jsonl").write_text(json.dumps(
        {"ts": 1796037000, "agent": "claude-code", "event": "UserPromptSubmit", "payload": payload}) + "\n")


def test_reach_of_patterns() -> None:
    assert reach(r"\bghp_[A-Za-z0-9]{36}\b") == (40, 0)
    assert reach(r"sk-[a-z]{3}(?![a-z]{2})") == (6, 2)
    assert reach(r"ghp_[A-Za-z0-9]{36,}") is None, "unbounded"
    assert reach(r"BEGIN[\s\S]{0,10}(?:END|\Z)") is None, "end of text"
    assert reach(r"a$") is None
    assert windows("xx key yy key", ("key",), 2, 0) == [(1, 13)]
    assert windows("key" + "-" * 50 + "key", ("key",), 2, 1) == [(0, 7), (51, 56)]


def test_windows_give_the_plain_result_on_random_text() -> None:
    """Secrets and near misses cut and spliced into noise at random: the windowed, prefiltered search
    equals every rule on the whole text."""
    rng = random.Random(7)
    lines = [json.loads(x)["text"] for x in
             (Path(__file__).parent.parent / "fixtures" / "secrets" / "positives.jsonl").read_text().splitlines()[::3]]
    fast, plain = Masker(load_rules()), Masker(load_rules(), prefilter=False)
    for _ in range(300):
        parts = []
        for _ in range(rng.randrange(1, 6)):
            line = rng.choice(lines)
            cut = rng.randrange(len(line))
            parts.append(rng.choice([line, line[:cut], line[cut:]]))
            parts.append("".join(rng.choice(string.printable) for _ in range(rng.randrange(0, 80))))
        text = rng.choice(["", " ", "\n", "key=", "token: "]).join(parts)
        assert fast.mask_text(text) == plain.mask_text(text), text


def test_the_keyword_set_holds_on_long_text() -> None:
    """The RE2 set does not give up (its DFA memory) on a long text: a keyword at the end is still found."""
    rng = random.Random(3)
    text = "".join(rng.choice(string.printable) for _ in range(3_000_000)) + f" {TOKEN}"
    assert Masker(load_rules()).mask_text(text).endswith(" [REDACTED:github_token]")


def test_the_default_config_file_and_its_rule_example_work() -> None:
    import tomllib

    from collector.config import DEFAULT_FILE

    tomllib.loads(DEFAULT_FILE)
    lines = DEFAULT_FILE.splitlines()
    start = lines.index("# [[masking.rules]]                      # more rules, same keys as the shipped ones")
    example = "\n".join(line.removeprefix("# ").split("  #")[0] for line in lines[start:start + 4])
    rules = tomllib.loads(example)["masking"]["rules"]
    masker = Masker(RuleSet(parse_rules(rules, "example")))
    assert masker.mask_text("x acme_" + "A1b2" * 8 + " y") == "x [REDACTED:acme_token] y"


def test_hash_mode_through_the_collector_uses_the_install_key(tmp_path: Path) -> None:
    """content.digest = none and masking in hash mode: the key is still made (0600) and the same secret
    gets the same keyed digest in every entry."""
    _spool_one(tmp_path)
    spool = tmp_path / "data" / "spool" / "claude-code" / "claude-code-2026-11-30.jsonl"
    line = json.loads(spool.read_text())
    line["payload"]["prompt"] = f"first {TOKEN}"
    second = json.loads(json.dumps(line))
    second["payload"].update(prompt=f"again {TOKEN}", prompt_id="p2")
    second["ts"] += 1
    spool.write_text(json.dumps(line) + "\n" + json.dumps(second) + "\n")
    env = {"AGENT_COLLECTOR_CONTENT__CAPTURE": "true", "AGENT_COLLECTOR_CONTENT__DIGEST": "none",
           "AGENT_COLLECTOR_MASKING__CONTENT_MODE": "hash"}
    paths = make_paths(tmp_path)
    entries = collect(paths, config=load_config(tmp_path / "none.toml", env=env))
    prompts = [json.dumps(e["gen_ai.input.messages"]) for e in entries if e["event.name"] == "user.prompt"]
    assert len(prompts) == 2 and all(TOKEN not in p for p in prompts)
    marks = {p.split("[HMAC:github_token:")[1][:16] for p in prompts}
    assert len(marks) == 1
    assert oct((paths.state_dir / "content.key").stat().st_mode & 0o777) == "0o600"


def test_the_quarantine_masks_with_the_configured_rules(tmp_path: Path) -> None:
    """A record kept in the quarantine (capture on) is masked by the collector's own masker, extra rules
    included, not only by the shipped ones."""
    from collector.model.raw import RawRecord
    from collector.pipeline.quarantine import FILE, Quarantine

    rules = load_rules([{"id": "acme_token", "keywords": ["acme_"], "pattern": r"\bacme_[a-z0-9]{12}\b"}])
    quarantine = Quarantine(tmp_path, Masker(rules).mask_value)
    record = RawRecord("claude-code", "hook", {"payload": {"prompt": f"acme_abcdef123456 {TOKEN}"}}, "s", "1", 1,
                       {"path": "/s"})
    quarantine.add(record, "parse", "KeyError", True)
    text = (tmp_path / FILE).read_text()
    assert "acme_abcdef123456" not in text and TOKEN not in text
    assert "[REDACTED:acme_token]" in text and "[REDACTED:github_token]" in text
