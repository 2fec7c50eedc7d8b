"""`collector.once_stall_s`: how long `collect --once` waits for the export queues without progress. A
typed key (default 10 s, checked range) that ``Service.end_of_input`` hands to every queue."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import make_paths
from support.otlp import FakeBackend, entries

from collector.config import ConfigError, load_config
from collector.daemon.service import Service
from collector.exporters.queue import Backlog, QueuedExporter, QueueOptions

FAST = QueueOptions(backoff_initial=0.01, backoff_max=0.05, tick_interval=0.01, drain_timeout=0.2)


class Recording(QueuedExporter):
    """A real queue that remembers the stall limit it was given."""

    asked: list[float]

    def end_of_input(self, stall_s: float, limit_s: float) -> Backlog:
        self.asked.append(stall_s)
        return super().end_of_input(stall_s, limit_s)


def _config(tmp_path: Path, text: str = "", env: dict[str, str] | None = None) -> float:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_config(path, env=env or {}, known_agents=()).collector.once_stall_s


def test_the_default_is_10_s_and_file_and_environment_set_it(tmp_path: Path) -> None:
    assert _config(tmp_path) == 10.0
    assert _config(tmp_path, "[collector]\nonce_stall_s = 2.5\n") == 2.5
    assert _config(tmp_path, env={"AGENT_COLLECTOR_COLLECTOR__ONCE_STALL_S": "0"}) == 0.0


@pytest.mark.parametrize("value", ["-1", "3601", '"soon"'])
def test_a_bad_value_names_the_key(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"collector\.once_stall_s"):
        _config(tmp_path, f"[collector]\nonce_stall_s = {value}\n")


def test_end_of_input_waits_with_the_configured_stall_and_leaves_the_rest_queued(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text("[collector]\nonce_stall_s = 0.2\n")
    service = Service(paths, config=load_config(paths.config_file, env={}, known_agents=()))
    backend = FakeBackend()
    backend.down = True  # no progress is possible: the queue gives up after the stall limit
    queue = Recording(backend, tmp_path / "q", options=FAST)
    queue.asked = []
    service.exporters = [queue]
    queue.export(entries(5))
    try:
        (left,) = service.end_of_input()
    finally:
        queue.shutdown()
    assert queue.asked == [0.2]
    assert left.queued == 5 and left.error and "connection refused" in left.error
    assert backend.received == []
