"""Entire external agent plugins (``entire-agent-<name>`` executables) as sources: discovery on PATH,
read-only calls, and the source that polls their sessions. docs/external-agents.md."""
