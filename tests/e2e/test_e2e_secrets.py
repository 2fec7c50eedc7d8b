"""Real agent CLIs (all five, from npm) in a session where the user pastes secrets into the prompt and a
shell command prints more of them (a file of credentials), with content capture on and off: no planted
secret reaches any file the collector writes (output, state, queues, usage store, logs), while with
capture on the prompt and the tool output are kept, masked. The spool, the hooks' raw transit copy, is
checked too, after a second `collect --once` with `retention.spool_grace_s = 0`: once every line is
committed the first sweep renames the hook script's file of today aside, the second deletes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from collector_e2e import collector, data_dir, run_collected
from fake_llm import FakeLLMServer
from harness import AgentHome, Scenario, Turn

pytestmark = pytest.mark.e2e

# Fake values in the providers' formats (none is a live credential).
IN_PROMPT = {
    "aws_access_key_id": "AKIAZ7Q3FAKE4KEYXMPL",
    "aws_secret_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYFAKEKEY012",
    "github_token": "ghp_FAKE0123456789abcdefghijABCDEFGHIJ01",
    "db_password": "Sup3r-FAKE-pw-2026",
}
IN_FILE = {
    "npm_token": "npm_FAKEabcdefghijklmnopqrstuvwxyz012345",
    "huggingface": "hf_FAKEabcdefghijklmnopqrstuvwxyzABCDEF",
    "tencent": "AKIDFAKEabcdefghijklmnopqrstuvwx0123",
    "alibaba": "LTAI5tFAKEabcdef012345",
    "basic": "ZGVwbG95OkZBS0UtYmFzaWMtcGFzcw==",  # deploy:FAKE-basic-pass
    "stripe": "sk_live_FAKE0123456789abcdefghij",
}
PROMPT = (f"My AWS key is {IN_PROMPT['aws_access_key_id']} with secret {IN_PROMPT['aws_secret_key']}, "
          f"the token {IN_PROMPT['github_token']} and DB_PASSWORD={IN_PROMPT['db_password']}. "
          "Please run `cat {workdir}/creds.env` in the shell and tell me what it printed.")
CREDS = "\n".join([
    f"NPM_TOKEN={IN_FILE['npm_token']}",
    f"HF_TOKEN={IN_FILE['huggingface']}",
    f"TENCENTCLOUD_SECRET_ID={IN_FILE['tencent']}",
    f"ALIBABA_CLOUD_ACCESS_KEY_ID={IN_FILE['alibaba']}",
    f"Authorization: Basic {IN_FILE['basic']}",
    f"STRIPE_KEY={IN_FILE['stripe']}",
]) + "\n"
SCENARIO = Scenario("pasted_secrets", (Turn(PROMPT),), "secrets in the prompt and in a tool's output")
AGENTS = ("claude-code", "codex", "gemini-cli", "qwen-code", "opencode")


def _config_dir(env: AgentHome) -> Path:
    return env.home / ".config" / "agent-collector"


def _files_we_write(env: AgentHome) -> dict[str, bytes]:
    out = {}
    for root in (data_dir(env), _config_dir(env)):
        for path in root.rglob("*"):
            if path.is_file():
                out[str(path.relative_to(env.home))] = path.read_bytes()
    return out


@pytest.mark.parametrize("capture", [True, False], ids=["capture_on", "capture_off"])
@pytest.mark.parametrize("agent", AGENTS)
def test_no_planted_secret_in_anything_we_write(e2e_agents_bin: Path, agent_home: AgentHome,
                                                fake_llm: FakeLLMServer, agent: str, capture: bool) -> None:
    (agent_home.workdir / "creds.env").write_text(CREDS)
    _config_dir(agent_home).mkdir(parents=True, exist_ok=True)
    (_config_dir(agent_home) / "config.toml").write_text(
        f"[content]\ncapture = {'true' if capture else 'false'}\n[retention]\nspool_grace_s = 0\n")
    entries = run_collected(agent, agent_home, fake_llm, SCENARIO)
    spool = data_dir(agent_home) / "spool"
    assert [p for p in spool.rglob("*.jsonl*") if p.stat().st_size], "the hooks spooled lines"
    collector(agent_home.home, "collect", "--once", "-q")  # the next sweep deletes what the first renamed
    assert [p for p in spool.rglob("*.jsonl*") if p.stat().st_size] == [], "committed: the spool is emptied"
    assert any(IN_FILE["npm_token"] in r.text for r in fake_llm.tool_results()), "the agent ran the command"
    files = _files_we_write(agent_home)
    assert any(name.endswith(".jsonl") and "output" in name for name in files), sorted(files)
    for name, data in files.items():
        for secret in [*IN_PROMPT.values(), *IN_FILE.values()]:
            assert secret.encode() not in data, f"{secret} leaked into {name}"
    output = b"".join(data for name, data in files.items() if "/output/" in name)
    if capture:
        assert b"Please run" in output, "capture on keeps the prompt"
        assert b"[REDACTED:" in output
        results = [e for e in entries if e["event.name"] == "tool.result" and "gen_ai.tool.call.result" in e]
        assert results and "NPM_TOKEN=[REDACTED:" in str(results), "the tool output is kept, masked"
    else:
        assert b"Please run" not in output and b"NPM_TOKEN" not in output
