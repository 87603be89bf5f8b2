"""The labs shipped with the package: topology files in package data, read with importlib.resources.

A topology argument that is not an existing file but names a shipped lab (`topology3`, `topology3.yml`)
means that shipped file, so `lab up topology3` works from any directory and from an installed wheel.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import yaml


def labs_root() -> Traversable:
    return resources.files("lab_orchestrator") / "labs"


def labs_dir() -> Path | None:
    """The shipped labs as a folder on disk (None if the package is not installed as plain files)."""
    root = labs_root()
    return root if isinstance(root, Path) and root.is_dir() else None


@dataclass(frozen=True)
class ShippedLab:
    stem: str  # what `lab up STEM` accepts
    name: str  # the lab's `name:` (namespaces, `lab down --lab`)
    description: str
    nodes: int
    path: str


def _entries() -> list[Traversable]:
    root = labs_root()
    if not root.is_dir():
        return []
    entries = (e for e in root.iterdir() if e.name.endswith(".yml") and e.is_file())
    return sorted(entries, key=lambda e: e.name.removesuffix(".yml"))


def shipped_labs() -> list[ShippedLab]:
    labs = []
    for entry in _entries():
        data = yaml.safe_load(entry.read_text(encoding="utf-8"))
        data = data if isinstance(data, dict) else {}
        nodes = data.get("nodes")
        labs.append(ShippedLab(stem=entry.name.removesuffix(".yml"), name=str(data.get("name", "")),
                               description=str(data.get("description", "")),
                               nodes=len(nodes) if isinstance(nodes, dict) else 0, path=str(entry)))
    return labs


def shipped_path(name: str) -> Path | None:
    """The file of the shipped lab called NAME (stem, with or without .yml), or None."""
    if not name or "/" in name or name.startswith("."):
        return None
    wanted = name if name.endswith(".yml") else f"{name}.yml"
    for entry in _entries():
        if entry.name == wanted and isinstance(entry, Path):
            return entry
    return None


def resolve(path: str | Path) -> Path:
    """PATH itself when it exists (or looks like a path); else the shipped lab of that name, if any."""
    given = Path(path)
    if given.exists() or given.parent != Path("."):
        return given
    return shipped_path(str(path)) or given
