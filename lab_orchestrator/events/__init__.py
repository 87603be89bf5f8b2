"""Failure events on a running lab: the catalog, the runner, what the lab shows, the verdict."""
