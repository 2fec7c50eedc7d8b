"""The daemon's own machinery: the Service that coordinates a start, a cycle, serving and a shutdown, and
the parts it hands work to (collection, delivery and commit, file events, the status file, housekeeping,
the instance lock, the hand-off of ``collect --once`` to a running daemon, the plug-in registries)."""
