"""The local usage store and what reads it: reports, cost, the dashboard's numbers."""
