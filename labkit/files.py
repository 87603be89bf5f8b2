"""Files other processes read while they are being rewritten."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_atomic(path: str | Path, text: str) -> None:
    """Replace PATH at once (write a sibling PATH.tmp, then rename): a reader never sees half a file."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


def write_json(path: str | Path, data: Any, indent: int | None = 2, sort_keys: bool = False) -> None:
    """Replace PATH with DATA as JSON (and a final newline), atomically."""
    write_atomic(path, json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n")
