"""The local dashboard the daemon serves on its loopback port: ``/dashboard`` and ``/v1/usage``."""
