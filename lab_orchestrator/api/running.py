"""A running lab (netns backend), by its record: inspect it, fail and restore nodes, traffic, events."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from labkit import netnsutil
from labkit.contracts import MNHA_STATUS, MXLB_STATUS, SRD_STATUS
from labkit.status import MnhaStatus, MxlbStatus, SrdStatus, read_status

from ..events import log as eventlog
from ..model.diagnostics import BadInput, LabError, did_you_mean
from ..runtime import hostcheck
from ..runtime.state import LabState, running_labs, state_dir

if TYPE_CHECKING:  # the model (pydantic) and templates load only for calls that read a topology
    from ..events.catalog import Applicability
    from ..events.result import EventResult
    from ..events.run import TrafficSpec
    from ..events.sessions import Session
    from ..plan.pipeline import LabPlan
    from ..runtime.status import LabStatus

from . import names
from .topology import event_verdicts


def remove_state(name: str) -> None:
    shutil.rmtree(state_dir(name), ignore_errors=True)


# ---------------------------------------------------------------- a running lab


def labs(name: str | None = None) -> list[Lab]:
    """Every running lab (or the one named; LabError if it is not running)."""
    found = [Lab(s) for s in running_labs() if name in (None, s.name)]
    if name and not found:
        raise LabError(f"no running lab named {name}{did_you_mean(name, [s.name for s in running_labs()])}")
    return found


def pick(name: str | None = None) -> Lab:
    """The lab named, or the only running one."""
    running = running_labs()
    if name:
        for state in running:
            if state.name == name:
                return Lab(state)
        raise LabError(f"no running lab named {name}{did_you_mean(name, [s.name for s in running])}")
    if len(running) == 1:
        return Lab(running[0])
    if not running:
        raise LabError("no lab is running (`lab up labs/topology3.yml`)")
    raise LabError(f"several labs run ({', '.join(s.name for s in running)}): pick one with --lab")


@dataclass(frozen=True)
class Port:
    """An interface of a node as `lab inspect` and `lab capture` name it."""

    node: str
    vendor: str  # ge-0/0/1, GigabitEthernet0/1: what the topology file says
    kernel: str  # ge-0-0-1, Gi0-1: the Linux name in the node's namespace
    ns: str
    address: str | None
    peer: str | None
    peer_interface: str | None
    zone: str | None


@dataclass
class Restarted:
    node: str
    process: str
    old_pid: int
    new_pid: int


class Lab:
    """A lab that runs (or ran) on the netns backend, by its record in /run/lab/NAME."""

    def __init__(self, state: LabState):
        self.state = state
        self._plan: LabPlan | None = None

    @property
    def name(self) -> str:
        return self.state.name

    @property
    def state_dir(self) -> Path:
        return Path(self.state.state_dir)

    def refresh(self) -> Lab:
        """Read the record again (an operation of another process may have changed it)."""
        self.state = LabState.load(self.state_dir)
        return self

    def plan(self) -> LabPlan:
        """The plan that was applied (with its rendered rulesets)."""
        if self._plan is None:
            from ..runtime import ops

            self._plan = ops.load_plan(self.state)
        return self._plan

    def has_mnha(self) -> bool:
        """Does the lab have MNHA pairs (the TCP budgets' goal of no reset holds there)?"""
        return bool(self.plan().mnha)

    def ns(self, node: str, instance: str | None = None) -> str:
        """A node's namespace name (an MX routing instance: its own namespace)."""
        return f"{self.name}-{node}" + (f"-{instance.lower()}" if instance else "")

    def node_file(self, node: str, name: str) -> Path:
        """A file of a node in the lab's state folder (configs, daemon status)."""
        return self.state_dir / "nodes" / node / name

    def read_json(self, node: str, name: str) -> Any:
        return json.loads(self.node_file(node, name).read_text())

    # -- up / down / status

    def down(self) -> float:
        """Tear the lab down (daemons, namespaces, links, bridge, nft table, state); seconds taken."""
        from ..runtime.netns import NetnsBackend

        started = time.monotonic()
        problems = NetnsBackend().down(self.state)
        remove_state(self.name)
        if problems:
            raise LabError(f"lab {self.name}: " + "; ".join(problems))
        return time.monotonic() - started

    def status(self) -> LabStatus:
        from ..runtime import status as statusmod

        return statusmod.collect(self.state)

    def ssh_logins(self) -> dict[str, str] | None:
        """Each SSH user that logs in with a password, and its password (drawn at random by `lab up` unless
        the topology set one); {} without SSH; None when the secret file is not readable here (not root)."""
        from ..plan.sshconfig import PASSWORDS_FILE

        path = self.state_dir / PASSWORDS_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return None
        return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}

    # -- entering nodes

    def exec_namespace(self, node: str, instance: str | None = None) -> str:
        """The namespace `lab exec NODE [-i INSTANCE]` enters (BadInput if the lab has none such)."""
        ns = self.ns(node, instance)
        if ns not in self.state.namespaces:
            nodes = sorted({n[len(self.name) + 1:] for n in self.state.namespaces})
            raise BadInput(f"lab {self.name} has no node/instance '{node}{'/' + instance if instance else ''}'"
                           f"{did_you_mean(node, nodes)} (namespaces: {', '.join(nodes)})")
        return ns

    def exec(self, node: str, command: list[str], instance: str | None = None) -> NoReturn:
        """Replace this process by COMMAND inside a node's namespace (`lab exec`)."""
        if not command:
            raise BadInput("give a command after --, e.g. `lab exec srx1 -- ip route`")
        ns = self.exec_namespace(node, instance)
        hostcheck.require_root()
        try:
            netnsutil.enter(ns)
        except OSError:
            raise LabError(f"cannot enter namespace {ns}") from None
        sys.stdout.flush()
        try:
            os.execvp(command[0], command)
        except FileNotFoundError:
            raise LabError(f"command not found: {command[0]}") from None

    def interfaces(self, node: str | None = None) -> list[Port]:
        """The interfaces of a node (or of every node): vendor name, kernel name, namespace, address, peer."""
        plan = self.plan()
        ports = [Port(end.node, end.alias, end.name, end.ns, end.address, end.peer_node, end.peer_alias, end.zone)
                 for veth in plan.veths for end in (veth.a, veth.b) if end.node in {n.name for n in plan.nodes}]
        ports += [Port(m.node, m.name, m.name, m.ns, m.address, None, None, "management") for m in plan.mgmt.ports]
        ports.sort(key=lambda p: (p.node, p.zone == "management", p.vendor))
        return [p for p in ports if node in (None, p.node)]

    def capture_port(self, node: str, interface: str) -> Port:
        """A node's interface by its vendor name (ge-0/0/1, ae0.100, GigabitEthernet0/1) or kernel name."""
        nodes = [n.name for n in self.plan().nodes]
        if node not in nodes:
            raise BadInput(f"lab {self.name} has no node {node}{did_you_mean(node, nodes)}")
        ports = self.interfaces(node)
        for port in ports:
            if interface in (port.vendor, port.kernel):
                return port
        names = [p.vendor for p in ports]
        listed = ", ".join(p.vendor if p.vendor == p.kernel else f"{p.vendor} ({p.kernel})" for p in ports)
        raise BadInput(f"{node} has no interface {interface}{did_you_mean(interface, names)}; its interfaces: "
                       f"{listed}")

    def capture(self, port: Port, write: str | None, count: int | None, seconds: float | None,
                bpf: str | None) -> NoReturn:
        """Replace this process by Wireshark's capture tools on a node's interface, inside its namespace:
        dumpcap writing a capture file (pcap for a name ending in .pcap, else pcapng; `-` for stdout, e.g.
        into `wireshark -k -i -`), else tshark printing one line per packet."""
        tool = "dumpcap" if write is not None else "tshark"
        if shutil.which(tool) is None:
            raise LabError(f"{tool} is not installed (Debian: apt-get install tshark)")
        argv = [tool, "-i", port.kernel, *(["-w", write, "-q"] if write is not None else ["-l", "-n"]),
                *(["-P"] if write is not None and write.endswith(".pcap") else []),  # pcap, not pcapng
                *(["-c", str(count)] if count else []), *(["-a", f"duration:{seconds:g}"] if seconds else []),
                *(["-f", bpf] if bpf else [])]
        hostcheck.require_root()
        try:
            netnsutil.enter(port.ns)
        except OSError:
            raise LabError(f"cannot enter namespace {port.ns}") from None
        sys.stdout.flush()
        os.execvp(argv[0], argv)

    def ssh(self, node: str, user: str | None, args: list[str]) -> NoReturn:
        """Replace this process by the OpenSSH client logged into a node's CLI (`lab ssh`)."""
        config = self.state_dir / "ssh_config"
        host = f"{self.name}-{node}"
        if not config.exists():
            raise LabError(f"lab {self.name} has no SSH access (ssh.enabled is false in its topology)")
        nodes = [n[len(self.name) + 1:] for n in self.state.namespaces]
        if f"Host {host}\n" not in config.read_text() and node not in nodes:
            raise BadInput(f"lab {self.name} has no node {node}{did_you_mean(node, nodes)}")
        if f"Host {host}\n" not in config.read_text():
            raise BadInput(f"{node} of lab {self.name} does not answer SSH (only mx, srx and ios-router nodes "
                           f"do; `lab exec {node} -- ...` runs a command on a host)")
        ready = self.state_dir / "ssh" / "ready"  # the server writes it once keys and listeners are up
        deadline = time.monotonic() + 10.0
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if "IdentityFile" not in config.read_text():  # no lab key (ssh.lab_key false): OpenSSH asks for one
            logins = self.ssh_logins() or {}
            login = user or next(iter(logins), "")
            if login in logins:
                print(f"password of {login}: {logins[login]}", file=sys.stderr)
        argv = ["ssh", "-F", str(config)] + (["-l", user] if user else []) + [host] + list(args)
        sys.stdout.flush()
        try:
            os.execvp("ssh", argv)
        except FileNotFoundError:
            raise LabError("the OpenSSH client (ssh) is not installed (make deps)") from None

    def cli(self, node: str, line: str, user: str | None = None) -> tuple[str, int]:
        """One command line on a node's Junos-like / IOS-like CLI, run here by the SSH CLI's own code
        (`lab show`): its output and status (0 ok, 1 the CLI reported an error)."""
        from ..cli_ssh.session import Session as CliSession
        from ..plan import sshconfig

        path = self.state_dir / "ssh" / "sshd.json"
        if not path.exists():
            raise LabError(f"lab {self.name} has no node CLI (ssh.enabled is false in its topology)")
        config = sshconfig.load(path)
        target = config.node(node)
        if target is None:
            names = ", ".join(n.name for n in config.nodes)
            raise BadInput(f"lab {self.name} has no node '{node}' with a CLI"
                           f"{did_you_mean(node, [n.name for n in config.nodes])} (nodes with one: {names})")
        if user is None:
            if not config.users:
                raise LabError(f"lab {self.name} has no CLI user")
            login = config.users[0]
        else:
            found = config.user(user)
            if found is None:
                raise BadInput(f"lab {self.name} has no CLI user '{user}' "
                               f"(users: {', '.join(u.name for u in config.users)})")
            login = found
        hostcheck.require_root()
        result = CliSession(config, target, login).run(line)
        return result.text, result.status

    # -- inspection

    def sessions(self, node: str) -> list[Session]:
        """An SRX's transit sessions (conntrack; BGP's port 179 left out); none of a powered-off node."""
        from ..events import sessions as sessionsmod

        hostcheck.require_root()
        ns = self.exec_namespace(node)  # BadInput for a node the lab has not
        if node in self.state.down_nodes:
            raise LabError(f"{node} in lab {self.name} is powered off (`lab restore {node}` powers it on, empty)")
        return [s for s in sessionsmod.read(ns) if 179 not in (s.source_port, s.destination_port)]

    def selector(self, node: str) -> dict[str, Any]:
        """The MX selector daemon's status (members, buckets, changes)."""
        path = self.node_file(node, MXLB_STATUS)
        nodes = [n.name for n in self.plan().nodes]
        if node not in nodes:
            raise BadInput(f"lab {self.name} has no node {node}{did_you_mean(node, nodes)}")
        if not path.exists():
            raise LabError(f"{node} in lab {self.name} runs no selector (mx with ecmp-chash or ecmp only)")
        status = read_status(path, MxlbStatus)
        if status is None:
            raise LabError(f"{node} in lab {self.name}: the selector's status is not readable ({path})")
        return status.to_dict()

    def redundancy(self) -> dict[str, dict[str, Any]]:
        """SRD status of each MX and MNHA status of each SRX, by node."""
        report: dict[str, dict[str, Any]] = {"srd": {}, "mnha": {}}
        for path in sorted((self.state_dir / "nodes").glob(f"*/{SRD_STATUS}")):
            srd = read_status(path, SrdStatus)
            if srd is not None:
                report["srd"][path.parent.name] = srd.to_dict()
        for path in sorted((self.state_dir / "nodes").glob(f"*/{MNHA_STATUS}")):
            mnha = read_status(path, MnhaStatus)
            if mnha is not None:
                report["mnha"][path.parent.name] = mnha.to_dict()
        return report

    def events(self) -> list[Applicability]:
        """Which failure events apply to this lab, and why not."""
        return event_verdicts(json.loads((self.state_dir / "plan.json").read_text()))

    # -- operations

    def checked_node(self, node: str, lab_wide: bool = False) -> None:
        """BadInput unless NODE is a node of the lab (LAB_WIDE: or `_lab`, the node of its lab-wide daemons)."""
        known = {n.name for n in self.plan().nodes} | ({r.node for r in self.state.processes} if lab_wide else set())
        names.node(self.name, node, sorted(known))

    def fail(self, event: str, node: str, down_time: float = 5.0, peer: str | None = None,
             daemon: str | None = None) -> str:
        """Inject one failure event now; returns what was done (daemon-crash: LabError if the
        daemon is not running again within 10 s)."""
        from ..runtime import ops

        hostcheck.require_root()
        names.events_to_run(event_verdicts(json.loads(self.plan().to_json())), [event], self.name, [])
        if daemon is not None and event != "daemon-crash":
            raise BadInput("--daemon goes with the daemon-crash event")
        self.checked_node(node, lab_wide=event == "daemon-crash")
        if daemon is not None:
            supervised = [r.name for r in self.state.processes if r.node == node and r.restart]
            names.daemon(self.name, node, daemon, supervised)
        if event == "daemon-crash":
            name = daemon or ops.default_daemon(self.state, node)
            seconds = ops.crash_daemon(self.state, node, name)
            if seconds is None:
                eventlog.record(self.state_dir, event, node, "error", f"{name} not running again after 10 s")
                raise LabError(f"{node}/{name} killed (SIGKILL) but not running again after 10 s; "
                               f"see `lab status` and its log")
            done = f"{node}/{name} killed (SIGKILL); the supervisor had it running again after {seconds:.2f} s"
        else:
            done = ops.inject(self.state, self.plan(), event, node, down_time=down_time, peer=peer)
        eventlog.record(self.state_dir, event, node, "done", done)
        return done

    def restore(self, node: str, wait: bool = True, timeout: float = 30.0) -> list[str]:
        """Undo lasting failure events on a node (power on, failed links up); what was done. With
        WAIT, return once the lab is ready for traffic again, as `lab up` does (BGP re-established,
        routes back, selectors and MNHA pairs in step): LabError if not within TIMEOUT seconds."""
        from ..runtime import ops

        hostcheck.require_root()
        self.checked_node(node)
        done = ops.restore(self.state, self.plan(), node)
        eventlog.record(self.state_dir, "restore", node, "done", "; ".join(done) or "nothing to restore")
        if wait and done:
            self.wait_ready(timeout)
        return done

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until the lab is ready for traffic, by the conditions `lab up` waits for."""
        from ..runtime.netns import NetnsBackend
        from ..runtime.upwait import ReadyWait

        backend = NetnsBackend()
        try:
            ReadyWait(self.plan(), lambda _step, _detail: None, backend.ipr).wait(self.state, timeout)
        finally:
            backend.close()

    def restart(self, node: str, process: str, kill: bool = False) -> Restarted:
        """Stop one daemon (SIGKILL with kill) and start the same command again under the supervisor."""
        from ..runtime import supervisor as sup

        hostcheck.require_root()
        self.checked_node(node, lab_wide=True)
        names.daemon(self.name, node, process, (r.name for r in self.state.processes if r.node == node))
        record = self.state.process(node, process)
        assert record is not None
        client = sup.Supervisor(self.state.state_dir)
        client.stop(procs=[(record.node, record.name)], kill=kill)  # on purpose: no automatic restart
        fresh = client.spawn(record.node, record.name, record.ns, record.argv, record.log,
                             restart=record.restart, stale_files=record.stale_files)
        self.state.processes = [fresh if r is record else r for r in self.state.processes]
        self.state.save()
        return Restarted(node, process, record.pid, fresh.pid)

    def power(self, node: str, on: bool) -> None:
        """Power a node off (links down, daemons killed, state forgotten) or on again."""
        from ..runtime import ops

        hostcheck.require_root()
        self.checked_node(node)
        (ops.power_on if on else ops.power_off)(self.refresh().state, self.plan(), node)

    def switchover(self) -> str:
        """SRD switchover requested on the master MX; returns its name."""
        from ..runtime import ops

        return ops.switchover(self.state, self.plan())

    # -- traffic and events

    def traffic_start(self, flows: int, rate: float, sizes: str, duration: float, reverse: bool,
                      family: str | None = None) -> dict[str, Any]:
        from ..events import traffic as traffic_cli
        hostcheck.require_root()  # FAMILY "4", "6", "64", "both" or "all" (None: every family of the lab)
        return traffic_cli.start(self.state, flows, rate, sizes, duration, reverse, family)

    def traffic_stop(self) -> dict[str, Any]:
        from ..events import traffic as traffic_cli

        hostcheck.require_root()
        return traffic_cli.stop(self.state)

    def traffic_stats(self) -> dict[str, Any]:
        from ..events import traffic as traffic_cli

        hostcheck.require_root()
        return traffic_cli.stats(self.state)

    def event_names(self, wanted: list[str], target: str | None = None) -> list[str]:
        """The events to run: those wanted (each checked), or every one that applies; TARGET (if given)
        checked to be a node of the lab (`topology.events_to_run`)."""
        plan = self.plan()
        return names.events_to_run(event_verdicts(json.loads(plan.to_json())), wanted, self.name,
                             [n.name for n in plan.nodes], target)

    def event_target(self, event: str, target: str | None = None) -> str:
        from ..events import catalog as eventsmod
        from ..events import run as eventrun

        if target:
            return target
        default = eventrun.default_target(self.plan(), eventsmod.BY_NAME[event])
        if default in self.plan().srd:
            # the JVD's MX events hit the primary: the current SRD master (after an MX reboot without
            # preemption that is the other MX), not the standby, which forwards nothing
            from ..runtime import ops

            return ops.srd_master(self.state, self.plan()) or default
        return default

    def traffic_choice(self, flows: int | None, rate: float | None, sizes: str = "imix", realtime: bool = True,
                       progress: Callable[[str], None] = lambda _: None,
                       families: list[int] | None = None) -> dict[str, Any]:
        """An events run's traffic: FLOWS/RATE, or (neither given) calibrated with the run's FAMILIES."""
        from ..events import baseline

        chosen = baseline.calibrate(self.plan(), sizes, realtime, progress=progress, families=families) \
            if flows is None and rate is None else None
        return baseline.traffic(flows, rate, chosen)

    def traffic_families(self, family: str | None = None, flows: int | None = None) -> list[int]:
        """FAMILY's families (None: every family of the lab); BadInput if FLOWS cannot be shared."""
        from ..plan import trafficsetup
        fams = trafficsetup.families(self.plan(), family)
        return fams if flows is None else list(trafficsetup.shares(flows, fams))

    def run_event(self, event: str, target: str, spec: TrafficSpec,
                  progress: Callable[[str], None] = lambda _: None, daemon: str | None = None,
                  before_traffic: Callable[[], None] | None = None) -> EventResult:
        """Run EVENT on TARGET under traffic, judged; again while its generator falls behind (`rerun`)."""
        from ..events import catalog as eventsmod
        from ..events import rerun
        from ..events import run as eventrun
        started = time.time()
        ident = eventlog.record(self.state_dir, event, target, "running", "under traffic", started)
        try:
            result = rerun.until_judged(lambda: eventrun.run_event(
                self.state, self.plan(), eventsmod.BY_NAME[event], target, spec, progress=progress, daemon=daemon,
                before_traffic=before_traffic), spec.reruns, progress)
        except BaseException as exc:
            eventlog.record(self.state_dir, event, target, "error", str(exc) or type(exc).__name__, started, ident)
            raise
        self.refresh()
        verdict, detail = eventlog.summary(result.to_json())
        eventlog.record(self.state_dir, event, target, verdict, detail, started=started, ident=ident)
        return result
