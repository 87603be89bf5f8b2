"""Shell completion of names (`lab --install-completion` installs it for the current shell): running
labs for --lab, nodes of the running lab for exec/ssh/sessions/fail/restore/show/..., event names, and
shipped labs or *.yml files for a topology argument. Cheap: reads only /run/lab records."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..runtime.state import STATE_ROOT


def _running() -> list[Path]:
    try:
        return sorted(p for p in STATE_ROOT.iterdir() if (p / "state.json").is_file())
    except OSError:
        return []


def lab_names(incomplete: str) -> list[str]:
    return [p.name for p in _running() if p.name.startswith(incomplete)]


def _plan_nodes(lab_dir: Path) -> list[tuple[str, str]]:
    try:
        nodes = json.loads((lab_dir / "plan.json").read_text())["nodes"]
        return [(str(n["name"]), str(n.get("kind", ""))) for n in nodes]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def node_names(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    """Nodes of the lab given with --lab, else of every running lab (help text: kind and lab)."""
    wanted = ctx.params.get("lab")
    found: dict[str, str] = {}
    for lab_dir in _running():
        if wanted and lab_dir.name != wanted:
            continue
        for name, kind in _plan_nodes(lab_dir):
            if name.startswith(incomplete):
                found.setdefault(name, f"{kind} in lab {lab_dir.name}")
    return sorted(found.items())


def event_names(incomplete: str) -> list[tuple[str, str]]:
    from ..events.catalog import CATALOG

    return [(e.name, e.title) for e in CATALOG if e.name.startswith(incomplete)]


def topology_names(incomplete: str) -> list[str]:
    """Shipped labs by name, and topology files (*.yml, *.yaml, folders) under what is typed."""
    from ..model.shipped import shipped_labs

    names = [lab.stem for lab in shipped_labs() if lab.stem.startswith(incomplete)]
    folder = Path(incomplete).parent if "/" in incomplete else Path(".")
    try:
        for entry in sorted(folder.iterdir()):
            shown = str(entry) if "/" in incomplete else entry.name
            if shown.startswith(incomplete) and (entry.is_dir() or entry.suffix in (".yml", ".yaml")):
                names.append(shown + ("/" if entry.is_dir() else ""))
    except OSError:
        pass
    return names
