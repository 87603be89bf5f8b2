"""The lab's recent events: what `lab fail`, `lab restore` and `lab events run` did to it, with verdicts.

Kept in STATE_DIR/events.json (the last KEEP entries, oldest first, replaced atomically) so that the live
views (`lab top`, `lab web`) can show them while they happen: an event run is written when it starts
(verdict `running`) and rewritten when it is judged. `summary` is pure.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from labkit.files import write_json

LOG_NAME = "events.json"
KEEP = 20
VERDICTS = ("running", "passed", "failed", "done", "error")  # done: a manual action (no verdict to judge)


def read(state_dir: Path) -> list[dict[str, Any]]:
    """The recorded entries, oldest first ([] when none or unreadable)."""
    try:
        data = json.loads((Path(state_dir) / LOG_NAME).read_text())
    except (OSError, ValueError):
        return []
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def record(state_dir: Path, event: str, target: str, verdict: str, detail: str = "",
           started: float | None = None, ident: str | None = None) -> str:
    """Add an entry (or replace the one with id IDENT); its id."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    now = time.time()
    entry = {"id": ident or f"{now:.6f}-{event}-{target}", "event": event, "target": target,
             "started": started if started is not None else now,
             "finished": None if verdict == "running" else now, "verdict": verdict, "detail": detail}
    entries = [e for e in read(state_dir) if e.get("id") != entry["id"]]
    write_json(Path(state_dir) / LOG_NAME, (entries + [entry])[-KEEP:])
    return str(entry["id"])


def summary(result: dict[str, Any]) -> tuple[str, str]:
    """(verdict, one line) of a `lab events run` result."""
    conv = result.get("convergence_ms") or {}
    parts = [f"convergence {float(conv.get('max', 0)):.0f} ms", f"{result.get('affected_flows', 0)} flows affected",
             f"unaffected loss {result.get('packets_lost_by_unaffected_flows', 0)}",
             "recovered" if result.get("recovered") else "NOT recovered"]
    return ("passed" if result.get("passed") else "failed"), ", ".join(parts)
