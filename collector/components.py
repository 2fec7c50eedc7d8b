"""Optional daemon parts, each a module with ``attach(service)``; a part missing from a build is skipped."""

from __future__ import annotations

import importlib
import logging

from collector.service import Service

log = logging.getLogger(__name__)

COMPONENT_MODULES = [
    "collector.ingest.live",  # session status + loopback ingest server
    "collector.deploy.watchdog",  # re-applies our hooks when another tool removes them
]


def attach(service: Service) -> None:
    for name in COMPONENT_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        attach_one = getattr(module, "attach", None)
        if attach_one is None:
            log.debug("%s has no attach(service)", name)
            continue
        attach_one(service)
