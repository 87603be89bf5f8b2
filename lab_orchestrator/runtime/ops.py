"""Operations on a running lab (netns backend): power a node off and on, fail and restore links,
restart daemons. The failure events of `events.py` are made of these.

Power off means the node vanishes at once: every interface of every namespace of the node goes
down (its peers see carrier loss) and its daemons are SIGKILLed. Power on brings it back as after a
boot: its sessions (conntrack) and the routes its routing daemon installed are forgotten while its
links are still down, then links up, the plan's static routes and nft rulesets applied again,
daemons started again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from labkit import netnsutil, unixsock
from labkit.contracts import IKEV2_STATUS, SRD_STATUS
from labkit.flexstatus import GatewayStatus
from labkit.status import SrdStatus, read_status

from .. import kinds
from ..model.diagnostics import LabError, did_you_mean
from ..plan.features import mnha
from ..plan.pipeline import LabPlan
from . import supervisor
from .state import LabState

RTPROT_BIRD = 12


def load_plan(state: LabState) -> LabPlan:
    root = Path(state.state_dir)
    plan = LabPlan.from_json((root / "plan.json").read_text())
    for ruleset in plan.rulesets:
        plan.files[ruleset.file] = (root / ruleset.file).read_text()
    return plan


def _node_plan(plan: LabPlan, node: str) -> list[str]:
    for n in plan.nodes:
        if n.name == node:
            return n.namespaces
    raise LabError(f"lab {plan.name} has no node {node}{did_you_mean(node, [n.name for n in plan.nodes])}")


def _socket(ns: str) -> IPRoute:
    with netnsutil.entered(ns):
        return IPRoute()


def set_links(ns: str, up: bool, only: set[str] | None = None) -> list[str]:
    changed = []
    with _socket(ns) as ipr:
        for link in ipr.get_links():
            name = link.get_attr("IFLA_IFNAME")
            if name == "lo" or (only is not None and name not in only):
                continue
            info = link.get_attr("IFLA_LINKINFO")
            if up and info is not None and info.get_attr("IFLA_INFO_KIND") == "macvlan":
                continue  # an HSRP VIP: its daemon brings it up when (and if) it is active again
            ipr.link("set", index=link["index"], state="up" if up else "down")
            changed.append(name)
    return changed


def stop_processes(state: LabState, node: str, kill: bool = True,
                   names: set[str] | None = None) -> list[supervisor.ProcessRecord]:
    """Stop a node's daemons (or those named) on purpose: the supervisor marks them intentionally
    down before signalling, so it does not restart them (KILL: SIGKILL at once, a power cut)."""
    records = [r for r in state.processes if r.node == node and (names is None or r.name in names)]
    client = supervisor.Supervisor(state.state_dir)
    if client.running():
        client.stop(procs=[(r.node, r.name) for r in records], kill=kill)
    else:
        supervisor.terminate([r.pid for r in records if supervisor.alive(r)])
    return records


def start_processes(state: LabState, records: list[supervisor.ProcessRecord], recover: bool = False) -> None:
    """Start these daemons again: in recovery with RECOVER (BIRD in graceful restart, the others
    resuming from their status files), as after a boot without."""
    client = supervisor.Supervisor(state.state_dir)
    fresh = {}
    # The daemons started before one that cannot start run: their records (pid, argv) reach the lab's
    # record on disk whatever happens to the next, so `lab down`, `lab status` and a later power-off or
    # restart find them (as netns.NetnsBackend._start_processes does with PartialStart).
    try:
        for record in records:
            argv, env = list(record.argv), None
            if recover:
                argv, env = supervisor.recovery(argv)
            elif "-R" in argv:
                argv.remove("-R")
            fresh[(record.node, record.name)] = client.spawn(record.node, record.name, record.ns, argv,
                                                             record.log, env=env, restart=record.restart,
                                                             stale_files=record.stale_files)
    finally:
        state.processes = [fresh.get((r.node, r.name), r) for r in state.processes]
        state.save()


def crash_daemon(state: LabState, node: str, name: str, timeout: float = 10.0) -> float | None:
    """kill -9 of one daemon, as a crash (not through the supervisor, which restarts it): return the
    seconds until it ran again, None if it did not within TIMEOUT."""
    client = supervisor.Supervisor(state.state_dir)
    if not client.running():
        raise LabError(f"the supervisor of lab {state.name} is not running: nothing would restart {name}")
    slot = next((s for s in client.table() if s.key == (node, name)), None)
    if slot is None or not slot.restart:
        known = sorted(s.name for s in client.table() if s.node == node and s.restart)
        raise LabError(f"{node} runs no daemon {name} (its daemons: {', '.join(known) or 'none'})")
    if not supervisor.slot_alive(slot):
        raise LabError(f"{node}/{name} is not running now ({slot.state}); nothing to crash")
    killed_at = time.monotonic()
    os.kill(slot.pid, signal.SIGKILL)
    deadline = killed_at + timeout
    while time.monotonic() < deadline:
        now = next((s for s in client.table() if s.key == (node, name)), None)
        if now is not None and now.pid != slot.pid and supervisor.slot_alive(now):
            state.refresh_processes()
            state.save()
            return time.monotonic() - killed_at
        time.sleep(0.02)
    return None


def power_off(state: LabState, plan: LabPlan, node: str, *more: str) -> None:
    """NODE (and MORE, at the same moment: a whole MNHA pair) loses power."""
    nodes = [node, *more]
    for name in nodes:
        if name in state.down_nodes:
            raise LabError(f"{name} is already powered off")
    namespaces = {name: _node_plan(plan, name) for name in nodes}
    # A box that loses power drops carrier before anything it runs can say goodbye: links first, so the
    # neighbours detect the failure by carrier loss, never by a BGP session closed by a dying daemon.
    # Boxes that lose power together all drop carrier before any daemon is stopped.
    # A node is recorded down as soon as its links are: whatever fails after that (a daemon that does
    # not stop), the record on disk says so and the restore (power_on) brings it back.
    # Its sessions and learned routes are forgotten at power-on, before its links come up: with no link
    # they can reach nothing, and emptying a table of a million sessions takes seconds that would
    # otherwise stand between the event and everything measured after it.
    try:
        for name in nodes:
            for ns in namespaces[name]:
                set_links(ns, up=False)
            state.down_nodes.append(name)
        for name in nodes:
            stop_processes(state, name, kill=True)
    finally:
        state.save()


# Emptying a session table takes longer the more it holds, and longer still on a machine busy with the
# event's traffic: a flush of about 2,000,000 sessions did not end within 10 s on 2 CPUs.
FLUSH_BASE_S = 10.0
FLUSH_S_PER_ENTRY = 1e-4


def flush_timeout(entries: int) -> float:
    """Seconds allowed to empty a session table of ENTRIES: 10 s and 1 s per 10,000."""
    return FLUSH_BASE_S + max(0, entries) * FLUSH_S_PER_ENTRY


def forget_node_state(ns: str) -> None:
    """A box that powers on has no sessions and no learned routes (run while its links are down)."""
    import subprocess

    from .netns import run_in_namespace, session_count

    entries = session_count(ns)
    timeout = flush_timeout(entries)
    try:
        run_in_namespace(ns, ["conntrack", "-F"], timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LabError(f"{ns}: emptying its {entries} sessions (conntrack -F) did not end within {timeout:.0f} s; "
                       "the node is still powered off, its links down (`lab restore` tries again)") from None
    with _socket(ns) as ipr:
        for route in ipr.get_routes(family=2, table=254, proto=RTPROT_BIRD):
            with contextlib.suppress(NetlinkError):
                ipr.route("del", **_route_key(route))


def _route_key(route: Any) -> dict[str, object]:
    """The fields that name a route (a pyroute2 rtmsg) for its deletion."""
    return {"dst": route.get_attr("RTA_DST") or "0.0.0.0", "dst_len": route["dst_len"],
            "table": route["table"], "proto": route["proto"]}


def power_on(state: LabState, plan: LabPlan, node: str, *more: str) -> None:
    """NODE (and MORE: the rest of an MNHA pair) powers on. Every one's tables are emptied, links still
    down, before any link comes up: a pair whose second table cannot be emptied stays down whole."""
    nodes = [node, *more]
    for name in nodes:
        if name not in state.down_nodes:
            raise LabError(f"{name} is not powered off")
    namespaces = {name: set(_node_plan(plan, name)) for name in nodes}
    for name in nodes:
        for ns in sorted(namespaces[name]):  # a box boots empty; its links come up after that
            forget_node_state(ns)
    for name in nodes:
        for ns in sorted(namespaces[name]):
            set_links(ns, up=True)
        reapply(plan, namespaces[name])
        boot = mnha.boot_role(plan, name)  # an MNHA node waits for its peer's sessions before drawing traffic
        if boot is not None:
            Path(plan.state_dir, mnha.role_file(plan, name)).write_text(boot)
        records = [r for r in state.processes if r.node == name]
        state.down_nodes.remove(name)
        start_processes(state, records, recover=False)


def reapply(plan: LabPlan, namespaces: set[str]) -> None:
    """Static routes and rulesets of the plan, as at boot (links going down removed the routes)."""
    from dataplane.kernel.nft import Nft

    from .netns import NetnsBackend

    backend = NetnsBackend()
    subset = LabPlan.from_json(plan.to_json(), plan.files)
    subset.routes = [r for r in plan.routes if r.ns in namespaces]
    subset.rules = []  # policy rules do not depend on links: they are still there
    try:
        backend.apply_routes(subset, tolerate_existing=True)
    finally:
        backend.close()
    nft = Nft()
    try:
        for ruleset in plan.rulesets:
            if ruleset.ns in namespaces:
                nft.run(plan.files[ruleset.file], ns=ruleset.ns)
    finally:
        nft.close()


def link_peers(plan: LabPlan, node: str, peer: str) -> list[tuple[str, str]]:
    """(namespace, interface) of both ends of every link between NODE and PEER."""
    ends = []
    for veth in plan.veths:
        if {veth.a.node, veth.b.node} == {node, peer}:
            ends += [(veth.a.ns, veth.a.name), (veth.b.ns, veth.b.name)]
    if not ends:
        raise LabError(f"no link between {node} and {peer}")
    return ends


def links_down(state: LabState, plan: LabPlan, node: str, peer: str) -> None:
    for ns, name in link_peers(plan, node, peer):
        set_links(ns, up=False, only={name})
    state.down_links.append([node, peer])
    state.save()


def links_up(state: LabState, plan: LabPlan, node: str, peer: str) -> None:
    ends = link_peers(plan, node, peer)
    for ns, name in ends:
        set_links(ns, up=True, only={name})
    reapply_routes_only(plan, {ns for ns, _ in ends})
    state.down_links = [pair for pair in state.down_links if sorted(pair) != sorted([node, peer])]
    state.save()


BLACKHOLE_TABLE = "lab_blackhole"


def blackhole_ruleset(devs: list[str]) -> str:
    """The nftables table that drops every packet in and out of DEVS (forwarded or the node's own)."""
    names = ", ".join(f'"{name}"' for name in devs)
    return (f"table inet {BLACKHOLE_TABLE} {{\n"
            f"  chain drop_in {{ type filter hook prerouting priority -400; iifname {{ {names} }} drop; }}\n"
            f"  chain drop_out {{ type filter hook postrouting priority 400; oifname {{ {names} }} drop; }}\n"
            f"  chain drop_local {{ type filter hook output priority -400; oifname {{ {names} }} drop; }}\n"
            f"}}\n")


def blackhole(state: LabState, plan: LabPlan, node: str, peer: str, on: bool) -> None:
    """Drop every packet on NODE's links to PEER inside NODE, both ways, leaving their carrier up (a path
    that stops forwarding: only a liveness protocol notices); on=False removes the drop."""
    from dataplane.kernel.nft import Nft, NftError

    ends = [(ns, name) for ns, name in link_peers(plan, node, peer) if ns in plan.node(node).namespaces]
    nft = Nft()
    try:
        for ns in sorted({ns for ns, _ in ends}):
            with contextlib.suppress(NftError):
                nft.run(f"delete table inet {BLACKHOLE_TABLE}", ns=ns)
            if on:
                nft.run(blackhole_ruleset([name for n, name in ends if n == ns]), ns=ns)
    finally:
        nft.close()
    pair = [node, peer]
    state.blackholed_links = [p for p in state.blackholed_links if sorted(p) != sorted(pair)] + ([pair] if on else [])
    state.save()


def reapply_routes_only(plan: LabPlan, namespaces: set[str]) -> None:
    from .netns import NetnsBackend

    backend = NetnsBackend()
    subset = LabPlan.from_json(plan.to_json())
    subset.routes = [r for r in plan.routes if r.ns in namespaces]
    subset.rules = []
    try:
        backend.apply_routes(subset, tolerate_existing=True)
    finally:
        backend.close()


def restart(state: LabState, node: str, names: set[str] | None, recover: bool) -> list[str]:
    """Kill the node's daemons (or those named) and start them again."""
    records = stop_processes(state, node, kill=True, names=names)
    if not records:
        raise LabError(f"{node} runs no such daemon")
    start_processes(state, records, recover=recover)
    return [r.name for r in records]


def wait(seconds: float) -> None:
    time.sleep(seconds)


def first_mx(plan: LabPlan, srx: str) -> str:
    """The MX an SRX's "MX-SRX link" failure cuts (its first MX, in link order)."""
    for veth in plan.veths:
        for end, other in ((veth.a, veth.b), (veth.b, veth.a)):
            if end.node == srx and any(n.name == other.node and kinds.get(n.kind).load_balancer for n in plan.nodes):
                return other.node
    raise LabError(f"{srx} has no link to an MX")


def default_daemon(state: LabState, node: str) -> str:
    """The daemon a `daemon-crash` hits when none is named: the node's first one that is not BIRD
    (the MX selector, an SRX's mnhad...), else its first BIRD."""
    names = [r.name for r in state.processes if r.node == node and r.restart]
    if not names:
        raise LabError(f"{node} runs no supervised daemon")
    return next((n for n in names if not n.startswith("bird")), names[0])


def service_group(plan: LabPlan, srx: str) -> list[str]:
    """What a next-hop deletion or addition takes out of, or puts into, service with SRX: its whole
    MNHA pair (the JVD's "adding/deleting a scale-out SRX MNHA pair"), else the SRX alone."""
    return list(next((p for p in plan.mnha if srx in p), [srx]))


TLB_DAEMONS = {"restart-tlb": {"mxlb", "healthd"}, "restart-tlb-selector": {"mxlb"},
               "restart-tlb-monitor": {"healthd"}}


def inject(state: LabState, plan: LabPlan, event: str, target: str, down_time: float = 5.0,
           peer: str | None = None, daemon: str | None = None) -> str:
    """Carry out EVENT on TARGET; self-restoring events come back by themselves. Return a summary."""
    if event == "daemon-crash":  # any supervised process, the lab-wide SSH server (node _lab) too
        name = daemon or default_daemon(state, target)
        seconds = crash_daemon(state, target, name)
        if seconds is None:
            return f"{target}/{name} killed (SIGKILL); NOT running again after 10 s (see `lab status`)"
        return f"{target}/{name} killed (SIGKILL); the supervisor had it running again after {seconds:.2f} s"
    kind = {n.name: n.kind for n in plan.nodes}.get(target)
    if kind is None:
        raise LabError(f"lab {plan.name} has no node {target}{did_you_mean(target, [n.name for n in plan.nodes])}")
    if event == "srx-link-failure":
        other = peer or first_mx(plan, target)
        links_down(state, plan, target, other)
        return f"links {target} <-> {other} down"
    if event == "srx-link-blackhole":
        other = peer or first_mx(plan, target)
        blackhole(state, plan, target, other, on=True)
        return f"links {target} <-> {other} drop every packet (carrier up)"
    if event == "srd-link-failure":
        if target not in plan.srd:
            raise LabError(f"{target} is not in the lab's SRD pair")
        other = next(n for n in plan.srd if n != target)
        links_down(state, plan, target, other)
        return f"inter-MX link {target} <-> {other} down"
    if event == "srx-power-off":
        power_off(state, plan, target)
        return f"{target} powered off"
    if event == "nexthop-delete":
        group = service_group(plan, target)
        if target in state.down_nodes:
            raise LabError(f"{target} is out of service already (`lab fail {target} nexthop-add` puts it back)")
        power_off(state, plan, *[n for n in group if n not in state.down_nodes])
        return f"{'MNHA pair ' if len(group) > 1 else ''}{'/'.join(group)} out of service"
    if event == "flexvpn-member-power-off":
        members = flexvpn_members(state, plan)
        if target not in members:
            raise LabError(f"{target} is no FlexVPN cluster member now (members: {', '.join(members) or 'none'}; "
                           f"the master is the HSRP Active router)")
        power_off(state, plan, target)
        return f"FlexVPN member {target} powered off"
    if event == "nexthop-add":
        if target not in state.down_nodes:
            raise LabError(f"{target} is in service already (`lab fail {target} nexthop-delete` takes it out)")
        # an MNHA pair comes into service as a pair (as `nexthop-delete` took it out)
        added = [n for n in service_group(plan, target) if n in state.down_nodes]
        power_on(state, plan, *added)
        return f"{'/'.join(added)} in service"
    if event in ("srx-reboot", "mx-reboot"):
        power_off(state, plan, target)
        time.sleep(down_time)
        power_on(state, plan, target)
        return f"{target} rebooted ({down_time:.1f} s down)"
    if event == "mnha-pair-power-off":
        pair = next((p for p in plan.mnha if target in p), None)
        if pair is None:
            raise LabError(f"{target} is in no MNHA pair")
        power_off(state, plan, *pair)  # both nodes at once
        return f"MNHA pair {'/'.join(pair)} powered off"
    if event == "restart-routing":
        names = restart(state, target, {r.name for r in state.processes if r.node == target
                                        and r.name.startswith("bird")}, recover=True)
        return f"{target}: {', '.join(names)} restarted (graceful restart)"
    if event in TLB_DAEMONS:
        names = restart(state, target, TLB_DAEMONS[event], recover=True)
        return f"{target}: {', '.join(names)} restarted"
    if event == "srd-switchover":
        master = switchover(state, plan)
        return f"SRD switchover requested on the master {master}"
    if event == "gres":
        names = restart(state, target, None, recover=True)
        return (f"{target}: every control-plane daemon ({', '.join(names)}) restarted at once "
                f"(no second routing engine), forwarding state kept")
    raise LabError(f"event {event} cannot be injected here (see `lab events list`)")


def flexvpn_members(state: LabState, plan: LabPlan) -> list[str]:
    """The FlexVPN routers that are cluster members (not the master) now, from their daemons' status."""
    out = []
    for node in sorted({p.node for p in plan.processes if p.name == "flexvpn"}):
        status = read_status(Path(state.state_dir) / "nodes" / node / IKEV2_STATUS, GatewayStatus)
        if status is not None and status.cluster is not None and status.cluster.role == "slave" \
                and node not in state.down_nodes:
            out.append(node)
    return out


def restore(state: LabState, plan: LabPlan, target: str) -> list[str]:
    """Undo what events left undone on TARGET: power it on, bring its failed links up."""
    done = []
    pair = next((p for p in plan.mnha if target in p), [target])
    nodes = [n for n in (pair if len(pair) > 1 and all(n in state.down_nodes for n in pair) else [target])
             if n in state.down_nodes]
    if nodes:
        power_on(state, plan, *nodes)
        done += [f"{node} powered on" for node in nodes]
    for node, peer in [tuple(p) for p in state.down_links]:
        if target in (node, peer):
            links_up(state, plan, node, peer)
            done.append(f"links {node} <-> {peer} up")
    for node, peer in [tuple(p) for p in state.blackholed_links]:
        if target in (node, peer):
            blackhole(state, plan, node, peer, on=False)
            done.append(f"links {node} <-> {peer} forward again")
    return done


def srd_master(state: LabState, plan: LabPlan) -> str | None:
    for node in plan.srd:
        status = read_status(Path(state.state_dir) / "nodes" / node / SRD_STATUS, SrdStatus)
        if status is not None and status.role == "master" and node not in state.down_nodes:
            return node
    return None


def switchover(state: LabState, plan: LabPlan) -> str:
    """`request services redundancy-set id 1 switchover` on the current master MX."""
    if not plan.srd:
        raise LabError(f"lab {plan.name} has no SRD pair")
    master = srd_master(state, plan)
    if master is None:
        raise LabError("no MX is SRD master right now (see `lab redundancy`)")
    unixsock.send_datagram(Path(state.state_dir) / "nodes" / master / "srd.sock", b"switchover")
    return master
