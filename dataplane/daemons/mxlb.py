"""MX load-balancing daemon (ECMP CHASH, plain ECMP, TLB): keeps the selector map in step with the SRXs.

A control plane only. It watches, over netlink in each routing-instance namespace, the carrier of
every SRX-facing link and, for ECMP, the BGP routes BIRD installs (an SRX whose next hop leaves the
watched route, after having been in it, has withdrawn; on a dual-stack lab its IPv6 next hop must be in
the watched IPv6 routes too); for TLB it takes each real-service's health
from the health monitor instead (dataplane.daemons.healthd, the JVD's Network-monitor: a process of its own
that probes from the trust instance and sends its state over a UNIX datagram socket; the last state
stays in force while the monitor restarts). It decides which SRXs are
alive, computes the selector table (dataplane.core.chash) and rewrites the nft map of every side in one
transaction per side. One table serves both sides, so a subscriber's traffic crosses the same SRX
both ways. For TLB the forwarding instance's default route exists only while an SRX is healthy.

On start it reads the programmed map back and changes nothing if nothing changed: restarting this
daemon never disturbs forwarding (the kernel keeps forwarding with the last map meanwhile).

    python -m dataplane.daemons.mxlb /run/lab/LAB/nodes/MX/mxlb.json
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import sys
import time
from collections.abc import Mapping
from ipaddress import ip_address, ip_network
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink.rtnl import RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_ROUTE, RTMGRP_LINK

from labkit import unixsock
from labkit.configs import Member, Selector, SelectorConfig
from labkit.status import (
    HealthStatus,
    MxlbCounters,
    MxlbHealthMonitor,
    MxlbHistoryEntry,
    MxlbMember,
    MxlbMemberHealth,
    MxlbProfile,
    MxlbStatus,
    write_status,
)

from ..core.chash import SelectorTable
from ..core.health import HealthState, ProfileHealth
from ..core.selector import MemberState, SelectorCore, map_commands, map_updates, pick_hop, read_map, routed_everywhere
from ..kernel.nft import Nft, NftError
from ..kernel.selcounters import SelectorCounters
from ..kernel.tcsel import TcSelector
from .daemonkit import StopFlag, exit_now, resumed

__all__ = ["Daemon", "MemberState", "main"]

IFF_UP = 0x1
IFF_LOWER_UP = 0x10000


def _open_in(ns: str, groups: int) -> IPRoute:
    from labkit import netnsutil

    with netnsutil.entered(ns):
        ipr = IPRoute()
        if groups:
            ipr.bind(groups=groups)
        return ipr


def _link_flags(ipr: IPRoute) -> dict[str, int]:
    return {link.get_attr("IFLA_IFNAME"): int(link["flags"]) for link in ipr.get_links()}


def _route_nexthops(routes: list[Any], prefix: str) -> set[str]:
    """The next hops of PREFIX's route among ROUTES (one dump of the main table of PREFIX's family),
    each written as `ipaddress` writes it (the plan's next hops are too)."""
    net = ip_network(prefix)
    hops: set[str] = set()
    for route in routes:
        dst = route.get_attr("RTA_DST")  # none for a default route
        if route["dst_len"] != net.prefixlen or (dst is not None and ip_address(dst) != net.network_address):
            continue
        gateway = route.get_attr("RTA_GATEWAY")
        if gateway:
            hops.add(str(ip_address(gateway)))
        for hop in route.get_attr("RTA_MULTIPATH") or []:
            gw = hop.get_attr("RTA_GATEWAY")
            if gw:
                hops.add(str(ip_address(gw)))
    return hops


def ipv6_standing(before: bool | None, nexthop6: str, hops6: set[str]) -> bool | None:
    """A member's IPv6 standing on a side: its IPv6 next hop in the watched IPv6 routes (HOPS6, every
    SRX's). None while no IPv6 route was ever seen; with every IPv6 route gone (the destination vanished,
    not the SRXs) the standing BEFORE is kept, as the IPv4 one is."""
    if not hops6:
        return before
    return bool(nexthop6) and str(ip_address(nexthop6)) in hops6


class Daemon(SelectorCore):
    """The selector's kernel side: netlink reads, the nft map, TLB tables and fallback route, status."""

    def __init__(self, config: SelectorConfig):
        self.config = config
        self.selectors = config.selectors
        members: dict[str, MemberState] = {}
        self.targets: dict[str, str] = {}
        self.profiles = config.profiles
        for selector in self.selectors:
            for m in selector.members:
                state = members.setdefault(m.name, MemberState(m.name, m.mark))
                if config.mode == "tlb" and state.health is None:
                    state.health = ProfileHealth({p.name: HealthState(p.failures, p.recoveries)
                                                  for p in self.profiles})
                    self.targets[m.name] = m.loopback
        super().__init__(config.order, config.buckets, config.mode, config.peers, config.restore_policy, members)
        self.nft = Nft()
        # The eBPF backend: one tc program and bucket array per side instead of the nft map.
        self.tc = {s.side: TcSelector(s.ns, s.ingress, s.hash_field, config.buckets, config.seed, s.match_prefixes,
                                      ipv6=s.dual_stack) for s in self.selectors} if config.backend == "ebpf" else {}
        self.counter_reader = SelectorCounters([config], sides={s.ns: self.tc[s.side] for s in self.selectors
                                                                if s.side in self.tc})
        self.health_sock: socket.socket | None = None
        self.mark_of = {name: state.mark for name, state in self.members.items()}
        self.name_of = {state.mark: name for name, state in self.members.items()}
        self.query = {s.side: _open_in(s.ns, 0) for s in self.selectors}
        # A link of an SRX serves every member that SRX carries (both real-services of an srg1+srg2 pair).
        self.dev_member: dict[str, dict[str, list[str]]] = {}
        for sel in self.selectors:
            devs = self.dev_member.setdefault(sel.side, {})
            for m in sel.members:
                for hop in m.hops:
                    devs.setdefault(hop.dev, []).append(m.name)
        self.member_cfg = {(sel.side, m.name): m for sel in self.selectors for m in sel.members}
        self.dev_up: dict[str, dict[str, bool]] = {sel.side: {} for sel in self.selectors}
        # TLB per pair: which SRX of the pair carries it on each side (BGP decides, see pick_hop).
        self.route_hops: dict[str, dict[str, set[str]]] = {sel.side: {} for sel in self.selectors}
        # dual-stack ECMP: (side, member) -> its IPv6 next hop in the watched IPv6 routes (`ipv6_standing`)
        self.routed6: dict[tuple[str, str], bool | None] = {}
        self.chosen: dict[str, dict[str, str]] = {sel.side: {} for sel in self.selectors}
        self.table_base = config.mark_table_base
        self.watch = {s.side: _open_in(s.ns, RTMGRP_LINK | RTMGRP_IPV4_ROUTE
                                       | (RTMGRP_IPV6_ROUTE if s.watch_prefixes6 else 0)) for s in self.selectors}
        self.fallback_route: dict[str, str | None] = {}
        self.counters: dict[str, dict[str, dict[str, int]]] = {}
        self.last_route_event = time.monotonic()
        self.last_event = 0.0
        self.last_programmed = 0.0

    # ------------------------------------------------------------ kernel reads
    def observe(self) -> None:
        for selector in self.selectors:
            side = selector.side
            ipr = self.query[side]
            flags = _link_flags(ipr)
            routes = list(ipr.get_routes(family=socket.AF_INET, table=254))
            hops: set[str] = set()
            for prefix in selector.watch_prefixes:
                hops |= _route_nexthops(routes, prefix)
            hops6: set[str] | None = None
            if selector.watch_prefixes6:
                routes6 = list(ipr.get_routes(family=socket.AF_INET6, table=254))
                hops6 = set()
                for prefix in selector.watch_prefixes6:
                    hops6 |= _route_nexthops(routes6, prefix)
            for m in selector.members:
                state = self.members[m.name]
                for hop in m.hops:
                    f = flags.get(hop.dev, 0)
                    self.dev_up[side][hop.dev] = bool(f & IFF_UP) and bool(f & IFF_LOWER_UP)
                state.carrier[side] = any(self.dev_up[side][h.dev] for h in m.hops)
                if not state.carrier[side]:
                    state.lost_carrier(time.monotonic())
                if len(m.hops) > 1:
                    self.route_hops[side][m.name] = _route_nexthops(routes, f"{m.loopback}/32")
                if hops6 is not None:  # its own standing, kept as the IPv4 one is when every route is gone
                    self.routed6[(side, m.name)] = ipv6_standing(self.routed6.get((side, m.name)), m.nexthop6, hops6)
                if not hops and side in state.routed:
                    # The watched route is gone through every SRX: the destination vanished (e.g. the
                    # subscriber gateway withdrew it), not the SRXs. Keep their standing.
                    continue
                routed6 = hops6 is None or bool(self.routed6.get((side, m.name)))
                state.set_routed(side, m.nexthop in hops and routed6, time.monotonic())
        self.routes_seen(time.monotonic())

    def programmed(self, selector: Selector) -> SelectorTable | None:
        """The map as the kernel has it now (None if it does not describe our members)."""
        if selector.side in self.tc:
            return read_map(self.tc[selector.side].read(), self.buckets, self.name_of)
        try:
            data = self.nft.json(f"list map {selector.nft_family} mxlb sel", ns=selector.ns)
        except NftError:
            return None
        for item in data.get("nftables", []):
            if "map" in item:
                return read_map(item["map"].get("elem", []), self.buckets, self.name_of)
        return None

    def absorb(self, side: str, messages: Any) -> bool:
        """Apply link events straight from the messages (the fast path: no dump needed to notice
        a carrier loss). Return True if routes changed, which needs a dump of the watched routes."""
        routes_changed = False
        for msg in messages:
            event = msg.get("event", "")
            if event in ("RTM_NEWLINK", "RTM_DELLINK"):
                dev = msg.get_attr("IFLA_IFNAME")
                flags = int(msg["flags"])
                up = event == "RTM_NEWLINK" and bool(flags & IFF_UP) and bool(flags & IFF_LOWER_UP)
                for member in self.dev_member[side].get(dev, []):
                    hops = self.member_cfg[(side, member)].hops
                    if len(hops) > 1 and self.dev_up[side].get(dev) != up:
                        # a real-service's SRX came or went: probes in flight may have gone its old way
                        self.members[member].path_moved_at = time.time()
                    self.dev_up[side][dev] = up
                    carrier = any(self.dev_up[side].get(h.dev, False) for h in hops)
                    self.members[member].carrier[side] = carrier
                    if not carrier:
                        self.members[member].lost_carrier(time.monotonic())
            elif event in ("RTM_NEWROUTE", "RTM_DELROUTE"):
                routes_changed = True
                self.route_event(time.monotonic())
        return routes_changed

    # ------------------------------------------------------------ kernel writes
    def program(self, table: SelectorTable, reason: str) -> None:
        if self.tc:
            updates = map_updates(self.table, table, self.mark_of, self.buckets)
            for side in self.tc.values():
                side.write(updates)
        for selector in self.selectors:
            commands = "" if self.tc else map_commands(self.table, table, self.mark_of, selector.nft_family)
            if commands:
                self.nft.run(commands, ns=selector.ns)
        self.last_programmed = time.time()
        if self.mode == "tlb":
            self.program_fallback(table)
        self.commit(table, reason, self.last_programmed)

    def program_hops(self) -> None:
        """TLB per pair: point each real-service's table at the SRX chosen by pick_hop."""
        for selector in self.selectors:
            side, ipr = selector.side, self.query[selector.side]
            for m in selector.members:
                if len(m.hops) < 2:
                    continue
                everywhere = routed_everywhere(
                    m.name, {other: self.member_cfg[(other, m.name)].hops for other in self.route_hops
                             if (other, m.name) in self.member_cfg}, self.dev_up, self.route_hops)
                hop = pick_hop(m.hops, self.dev_up[side], self.route_hops[side].get(m.name, set()), everywhere,
                               self.chosen[side].get(m.name))
                if hop is None:
                    self.blackhole_member(ipr, side, m)
                    continue
                if self.chosen[side].get(m.name) == hop.nexthop:
                    continue
                oif = ipr.link_lookup(ifname=hop.dev)
                try:
                    ipr.route("replace", dst="0.0.0.0", dst_len=0, table=self.table_base + (m.mark & 0xFF),
                              gateway=hop.nexthop, oif=oif[0] if oif else None)
                    if hop.nexthop6:  # dual stack: IPv6 follows the same SRX
                        ipr.route("replace", dst="::", dst_len=0, family=10, table=self.table_base + (m.mark & 0xFF),
                                  gateway=hop.nexthop6, oif=oif[0] if oif else None)
                except Exception as exc:  # noqa: BLE001 - the link went down meanwhile: next event retries
                    print(f"{time.strftime('%H:%M:%S')} {m.name} {side}: via {hop.node} failed: {exc}",
                          flush=True)
                    continue
                before = self.chosen[side].get(m.name)
                self.chosen[side][m.name] = hop.nexthop
                if before is not None:
                    self.members[m.name].path_moved_at = time.time()
                    print(f"{time.strftime('%H:%M:%S')} {m.name} {side}: now via {hop.node}", flush=True)
                    self.note(f"{m.name} {side} via {hop.node}", time.time())

    def blackhole_member(self, ipr: IPRoute, side: str, m: Member) -> None:
        """A pair with no SRX left to carry it (every link down): its table drops, so its probes fail
        and nothing is sent to it until pick_hop chooses a routed SRX again (a route kept by the
        kernel through a link without carrier would come back with the carrier, before BGP)."""
        if self.chosen[side].pop(m.name, None) is None:
            return
        self.members[m.name].path_moved_at = time.time()
        table = self.table_base + (m.mark & 0xFF)
        try:
            ipr.route("replace", dst="0.0.0.0", dst_len=0, table=table, type="blackhole")
            if m.nexthop6:
                ipr.route("replace", dst="::", dst_len=0, family=10, table=table, type="blackhole")
        except Exception as exc:  # noqa: BLE001 - logged; the next change programs the table anew
            print(f"{time.strftime('%H:%M:%S')} {m.name} {side}: blackhole failed: {exc}", flush=True)
        print(f"{time.strftime('%H:%M:%S')} {m.name} {side}: no SRX of the pair can carry it", flush=True)
        self.note(f"{m.name} {side} via none", time.time())

    def program_fallback(self, table: SelectorTable) -> None:
        """TLB: the forwarding instance's default route exists only while an SRX is healthy (the
        blackhole under it, at the highest metric, is static: with no SRX, traffic dies here)."""
        for selector in self.selectors:
            side, ipr = selector.side, self.query[selector.side]
            # The first member in service whose link is up (a route through a link that is down is
            # refused: the member's link may still be down while its health is not yet).
            first = next((m for m in selector.members if m.name in table.members()
                          and self.dev_up[side].get(m.dev, True)), None)
            want = first.nexthop if first else None
            if self.fallback_route.get(side, "?") == want:
                continue
            if first is None:
                for family, default in ((2, "0.0.0.0"), (10, "::")):
                    with contextlib.suppress(Exception):  # absent already (or no IPv6 in this lab)
                        ipr.route("del", dst=default, dst_len=0, family=family, table=self.config.fallback_table,
                                  priority=1)
            else:
                # replaced in place, never deleted first: a restarted daemon (which starts knowing no
                # route) rewrites the same route without a moment when the table has none
                oif = ipr.link_lookup(ifname=first.dev)
                try:
                    ipr.route("replace", dst="0.0.0.0", dst_len=0, table=self.config.fallback_table, priority=1,
                              gateway=first.nexthop, oif=oif[0] if oif else None)
                    if first.nexthop6:
                        ipr.route("replace", dst="::", dst_len=0, family=10, table=self.config.fallback_table,
                                  priority=1, gateway=first.nexthop6, oif=oif[0] if oif else None)
                    else:  # no IPv6 through this member: none through the one before either
                        with contextlib.suppress(Exception):  # absent already (or no IPv6 in this lab)
                            ipr.route("del", dst="::", dst_len=0, family=10, table=self.config.fallback_table,
                                      priority=1)
                except Exception as exc:  # noqa: BLE001 - its link went down meanwhile: the next change retries
                    print(f"{time.strftime('%H:%M:%S')} {side}: fallback via {first.nexthop} failed: {exc}", flush=True)
                    self.fallback_route.pop(side, None)
                    continue
            self.fallback_route[side] = want

    def read_counters(self) -> None:
        values = self.counter_reader.read()
        for selector in self.selectors:
            if selector.ns in values:
                self.counters[selector.side] = values[selector.ns]

    # ------------------------------------------------------------ health (TLB), from the monitor
    def open_health(self) -> None:
        """The socket the health monitor (dataplane.daemons.healthd) sends each round's state to."""
        self.health_sock = unixsock.bind_datagram(self.config.health_socket, blocking=False)

    def absorb_health(self) -> None:
        assert self.health_sock is not None
        while True:
            try:
                data = self.health_sock.recv(262144)
            except BlockingIOError:
                return
            with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
                self.health_report(HealthStatus.model_validate_json(data).to_dict())

    def health_report(self, report: Mapping[str, Any]) -> list[str]:
        lines = super().health_report(report)
        for line in lines:
            print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)
        return lines

    def resume_health(self) -> None:
        """Restarted after a crash: the monitor's last published state, before its next round."""
        previous = resumed(self.config.health_status_file, HealthStatus)
        if previous is not None:
            with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
                self.health_report(previous.to_dict())

    def adopt_programmed(self) -> None:
        """Start-up: take the programmed map as the current table if it is one of ours (eBPF: the
        program is put on the ingress interfaces first, with the initial table, unless it is there)."""
        for side in self.tc.values():
            side.attach(map_updates(SelectorTable(), self.initial(), self.mark_of, self.buckets))
        tables = [self.programmed(s) for s in self.selectors]
        self.observe()
        if not self.adopt(tables):
            # eBPF: whatever the array holds is not ours, rewrite it whole (nft: the ruleset has it)
            self.table = SelectorTable() if self.tc else self.initial()
            self.program(self.initial(), "initial table (programmed map missing or inconsistent)")

    def step(self, reason: str) -> bool:
        self.observe()
        return self.decide(reason)

    def decide(self, reason: str) -> bool:
        wanted = self.desired(time.monotonic())
        if wanted == self.table:
            return False
        self.program(wanted, reason)
        return True

    # ------------------------------------------------------------ status
    def write_status(self) -> None:
        members = []
        for core in self.members_status():
            name = core["name"]
            health = self.members[name].health
            members.append(MxlbMember(
                **core,
                health=None if health is None else MxlbMemberHealth(
                    up=health.up, last_result=health.last_result, probes=health.probes,
                    fail_streak=health.fail_streak, last_change=health.last_change,
                    profiles={n: MxlbProfile(up=p.up, last_result=p.last_result, probes=p.probes)
                              for n, p in health.states.items()}),
                via={side: next((h.node for h in self.member_cfg[(side, name)].hops
                                 if h.nexthop == self.chosen[side].get(name)), None)
                     for side in self.chosen if (side, name) in self.member_cfg},
                # every side of a pair real-service goes through the SRX BGP prefers (TLB per pair)
                via_settled=all(len(self.member_cfg[(side, name)].hops) < 2 or
                                self.chosen[side].get(name) in self.route_hops[side].get(name, set())
                                for side in self.chosen if (side, name) in self.member_cfg),
                counters={side: MxlbCounters.model_validate(values.get(name, {"packets": 0, "bytes": 0}))
                          for side, values in self.counters.items()}))
        status = MxlbStatus(
            node=self.config.node, mode=self.config.mode, buckets=self.buckets, pid=os.getpid(),
            updated_at=time.time(),
            last_event_at=self.last_event, last_programmed_at=self.last_programmed, changes=self.changes,
            settling=self.settling(), members=members, fallback_route=self.fallback_route,
            health_monitor=MxlbHealthMonitor(reports=self.health_reports, last_report_at=self.health_report_at)
            if self.mode == "tlb" else None,
            table=list(self.table.buckets),
            history=[MxlbHistoryEntry.model_validate(h) for h in self.history])
        write_status(self.config.status_file, status)

    # ------------------------------------------------------------ loop
    def run(self) -> None:
        stopping = StopFlag()
        wake = stopping.wakeup()
        if self.mode == "tlb":
            self.open_health()
            self.resume_health()
        self.adopt_programmed()
        self.step("start-up")
        if self.mode == "tlb":
            self.program_fallback(self.table)
            self.program_hops()
        self.read_counters()
        self.write_status()
        sockets = {ipr.fileno(): ipr for ipr in self.watch.values()}
        self.side_of = {ipr.fileno(): side for side, ipr in self.watch.items()}
        last_status = time.monotonic()
        while not stopping:
            busy = self.pending_hold or bool(self.takeover_until)
            try:
                extra = [self.health_sock] if self.health_sock is not None else []
                ready, _, _ = select.select([*sockets, *extra, wake], [], [], 0.1 if busy else 1.0)
            except InterruptedError:
                continue
            if wake in ready:
                continue  # stopping
            if time.monotonic() - last_status >= 1.0:
                self.read_counters()
                last_status = time.monotonic()
            if not ready:
                self.step("periodic check")
                if self.mode == "tlb":
                    self.program_hops()
                self.write_status()
                continue
            self.last_event = time.time()
            routes_changed = False
            # links first: a health report that came with a link event is judged knowing the path moved
            for fd in ready:
                if fd is not self.health_sock:
                    routes_changed |= self.absorb(self.side_of[fd], sockets[fd].get())
            if self.health_sock is not None and self.health_sock in ready:
                self.absorb_health()
            # Decide on what the messages said first (a lost carrier is acted on at once), then,
            # if routes moved, re-read them as a whole and decide again.
            changed = self.decide("link or health event")
            if self.mode == "tlb":
                # at once, before the routes are re-read (tens of ms): a link that went down took the
                # route of each real-service it carried out of that real-service's table, and until
                # the route through the pair's other node is in, its traffic and its health probes
                # fall through to another pair's SRX
                self.program_hops()
            if routes_changed:
                changed |= self.step("route event")
                if self.mode == "tlb":
                    self.program_hops()
            if changed:
                print(f"{time.strftime('%H:%M:%S')} selector now {self.table.counts()} "
                      f"({(self.last_programmed - self.last_event) * 1000:.2f} ms after the event)", flush=True)
            self.write_status()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m dataplane.daemons.mxlb CONFIG.json", file=sys.stderr)
        return 2
    config = SelectorConfig.read(argv[1])
    daemon = Daemon(config)
    print(f"mxlb {config.node}: mode {config.mode}, {len(daemon.members)} SRX, "
          f"{config.buckets} buckets", flush=True)
    daemon.run()
    return 0


if __name__ == "__main__":
    exit_now(main(sys.argv))
