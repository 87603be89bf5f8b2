"""Apply a plan to this host: namespaces, veths, bridge, addresses, routes, processes.

One netlink socket per namespace (opened while the thread is inside it), raw RTM_NEWLINK
messages so both veth ends get their namespace and ifindex in one request (distinct ifindexes:
see docs/architecture.md on carrier detection), one `nft -f` for the root guard table.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import zlib
from collections.abc import Callable
from ipaddress import IPv4Interface
from pathlib import Path

from pyroute2 import IPRoute
from pyroute2.netlink import NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl import RTM_NEWLINK
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

from labkit import netnsutil
from labkit.files import is_secret, private_dir, write_secret

from ..model.diagnostics import LabError
from ..plan.pipeline import LabPlan, Route
from . import credentials, kernel_room, netlinkcfg, supervisor, upwait
from .state import LabState, running_labs

Progress = Callable[[str, str], None]  # (step, detail)


def _quiet(step: str, detail: str) -> None:
    pass


class NetnsBackend:
    def __init__(self, progress: Progress = _quiet):
        self.progress = progress
        self._sockets: dict[str, IPRoute] = {}

    # ---------------------------------------------------------------- up
    def up(self, plan: LabPlan, ready_timeout: float = 30.0) -> LabState:
        state = LabState(
            name=plan.name, source=plan.source, state_dir=plan.state_dir, status="creating",
            namespaces=[ns.name for ns in plan.namespaces], bridge=plan.mgmt.bridge,
            host_ports=[p.host_port for p in plan.mgmt.ports], nft_table=plan.mgmt.nft_table,
            mgmt_subnet=plan.mgmt.subnet, created_at=time.time(), kernel_room=kernel_room.wanted(plan),
        )
        state.save()  # the journal first: a crash from here on is cleaned by `lab down`
        try:
            self._write_files(plan)
            # the supervisor (a Python process of its own) gets ready while the namespaces are made
            state.supervisor_pid = supervisor.Supervisor(plan.state_dir).launch()
            state.save()
            self._raise_kernel_room(plan, state)
            self._namespaces(plan)
            self._links(plan)
            self._addresses(plan)
            self.apply_bridges(plan)
            self.apply_routes(plan)
            # BIRD waits about a second before its first BGP connect whatever the config says:
            # start it as early as its interfaces allow and build the rest meanwhile.
            self._start_processes(plan, state, routing=True)
            self._mgmt(plan)
            self._guard_root(plan)
            self.apply_rulesets(plan)
            self._start_processes(plan, state, routing=False)
            self._wait_ready(plan, state, ready_timeout)
        except NetlinkError as exc:
            raise LabError(f"the kernel refused a step of the plan: {exc.args[1]} (errno {exc.code})") from None
        finally:
            self.close()
        state.status = "ready"
        state.ready_at = time.time()
        state.save()
        return state

    def _write_files(self, plan: LabPlan) -> None:
        """The plan's files into the state dir (0700); secret files drawn (credentials) and written 0600."""
        root = private_dir(plan.state_dir)
        for rel, content in credentials.materialize(plan.files).items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if is_secret(rel):
                write_secret(target, content)
            else:
                target.write_text(content)
        (root / "logs").mkdir(exist_ok=True)

    def ipr(self, ns: str) -> IPRoute:
        if ns not in self._sockets:
            with netnsutil.entered(ns):
                self._sockets[ns] = IPRoute()
        return self._sockets[ns]

    def close(self) -> None:
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()

    def _namespaces(self, plan: LabPlan) -> None:
        self.progress("namespaces", f"{len(plan.namespaces)} namespaces")
        for ns in plan.namespaces:
            try:
                netnsutil.create(ns.name)
            except FileExistsError:
                raise LabError(f"namespace {ns.name} already exists and is not this lab's to reuse "
                               f"(run `lab down` for the lab that owns it)") from None
            with netnsutil.entered(ns.name):
                for key, value in ns.sysctls:
                    target = Path("/proc/sys", *key.split("."))
                    if target.exists():  # e.g. no IPv6 in this kernel: nothing to switch off
                        target.write_text(value)
                self._sockets[ns.name] = IPRoute()
            ipr = self._sockets[ns.name]
            ipr.link("set", index=1, state="up")

    def _links(self, plan: LabPlan) -> None:
        self.progress("links", f"{len(plan.veths)} veth pairs")
        with IPRoute() as root:
            fds = {ns.name: os.open(netnsutil.path(ns.name), os.O_RDONLY) for ns in plan.namespaces}
            try:
                for veth in plan.veths:
                    _add_veth(root, veth.a.name, veth.a.ifindex, fds[veth.a.ns],
                              veth.b.name, veth.b.ifindex, fds[veth.b.ns])
            finally:
                for fd in fds.values():
                    os.close(fd)

    def _mgmt(self, plan: LabPlan) -> None:
        mgmt = plan.mgmt
        self.progress("management", f"bridge {mgmt.bridge} {mgmt.subnet}")
        with IPRoute() as root:
            try:
                root.link("add", ifname=mgmt.bridge, kind="bridge")
            except NetlinkError as exc:
                raise LabError(f"cannot create management bridge {mgmt.bridge}: {exc.args[1]}") from None
            bridge = root.link_lookup(ifname=mgmt.bridge)[0]
            host = IPv4Interface(mgmt.host_address)
            root.addr("add", index=bridge, address=str(host.ip), prefixlen=host.network.prefixlen)
            root.link("set", index=bridge, state="up")
            for port in mgmt.ports:
                fd = os.open(netnsutil.path(port.ns), os.O_RDONLY)
                try:
                    _add_veth(root, port.name, port.ifindex, fd, port.host_port, 0, None)
                finally:
                    os.close(fd)
                index = root.link_lookup(ifname=port.host_port)[0]
                root.link("set", index=index, master=bridge, state="up", group=link_group(plan.name))
                ipr = self.ipr(port.ns)
                inner = ipr.link_lookup(ifname=port.name)[0]
                address = IPv4Interface(port.address)
                ipr.addr("add", index=inner, address=str(address.ip), prefixlen=address.network.prefixlen)
                ipr.link("set", index=inner, state="up", ifalias=port.name)

    def _addresses(self, plan: LabPlan) -> None:
        self.progress("addresses", "interfaces, aliases, loopbacks")
        for iface in plan.all_interfaces():
            netlinkcfg.configure_interface(self.ipr(iface.ns), iface)
        for node in plan.nodes:
            for instance, address in node.loopbacks.items():
                ns = node.master_ns if not instance else next(
                    n for n in node.namespaces if n.endswith("-" + instance.lower()))
                self.ipr(ns).addr("add", index=1, address=address, prefixlen=32)
                if instance in node.loopbacks6:
                    netlinkcfg.add_address(self.ipr(ns), 1, node.loopbacks6[instance])
            # lo0.1 / lo0.2 of an SRX: its pair's address (and its IPv6 twin)
            for address in [*node.lo_units.values(), *node.lo_units6.values()]:
                netlinkcfg.add_address(self.ipr(node.master_ns), 1, address)

    def apply_bridges(self, plan: LabPlan) -> None:
        for bridge in plan.bridges:
            ipr = self.ipr(bridge.ns)
            ipr.link("add", ifname=bridge.name, kind="bridge")
            index = ipr.link_lookup(ifname=bridge.name)[0]
            ipr.link("set", index=index, state="up")
            for port in bridge.ports:
                ipr.link("set", index=ipr.link_lookup(ifname=port)[0], master=index)

    def apply_routes(self, plan: LabPlan, tolerate_existing: bool = False) -> None:
        for route in plan.routes:
            try:
                self._route(route)
            except NetlinkError as exc:
                if not (tolerate_existing and exc.code == 17):  # EEXIST: still there
                    raise
        for rule in plan.rules:
            netlinkcfg.add_rule(self.ipr(rule.ns), rule)

    def _route(self, route: Route) -> None:
        netlinkcfg.add_route(self.ipr(route.ns), route)

    def _guard_root(self, plan: LabPlan) -> None:
        """No routed path between the lab's management bridge and the rest of the host."""
        table = plan.mgmt.nft_table
        ruleset = (
            f"table inet {table} {{\n"
            f"  chain guard {{\n"
            f"    type filter hook forward priority -10; policy accept;\n"
            f'    iifname "{plan.mgmt.bridge}" counter drop\n'
            f'    oifname "{plan.mgmt.bridge}" counter drop\n'
            f"  }}\n"
            f"}}\n"
        )
        _nft(ruleset)

    def apply_rulesets(self, plan: LabPlan) -> None:
        if plan.rulesets:
            self.progress("rulesets", f"{len(plan.rulesets)} nftables rulesets")
        from dataplane.kernel.nft import Nft, NftError

        # libnftables waits for the kernel's answer with select(), which aborts the process on a
        # descriptor >= FD_SETSIZE (1024): free the per-namespace netlink sockets (3 descriptors
        # each, reopened on demand) so that one context per namespace stays below it (256 SRX).
        self.close()
        nft = Nft()  # in-process libnftables: no nft process per ruleset
        try:
            for ruleset in plan.rulesets:
                try:
                    nft.run(plan.files[ruleset.file], ns=ruleset.ns)
                except NftError as exc:
                    raise LabError(f"nft refused {ruleset.file} on {ruleset.node}: {exc}") from None
        finally:
            nft.close()

    def _start_processes(self, plan: LabPlan, state: LabState, routing: bool) -> None:
        """Routing daemons (BIRD) first, the rest (which read rulesets and routes) after."""
        chosen = [p for p in plan.processes if (p.control_socket is not None) == routing]
        # the SSH server first: its start (imports, keys) is the longest, and `lab up` waits for it too
        chosen.sort(key=lambda p: p.name != "sshd")
        if not chosen:
            return
        self.progress("processes", f"{len(chosen)} {'routing daemons' if routing else 'other daemons'}")
        logs = Path(plan.state_dir) / "logs"
        sup = supervisor.Supervisor(plan.state_dir)
        if not state.supervisor_pid:
            state.supervisor_pid = sup.start()
            state.save()
        sup.wait_started(state.supervisor_pid)
        try:
            state.processes += sup.spawn_all([
                supervisor.SpawnRequest(proc.node, proc.name, proc.ns, list(proc.argv),
                                        str(logs / f"{proc.node}-{proc.name}.log"), restart=True,
                                        stale_files=list(proc.stale_files))
                for proc in chosen])
        except supervisor.PartialStart as exc:
            state.processes += exc.started  # they run: recorded, `lab down` stops them
            raise
        finally:
            state.save()

    def _wait_ready(self, plan: LabPlan, state: LabState, timeout: float) -> None:
        """Until the lab is ready for traffic (lab_orchestrator.runtime.upwait); what it waited for
        goes into the state record."""
        wait = upwait.ReadyWait(plan, self.progress, self.ipr)
        try:
            wait.wait(state, timeout)
        finally:
            state.ready_for = wait.waited

    # ---------------------------------------------------------------- down
    def down(self, state: LabState) -> list[str]:
        """Remove everything the lab owns; return what could not be removed (normally nothing)."""
        problems: list[str] = []
        state.status = "destroying"
        if Path(state.state_dir).is_dir():
            state.save()
        self.progress("processes", "stopping daemons")
        inodes = set()
        for ns in state.namespaces:
            if netnsutil.exists(ns):
                inodes.add(netnsutil.inode(ns))
        pids = [r.pid for r in state.processes if supervisor.alive(r)]
        pids += [p for p in netnsutil.pids_in(inodes) if p not in pids and p != os.getpid()]
        sup = supervisor.Supervisor(state.state_dir)
        if sup.running():
            with contextlib.suppress(OSError, LabError):  # busy or gone: terminated by pid just below
                sup.stop(pids)  # the supervisor reaps them: nothing lingers as a zombie
            sup.shutdown()
        # A supervisor that does not answer (still starting, or `lab up` was interrupted in the middle
        # of a spawn) and any child it forked that has not become its daemon yet: by command line.
        supervisor.terminate(_supervisor_pids(state.state_dir))
        # Nothing can start in the lab's namespaces any more: look again for what runs there.
        pids += [p for p in netnsutil.pids_in(inodes) if p not in pids and p != os.getpid()]
        supervisor.terminate(pids)  # whatever is left (supervisor gone after a crash)
        self.progress("links", "management ports and bridge")
        with IPRoute() as root:
            _delete_ports(root, state, problems)
        self.progress("namespaces", f"{len(state.namespaces)} namespaces")
        for ns in state.namespaces:
            netnsutil.delete(ns)
        if _nft_has_table(state.nft_table):
            _nft(f"delete table inet {state.nft_table}\n")
        try:
            self._give_back_kernel_room(state)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:  # bookkeeping: never stops a removal
            problems.append(f"kernel limits not given back ({type(exc).__name__}: {exc})")
        leftovers = [p for p in netnsutil.pids_in(inodes) if p != os.getpid()]
        leftovers += _supervisor_pids(state.state_dir)
        if leftovers:
            problems.append(f"processes still running: {leftovers}")
        return problems

    def _raise_kernel_room(self, plan: LabPlan, state: LabState) -> None:
        """The machine-wide knobs this lab needs (runtime/kernel_room.py); bookkeeping that fails is said,
        not fatal: without the room a big lab misses sessions or neighbours, which `lab doctor` shows."""
        try:
            kernel_room.KernelRoom().raise_to(plan.state_dir, state.kernel_room, self.progress)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self.progress("kernel", f"kernel limits not raised ({type(exc).__name__}: {exc}): `lab doctor` shows them")

    def _give_back_kernel_room(self, gone: LabState) -> None:
        """The knobs labs raised go back to what the labs still up need (all of it when none is). While a
        lab recorded by a version of lab that did not say what it needs runs, none is lowered."""
        unknown = [s for s in running_labs() if s.name != gone.name and not s.kernel_room]
        kernel_room.KernelRoom().give_back(gone.state_dir, self.progress, lower=not unknown)


def _supervisor_pids(state_dir: str) -> list[int]:
    """The lab's supervisor processes (`python -m lab_orchestrator.runtime.supervisord STATE_DIR`), including
    one that is not listening yet and children it forked that have not exec'd their daemon yet."""
    wanted = ["-m", "lab_orchestrator.runtime.supervisord", str(Path(state_dir))]
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = Path(f"/proc/{entry.name}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if argv[1:4] == wanted:
            found.append(int(entry.name))
    return found


def link_group(lab: str) -> int:
    """A link group per lab for its root-namespace ports: one RTM_DELLINK removes them all (each
    deletion alone waits ~16 ms in the kernel)."""
    return 0x1AB00000 | (zlib.crc32(lab.encode()) & 0xFFFFF)


def _delete_ports(root: IPRoute, state: LabState, problems: list[str]) -> None:
    ours = set(state.host_ports)
    group = link_group(state.name)
    members = {link.get_attr("IFLA_IFNAME") for link in root.get_links() if link.get_attr("IFLA_GROUP") == group}
    if members and members <= ours:  # never delete by group if another lab's link shares the group
        with contextlib.suppress(NetlinkError):
            root.link("del", index=0, group=group)
    for port in state.host_ports + [state.bridge]:
        for index in root.link_lookup(ifname=port):
            try:
                root.link("del", index=index)
            except NetlinkError as exc:
                if exc.code != 19:  # ENODEV: gone with its peer meanwhile
                    problems.append(f"link {port}: {exc.args[1]}")


def _add_veth(root: IPRoute, name: str, index: int, ns_fd: int,
              peer: str, peer_index: int, peer_ns_fd: int | None) -> None:
    """One RTM_NEWLINK creating both ends, each in its namespace with its ifindex."""
    peer_attrs: list[tuple[str, object]] = [("IFLA_IFNAME", peer)]
    if peer_ns_fd is not None:
        peer_attrs.append(("IFLA_NET_NS_FD", peer_ns_fd))
    msg = ifinfmsg()
    msg["index"] = index
    msg["attrs"] = [
        ("IFLA_IFNAME", name),
        ("IFLA_NET_NS_FD", ns_fd),
        ("IFLA_LINKINFO", {"attrs": [
            ("IFLA_INFO_KIND", "veth"),
            ("IFLA_INFO_DATA", {"attrs": [("VETH_INFO_PEER", {"index": peer_index, "attrs": peer_attrs})]}),
        ]}),
    ]
    try:
        root.nlm_request(msg, msg_type=RTM_NEWLINK,
                         msg_flags=NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL)
    except NetlinkError as exc:
        raise LabError(f"cannot create veth {name} <-> {peer}: {exc.args[1]}") from None


def _nft(ruleset: str, check: bool = True) -> None:
    result = subprocess.run(["nft", "-f", "-"], input=ruleset, text=True, capture_output=True)
    if check and result.returncode != 0:
        raise LabError(f"nft refused the ruleset: {result.stderr.strip()}")


def run_in_namespace(ns: str, argv: list[str], stdin: str | None = None,
                     timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
    """Run a short command inside namespace NS (setns in the child; no `ip netns exec`)."""
    return subprocess.run(argv, input=stdin, text=True, capture_output=True,
                          preexec_fn=lambda: netnsutil.enter(ns), timeout=timeout)


COUNT_TIMEOUT_S = 10.0


def session_count(ns: str) -> int:
    """The sessions in namespace NS (`conntrack -C`: the kernel's counter, no dump); 0 when it cannot be
    read, as its callers only size a timeout with it and then get their base time. Through nsenter, not
    run_in_namespace: session tables are read from threads, where a preexec_fn may deadlock the child."""
    try:
        done = subprocess.run(["nsenter", f"--net={netnsutil.path(ns)}", "conntrack", "-C"],
                              capture_output=True, text=True, timeout=COUNT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    counted = done.stdout.strip()
    return int(counted) if done.returncode == 0 and counted.isdigit() else 0


def _nft_has_table(table: str) -> bool:
    result = subprocess.run(["nft", "list", "table", "inet", table], capture_output=True, text=True)
    return result.returncode == 0
