"""Files other processes read while they are being rewritten, and the lab's secret files.

A secret file (a name ending in SECRET_SUFFIX: passwords, pre-shared keys) is a JSON object written
0600 (owner only); the lab's state directory is 0700 (lab_orchestrator.runtime.state), so neither its keys nor
its passwords are readable by other users of the machine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SECRET_SUFFIX = ".secret.json"
SECRET_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


def write_atomic(path: str | Path, text: str, mode: int | None = None) -> None:
    """Replace PATH at once (write a sibling PATH.tmp, then rename): a reader never sees half a file.
    MODE: the new file's permissions from its creation on (never wider for a moment), else the umask's."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    if mode is None:
        tmp.write_text(text)
    else:
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(tmp, mode)  # the umask may have narrowed it; never widened
    os.replace(tmp, target)


def write_json(path: str | Path, data: Any, indent: int | None = 2, sort_keys: bool = False) -> None:
    """Replace PATH with DATA as JSON (and a final newline), atomically."""
    write_atomic(path, json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n")


def is_secret(path: str | Path) -> bool:
    """Whether PATH names a secret file (by its name: NAME.secret.json)."""
    return str(path).endswith(SECRET_SUFFIX)


def private_dir(path: str | Path) -> Path:
    """PATH as a directory only its owner may enter (0700), made with its parents if missing."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    os.chmod(folder, PRIVATE_DIR_MODE)
    return folder


def write_secret(path: str | Path, text: str) -> None:
    """Write a secret file: 0600 from its creation, atomically; its folder is made 0700 if missing."""
    target = Path(path)
    if not target.parent.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    write_atomic(target, text, SECRET_MODE)


def read_secret(path: str | Path, key: str) -> str:
    """The value KEY of the secret file PATH; ValueError (saying which file and why) if it has none."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ValueError(f"cannot read the secret file {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise ValueError(f"the secret file {path} is not JSON") from None
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, str) or not value:
        raise ValueError(f"the secret file {path} has no {key!r}")
    return value
