"""The records that flow through the pipeline."""

from collector.model.entry import AgentActivityEntry, event_id
from collector.model.raw import RawRecord

__all__ = ["AgentActivityEntry", "RawRecord", "event_id"]
