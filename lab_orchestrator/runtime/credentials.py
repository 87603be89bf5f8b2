"""The lab's secrets: drawn at random when the lab comes up, written owner-only, never in a rendered plan.

The planner stays pure: a secret file in the plan (labkit.files.is_secret: NAME.secret.json) is a JSON
object whose values are either what the topology set or null. `lab up` (materialize) replaces each null
with a fresh random value, the same one for the same name of file and key in every folder (so each
FlexVPN router's copy of the lab's pre-shared key matches), and writes the files 0600 in the 0700 state
directory. `lab render` (masked) writes them with every value replaced by what it would be.
"""

from __future__ import annotations

import json
import secrets
from pathlib import PurePosixPath

from labkit.files import is_secret

DRAWN = "<secret: drawn at random by `lab up`>"
SET = "<secret: set by the topology, not shown>"


def draw() -> str:
    """A random secret (96 bits), letters, digits, '-' and '_' only: easy to paste, no shell quoting."""
    return secrets.token_urlsafe(12)


def materialize(files: dict[str, str]) -> dict[str, str]:
    """FILES with every null value of their secret files replaced by a random one (shared by file name
    and key within this call); the other files as they are."""
    drawn: dict[tuple[str, str], str] = {}
    out = {}
    for rel, content in files.items():
        if not is_secret(rel):
            out[rel] = content
            continue
        data = json.loads(content)
        name = PurePosixPath(rel).name
        for key, value in data.items():
            if value is None:
                data[key] = drawn.setdefault((name, key), draw())
        out[rel] = json.dumps(data, indent=2, sort_keys=True) + "\n"
    return out


def masked(rel: str, content: str) -> str:
    """What `lab render` writes for a file: a secret file's values replaced by what they will be."""
    if not is_secret(rel):
        return content
    data = json.loads(content)
    return json.dumps({key: DRAWN if value is None else SET for key, value in data.items()},
                      indent=2, sort_keys=True) + "\n"
