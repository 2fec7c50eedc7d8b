"""No guessable digests: with content capture off a content field keeps its length and an HMAC under a
per-install key (or nothing, by setting), never a plain SHA-256 that a guess can be checked against."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from support import collect, make_paths

from collector.config import ConfigError, load_config
from collector.pipeline.content_policy import (
    KEY_FILE,
    ContentKeyError,
    ContentPolicy,
    content_bytes,
    load_or_create_key,
    policy_for,
)

SESSION = "5e55a0c1-0000-4000-8000-00000000d1d1"


def _spool(tmp: Path, prompts: list[str], first: int = 0) -> None:
    spool = tmp / "data" / "spool" / "claude-code"
    spool.mkdir(parents=True, exist_ok=True)
    with (spool / "claude-code-2026-11-30.jsonl").open("a") as f:
        for i, prompt in enumerate(prompts, first):
            payload = {"session_id": SESSION, "hook_event_name": "UserPromptSubmit", "cwd": "/work",
                       "prompt": prompt, "prompt_id": f"p{i}"}
            f.write(json.dumps({"ts": 1796037000 + i, "agent": "claude-code", "event": "UserPromptSubmit",
                                "payload": payload}) + "\n")


def _prompts(entries: list[dict]) -> list[dict]:
    return [e for e in entries if e["event.name"] == "user.prompt"]


def test_key_is_made_once_private_and_reused(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        key = load_or_create_key(tmp_path / "state" / KEY_FILE)
    finally:
        os.umask(old)
    path = tmp_path / "state" / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(key) == 32 and load_or_create_key(path) == key
    assert [p.name for p in path.parent.iterdir()] == [KEY_FILE], "no temporary file left behind"


def test_loose_key_mode_is_repaired(tmp_path: Path) -> None:
    path = tmp_path / KEY_FILE
    key = load_or_create_key(path)
    path.chmod(0o644)
    assert load_or_create_key(path) == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_planted_symlink_or_junk_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "attacker-key"
    target.write_text("00" * 32)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / KEY_FILE).symlink_to(target)
    with pytest.raises(ContentKeyError, match="cannot be read safely"):
        load_or_create_key(tmp_path / "a" / KEY_FILE)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / KEY_FILE).write_text("not hex")
    with pytest.raises(ContentKeyError, match="not a content key"):
        load_or_create_key(tmp_path / "b" / KEY_FILE)
    with pytest.raises(ContentKeyError, match="content.digest"):
        policy_for(tmp_path, "sha256")


def test_digest_is_keyed_and_stable_per_key() -> None:
    one, two = ContentPolicy(b"k" * 32), ContentPolicy(b"j" * 32)
    assert one.digest(b"hunter2") == one.digest(b"hunter2") != two.digest(b"hunter2")
    assert one.digest(b"hunter2") != hashlib.sha256(b"hunter2").hexdigest()
    entry = {"gen_ai.input.messages": "hunter2", "error.message": "boom"}
    one.apply(entry, capture=False)
    assert entry == {"gen_ai.input.messages.length": 7, "gen_ai.input.messages.hmac": one.digest(b"hunter2"),
                     "error.message.length": 4, "error.message.hmac": one.digest(b"boom")}
    entry = {"gen_ai.input.messages": "hunter2"}
    ContentPolicy(None).apply(entry, capture=False)
    assert entry == {"gen_ai.input.messages.length": 7}


@pytest.mark.parametrize("key_bytes", [0, 32, 64, 65, 200])
def test_digest_is_hmac_sha256(key_bytes: int) -> None:
    """The digest is HMAC-SHA256 as the standard library computes it, for keys shorter than, as long as
    and longer than SHA-256's block (the policy builds it from two hashes with the padded key taken in)."""
    import hmac

    key = bytes(i % 251 for i in range(key_bytes))
    policy = ContentPolicy(key)
    for data in (b"", b"hunter2", bytes(range(256)) * 5):
        assert policy.digest(data) == hmac.new(key, data, hashlib.sha256).hexdigest()


def test_collector_output_has_no_guessable_digest(tmp_path: Path) -> None:
    """A short prompt cannot be recovered from the output by hashing guesses; equal prompts still compare
    equal across runs of the same install."""
    _spool(tmp_path, ["hunter2", "hunter2", "something else"])
    paths = make_paths(tmp_path)
    entries = _prompts(collect(paths))
    text = "".join(p.read_text() for p in paths.output_dir.glob("*.jsonl"))
    assert "hunter2" not in text
    message = [{"role": "user", "parts": [{"type": "text", "content": "hunter2"}]}]
    assert entries[0]["gen_ai.input.messages.length"] == len(content_bytes(message)), "the guess is the real shape"
    for guess in (b"hunter2", content_bytes(message)):
        assert hashlib.sha256(guess).hexdigest() not in text
    assert not any(k.endswith(".sha256") for e in entries for k in e)
    digests = [e["gen_ai.input.messages.hmac"] for e in entries]
    assert len(digests) == 3 and digests[0] == digests[1] != digests[2]
    key_file = paths.state_dir / KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    # a later run of the same install: same key, so the same text gets the same digest
    _spool(tmp_path, ["hunter2"], first=3)
    (later,) = _prompts(collect(paths, output=tmp_path / "later"))
    assert later["time_unix_nano"] == (1796037000 + 3) * 10**9 and later["gen_ai.input.messages.hmac"] == digests[0]


def test_digest_none_keeps_only_the_length(tmp_path: Path) -> None:
    _spool(tmp_path, ["hunter2"])
    paths = make_paths(tmp_path)
    config = load_config(tmp_path / "none.toml", env={"AGENT_COLLECTOR_CONTENT__DIGEST": "none"})
    (prompt,) = _prompts(collect(paths, config=config))
    assert prompt["gen_ai.input.messages.length"] > 0
    assert not any(k.endswith((".hmac", ".sha256")) for k in prompt)
    assert not (paths.state_dir / KEY_FILE).exists()


def test_unknown_digest_mode_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="AGENT_COLLECTOR_CONTENT__DIGEST: content.digest: 'sha256'"):
        load_config(tmp_path / "none.toml", env={"AGENT_COLLECTOR_CONTENT__DIGEST": "sha256"})
