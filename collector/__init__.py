"""agent-collector: telemetry for AI coding agents, in one schema."""

__version__ = "0.1.0"
SCHEMA_VERSION = "1.0"
