"""`lab`: validate, render, bring up, inspect and tear down emulated vendor topologies.

Printing and argument parsing only; everything a command does goes through `lab_orchestrator.api`.
One module per verb group registers its commands on the shared Typer app; the import order below is
the order of `lab --help`.
"""

from __future__ import annotations

# isort: off
from . import topology  # noqa: F401  validate, render, export, graph
from . import lifecycle  # noqa: F401  up, down, status, restart
from . import operate  # noqa: F401  fail, restore, switchover
from . import inspect  # noqa: F401  redundancy, sessions, selector, ssh, exec
from . import events  # noqa: F401  events list|run
from . import report  # noqa: F401  report (a test plan)
from . import traffic  # noqa: F401  traffic start|stop|stats
from . import meta  # noqa: F401  doctor, version, labs
# isort: on
from .common import app

__all__ = ["app", "main"]


def main() -> None:
    app()
