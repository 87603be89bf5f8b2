"""Dataplane helpers: pure computations whose results are programmed into the Linux kernel."""
