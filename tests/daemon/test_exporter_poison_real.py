"""An installed exporter plug-in (registered the way plug-ins are: an entry point of a package on the path)
fails on one entry of a real Claude Code capture: with TypeError in the real `collect --once`, and by
killing the real daemon while it holds the entry. The entry is quarantined for that exporter with the
record's source position and the reason, every other entry reaches every exporter exactly once, `status`
names the cause, the daemon keeps running, and `quarantine retry` offers the entry again."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

from support import FIXTURES, assert_no_duplicates, read_output
from support.robust import Daemon, wait_status

from collector.model.entry import CONTENT_FIELDS

CASE = FIXTURES / "claude-code" / "two_tools"
TOOL = "toolu_3534a3be88264b1489405487"  # the second of the capture's two shell commands

PROBE = '''
import json, os, signal
from collector.registry import Plugin


class Probe:
    """Keeps the ids it accepted (once each, like every exporter); fails on the tool result it is told to."""

    name = "probe"

    def __init__(self, path):
        self.path = path
        self.have = set()
        if path.exists():
            self.have = {json.loads(line)["id"] for line in path.read_text().splitlines()}

    def export(self, batch):
        for entry in batch:
            bad = entry.get("event.name") == "tool.result" and entry.get("gen_ai.tool.call.id") == os.environ.get(
                "PROBE_TOOL")
            if bad and os.environ.get("PROBE_HOW") == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if bad:
                raise TypeError("the probe cannot take this entry")
        fresh = [e["event.id"] for e in batch if e["event.id"] not in self.have]
        with open(self.path, "a") as f:
            f.write("".join(json.dumps({"id": i}) + "\\n" for i in fresh))
        self.have.update(fresh)

    def shutdown(self):
        pass

    def stats(self):
        return {"accepted": len(self.have)}


EXPORTER = Plugin("probe", lambda config, ctx: [Probe(ctx.paths.data_dir / "probe.jsonl")])
'''


def install_probe(site: Path) -> None:
    site.mkdir(parents=True)
    (site / "probe_exporter.py").write_text(textwrap.dedent(PROBE))
    info = site / "probe_exporter-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-exporter\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[agent_collector.exporters]\nprobe = probe_exporter:EXPORTER\n")


def daemon_with_probe(tmp_path: Path, how: str) -> Daemon:
    install_probe(tmp_path / "site")
    daemon = Daemon(tmp_path, {"PYTHONPATH": str(tmp_path / "site"), "PROBE_TOOL": TOOL, "PROBE_HOW": how,
                               "AGENT_COLLECTOR_INGEST__ENABLED": "false"})
    shutil.rmtree(daemon.home)
    shutil.copytree(CASE / "home", daemon.home, symlinks=True)
    shutil.copytree(CASE / "spool", daemon.data / "spool")
    return daemon


def probe_ids(daemon: Daemon) -> Counter[str]:
    path = daemon.data / "probe.jsonl"
    return Counter(json.loads(line)["id"] for line in path.read_text().splitlines()) if path.exists() else Counter()


def cli(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collector", *args, "--home", str(daemon.home)], env=daemon.env,
                          capture_output=True, text=True, timeout=120)


def quarantined(daemon: Daemon) -> list[dict[str, object]]:
    done = cli(daemon, "quarantine", "list", "--json")
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def poison_of(entries: list[dict[str, object]]) -> dict[str, object]:
    [entry] = [e for e in entries if e["event.name"] == "tool.result" and e.get("gen_ai.tool.call.id") == TOOL]
    return entry


def test_collect_once_quarantines_the_entry_an_exporter_fails_on_and_retry_offers_it_again(tmp_path: Path) -> None:
    daemon = daemon_with_probe(tmp_path, "raise")
    done = cli(daemon, "collect", "--once", "--output", str(daemon.out), "-q")
    assert done.returncode == 0, done.stderr

    entries = read_output(daemon.out)
    assert_no_duplicates(entries)
    poison = poison_of(entries)  # the JSONL file, before the probe in the chain, took it
    assert {e["gen_ai.tool.call.id"] for e in entries if e["event.name"] == "tool.call"} == {
        TOOL, "toolu_a3d0adf4716146f591bb17ab"}
    assert probe_ids(daemon) == Counter(e["event.id"] for e in entries if e is not poison), \
        "every neighbour reached the failing exporter exactly once"
    [line] = quarantined(daemon)
    assert (line["stage"], line["reason"], line["exporter"]) == ("export", "probe: TypeError", "probe")
    assert line["event.id"] == poison["event.id"]
    assert str(line["path"]).endswith(".jsonl") and str(line["position"]).isdigit(), "its source position"
    assert line["entry"] == poison and not set(CONTENT_FIELDS) & set(poison), "capture off: no content kept"
    assert "data" not in line
    status = json.loads((daemon.data / "state" / "status.json").read_text())
    assert {why for reasons in status["quarantine"]["by_source"].values() for why in reasons} == {
        "export: probe: TypeError"}
    assert status["delivery"]["poisoned"] == {"probe": 1}

    daemon.env.pop("PROBE_TOOL")  # the exporter is fixed
    done = cli(daemon, "quarantine", "retry")
    assert done.returncode == 0 and "1 records retried; 0 in quarantine now" in done.stdout, done.stdout + done.stderr
    assert probe_ids(daemon) == Counter(e["event.id"] for e in entries), "the entry reached it, once"
    assert read_output(daemon.out) == entries, "the other exporters did not get it again"


def test_a_daemon_killed_in_an_exporter_on_an_entry_does_not_die_on_it_again(tmp_path: Path) -> None:
    """SIGKILL (no word from the process): the first death names the batch, the second and third (the batch
    one entry at a time) the entry, and the fourth start quarantines it and goes on."""
    daemon = daemon_with_probe(tmp_path, "kill")
    for death in (1, 2, 3):
        daemon.spawn()
        assert daemon.proc is not None
        assert daemon.proc.wait(60) == -9, f"death {death}: " + daemon.log()[-3000:]
    assert "one entry at a time" in daemon.log()
    daemon.start_quiet()
    try:
        daemon.wait_output(lambda es: any(e["event.name"] == "session.end" for e in es))
        status = wait_status(daemon, lambda s: bool(s.get("quarantine", {}).get("records")))
        assert daemon.proc is not None and daemon.proc.poll() is None, "alive with the entry in its input"
    finally:
        assert daemon.stop() == 0
    entries = read_output(daemon.out)
    assert_no_duplicates(entries)
    poison = poison_of(entries)
    assert probe_ids(daemon) == Counter(e["event.id"] for e in entries if e is not poison)
    [line] = quarantined(daemon)
    assert (line["stage"], line["reason"]) == ("export", "probe: the collector died while exporting it")
    assert str(line["path"]).endswith(".jsonl") and line["event.id"] == poison["event.id"]
    assert "export: probe: the collector died while exporting it" in json.dumps(status["quarantine"])
