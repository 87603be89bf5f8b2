"""The names a user types for a lab's nodes, daemons and events, checked before anything is done: a
wrong one is bad input (exit 2) naming the closest known name, never an operation half carried out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..model.diagnostics import BadInput, did_you_mean
from ..plan.sshplan import PROCESS_NODE

if TYPE_CHECKING:
    from ..events.catalog import Applicability


def node(lab: str, name: str, known: Iterable[str]) -> None:
    """BadInput unless NAME is one of the lab's KNOWN nodes."""
    names = list(known)
    if name not in names:
        raise BadInput(f"lab {lab} has no node {name}{did_you_mean(name, names)}")


def daemon(lab: str, node_name: str, name: str, known: Iterable[str]) -> None:
    """BadInput unless NODE_NAME runs a supervised daemon NAME (KNOWN: the ones it runs)."""
    names = list(known)
    if name not in names:
        raise BadInput(f"{node_name} of lab {lab} runs no daemon {name}{did_you_mean(name, names)} "
                       f"(its daemons: {', '.join(names) or 'none'})")


def events_to_run(verdicts: list[Applicability], wanted: list[str], lab: str, nodes: list[str],
                  target: str | None = None) -> list[str]:
    """The events of a run: those WANTED, or every one that applies to LAB. BadInput for a name that is
    no event or an event that does not apply, and for a TARGET that is not one of the lab's NODES (or
    the lab-wide daemons' PROCESS_NODE, for a daemon crash only)."""
    by_name = {a.event.name: a for a in verdicts}
    names = wanted or [name for name, a in by_name.items() if a.applicable]
    for name in names:
        if name not in by_name:
            raise BadInput(f"unknown event {name}{did_you_mean(name, by_name)}; known: {', '.join(by_name)}")
        if not by_name[name].applicable:
            raise BadInput(f"{name} does not apply to lab {lab}: {by_name[name].reason}")
    # the lab-wide daemons (the SSH server) run on no node of the topology: a daemon crash may hit them
    lab_wide = target == PROCESS_NODE and set(names) == {"daemon-crash"}
    if target is not None and target not in nodes and not lab_wide:
        raise BadInput(f"--target {target}: lab {lab} has no node {target}{did_you_mean(target, nodes)}")
    return names
