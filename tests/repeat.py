"""Run a pytest selection several times in a row and report every test that failed in any run.

    python tests/repeat.py --runs 3 [--] [pytest arguments, default: tests/integration]

Each run writes a JUnit XML file (in a temporary directory); after the last run one line per test that
failed or errored in some run says in which runs, followed by each run's summary. The exit status is 0
only when every run passed. A timing-dependent failure shows up here as a test failing in one run of N.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RunResult:
    number: int
    returncode: int
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # test id -> first line of its message

    def summary(self) -> str:
        parts = [f"{self.counts[k]} {k}" for k in ("failed", "errors", "passed", "skipped") if self.counts.get(k)]
        return (f"run {self.number}: {', '.join(parts) or 'nothing collected'} in {self.seconds:.0f} s "
                f"(exit {self.returncode})")


def read_junit(path: Path) -> tuple[dict[str, int], dict[str, str]]:
    """Counts (passed, failed, errors, skipped) and the failed test ids of one pytest JUnit XML file."""
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failed: dict[str, str] = {}
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = "passed"
        message = ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "errors"
                message = (child.get("message") or "").splitlines()[0][:160] if child.get("message") else child.tag
                break
            if child.tag == "skipped":
                outcome = "skipped"
        counts[outcome] += 1
        if outcome in ("failed", "errors"):
            failed[test] = message
    return counts, failed


def run_once(number: int, pytest_args: list[str], junit: Path) -> RunResult:
    started = time.monotonic()
    print(f"=== repeat: run {number}: pytest {' '.join(pytest_args)}", flush=True)
    proc = subprocess.run([sys.executable, "-m", "pytest", *pytest_args, f"--junitxml={junit}"], check=False)
    result = RunResult(number, proc.returncode, time.monotonic() - started)
    if junit.exists():
        result.counts, result.failed = read_junit(junit)
    elif proc.returncode:
        result.failed["(pytest itself)"] = f"exit {proc.returncode}, no report written"
    return result


def report(results: list[RunResult]) -> list[str]:
    lines = []
    tests = sorted({t for r in results for t in r.failed})
    if tests:
        lines.append(f"{len(tests)} test(s) failed in at least one of {len(results)} runs:")
        for test in tests:
            runs = [r for r in results if test in r.failed]
            lines.append(f"  {test}: runs {', '.join(str(r.number) for r in runs)} -- {runs[0].failed[test]}")
    else:
        lines.append(f"no test failed in {len(results)} runs")
    lines += [r.summary() for r in results]
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="how many runs in a row (default 3)")
    args, rest = parser.parse_known_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    pytest_args = [a for a in rest if a != "--"] or ["tests/integration", "-q"]
    results = []
    with tempfile.TemporaryDirectory(prefix="lab-repeat-") as tmp:
        for number in range(1, args.runs + 1):
            results.append(run_once(number, pytest_args, Path(tmp) / f"run{number}.xml"))
    print("\n=== repeat: " + "\n".join(report(results)), flush=True)
    return 0 if all(r.returncode == 0 and not r.failed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
