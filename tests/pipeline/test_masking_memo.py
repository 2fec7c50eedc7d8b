"""The masker remembers, per instance, which fields of an entry shape are scanned and which short values
were found clean, so the host name, tool names and versions that fill every entry are not serialised and
searched again. What it remembers must never change a result: a value with a secret is masked every time
(in every mode), whatever order the keys come in, and the plain rule set (no prefilter) remembers nothing."""

from __future__ import annotations

import pytest

from collector.pipeline.masking import Masker, RuleSet, load_rules

TOKEN = "ghp_FAKE0123456789abcdefghijABCDEFGHIJ01"
KEY = b"k" * 32


def _count_searches(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    calls: list[object] = []
    original = RuleSet.candidates

    def spy(self: RuleSet, text: str | bytes) -> list[int]:
        calls.append(text)
        return original(self, text)

    monkeypatch.setattr(RuleSet, "candidates", spy)
    return calls


def test_a_clean_value_is_searched_once(monkeypatch: pytest.MonkeyPatch) -> None:
    masker = Masker(load_rules())
    calls = _count_searches(monkeypatch)
    for _ in range(3):
        entry = {"event.id": "e", "host.name": "vm", "gen_ai.tool.name": "Bash", "gen_ai.usage.input_tokens": 3}
        assert masker.mask_entry(entry) == {"event.id": "e", "host.name": "vm", "gen_ai.tool.name": "Bash",
                                            "gen_ai.usage.input_tokens": 3}
    assert len(calls) == 1, "the first entry's fields were searched together; the next two not at all"
    masker.mask_entry({"gen_ai.tool.name": "Bash", "host.name": "other"})  # another shape, one new value
    assert len(calls) == 2


@pytest.mark.parametrize("modes", [{}, {"attributes": "hash"}, {"attributes": "drop"}])
def test_a_secret_is_masked_every_time_in_every_mode(modes: dict[str, str]) -> None:
    fast, plain = Masker(load_rules(), modes, KEY), Masker(load_rules(), modes, KEY, prefilter=False)
    for n in range(4):
        entry = {"host.name": "vm", "workspace.path": f"/tmp/{TOKEN}", "agent.note": "plain words"}
        if n % 2:
            entry = dict(reversed(list(entry.items())))  # the same fields in another order: another shape
        expected = plain.mask_entry(dict(entry))
        got = fast.mask_entry(dict(entry))
        assert got == expected
        assert TOKEN not in str(got)


def test_the_plain_rule_set_remembers_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = Masker(load_rules(), prefilter=False)
    for _ in range(2):
        plain.mask_entry({"host.name": "vm"})
    assert plain._clean == set()
