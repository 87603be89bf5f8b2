"""Topology files: validate, plan, render, export; which failure events apply."""

from __future__ import annotations

import json
from collections.abc import Callable
from ipaddress import IPv4Network
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..runtime import hostcheck
from ..runtime.state import STATE_ROOT, running_labs

if TYPE_CHECKING:  # the model (pydantic) and templates load only for calls that read a topology
    from ..clab.export import ClabExport, ExportOptions
    from ..events.catalog import Applicability
    from ..importer import ImportResult
    from ..model.validate import LoadedTopology
    from ..plan.pipeline import LabPlan

Progress = Callable[[str, str], None]


def _quiet(step: str, detail: str) -> None:
    del step, detail


# ---------------------------------------------------------------- topology files


def peek_name(path: Path) -> str | None:
    """The `name:` of a topology file without validating it (None if unreadable): the same bounded
    reader and loader as the validation that follows, which reports whatever made it fail."""
    from ..model import yamlsrc
    from ..model.shipped import resolve

    return yamlsrc.peek_name(resolve(path))


def load(path: Path, check_host: bool = True) -> LoadedTopology:
    """Validate a topology file (every error at once: TopologyInvalid); with check_host, also against
    this host's routes (a running lab of the same name owns its own management bridge)."""
    routes = []
    if check_host:
        try:
            lab_name = peek_name(path)
            own = tuple(s.bridge for s in running_labs() if s.name == lab_name)
            routes = hostcheck.root_routes(own)
        except (OSError, ImportError):
            routes = []
    from ..model.validate import load_topology

    return load_topology(path, routes)


def plan(path: Path, state_root: str | None = str(STATE_ROOT)) -> LabPlan:
    """The plan of a topology file as `lab render` writes it (no host check)."""
    from ..plan import pipeline as planmod

    loaded = load(path, check_host=False)
    if state_root is None:
        return planmod.build(loaded.topology, str(path))
    return planmod.build(loaded.topology, str(path), state_root)


def _writable_folder(out_dir: Path) -> None:
    """--out must be a folder (made if missing): an existing file there is bad input, before any work."""
    from ..model.diagnostics import BadInput

    if out_dir.exists() and not out_dir.is_dir():
        raise BadInput(f"--out {out_dir} is an existing file; give a folder (it is created if missing)")


def _write_files(files: dict[str, str], out_dir: Path, drawn: bool = False) -> None:
    """FILES into OUT_DIR; a secret file (labkit.files.is_secret) 0600, masked (its values said, not shown)
    or, DRAWN, with its random values drawn (an export that is deployed as it is)."""
    from labkit.files import is_secret, write_secret

    from ..model.diagnostics import BadInput
    from ..runtime import credentials

    for rel, content in (credentials.materialize(files) if drawn else files).items():
        target = out_dir / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if is_secret(rel):
                write_secret(target, content if drawn else credentials.masked(rel, content))
            else:
                target.write_text(content)
        except OSError as exc:
            raise BadInput(f"cannot write {target}: {exc.strerror or exc}") from None


def import_configs(paths: list[Path], name: str, client_lan: IPv4Network | None = None) -> ImportResult:
    """`lab import`: a topology (and its report) from device configurations; ParseError if one is unreadable."""
    from ..importer import import_configs as run

    return run(paths, name, client_lan)


def render(path: Path, out_dir: Path) -> int:
    """Write the plan's files (plan.json and every rendered config) into out_dir; returns how many."""
    _writable_folder(out_dir)
    built = plan(path)
    _write_files(built.files, out_dir)
    return len(built.files)


def export(path: Path, out_dir: Path, options: ExportOptions) -> ClabExport:
    """Write the lab for containerlab (LAB.clab.yml, node files, lab-export.json) into out_dir."""
    from ..clab import export as clab_export

    _writable_folder(out_dir)
    result = clab_export.export(plan(path, state_root=None), options)
    _write_files(result.files, out_dir, drawn=True)
    return result


def event_verdicts(plan_data: dict[str, Any]) -> list[Applicability]:
    from ..events import catalog as eventsmod

    return eventsmod.applicable(plan_data)


def file_event_verdicts(path: Path) -> list[Applicability]:
    """Which failure events apply to the lab of a topology file, and why not."""
    return event_verdicts(json.loads(plan(path, state_root=None).to_json()))


def file_events_to_run(path: Path, wanted: list[str], target: str | None = None) -> list[str]:
    """`events_to_run` for the lab of a topology file, checked before it is brought up."""
    from .names import events_to_run

    built = plan(path, state_root=None)
    return events_to_run(event_verdicts(json.loads(built.to_json())), wanted, built.name,
                         [n.name for n in built.nodes], target)
