"""Typed daemon status files: the daemon builds the model and writes it (atomically), every reader
(`lab` commands, the SSH CLI, benchmarks, the daemon itself resuming after a crash) parses it with
the same type: a field renamed or mistyped on one end fails on the other, not as a KeyError later.
Unknown keys are errors. The file names are in labkit.contracts.

    write_status(path, SrdStatus(node=..., ...))                             # daemon
    status = read_status(path, SrdStatus)   # None: no file, or one being rewritten / not this shape
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .files import write_atomic

S = TypeVar("S", bound="StatusModel")


class StatusModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, keys in field order (what `--json` output and `| display json` show)."""
        return self.model_dump(mode="json")

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent) + "\n"


def write_status(path: str | Path, status: StatusModel, indent: int | None = 2) -> None:
    """Replace the status file at once: a reader never sees half of it."""
    write_atomic(path, status.to_json(indent))


def parse_status(data: Any, model: type[S]) -> S | None:
    """DATA (an already loaded JSON value) as MODEL; None when it is not one."""
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def read_status(path: str | Path, model: type[S]) -> S | None:
    """The status file at PATH as MODEL; None when it is missing, unreadable or not (yet) a MODEL."""
    try:
        return model.model_validate_json(Path(path).read_text())
    except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
        return None


# ---------------------------------------------------------------- dataplane.daemons.srdd (labkit.contracts.SRD_STATUS)
SrdRole = Literal["init", "master", "standby", "ineligible"]  # Junos' words for the SRD states


class SrdSignalRoute(StatusModel):
    prefix: str  # the signal route, /32
    installed: bool


class SrdHeartbeat(StatusModel):
    sent: int
    received: int
    errors: int
    peer_alive: bool


class SrdTransition(StatusModel):
    at: float  # wall clock
    role: Literal["init", "active", "backup", "ineligible"]  # dataplane.core.mnha.Role values
    why: str


class SrdStatus(StatusModel):
    """Services Redundancy on one MX of the SRD pair."""

    node: str
    peer: str
    pid: int
    updated_at: float  # wall clock of the last write
    role: SrdRole
    priority: int
    preempt: bool
    healthy: bool  # every monitored link has carrier
    signal_route: SrdSignalRoute
    peer_role: Literal["master", "standby", "unknown"]
    heartbeat: SrdHeartbeat
    resumed: str | None  # the role taken up from the previous instance after a crash
    transitions: list[SrdTransition]
