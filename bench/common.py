"""What the benchmarks share: the `lab` command, a lab brought up for a measurement and down after,
polling, percentiles and the markdown file with kept notes.

A lab is brought up and down through the `lab` command (the path a user takes, and what the figures
are about); once up it is read through the Lab API (`lab_orchestrator.api.Lab`: namespaces, plan,
daemon status files), never by re-deriving names.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lab_orchestrator import api  # noqa: E402
from lab_orchestrator.runtime.state import state_dir  # noqa: E402
from labkit.contracts import SRD_STATUS  # noqa: E402
from labkit.status import MnhaStatus, MxlbStatus, SrdStatus, read_status  # noqa: E402

NOTES_MARKER = "<!-- notes below this line are kept when the benchmark rewrites this file -->"


class BenchError(RuntimeError):
    pass


def logger(prefix: str) -> Callable[[str], None]:
    def log(message: str) -> None:
        print(f"[{prefix}] {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)

    return log


def lab_cmd() -> list[str]:
    """The `lab` command of the Python running the benchmark (a checkout's own virtualenv: its code,
    not another checkout's installed on PATH), else the one on PATH, else the CLI module."""
    beside = Path(sys.executable).parent / "lab"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    exe = shutil.which("lab")
    return [exe] if exe else [sys.executable, "-m", "lab_orchestrator.cli"]


def lab(*args: str, check: bool = True, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*lab_cmd(), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise BenchError(f"lab {' '.join(args)} exited {result.returncode}: "
                         f"{(result.stderr or result.stdout).strip()[-600:]}")
    return result


class BenchLab:
    """A lab brought up from a topology file with `lab up`; `lab down` on exit, whatever happens
    (Ctrl-C during the cleanup is ignored). Refuses a lab that already runs: never touches another's."""

    def __init__(self, name: str, file: Path, log: Callable[[str], None] = logger("bench"),
                 up_timeout: float = 300.0):
        self.name = name
        self.file = file
        self.state_dir = state_dir(name)
        self.log = log
        self.up_timeout = up_timeout
        self._lab: api.Lab | None = None

    def __enter__(self) -> Self:
        if (self.state_dir / "state.json").exists():
            raise BenchError(f"lab {self.name} is already up (another bench run?): `lab down --lab {self.name}`")
        self.log(f"lab up {self.name}")
        try:
            lab("up", str(self.file), timeout=self.up_timeout)
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def down(self) -> None:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            result = lab("down", "--lab", self.name, check=False, timeout=180)
            if result.returncode != 0:
                self.log(f"cleanup: lab down --lab {self.name}: {result.stderr.strip()[-300:]}")
            else:
                self.log(f"lab down {self.name}")
        except (OSError, subprocess.SubprocessError) as exc:
            self.log(f"cleanup: lab down --lab {self.name} failed: {exc}")
        finally:
            signal.signal(signal.SIGINT, previous)

    @property
    def lab(self) -> api.Lab:
        """The running lab through the Lab API (`.refresh()` reads its record again)."""
        if self._lab is None:
            self._lab = api.pick(self.name)
        return self._lab

    def ns(self, node: str, instance: str | None = None) -> str:
        return self.lab.ns(node, instance)

    def srd(self, node: str) -> SrdStatus | None:
        """The MX's SRD daemon status (labkit.status.SrdStatus); None while it is being rewritten."""
        return read_status(self.lab.node_file(node, SRD_STATUS), SrdStatus)

    def status(self, node: str, daemon: str) -> dict[str, Any]:
        """A daemon's status file (mnha, mxlb) read as its labkit model; {} while it is being rewritten."""
        model = {"mnha": MnhaStatus, "mxlb": MxlbStatus}[daemon]
        found = read_status(self.lab.node_file(node, f"{daemon}-status.json"), model)
        return {} if found is None else found.to_dict()


def topology_text(source: Path, name: str) -> str:
    """A topology file's text with another lab name."""
    text = source.read_text()
    old = next(line for line in text.splitlines() if line.startswith("name:"))
    return text.replace(old, f"name: {name}", 1)


def wait_for(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.05) -> float:
    """Poll CHECK until true; the monotonic time it became true. BenchError after TIMEOUT."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return time.monotonic()
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def pct(values: list[float], q: float) -> float | None:
    """The Q-quantile (0..1) by nearest rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def summary(values: list[float], digits: int = 1) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "median": round(statistics.median(values), digits),
            "p99": round(pct(values, 0.99) or 0, digits), "min": round(min(values), digits),
            "max": round(max(values), digits)}


def publish(text: str, path: Path, keep: bool = True) -> int:
    """A benchmark's end: its markdown TEXT printed and, with KEEP, written to PATH (`write_doc`); 0."""
    print(text)
    if keep:
        write_doc(text, path)
    return 0


def write_doc(text: str, path: Path) -> None:
    """Write a benchmark's markdown, keeping the notes below NOTES_MARKER of the previous file."""
    notes = ""
    if path.exists():
        old = path.read_text()
        if NOTES_MARKER in old:
            notes = old[old.index(NOTES_MARKER):]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + ("\n" + notes if notes else "\n" + NOTES_MARKER + "\n"))


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt for the body (the labs' finally blocks run)."""

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
