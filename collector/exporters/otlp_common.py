"""What the three OTLP exporters share: resources, the scope, and where poison goes.

Resources are the SDK's ``Resource.create`` (so ``telemetry.sdk.*`` and the standard detectors stay what
they were) made once per (host.name, user.id) seen in entries, plus configured extras, and kept encoded.
An entry protobuf cannot carry is *poison*: a permanent error for that entry alone. It is reported to
the exporter's :data:`PoisonSink` (the quarantine file, see ``collector.exporters.otlp``) after the rest
of its batch was accepted, so a batch that is retried does not report it twice.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.resources import Resource

import collector.exporters.otlp_wire as wire
from collector import __version__
from collector.exporters.base import PoisonSink, no_sink

SCOPE_NAME = "agent-collector"
SCOPE = wire.scope(SCOPE_NAME, __version__)  # the encoded InstrumentationScope of every signal

__all__ = ["SCOPE", "PoisonSink", "ResourceCache", "no_sink"]


class ResourceCache:
    """One SDK ``Resource`` per (host.name, user.id) seen in entries, plus configured extras."""

    def __init__(self, extra: Mapping[str, str] | None = None) -> None:
        self.extra = dict(extra or {})
        self._cache: dict[tuple[str, str], Resource] = {}
        self._encoded: dict[tuple[str, str], bytes] = {}
        self._host = socket.gethostname()
        try:
            self._user = getpass.getuser()
        except (KeyError, OSError):
            self._user = "unknown"

    def key(self, entry: Mapping[str, Any]) -> tuple[str, str]:
        return (str(entry.get("host.name") or self._host), str(entry.get("user.id") or self._user))

    def get(self, key: tuple[str, str]) -> Resource:
        resource = self._cache.get(key)
        if resource is None:
            attributes = {
                "service.name": "agent-collector",
                **self.extra,  # resource_attributes: may name the service too (a team's own service name)
                "service.version": __version__,
                "host.name": key[0],
                "user.id": key[1],
            }
            resource = self._cache[key] = Resource.create(attributes)
        return resource

    def encoded(self, key: tuple[str, str]) -> bytes:
        """The body of the protobuf ``Resource`` for ``key`` (raises wire.Unencodable for bad UTF-8)."""
        found = self._encoded.get(key)
        if found is None:
            found = self._encoded[key] = wire.resource(self.get(key).attributes)
        return found

    def for_entry(self, entry: Mapping[str, Any]) -> Resource:
        return self.get(self.key(entry))
