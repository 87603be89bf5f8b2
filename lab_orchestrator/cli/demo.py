"""`make demo`: bring a lab up, show it working with the commands a user would type, tear it down."""

from __future__ import annotations

import shlex
import subprocess
import sys

from rich.console import Console

console = Console()


def run(args: list[str], check: bool = True) -> int:
    console.print(f"\n[bold green]$ lab {shlex.join(args)}[/]")
    result = subprocess.run([sys.executable, "-m", "lab_orchestrator.cli", *args])
    if check and result.returncode != 0:
        raise SystemExit(f"demo step failed: lab {shlex.join(args)} (exit {result.returncode})")
    return result.returncode


def main(topology: str) -> None:
    import yaml

    with open(topology) as handle:
        name = yaml.safe_load(handle)["name"]
    run(["validate", topology])
    run(["up", topology])
    try:
        run(["status", name])
        run(["exec", "--lab", name, "mx1", "--instance", "TRUST-VR", "--", "ip", "route", "show", "0.0.0.0/0"])
        run(["exec", "--lab", name, "client", "--", "ping", "-c", "3", "-i", "0.2", "-I", "100.64.1.1",
             "203.0.113.9"])
        for srx in ("srx1", "srx2", "srx3", "srx4"):
            run(["exec", "--lab", name, srx, "--", "conntrack", "-L", "-p", "icmp"], check=False)
    finally:
        run(["down", "--lab", name])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "labs/topology3.yml")
