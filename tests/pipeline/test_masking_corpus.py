"""The masking corpus (tests/fixtures/secrets): recall and false positives of the shipped rules, every
rule exercised, and the prefiltered masker equal to the plain rule set on the corpus and on the entries
of every agent's fixture sessions."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support import FIXTURES, collect, prepare_fixture

from collector.config import load_config
from collector.pipeline.masking import Masker, default_masker, load_rules

CORPUS = FIXTURES / "secrets"
CONTEXTS = {"prompt", "tool_args", "tool_output", "file", "key", "json_output"}
# Every type the issue found leaking or missing, by the corpus's type names.
REQUIRED_TYPES = {
    "aws_secret_key_free_text", "aws_credentials_csv", "pgp_private_key_block", "azure_sas_signature",
    "twilio_api_key", "twilio_auth_token", "sendgrid_api_key", "npm_token", "pypi_token", "huggingface_token",
    "databricks_token", "db_password_assignment", "github_token_assignment", "cli_password_flag",
    "basic_auth_header", "discord_bot_token", "discord_webhook", "telegram_bot_token", "shopify_token",
    "digitalocean_token", "vault_token", "mailgun_api_key", "alibaba_access_key_id", "alibaba_access_key_secret",
    "tencent_secret_id", "tencent_secret_key", "huawei_cloud_access_key", "huawei_cloud_secret_key",
    "volcengine_access_key", "volcengine_secret_key", "postgres_url", "mysql_url", "mongodb_url", "redis_url",
    "secret_key_assignment", "api_token_assignment", "rsa_private_key", "ec_private_key", "dsa_private_key",
    "openssh_private_key", "pkcs8_private_key", "encrypted_private_key",
}
ISSUE_FALSE_POSITIVES = {
    "password = getpass.getpass()",
    "api_key = os.environ['API_KEY']",
    "We ship sk-learn-compatible-estimators for the pipeline.",
    "auth_token: <YOUR_TOKEN_HERE>",
    "token = request.headers.get('Authorization')",
    "secret = settings.SECRET_KEY",
}


def _load(name: str) -> list[dict[str, str]]:
    return [json.loads(line) for line in (CORPUS / name).read_text(encoding="utf-8").splitlines() if line]


POSITIVES = _load("positives.jsonl")
NEGATIVES = _load("negatives.jsonl")


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS / "make_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def masked(masker: Masker, sample: dict[str, str]) -> str:
    """The sample through the masker: as a string value, or as a dictionary key."""
    if sample["context"] == "key":
        (key,) = masker.mask_value({sample["text"]: "value"})
        return str(key)
    return masker.mask_text(sample["text"])


def test_the_positives_are_what_the_generator_makes() -> None:
    """No hand-edited sample (the negatives hold a snapshot of this project's code, which moves on)."""
    assert _generator().positives() == POSITIVES


def test_corpus_size_and_spread() -> None:
    types = Counter(p["type"] for p in POSITIVES)
    assert len(POSITIVES) >= 900 and len(types) >= 150
    assert set(types) >= REQUIRED_TYPES
    assert {p["context"] for p in POSITIVES} == CONTEXTS
    assert all(n >= 5 for n in types.values())
    kinds = Counter(n["kind"] for n in NEGATIVES)
    assert len(NEGATIVES) >= 600
    assert {"near_miss", "digest_or_id", "project_code", "transcript", "prose", "lookalike"} <= set(kinds)
    texts = {n["text"] for n in NEGATIVES}
    assert texts >= ISSUE_FALSE_POSITIVES
    assert any("data:image/png;base64," in t for t in texts)
    assert any(t.startswith("commit ") for t in texts) and any("sha256:" in t for t in texts)
    assert all(p["secret"] in p["text"] for p in POSITIVES)


def test_recall_at_least_99_percent() -> None:
    masker = default_masker()
    missed = [p for p in POSITIVES if p["secret"] in masked(masker, p)]
    recall = 1 - len(missed) / len(POSITIVES)
    detail = [(p["type"], p["context"]) for p in missed]
    assert recall >= 0.99, f"recall {recall:.3f}; missed {detail}"
    for sample in POSITIVES:
        out = masked(masker, sample)
        if sample["secret"] not in out:
            assert "[REDACTED:" in out, sample


def test_false_positives_at_most_1_percent() -> None:
    masker = default_masker()
    changed = [n for n in NEGATIVES if masker.mask_text(n["text"]) != n["text"]]
    assert len(changed) / len(NEGATIVES) <= 0.01, [(n["kind"], n["text"][:80]) for n in changed]
    for line in ISSUE_FALSE_POSITIVES:
        assert masker.mask_text(line) == line


def test_every_issue_type_is_caught_everywhere() -> None:
    masker = default_masker()
    for sample in POSITIVES:
        if sample["type"] in REQUIRED_TYPES:
            assert sample["secret"] not in masked(masker, sample), (sample["type"], sample["context"])


def test_every_shipped_rule_finds_something_in_the_corpus() -> None:
    rules = default_masker().rules.rules
    found = {r.id for r in rules for p in POSITIVES if any(True for _ in r.spans(p["text"]))}
    assert found == {r.id for r in rules}, f"rules without a positive sample: {sorted({r.id for r in rules} - found)}"


@lru_cache(maxsize=1)
def _fixture_entries() -> tuple[str, ...]:
    """Every entry of every agent's fixture sessions, content captured, not masked (as JSON text)."""
    import tempfile

    out: list[str] = []
    env = {"AGENT_COLLECTOR_CONTENT__CAPTURE": "true", "AGENT_COLLECTOR_MASKING__ENABLED": "false"}
    for case in sorted(p.parent for p in FIXTURES.glob("*/*/expected.json")):
        with tempfile.TemporaryDirectory() as tmp:
            paths = prepare_fixture(case, Path(tmp))
            entries = collect(paths, config=load_config(paths.config_file, env=env))
            out.extend(json.dumps(e) for e in entries)
    return tuple(out)


def test_prefiltered_masker_equals_the_plain_rule_set() -> None:
    """Same result with and without the keyword prefilter and windows: on the corpus (values and keys)
    and on real entries of every agent, alone and with the corpus's secrets planted in them."""
    fast, plain = default_masker(), Masker(load_rules(), prefilter=False)
    for sample in POSITIVES + NEGATIVES:
        assert fast.mask_text(sample["text"]) == plain.mask_text(sample["text"])
        value = {sample["text"]: [sample["text"]]}
        assert fast.mask_value(value) == plain.mask_value(value)
    entries = [json.loads(e) for e in _fixture_entries()]
    assert {e["gen_ai.agent.type"] for e in entries} == {p.name for p in FIXTURES.iterdir()
                                                          if any(p.glob("*/expected.json"))}
    for i, entry in enumerate(entries):
        planted = _plant(entry, POSITIVES[i % len(POSITIVES)]["text"])
        for candidate in (entry, planted):
            a, b = json.loads(json.dumps(candidate)), json.loads(json.dumps(candidate))
            assert fast.mask_entry(a) == plain.mask_entry(b)


def _plant(entry: dict[str, Any], secret: str) -> dict[str, Any]:
    out = json.loads(json.dumps(entry))
    for key in ("gen_ai.tool.call.result", "gen_ai.input.messages", "gen_ai.tool.call.arguments"):
        if key in out:
            out[key] = [out[key], {"pasted": secret, secret[:40]: "as a key"}]
            return out
    out["agent.note"] = secret
    return out


@pytest.mark.parametrize("context", sorted(CONTEXTS))
def test_recall_holds_in_every_context(context: str) -> None:
    masker = default_masker()
    samples = [p for p in POSITIVES if p["context"] == context]
    missed = [p["type"] for p in samples if p["secret"] in masked(masker, p)]
    assert len(missed) <= len(samples) * 0.01, missed


TYPES = sorted({p["type"] for p in POSITIVES})


def test_every_type_names_the_public_document_of_its_format() -> None:
    sources = _generator().SOURCES
    assert set(sources) == set(TYPES)
    assert all(url.startswith("https://") for url in sources.values())


@pytest.mark.parametrize("kind", TYPES)
def test_each_secret_type_is_masked_in_every_context(kind: str) -> None:
    """One test per type (issue 22 item 6): the secret is gone from all six places people paste it."""
    masker = default_masker()
    samples = [p for p in POSITIVES if p["type"] == kind]
    assert {p["context"] for p in samples} == CONTEXTS
    for sample in samples:
        out = masked(masker, sample)
        assert sample["secret"] not in out and "[REDACTED:" in out, (sample["context"], out[:200])
