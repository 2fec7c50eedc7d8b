"""Everything that is the same for all agents: dedupe, correlation, status, content policy, masking."""
