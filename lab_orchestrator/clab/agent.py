"""The node agent: what runs as PID 1 in each `linux` container of a containerlab export.

`python3 -m lab_orchestrator.clab.agent run /etc/lab/node/clab-node.json` applies one node's slice of
the plan (clab_export.node_slice) inside its container, the way the netns backend applies it to a
namespace: the container's own network namespace is the node's master instance (registered under
its plan name in the container's private /run/netns), an MX's routing instances are namespaces
created inside the container, and containerlab's data-plane interfaces (named as in the netns
backend) are moved into them. Then addresses, aliases, loopbacks, sysctls, routes, rules, nftables
rulesets and the node's daemons, as in backends.netns. It stays PID 1: it reaps its daemons and
carries out requests (power off / on, restart daemons) that `docker exec ... clab_node` relays.

Other subcommands, run through `docker exec CONTAINER python3 -m lab_orchestrator.clab.agent ...`:
  status              readiness of this node as JSON (agent phase, daemons, BGP sessions, routes)
  power-off/power-on  the failure events' power off and on (links down, daemons killed, state lost)
  link IFACE down|up  one interface of this node down or up (a link failure is both ends)
  restart NAME... [--recover]   restart daemons (BIRD with -R: graceful restart)

The management port is containerlab's eth0 (alias fxp0 / mgmt0, as the netns backend names it); the
default route Docker gives it is removed, so lab traffic cannot leave through the management network.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.files import SECRET_MODE, is_secret, write_json

from .agentconfig import Daemon, NodeConfig, interface_names, load_config, moves, ordered_daemons, readiness

__all__ = ["Agent", "NodeConfig", "interface_names", "load_config", "main", "moves", "ordered_daemons", "readiness"]

AGENT_STATE = "clab-agent.json"
REQUEST_FILE = "clab-agent.request"
RESPONSE_FILE = "clab-agent.response"
MGMT_IF = "eth0"
INTERFACE_WAIT = 300.0  # seconds: containerlab adds the data-plane links after the container starts
MS_BIND = 0x1000


@dataclass
class AgentState:
    phase: str = "starting"  # starting | ready | powered-off | failed
    error: str = ""
    pid: int = field(default_factory=os.getpid)
    daemons: list[dict[str, Any]] = field(default_factory=list)
    down_links: list[str] = field(default_factory=list)


def _log(message: str) -> None:
    sys.stdout.write(f"clab_node: {message}\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- system steps (in the container)
def adopt_namespace(name: str) -> None:
    """Register this process's network namespace as /run/netns/NAME (as `ip netns attach`)."""
    from labkit import netnsutil

    netnsutil.attach_current(name)


def copy_config(config: NodeConfig) -> None:
    """The bound node folder is read-only (a ConfigMap under clabernetes): work on a copy."""
    config.node_dir.mkdir(parents=True, exist_ok=True)
    for item in config.source_dir.iterdir():
        if item.is_file():
            shutil.copyfile(item, config.node_dir / item.name)
            if is_secret(item.name):
                os.chmod(config.node_dir / item.name, SECRET_MODE)
    (Path(config.state_dir) / "logs").mkdir(parents=True, exist_ok=True)


def load_files(config: NodeConfig) -> None:
    for ruleset in config.plan.rulesets:
        config.plan.files[ruleset.file] = (Path(config.state_dir) / ruleset.file).read_text()


def wait_interfaces(names: list[str], timeout: float = INTERFACE_WAIT) -> None:
    """Until every name is a link of this network namespace (asked over netlink: /sys may show
    another namespace's devices where sysfs was not mounted for this one)."""
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkDumpInterrupted

    deadline = time.monotonic() + timeout
    missing = names
    with IPRoute() as ipr:
        while time.monotonic() < deadline:
            try:
                present = {link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
            except NetlinkDumpInterrupted:  # links were being added while the kernel listed them: ask again
                continue
            missing = [n for n in names if n not in present]
            if not missing:
                return
            time.sleep(0.2)
    raise RuntimeError(f"interfaces never appeared: {', '.join(missing)} (is every link of the node deployed?)")


class _Stopped(BaseException):
    """SIGTERM while the node is being built: stop what was started and exit."""


class Agent:
    def __init__(self, config: NodeConfig):
        self.config = config
        self.state = AgentState()
        self.daemons: list[Daemon] = []
        self.pending: list[int] = []
        self.building = False

    # ----------------------------------------------------------- state file
    def save(self) -> None:
        self.state.daemons = [{"name": d.name, "ns": d.ns, "pid": d.pid, "exit_status": d.exit_status,
                               "log": d.log} for d in self.daemons]
        write_json(self.config.node_dir / AGENT_STATE, self.state.__dict__, sort_keys=True)

    # ----------------------------------------------------------- build
    def build(self) -> None:
        from pyroute2.netlink.exceptions import NetlinkError

        from labkit import netnsutil

        from ..runtime.netlinkcfg import configure_interface
        from ..runtime.netns import NetnsBackend

        config = self.config
        copy_config(config)
        load_files(config)
        self.save()
        adopt_namespace(config.master_ns)
        _log(f"waiting for {len(interface_names(config))} interfaces")
        wait_interfaces(interface_names(config))
        backend = NetnsBackend(lambda step, detail: _log(f"{step}: {detail}"))
        try:
            master = backend.ipr(config.master_ns)
            self._mgmt(master)
            for namespace in config.plan.namespaces:
                if namespace.name != config.master_ns:
                    netnsutil.create(namespace.name)
                    backend.ipr(namespace.name).link("set", index=1, state="up")
                _sysctls(namespace.name, namespace.sysctls)
            for name, target in moves(config):
                fd = os.open(netnsutil.path(target), os.O_RDONLY)
                try:
                    master.link("set", index=master.link_lookup(ifname=name)[0], net_ns_fd=fd)
                finally:
                    os.close(fd)
            for iface in config.own_interfaces():
                configure_interface(backend.ipr(iface.ns), iface)
            for node in config.plan.nodes:
                for instance, address in node.loopbacks.items():
                    lo_ns = node.master_ns if not instance else next(
                        n for n in node.namespaces if n.endswith("-" + instance.lower()))
                    backend.ipr(lo_ns).addr("add", index=1, address=address, prefixlen=32)
                for address in node.lo_units.values():
                    backend.ipr(node.master_ns).addr("add", index=1, address=address, prefixlen=32)
            backend.apply_bridges(config.plan)
            backend.apply_routes(config.plan)
        except NetlinkError as exc:
            raise RuntimeError(f"the kernel refused a step of the plan: {exc.args[1]} (errno {exc.code})") from None
        finally:
            backend.close()
        routing, other = ordered_daemons(config)
        self.daemons = routing + other
        self._start(routing)
        backend.apply_rulesets(config.plan)
        self._start(other)

    def _mgmt(self, ipr: Any) -> None:
        """eth0 carries the node's management address; Docker's default route through it goes."""
        index = ipr.link_lookup(ifname=MGMT_IF)
        if not index:
            return
        ipr.link("set", index=index[0], ifalias=self.config.mgmt_alias)
        for route in ipr.get_routes(family=2, table=254):
            if route["dst_len"] == 0 and route.get_attr("RTA_OIF") == index[0]:
                with contextlib.suppress(Exception):
                    ipr.route("del", dst="0.0.0.0", dst_len=0, oif=index[0], table=254)

    def _start(self, daemons: list[Daemon]) -> None:
        from ..runtime import supervisor

        try:
            for daemon in daemons:
                daemon.exit_status = None
                daemon.pid = supervisor.fork_exec(daemon.argv, daemon.ns, daemon.log)
                _log(f"started {daemon.name} (pid {daemon.pid}) in {daemon.ns}")
        finally:
            self.save()  # those started before one that could not start run: their pids are in the state file

    # ----------------------------------------------------------- run loop
    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGUSR1, self._on_signal)
        self.building = True
        try:
            self.build()
        except _Stopped:
            self._stop_all()
            return 0
        except Exception as exc:  # noqa: BLE001 - reported in the state file and the container log
            self.building = False
            self.state.phase, self.state.error = "failed", f"{type(exc).__name__}: {exc}"
            self.save()
            _log(f"failed: {self.state.error}")
            self._idle_until_stopped()
            return 1
        self.building = False
        self.state.phase = "ready"
        self.save()
        _log("node ready")
        return self._idle_until_stopped()

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.building and signum in (signal.SIGTERM, signal.SIGINT):
            raise _Stopped
        self.pending.append(signum)

    def _idle_until_stopped(self) -> int:
        while True:
            self._reap()
            while self.pending:
                signum = self.pending.pop(0)
                if signum in (signal.SIGTERM, signal.SIGINT):
                    self._stop_all()
                    return 0
                if signum == signal.SIGUSR1:
                    self._handle_request()
            time.sleep(0.2)

    def _reap(self) -> None:
        from ..runtime.supervisor import reaped

        for pid, status in reaped():
            for daemon in self.daemons:
                if daemon.pid == pid:
                    daemon.exit_status = os.waitstatus_to_exitcode(status)
                    _log(f"{daemon.name} (pid {pid}) exited: {daemon.exit_status}")
                    self.save()

    def _stop_all(self, kill: bool = False) -> None:
        from ..runtime import supervisor

        live = [d.pid for d in self.daemons if d.pid and d.exit_status is None]
        if kill:
            for pid in live:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        supervisor.terminate(live)
        self._reap()

    # ----------------------------------------------------------- requests (docker exec -> PID 1)
    def _handle_request(self) -> None:
        path = self.config.node_dir / REQUEST_FILE
        try:
            request = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        try:
            message = self._do(request)
            reply = {"id": request.get("id"), "ok": True, "message": message}
        except Exception as exc:  # noqa: BLE001 - the requester shows it
            reply = {"id": request.get("id"), "ok": False, "message": f"{type(exc).__name__}: {exc}"}
        write_json(self.config.node_dir / RESPONSE_FILE, reply, indent=None)

    def _do(self, request: dict[str, Any]) -> str:
        from ..plan.features import mnha
        from ..runtime import ops

        op = request.get("op")
        namespaces = set(self.config.namespaces)
        if op == "power-off":
            if self.state.phase == "powered-off":
                raise RuntimeError(f"{self.config.node} is already powered off")
            # As runtime.ops.power_off: the box drops carrier on every interface of every namespace
            # before any daemon dies (its neighbours see the failure by carrier loss, never by a BGP
            # session a dying BIRD's sockets close), and it is recorded powered off as soon as its links
            # are down, so a step that fails after that (a daemon that does not stop) leaves it in a
            # state power-on restores. Its sessions and routes are forgotten at power-on.
            try:
                for ns in sorted(namespaces):
                    ops.set_links(ns, up=False)
                self.state.phase = "powered-off"
                self._stop_all(kill=True)
            finally:
                self.save()
            return f"{self.config.node} powered off"
        if op == "power-on":
            if self.state.phase != "powered-off":
                raise RuntimeError(f"{self.config.node} is not powered off")
            for ns in sorted(namespaces):  # as runtime.ops.power_on: it boots empty, links still down
                ops.forget_node_state(ns)  # (an error here leaves it powered off)
            try:
                for ns in sorted(namespaces):
                    ops.set_links(ns, up=True)
                ops.reapply(self.config.plan, namespaces)
                # as runtime.ops.power_on: an MNHA node waits for its peer's sessions before drawing traffic
                plan, node = self.config.plan, self.config.node
                boot = mnha.boot_role(plan, node)
                if boot is not None:
                    Path(plan.state_dir, mnha.role_file(plan, node)).write_text(boot)
                routing, other = ordered_daemons(self.config)
                self.daemons = routing + other
                self._start(self.daemons)
            except Exception as exc:
                # Links up and some daemons running: no longer powered off (a second power-on would
                # start those daemons twice); power-off, which stops every daemon tracked, undoes it.
                self.state.phase, self.state.error = "failed", f"power-on: {type(exc).__name__}: {exc}"
                self.save()
                raise
            self.state.phase, self.state.error = "ready", ""
            self.save()
            return f"{self.config.node} powered on"
        if op == "restart":
            names = set(request.get("names") or [])
            chosen = [d for d in self.daemons if not names or d.name in names]
            if not chosen:
                raise RuntimeError(f"{self.config.node} runs no daemon {', '.join(sorted(names))}")
            from ..runtime import supervisor

            live = [d.pid for d in chosen if d.exit_status is None]
            for pid in live:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            supervisor.terminate(live)
            self._reap()
            for daemon in chosen:
                argv = [a for a in daemon.argv if a != "-R"]
                if request.get("recover") and argv and argv[0] == "bird":
                    argv.append("-R")
                daemon.argv = argv
            self._start(chosen)
            return f"{self.config.node}: {', '.join(d.name for d in chosen)} restarted"
        raise RuntimeError(f"unknown request {op!r}")


def _sysctls(ns: str, sysctls: tuple[tuple[str, str], ...]) -> None:
    from labkit import netnsutil

    with netnsutil.entered(ns):
        for key, value in sysctls:
            target = Path("/proc/sys", *key.split("."))
            if target.exists():
                target.write_text(value)


# ---------------------------------------------------------------- subcommands run by docker exec
def _request(config: NodeConfig, op: str, timeout: float = 30.0, **args: Any) -> int:
    state = json.loads((config.node_dir / AGENT_STATE).read_text())
    request_id = f"{os.getpid()}-{time.monotonic_ns()}"
    write_json(config.node_dir / REQUEST_FILE, {"id": request_id, "op": op, **args}, indent=None)
    os.kill(int(state["pid"]), signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    response = config.node_dir / RESPONSE_FILE
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            reply = json.loads(response.read_text())
            if reply.get("id") == request_id:
                print(reply["message"])
                return 0 if reply["ok"] else 1
        time.sleep(0.05)
    print(f"{config.node}: no answer from the node agent in {timeout:.0f} s", file=sys.stderr)
    return 1


def status(config: NodeConfig) -> dict[str, Any]:
    from labkit import birdctl

    try:
        agent = json.loads((config.node_dir / AGENT_STATE).read_text())
    except (OSError, ValueError):
        agent = {"phase": "starting", "error": "", "daemons": []}
    protocols: dict[str, dict[str, str]] = {}
    routes: dict[str, set[str]] = {}
    if agent.get("phase") == "ready":
        for proc in config.plan.processes:
            if proc.control_socket:
                try:
                    protocols[proc.control_socket] = {p.name: p.info for p in birdctl.protocols(proc.control_socket)}
                except birdctl.BirdError as exc:
                    protocols[proc.control_socket] = {"(bird)": str(exc)}
        for ns in {e.ns for e in config.plan.expected_routes}:
            routes[ns] = _route_prefixes(ns)
    pending = [f"{config.node} agent {agent.get('phase')}"] if agent.get("phase") != "ready" else \
        readiness(config, protocols, routes)
    return {"node": config.node, "kind": config.kind, "phase": agent.get("phase"), "error": agent.get("error", ""),
            "ready": not pending, "pending": pending, "daemons": agent.get("daemons", []),
            "bgp": {name: info for by in protocols.values() for name, info in sorted(by.items())}}


def _route_prefixes(ns: str, attempts: int = 20) -> set[str]:
    """The main table's IPv4 prefixes in NS. A dump the kernel interrupts (routes changing while it
    lists them: BGP converging) is asked again."""
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkDumpInterrupted

    from labkit import netnsutil

    with netnsutil.entered(ns):
        ipr = IPRoute()
    try:
        for attempt in range(1, attempts + 1):
            try:
                table = ipr.get_routes(family=2, table=254)
            except NetlinkDumpInterrupted:
                if attempt == attempts:
                    raise
                continue
            return {f"{r.get_attr('RTA_DST') or '0.0.0.0'}/{r['dst_len']}" for r in table}
        return set()
    finally:
        ipr.close()


def link(config: NodeConfig, name: str, up: bool) -> int:
    from ..runtime import ops

    for iface in config.own_interfaces():
        if name in (iface.name, iface.alias):
            ops.set_links(iface.ns, up=up, only={iface.name})
            if up:
                ops.reapply_routes_only(config.plan, {iface.ns})
            print(f"{config.node} {iface.alias} {'up' if up else 'down'}")
            return 0
    print(f"{config.node} has no interface {name}", file=sys.stderr)
    return 1


USAGE = ("usage: python3 -m lab_orchestrator.clab.agent run CONFIG | status [CONFIG] | power-off [CONFIG] | "
         "power-on [CONFIG] | link IFACE down|up [CONFIG] | restart NAME... [--recover] [CONFIG]")
DEFAULT_CONFIG = "/etc/lab/node/clab-node.json"


def main(argv: list[str]) -> int:
    if not argv:
        print(USAGE, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    config_path = rest.pop() if rest and rest[-1].endswith(".json") else DEFAULT_CONFIG
    config = load_config(config_path)
    if command == "run":
        return Agent(config).run()
    if command == "status":
        print(json.dumps(status(config), indent=2, sort_keys=True))
        return 0
    if command in ("power-off", "power-on"):
        return _request(config, command)
    if command == "restart":
        recover = "--recover" in rest
        return _request(config, "restart", names=[r for r in rest if r != "--recover"], recover=recover)
    if command == "link" and len(rest) == 2 and rest[1] in ("down", "up"):
        return link(config, rest[0], rest[1] == "up")
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
