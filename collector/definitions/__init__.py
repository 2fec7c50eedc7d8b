"""Agent definitions: built-in agents.d/*.json plus the user's overrides, validated by JSON Schema."""

from collector.definitions.detect import Detection, detect
from collector.definitions.loader import AgentDefinition, DefinitionProblem, LoadResult, load_definitions

__all__ = ["AgentDefinition", "DefinitionProblem", "Detection", "LoadResult", "detect", "load_definitions"]
