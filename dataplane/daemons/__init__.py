"""The per-node daemons around the cores (`python -m dataplane.daemons.NAME CONFIG`)."""
