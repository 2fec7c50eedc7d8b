"""The command line. Each command module exposes ``register(subparsers)``; main.py lists them."""
