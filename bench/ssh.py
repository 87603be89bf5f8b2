#!/usr/bin/env python3
"""SSH/CLI benchmark: connect + exec round trip, and the memory of the lab-wide SSH server per node.

Measures, on this machine and in one run:
  1. round trip of `ssh -F STATE/ssh_config LAB-NODE 'COMMAND'` with the OpenSSH client (a new
     connection each time: TCP, key exchange, public-key login, exec, exit status), for a light
     command (`show version`) and heavier ones (`show route` on the MX, `show bgp summary`,
     `show security flow session`, IOS `show ip route`); the same with paramiko as the client; and a
     command on an already open connection (one more channel on the transport);
  2. memory of the SSH server process (PSS and RSS from /proc/PID/smaps_rollup): just started, after
     every command has run once (netlink, BIRD and conntrack readers loaded), and with one open
     interactive session per node; divided by the nodes it serves. For comparison, what one
     process per node would cost (a Python process importing paramiko, measured alone);
  3. the same memory figures on a generated lab with --srx SRX (default 16) scale-out SRX.

Labs: copies of labs/topology1.yml named ssb1 and a generated ssbN; both are brought down in a
finally block. Prints a markdown report and writes it to docs/benchmarks-ssh.md. Needs root.

  sudo python3 bench/ssh.py                 # 50 round trips per case, a 16-SRX lab
  sudo python3 bench/ssh.py --quick         # 15 round trips, an 8-SRX lab
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from common import BenchLab, logger, wait_for  # noqa: E402

DOC = ROOT / "docs" / "benchmarks-ssh.md"
NOTES_MARKER = "<!-- notes below this line are kept when the benchmark rewrites this file -->"
GOAL_RTT_MS = 100.0
GOAL_MIB_PER_NODE = 30.0  # the foundation's per-node memory goal (every process of a node)
KIB = 1024


log = logger("ssh-bench")


def free_subnet(name: str) -> str:
    used = []
    for argv in (["ip", "-j", "-4", "route", "show", "table", "all"], ["ip", "-j", "-4", "addr"]):
        for item in json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout or "[]"):
            if item.get("dst") not in (None, "default"):
                used.append(item["dst"] if "/" in item["dst"] else item["dst"] + "/32")
            used += [f"{a['local']}/{a['prefixlen']}" for a in item.get("addr_info", [])]
    from ipaddress import IPv4Network

    nets = [IPv4Network(u, strict=False) for u in used]
    for third in range(200, 250):
        subnet = IPv4Network(f"10.253.{third}.0/24")
        if not any(subnet.overlaps(n) for n in nets):
            return str(subnet)
    raise RuntimeError("no free management subnet")


class Lab(BenchLab):
    """An ssb* lab; up once its SSH server is ready, down on exit (the server's log shown on an error)."""

    def __init__(self, name: str, topology: Path):
        super().__init__(name, topology, log)
        self.state = self.state_dir

    def __enter__(self) -> Lab:
        started = time.monotonic()
        super().__enter__()
        try:
            wait_for("the SSH server to get ready", (self.state / "ssh" / "ready").exists, 15)
        except BaseException:
            self.down()
            raise
        log(f"{self.name} up in {time.monotonic() - started:.1f} s")
        return self

    def __exit__(self, *exc: object) -> None:
        server_log = self.state / "logs" / "_lab-sshd.log"
        if exc[0] is not None and server_log.exists():  # what the server saw, before the lab is gone
            log("SSH server log (last lines):\n" + "\n".join(server_log.read_text().splitlines()[-40:]))
        super().__exit__(*exc)

    @property
    def sshd(self) -> dict[str, Any]:
        return json.loads((self.state / "ssh" / "sshd.json").read_text())

    @property
    def nodes(self) -> list[str]:
        return [n["name"] for n in self.sshd["nodes"]]

    def address(self, node: str) -> str:
        return next(n["mgmt_address"].split("/")[0] for n in self.sshd["nodes"] if n["name"] == node)

    def sshd_pid(self) -> int:
        state = json.loads((self.state / "state.json").read_text())
        return int(next(p["pid"] for p in state["processes"] if p["name"] == "sshd"))


def memory(pid: int) -> tuple[float, float]:
    """(PSS, RSS) in MiB."""
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] in ("Pss:", "Rss:"):
            values[parts[0]] = int(parts[1]) / KIB
    return values["Pss:"], values["Rss:"]


def openssh_rtt(bench: Lab, node: str, command: str, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = subprocess.run(["ssh", "-F", str(bench.state / "ssh_config"), f"{bench.name}-{node}", command],
                                capture_output=True, text=True, timeout=30)
        times.append((time.perf_counter() - started) * 1000)
        if result.returncode != 0:
            raise RuntimeError(f"ssh {node} {command!r}: exit {result.returncode}: {result.stderr.strip()}")
    return times


def paramiko_client(bench: Lab, node: str) -> Any:
    import paramiko

    client = paramiko.SSHClient()
    client.load_host_keys(str(bench.state / "ssh" / "known_hosts"))
    client.connect(bench.address(node), username="admin", key_filename=str(bench.state / "ssh" / "id_ed25519-admin"),
                   look_for_keys=False, allow_agent=False, timeout=5)
    return client


def paramiko_exec(client: Any, command: str) -> int:
    chan = client.get_transport().open_session()
    chan.exec_command(command)
    while chan.recv(65536):
        pass
    return int(chan.recv_exit_status())


def paramiko_rtt(bench: Lab, node: str, command: str, runs: int, reuse: bool) -> list[float]:
    times = []
    client = paramiko_client(bench, node) if reuse else None
    try:
        for _ in range(runs):
            started = time.perf_counter()
            if reuse:
                status = paramiko_exec(client, command)
            else:
                fresh = paramiko_client(bench, node)
                status = paramiko_exec(fresh, command)
                fresh.close()
            times.append((time.perf_counter() - started) * 1000)
            if status != 0:
                raise RuntimeError(f"{command!r} on {node}: exit {status}")
    finally:
        if client is not None:
            client.close()
    return times


def stats(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"median": statistics.median(ordered), "p90": ordered[int(0.9 * (len(ordered) - 1))],
            "min": ordered[0], "max": ordered[-1]}


def warm_up(bench: Lab) -> None:
    """Run every command of each vendor once on one node of each kind (loads the readers)."""
    from lab_orchestrator.cli_ssh import commands

    kinds = {}
    for node in bench.sshd["nodes"]:
        kinds.setdefault(node["kind"], node["name"])
    for kind, node in kinds.items():
        vendor = "ios" if kind == "ios-router" else "junos"
        client = paramiko_client(bench, node)
        try:
            for command in commands.commands_for(vendor, kind):
                if command.run.startswith("action:") or command.run in ("exit", "configure"):
                    continue
                paramiko_exec(client, " ".join(command.words))
        finally:
            client.close()


def shells(bench: Lab) -> list[Any]:
    """One open interactive session per node."""
    opened = []
    for node in bench.nodes:
        client = paramiko_client(bench, node)
        chan = client.invoke_shell()
        deadline = time.monotonic() + 5
        while not chan.recv_ready() and time.monotonic() < deadline:
            time.sleep(0.01)
        chan.recv(65536)
        opened.append(client)
    return opened


def one_process_alone() -> tuple[float, float]:
    """PSS/RSS of a lone Python process with the server's imports (a process-per-node design)."""
    code = ("import paramiko, sys, time; sys.stdout.write('ready\\n'); sys.stdout.flush(); time.sleep(30)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        return memory(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def memory_figures(bench: Lab) -> dict[str, Any]:
    pid = bench.sshd_pid()
    nodes = len(bench.nodes)
    idle = memory(pid)
    warm_up(bench)
    warm = memory(pid)
    opened = shells(bench)
    try:
        busy = memory(pid)
    finally:
        for client in opened:
            client.close()
    return {"nodes": nodes, "idle": idle, "warm": warm, "sessions": busy,
            "per_node_pss": busy[0] / nodes, "per_node_rss": busy[1] / nodes}


def machine(load_before: tuple[float, float, float]) -> str:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    ssh = subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip()
    import paramiko

    load = os.getloadavg()
    return (f"{os.cpu_count()} CPUs ({cpu}), kernel {platform.release()}, Python {platform.python_version()}, "
            f"{ssh}, paramiko {paramiko.__version__}; load average {load_before[0]:.2f} at start, {load[0]:.2f} "
            f"at end (other engineers' labs and tests share the machine)")


def report(results: dict[str, Any]) -> str:
    rows = ["| measurement | median | p90 | min | goal | |", "|---|---|---|---|---|---|"]
    for label, values in results["rtt"].items():
        goal = f"≤ {GOAL_RTT_MS:.0f} ms" if label.startswith("OpenSSH") or label.startswith("paramiko, new") else ""
        verdict = ("pass" if values["median"] <= GOAL_RTT_MS else "FAIL") if goal else ""
        rows.append(f"| {label} | {values['median']:.1f} ms | {values['p90']:.1f} ms | {values['min']:.1f} ms | "
                    f"{goal} | {verdict} |")
    mem = ["| lab | nodes | PSS / RSS just started | after every command | with a session per node | "
           "per node (PSS / RSS) | goal | |", "|---|---|---|---|---|---|---|---|"]
    for name, m in results["memory"].items():
        verdict = "pass" if m["per_node_rss"] <= GOAL_MIB_PER_NODE else "FAIL"
        mem.append(f"| {name} | {m['nodes']} | {m['idle'][0]:.1f} / {m['idle'][1]:.1f} MiB | "
                   f"{m['warm'][0]:.1f} / {m['warm'][1]:.1f} MiB | {m['sessions'][0]:.1f} / {m['sessions'][1]:.1f} MiB"
                   f" | {m['per_node_pss']:.1f} / {m['per_node_rss']:.1f} MiB | ≤ {GOAL_MIB_PER_NODE:.0f} MiB | "
                   f"{verdict} |")
    alone = results["process_alone"]
    return "\n".join([
        "# SSH / CLI benchmark",
        "",
        f"Run {results['date']} with `python3 bench/ssh.py{' --quick' if results['quick'] else ''}`; "
        f"{results['runs']} round trips per case. Machine: {results['machine']}.",
        "",
        "## Connect + exec round trip",
        "",
        "Each OpenSSH case is a new `ssh -F STATE/ssh_config LAB-NODE 'COMMAND'` process: TCP connect to the "
        "node's management address, key exchange, public-key login with the lab's key, one exec, its exit "
        "status. `paramiko, new connection` is the same from Python; `open connection` is one more exec "
        "channel on a transport kept open.",
        "",
        *rows,
        "",
        "## Memory of the SSH/CLI part",
        "",
        "One server process for the whole lab (PSS and RSS from /proc/PID/smaps_rollup); per node = the "
        "process divided by the nodes it serves (mx, srx and ios-router; hosts have no CLI).",
        "",
        *mem,
        "",
        f"For comparison, one Python process importing paramiko (what the server imports), alone: "
        f"{alone[0]:.1f} MiB PSS / {alone[1]:.1f} MiB RSS — what each node would cost with a process per "
        f"node, before serving anything.",
        "",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--srx", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="15 runs, 8 SRX")
    parser.add_argument("--no-write", action="store_true", help=f"do not rewrite {DOC.relative_to(ROOT)}")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 1
    runs, srx = (15, 8) if args.quick else (args.runs, args.srx)
    results: dict[str, Any] = {"date": dt.date.today().isoformat(), "quick": args.quick, "runs": runs,
                               "rtt": {}, "memory": {}}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        t1 = Path(tmp) / "ssb1.yml"
        text = re.sub(r"(?m)^name:.*$", "name: ssb1", (ROOT / "labs" / "topology1.yml").read_text(), count=1)
        t1.write_text(text + f"addressing:\n  mgmt: {free_subnet('ssb1')}\n")
        with Lab("ssb1", t1) as bench:
            for label, node, command in (("OpenSSH, show version (srx1)", "srx1", "show version"),
                                         ("OpenSSH, show route (mx1, 3 instances)", "mx1", "show route"),
                                         ("OpenSSH, show bgp summary (mx1)", "mx1", "show bgp summary"),
                                         ("OpenSSH, show security flow session (srx1)", "srx1",
                                          "show security flow session"),
                                         ("OpenSSH, show ip route (gw-trust)", "gw-trust", "show ip route")):
                openssh_rtt(bench, node, command, 2)  # warm: the first command loads its readers
                results["rtt"][label] = stats(openssh_rtt(bench, node, command, runs))
                log(f"{label}: median {results['rtt'][label]['median']:.1f} ms")
            results["rtt"]["paramiko, new connection, show version (srx1)"] = stats(
                paramiko_rtt(bench, "srx1", "show version", runs, reuse=False))
            results["rtt"]["paramiko, open connection, show version (srx1)"] = stats(
                paramiko_rtt(bench, "srx1", "show version", runs, reuse=True))
            results["rtt"]["paramiko, open connection, show route (mx1)"] = stats(
                paramiko_rtt(bench, "mx1", "show route", runs, reuse=True))
        with Lab("ssb1", t1) as bench:  # a fresh server for the memory figures
            results["memory"]["topology1 (ssb1)"] = memory_figures(bench)
        big = Path(tmp) / f"ssb{srx}.yml"
        name = f"ssb{srx}"
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_topology.py"), "--name", name, "--srx", str(srx)],
                       stdout=big.open("w"), check=True, cwd=ROOT)
        big.write_text(big.read_text() + f"addressing:\n  mgmt: {free_subnet(name)}\n")
        with Lab(name, big) as bench:
            results["memory"][f"{srx} SRX ({name})"] = memory_figures(bench)
    results["process_alone"] = one_process_alone()
    results["machine"] = machine(load_before)
    text = report(results)
    print(text)
    if not args.no_write:
        notes = ""
        if DOC.exists() and NOTES_MARKER in DOC.read_text():
            notes = DOC.read_text().split(NOTES_MARKER, 1)[1]
        DOC.write_text(text + "\n" + NOTES_MARKER + notes)
        log(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
