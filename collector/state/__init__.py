"""Durable collector state. Only ``checkpoints`` writes it."""
