"""Exporters: where entries go. Each implements the tiny interface in ``base``."""
