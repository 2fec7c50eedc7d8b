"""Loopback HTTP ingest: http hooks post raw payloads; the live picture is served as JSON."""

from collector.ingest.envelope import to_envelope
from collector.ingest.server import DEFAULT_PORT, IngestConfig, IngestServer, check_loopback

__all__ = ["DEFAULT_PORT", "IngestConfig", "IngestServer", "check_loopback", "to_envelope"]
