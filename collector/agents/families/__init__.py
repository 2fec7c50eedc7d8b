"""What a family of agents shares: agents that copied another's input formats read them with the same code.

- :mod:`~collector.agents.families.claude_hooks`: the hook protocol of Claude Code (its event names and
  payload fields), which Codex and Qwen Code copied.
- :mod:`~collector.agents.families.gemini_chat`: the Gemini-style chat content (``parts`` with text,
  ``functionCall`` and ``functionResponse``) of the Gemini CLI and Qwen Code chat logs.

An agent's own module keeps only what it does its own way.
"""
