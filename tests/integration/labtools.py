"""Helpers for the namespace (root) tests: run the `lab` CLI as a user would, find leftovers.

Every lab a test brings up is registered with an owner fixture that always runs `lab down` for it,
whatever happens; nothing here ever touches a lab or namespace the tests did not create
(no `lab down --all`, no prefix-wide deletion).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import pytest

from lab_orchestrator.runtime import supervisor

REPO = Path(__file__).resolve().parents[2]
LABS = sorted((REPO / "labs").glob("*.yml"))
STATE_ROOT = Path(os.environ.get("LAB_STATE_ROOT", "/run/lab"))
REQUIRED_TOOLS = ("bird", "nft", "ip", "ping")
UP_TIMEOUT = 90.0  # seconds a `lab up` subprocess may take before the test gives up on it


def host_problem() -> str | None:
    """Why this machine cannot run the namespace tests, or None."""
    if not sys.platform.startswith("linux"):
        return "needs Linux network namespaces"
    if os.geteuid() != 0:
        return "needs root: the lab creates network namespaces"
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        return f"missing on this host: {', '.join(missing)} (make deps)"
    return None


# --------------------------------------------------------------------------- the CLI
def lab_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "lab_orchestrator.cli", *args]


def run_lab(*args: str, timeout: float = UP_TIMEOUT, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
    """`lab ARGS...` in a subprocess from the repository root; output captured as text."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("LAB_DEBUG", None)  # the tests check what users see, not the debug traceback
    return subprocess.run(lab_argv(*args), cwd=REPO, env=full_env, capture_output=True, text=True,
                          timeout=timeout)


def start_lab(*args: str, env: dict[str, str] | None = None, ignore_sigint: bool = False) -> subprocess.Popen[str]:
    """`lab ARGS...` in the background, in its own process group (like a shell job)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("LAB_DEBUG", None)
    # SIGINT at its default disposition in the child even when this test run inherited it ignored (a run
    # started as a background job): the child must see Ctrl-C as a user's shell would deliver it
    return subprocess.Popen(lab_argv(*args), cwd=REPO, env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_ignored_sigint if ignore_sigint else _default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ignored_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def explain(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def flat(text: str) -> str:
    """TEXT with every run of whitespace as one space (rich wraps long messages at 80 columns)."""
    return " ".join(text.split())


def assert_no_traceback(text: str) -> None:
    assert "Traceback" not in text, text
    assert "internal error" not in text, text


def status_of(name: str) -> dict[str, Any]:
    result = run_lab("status", name, "--json", timeout=30)
    assert result.returncode == 0, explain(result)
    reports = json.loads(result.stdout)
    assert [r["name"] for r in reports] == [name], reports
    return dict(reports[0])


def lab_exec(name: str, node: str, *command: str, instance: str | None = None,
             timeout: float = 30) -> subprocess.CompletedProcess[str]:
    args = ["exec", "--lab", name, node]
    if instance:
        args += ["--instance", instance]
    return run_lab(*args, "--", *command, timeout=timeout)


# --------------------------------------------------------------------------- the plan
@dataclass
class PlanFacts:
    """What a lab creates on the host, read from `lab render` (no root needed)."""

    name: str
    namespaces: list[str]
    bridge: str
    host_ports: list[str]
    nft_table: str
    mgmt_subnet: str
    nodes: list[str]
    processes: dict[str, list[str]]  # node -> daemon names
    sessions: set[tuple[str, str]]  # (node, BIRD protocol)

    @property
    def state_dir(self) -> Path:
        return STATE_ROOT / self.name


def _plan_json(topology: Path, tmp_dir: Path) -> dict[str, Any]:
    """The plan `lab render` would write: computed in this process (a `lab` subprocess costs ~1 s on
    a busy machine), through `lab render` itself if the internals moved."""
    try:
        from lab_orchestrator.model.validate import load_topology
        from lab_orchestrator.plan import pipeline as planmod

        plan = planmod.build(load_topology(topology).topology, str(topology), str(STATE_ROOT))
        return dict(json.loads(plan.files.get("plan.json") or plan.to_json()))
    except (ImportError, AttributeError, TypeError):
        out = tmp_dir / f"render-{topology.stem}"
        result = run_lab("render", str(topology), "--out", str(out), timeout=60)
        assert result.returncode == 0, explain(result)
        return dict(json.loads((out / "plan.json").read_text()))


def plan_facts(topology: Path, tmp_dir: Path) -> PlanFacts:
    plan = _plan_json(topology, tmp_dir)
    processes: dict[str, list[str]] = {}
    for proc in plan["processes"]:
        processes.setdefault(proc["node"], []).append(proc["name"])
    return PlanFacts(
        name=plan["name"],
        namespaces=[ns["name"] for ns in plan["namespaces"]],
        bridge=plan["mgmt"]["bridge"],
        host_ports=[p["host_port"] for p in plan["mgmt"]["ports"]],
        nft_table=plan["mgmt"]["nft_table"],
        mgmt_subnet=plan["mgmt"]["subnet"],
        nodes=[n["name"] for n in plan["nodes"]],
        processes=processes,
        sessions={(s["node"], s["protocol"]) for s in plan["sessions"]},
    )


# --------------------------------------------------------------------------- the host
def netns_names() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def root_links() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def nft_tables() -> list[str]:
    out = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.startswith("table ")]


def processes_mentioning(path: Path) -> list[str]:
    """Processes with an argument naming PATH or something under it (not a longer sibling name)."""
    pattern = re.compile(re.escape(str(path)) + r"(/|$)")
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            raw = Path(f"/proc/{entry.name}/cmdline").read_bytes()
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
        if any(pattern.search(a) for a in args):
            found.append(f"{entry.name}: {' '.join(args)}")
    return found


def other_labs_namespaces(name: str) -> set[str]:
    """Namespaces recorded by running labs other than NAME (e.g. t1-nat's while checking t1)."""
    owned: set[str] = set()
    if STATE_ROOT.is_dir():
        for entry in STATE_ROOT.iterdir():
            if entry.name == name:
                continue
            try:
                owned.update(json.loads((entry / "state.json").read_text())["namespaces"])
            except (OSError, ValueError, KeyError):
                continue
    return owned


def leftovers(facts: PlanFacts) -> list[str]:
    """Everything of lab FACTS.name still on this host (empty when `lab down` did its job)."""
    name = facts.name
    problems = []
    others = other_labs_namespaces(name)
    stale_ns = [ns for ns in netns_names()
                if ns in facts.namespaces or (ns.startswith(f"{name}-") and ns not in others)]
    if stale_ns:
        problems.append(f"namespaces: {stale_ns}")
    port_name = re.compile(rf"^{re.escape(name)}-m(g|\d+)$")
    stale_links = [link for link in root_links()
                   if link in facts.host_ports or link == facts.bridge or port_name.match(link)]
    if stale_links:
        problems.append(f"root-namespace links: {stale_links}")
    tables = {facts.nft_table, "lab_" + name.replace("-", "_")}
    stale_tables = [t for t in nft_tables() if t in tables]
    if stale_tables:
        problems.append(f"nft tables: {stale_tables}")
    procs = processes_mentioning(facts.state_dir)
    if procs:
        problems.append(f"processes: {procs}")
    if facts.state_dir.exists():
        problems.append(f"state dir {facts.state_dir} still exists: {sorted(os.listdir(facts.state_dir))}")
    return problems


def wait_no_leftovers(facts: PlanFacts, grace: float = 0.0) -> list[str]:
    """Leftovers, rechecked for up to GRACE seconds (0: one look; `lab down` must be synchronous)."""
    deadline = time.monotonic() + grace
    while True:
        found = leftovers(facts)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


def is_present(facts: PlanFacts) -> bool:
    return (facts.state_dir / "state.json").exists() or any(ns in facts.namespaces for ns in netns_names())


# --------------------------------------------------------------------------- lab files
_taken_subnets: set[IPv4Network] = set()


def root_networks() -> list[IPv4Network]:
    nets = []
    for argv in (["ip", "-j", "-4", "route", "show", "table", "all"], ["ip", "-j", "-4", "addr"]):
        data = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout or "[]")
        for item in data:
            if "dst" in item:
                dst = item["dst"]
                if dst == "default":
                    continue
                nets.append(IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False))
            for addr in item.get("addr_info", []):
                nets.append(IPv4Network(f"{addr['local']}/{addr['prefixlen']}", strict=False))
    return nets


def free_mgmt_subnet() -> IPv4Network:
    """A /24 no route of the root namespace touches, away from 198.19.0.0/16 (default mgmt
    subnets, e.g. of labs another engineer brings up meanwhile)."""
    used = root_networks()
    for pool in ("10.254.0.0/16", "172.30.0.0/16", "100.127.0.0/16"):
        for subnet in IPv4Network(pool).subnets(new_prefix=24):
            if subnet in _taken_subnets or subnet.network_address.packed[2] == 0:
                continue
            if not any(subnet.overlaps(n) for n in used):
                _taken_subnets.add(subnet)
                return subnet
    raise RuntimeError("no free management subnet for a test lab")


def lab_name(topology: Path) -> str:
    match = re.search(r"(?m)^name:\s*(\S+)\s*$", topology.read_text())
    assert match, f"{topology} has no top-level name:"
    return match.group(1).strip("'\"")


def copy_lab(source: Path, name: str, dest_dir: Path, mgmt: IPv4Network | str | None = None) -> Path:
    """SOURCE with another `name:` (and an explicit management subnet, free unless given)."""
    text = source.read_text()
    text, count = re.subn(r"(?m)^name:.*$", f"name: {name}", text, count=1)
    assert count == 1, f"{source} has no top-level name:"
    assert not re.search(r"(?m)^addressing:.*\S.*$|^  mgmt:", text), f"{source} already fixes addressing"
    subnet = mgmt if mgmt is not None else free_mgmt_subnet()
    if re.search(r"(?m)^addressing:\s*$", text):  # a block (e.g. a dual-stack lab's v6 pools): add to it
        text = re.sub(r"(?m)^addressing:\s*$", f"addressing:\n  mgmt: {subnet}", text, count=1)
    else:
        text = text.rstrip("\n") + f"\naddressing:\n  mgmt: {subnet}\n"
    target = dest_dir / f"{name}.yml"
    target.write_text(text)
    return target


def line_of(path: Path, pattern: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if re.search(pattern, line):
            return number
    raise AssertionError(f"{pattern!r} not in {path}")


# --------------------------------------------------------------------------- ownership
@dataclass
class LabOwner:
    """Labs a test created; `cleanup` runs `lab down` for each of them, and only for them."""

    tmp_dir: Path
    labs: dict[str, tuple[Path, PlanFacts]] = field(default_factory=dict)

    def claim(self, topology: Path) -> PlanFacts:
        """Check the lab is not running already (someone else's: never touch it), then own it."""
        facts = plan_facts(topology, self.tmp_dir)
        if is_present(facts):
            pytest.fail(f"lab {facts.name} is already present on this host and was not created by this "
                        f"test; refusing to touch it (remove it with `lab down --lab {facts.name}`)")
        self.labs[facts.name] = (topology, facts)
        return facts

    def cleanup(self) -> list[str]:
        problems = []
        for name, (topology, facts) in reversed(list(self.labs.items())):
            if not leftovers(facts):
                continue  # the test took it down already (or it never came up): nothing to do
            args = ["down", "--lab", name] if (STATE_ROOT / name / "state.json").exists() \
                else ["down", str(topology)]
            try:
                result = run_lab(*args, timeout=60)
                if result.returncode != 0:
                    problems.append(f"lab {' '.join(args)}: {explain(result)}")
            except subprocess.TimeoutExpired:
                problems.append(f"lab {' '.join(args)} timed out")
            # What `lab down` could not find (a bug the test reports): end it by pid, so that one
            # failure does not cascade into the next tests.
            for line in processes_mentioning(facts.state_dir):
                problems.append(f"killed a stray process of lab {name}: {line}")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(line.split(":")[0]), signal.SIGKILL)
        self.labs.clear()
        return problems


def stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Kill a background `lab` process group if still running; return its output."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.communicate(timeout=30)


def wait_for_state(name: str, proc: subprocess.Popen[str], ready: Any, timeout: float = 30.0) -> dict[str, Any]:
    """Poll /run/lab/NAME/state.json until READY(state, state_dir) is true; fail if `lab up` ended first."""
    path = STATE_ROOT / name / "state.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"lab up ended (exit {proc.returncode}) before the awaited point:\n{out}\n{err}")
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            state = None
        if state is not None and ready(state, path.parent):
            return dict(state)
        time.sleep(0.002)
    pytest.fail(f"{path} never reached the awaited point within {timeout} s")


def ping(name: str, node: str, target: str, source: str | None = None) -> str:
    argv = ["ping", "-c", "2", "-i", "0.2", "-W", "1"] + (["-I", source] if source else []) + [target]
    result = lab_exec(name, node, *argv)
    assert result.returncode == 0, f"{node} -> {target} in lab {name}: {explain(result)}"
    assert " 2 received" in result.stdout, result.stdout
    return result.stdout


def assert_ready(facts: PlanFacts) -> None:
    report = status_of(facts.name)
    assert report["status"] == "ready", report
    assert report["namespaces_present"] == report["namespaces_expected"] == len(facts.namespaces), report
    # lab-wide daemons (SSH server, health-check responder) are listed under a pseudo-node of their own
    assert [n["name"] for n in report["nodes"] if n["kind"] != "lab-wide"] == facts.nodes
    established = set()
    for node in report["nodes"]:
        daemons = {d["name"]: d["running"] for d in node["daemons"]}
        assert sorted(daemons) == sorted(facts.processes.get(node["name"], [])), node
        assert all(daemons.values()), f"{node['name']}: a daemon is not running: {node['daemons']}"
        for session in node["bgp"]:
            assert session["info"].startswith("Established"), f"{node['name']}: {session}"
            established.add((node["name"], session["protocol"]))
    assert established == facts.sessions
    # Lab-wide daemons (not under a node in `lab status`, e.g. the SSH front end) run too.
    state = json.loads((facts.state_dir / "state.json").read_text())
    assert sorted((p["node"], p["name"]) for p in state["processes"]) == sorted(
        (node, name) for node, names in facts.processes.items() for name in names)
    dead = [p for p in state["processes"] if supervisor.starttime(p["pid"]) != p["starttime"]]
    assert not dead, f"daemons not running: {dead}"


def assert_down_clean(facts: PlanFacts, *args: str) -> None:
    """`lab ARGS` (a down) ends well, says so, prints no traceback and leaves nothing of the lab."""
    down = run_lab(*args, timeout=60)
    assert down.returncode == 0, explain(down)
    assert_no_traceback(down.stderr)
    assert f"lab {facts.name} is down" in flat(down.stdout)
    assert leftovers(facts) == []


def running_copy(tmp_path_factory: pytest.TempPathFactory, shipped: str, name: str) -> Iterator[PlanFacts]:
    """A copy of the shipped lab SHIPPED (a file of labs/) running under NAME for a module's tests: a
    module-scoped fixture yields from it. Up before the first test; after the last, down with nothing
    of it left behind."""
    reason = host_problem()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp(name)
    owner = LabOwner(tmp)
    topology = copy_lab(REPO / "labs" / shipped, name, tmp)
    facts = owner.claim(topology)
    try:
        up = run_lab("up", str(topology))
        assert up.returncode == 0, explain(up)
        yield facts
    finally:
        problems = owner.cleanup()
    assert not problems, problems
    assert leftovers(facts) == []


# Appended before the kernel-twin scripts of the selector tests (run with `python -c` in `unshare --net`):
# what the twin table's seen_saddr / seen_daddr sets hold, per field (each element: addresses and mark).
SEEN_READER = r"""
def read_seen(family):
    out = {}
    for f in ("saddr", "daddr"):
        data = json.loads(run("nft", "-j", "list", "set", family, "twin", f"seen_{f}").stdout)
        elem = next(i["set"] for i in data["nftables"] if "set" in i).get("elem", [])
        out[f] = [e["concat"] if "concat" in e else e["elem"]["val"]["concat"] for e in elem]
    return out
"""
