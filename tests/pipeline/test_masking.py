"""Secret masking and the content policy, end to end through the collector: secrets placed in prompts,
tool arguments and tool results never reach the output; with capture off no prompt text does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import collect, make_paths

from collector.config import defaults, load_config
from collector.pipeline.masking import mask_text

# One real-looking value per kind (none of them is a live credential).
SECRETS = {
    "private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\n"
                   "-----END OPENSSH PRIVATE KEY-----",
    "aws_access_key": "AKIAZ7Q3EXAMPLE4KEYX",
    "aws_secret_key": "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY",
    "gcp_api_key": "AIzaSyD3x4mPl3K3y-f0rT3st1ngPurp0s3sXYZ",
    "azure_key": "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
                 "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmE=;",
    "azure_client_secret": "abc8Q~d1E2f3G4h5I6j7K8l9M0n1O2p3Q4r5S6t7",
    "openai_key": "sk-proj-T3stK3yAbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "anthropic_key": "sk-ant-api03-T3stK3yAbCdEfGhIjKlMnOpQrStUvWxYz0123456789-AAAA",
    "github_token": "ghp_T3stK3yAbCdEfGhIjKlMnOpQrStUvWxYz012",
    "github_pat": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOP",
    "gitlab_token": "glpat-T3stK3yAbCdEfGhIjKlMn",
    "slack_token": "xoxb-123456789012-1234567890123-T3stK3yAbCdEfGhIjKlMnOp",
    "slack_webhook": "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "stripe_key": "sk_live_51T3stK3yAbCdEfGhIjKlMnOpQr",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
           "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "bearer": "Authorization: Bearer T3stB3arerT0kenValue1234567890",
    "url_password": "postgres://admin:Sup3rS3cretPw@db.internal:5432/app",
    "password_assignment": "password=Sup3rS3cretPw2",
}
# The part of each that must never appear in the output.
SECRET_CORES = {
    "private_key": "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB",
    "aws_secret_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY",
    "azure_key": "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4",
    "bearer": "T3stB3arerT0kenValue1234567890",
    "url_password": "Sup3rS3cretPw",
    "password_assignment": "Sup3rS3cretPw2",
}


def core(kind: str) -> str:
    return SECRET_CORES.get(kind, SECRETS[kind])


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_secret_kind_is_masked(kind: str) -> None:
    masked = mask_text(f"before {SECRETS[kind]} after")
    assert core(kind) not in masked
    assert "[REDACTED:" in masked and masked.startswith("before ") and masked.endswith(" after")


def test_ordinary_text_is_left_alone() -> None:
    text = "Run `ls -la` in /home/alice/project and tell me about task-1234 and commit a44aa80."
    assert mask_text(text) == text


def _spool(tmp: Path) -> None:
    session = "5e55a0c1-0000-4000-8000-00000000feed"
    secrets = "\n".join(SECRETS.values())
    events = [
        ("UserPromptSubmit", {"prompt": f"deploy with these: {secrets}", "prompt_id": "p1"}),
        ("PreToolUse", {"tool_name": "Bash", "tool_use_id": "toolu_1", "prompt_id": "p1",
                        "tool_input": {"command": f"curl -H '{SECRETS['bearer']}' {SECRETS['url_password']}",
                                       "env": {k: v for k, v in SECRETS.items()}}}),
        ("PostToolUse", {"tool_name": "Bash", "tool_use_id": "toolu_1", "prompt_id": "p1",
                         "tool_response": {"stdout": secrets, "stderr": ""}, "duration_ms": 5}),
        ("PreToolUse", {"tool_name": "Bash", "tool_use_id": "toolu_2", "prompt_id": "p1",
                        "tool_input": {"command": "cat creds"}}),
        ("PostToolUseFailure", {"tool_name": "Bash", "tool_use_id": "toolu_2", "prompt_id": "p1",
                                "error": f"Exit code 1\n{secrets}", "is_interrupt": False}),
    ]
    spool = tmp / "data" / "spool" / "claude-code"
    spool.mkdir(parents=True)
    with (spool / "claude-code-2026-11-30.jsonl").open("w") as f:
        for i, (event, extra) in enumerate(events):
            payload = {"session_id": session, "hook_event_name": event, "cwd": "/work", **extra}
            f.write(json.dumps({"ts": 1796037000 + i, "agent": "claude-code", "event": event, "payload": payload}))
            f.write("\n")


def _output_text(tmp: Path) -> str:
    return "".join(p.read_text() for p in (tmp / "data" / "output").glob("*.jsonl"))


def test_capture_on_masking_on_no_secret_in_output(tmp_path: Path) -> None:
    _spool(tmp_path)
    config = load_config(tmp_path / "none.toml", env={})
    config.content.capture = True
    entries = collect(make_paths(tmp_path), config=config)
    text = _output_text(tmp_path)
    assert "deploy with these" in text, "content capture on keeps the prompt"
    for kind in SECRETS:
        assert core(kind) not in text, f"{kind} leaked"
    kinds = {e["event.name"] for e in entries}
    assert {"user.prompt", "tool.call", "tool.result"} <= kinds


def test_capture_off_keeps_no_content_at_all(tmp_path: Path) -> None:
    _spool(tmp_path)
    assert defaults().content.capture is False
    entries = collect(make_paths(tmp_path), config=load_config(tmp_path / "none.toml", env={}))
    text = _output_text(tmp_path)
    assert "deploy with these" not in text and "curl" not in text and "Exit code 1" not in text
    for kind in SECRETS:
        assert core(kind) not in text
    result = next(e for e in entries if e["event.name"] == "tool.result" and e["tool.result.status"] == "error")
    assert result["error.message.length"] > 0 and result["error.type"] == "tool_error"
