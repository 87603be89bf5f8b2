"""A running lab's record on disk: what it created and which processes it runs.

Written before anything is created (a journal), so `lab down` can clean up after a crash or
a kill -9 of `lab up`. Lives in /run/lab/NAME (tmpfs: it vanishes with the namespaces on reboot).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from labkit.files import private_dir, write_json

from . import supervisor
from .supervisor import ProcessRecord

STATE_ROOT = Path(os.environ.get("LAB_STATE_ROOT", "/run/lab"))


@dataclass
class LabState:
    name: str
    source: str
    state_dir: str
    status: str  # "creating" | "ready" | "failed" | "destroying"
    namespaces: list[str]
    bridge: str
    host_ports: list[str]
    nft_table: str
    mgmt_subnet: str
    processes: list[ProcessRecord] = field(default_factory=list)
    supervisor_pid: int = 0
    down_nodes: list[str] = field(default_factory=list)  # powered off by a failure event
    down_links: list[list[str]] = field(default_factory=list)  # [node, peer] pairs failed by an event
    blackholed_links: list[list[str]] = field(default_factory=list)  # [node, peer]: dropping, carrier up
    created_at: float = 0.0
    ready_at: float = 0.0
    ready_for: list[str] = field(default_factory=list)  # what `lab up` waited for before it returned
    # machine-wide knobs (paths under /proc/sys) and the value this lab needs: `lab down` gives back the rest
    kernel_room: dict[str, int] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return Path(self.state_dir) / "state.json"

    def save(self) -> None:
        private_dir(self.path.parent)  # keys, passwords and pre-shared keys live here: owner only
        write_json(self.path, asdict(self), sort_keys=True)

    @classmethod
    def load(cls, state_dir: Path) -> LabState:
        data = json.loads((state_dir / "state.json").read_text())
        data["processes"] = [ProcessRecord(**p) for p in data.get("processes", [])]
        state = cls(**data)
        state.refresh_processes()
        return state

    def refresh_processes(self) -> None:
        """Take each process's current pid, state and restart count from the supervisor's table: it
        restarts crashed daemons by itself, so the pids this record was written with may be old."""
        table = supervisor.read_table(self.state_dir)
        if not table:
            return
        slots = {slot.key: slot for slot in table}
        for record in self.processes:
            slot = slots.get((record.node, record.name))
            if slot is None or slot.pid == 0:
                continue
            record.pid, record.starttime, record.argv = slot.pid, slot.starttime, list(slot.running_argv or slot.argv)
            record.restarts, record.state = slot.restarts, slot.state

    def process(self, node: str, name: str) -> ProcessRecord | None:
        for record in self.processes:
            if record.node == node and record.name == name:
                return record
        return None


def state_dir(name: str) -> Path:
    return STATE_ROOT / name


def running_labs() -> list[LabState]:
    if not STATE_ROOT.is_dir():
        return []
    labs = []
    for entry in sorted(STATE_ROOT.iterdir()):
        if (entry / "state.json").is_file():
            try:
                labs.append(LabState.load(entry))
            except (ValueError, TypeError, KeyError):
                continue
    return labs
