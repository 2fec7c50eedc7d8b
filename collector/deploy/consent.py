"""Whether the user asked for integrations: `agent-collector install` (or `run --deploy`) leaves a mark in
the state directory; `uninstall` of every agent takes it away. Without it the daemon deploys nothing by
itself (auto-deploy stays off), so `run` from a checkout never edits an agent's settings unasked."""

from __future__ import annotations

import contextlib
import time

from collector.paths import Paths
from collector.util.private import create_private, private_dir

MARK = "deploy-consent"


def give(paths: Paths, how: str) -> None:
    private_dir(paths.state_dir)
    mark = paths.state_dir / MARK
    create_private(mark)
    mark.write_text(f"{how} at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")


def withdraw(paths: Paths) -> None:
    with contextlib.suppress(FileNotFoundError):
        (paths.state_dir / MARK).unlink()


def given(paths: Paths) -> bool:
    return (paths.state_dir / MARK).is_file()
