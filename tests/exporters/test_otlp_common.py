"""The resource every OTLP signal carries: ours, and resource_attributes, which may name the service."""

from __future__ import annotations

from collector.exporters.otlp_common import ResourceCache


def test_resource_attributes_may_name_the_service_but_not_the_entry_identity() -> None:
    resource = ResourceCache({"service.name": "team-agents", "user.id": "spoof", "team": "platform"})
    attributes = dict(resource.for_entry({"host.name": "h", "user.id": "alice"}).attributes)
    assert attributes["service.name"] == "team-agents" and attributes["team"] == "platform"
    assert (attributes["host.name"], attributes["user.id"]) == ("h", "alice")


def test_without_one_the_service_is_ours() -> None:
    attributes = dict(ResourceCache().for_entry({}).attributes)
    assert attributes["service.name"] == "agent-collector"
