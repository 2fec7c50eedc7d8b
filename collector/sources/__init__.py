"""Sources: files, databases and processes. They know nothing of agents: they yield raw records and
the position to commit once everything up to that record has been delivered."""
