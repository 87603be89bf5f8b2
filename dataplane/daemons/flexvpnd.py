"""FlexVPN router daemon: HSRP + IKEv2 cluster (CLB) + IKEv2 gateway in one process per router.

A control plane only; the kernel forwards. One single-threaded event loop (dataplane.daemons.evloop):

* HSRP (dataplane.core.hsrp; a group's sockets and VIP in dataplane.daemons.flexvpn_hsrp) per configured
  group: hellos over UDP 1985 to 224.0.0.2 from the interface address, TTL 1; the virtual IP
  (dataplane.kernel.vip) is added to a macvlan with the virtual MAC on becoming Active (then gratuitous
  ARP) and removed on leaving Active; interface carrier is watched over netlink (down: the group
  goes to Init).
* CLB (dataplane.core.clb; master and member in dataplane.daemons.flexvpn_clb): the Active router of the
  cluster's standby group is the master; it listens on TCP `port` and keeps the members' loads;
  the others connect to the VIP, send hellos and load updates; a member silent for the hold time
  is dropped; a member that loses its master reconnects.
* IKEv2 (dataplane.ikev2.gateway) on UDP 500 and 4500: the master redirects new clients that
  support it to the least-loaded gateway; everyone serves the clients that reach it.

Status: `hsrp-status.json` and `ikev2-status.json` in the node's folder, rewritten on every change
and at least once a second.

    python -m dataplane.daemons.flexvpnd /run/lab/LAB/nodes/NODE/flexvpn.json
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

from labkit.configs import ClusterConfig, FlexvpnConfig
from labkit.flexstatus import ClbStatus, GatewayStatus, HsrpGroupStatus, HsrpStatus
from labkit.status import write_status

from ..core import hsrp
from ..kernel.vip import IFF_RUNNING, IFF_UP, LinkMonitor, Rtnl, link_flags, link_index
from .daemonkit import exit_now, resumed
from .evloop import Loop
from .flexvpn_clb import Cluster
from .flexvpn_hsrp import HsrpGroup, log


# ------------------------------------------------------------------------------------------ daemon
class Daemon:
    def __init__(self, config: FlexvpnConfig):
        self.config = config
        self.loop = Loop()
        self.rtnl = Rtnl()
        self.counters: dict[str, int] = {"hsrp_malformed": 0, "clb_malformed": 0, "ike_malformed": 0}
        self.groups = [HsrpGroup(self, spec) for spec in config.groups]
        cluster_spec = config.cluster
        self.cluster: Cluster | None = None
        if cluster_spec is not None:
            group = next((g for g in self.groups if g.spec.name == cluster_spec.standby_group), None)
            self.cluster = Cluster(self, cluster_spec, group)
        self.ike: Any = None
        if config.ikev2 is not None:
            from ..ikev2.service import IkeService

            self.ike = IkeService(self, config.ikev2)
        self.monitor: LinkMonitor | None = None
        self.cpu_samples: deque[tuple[float, float]] = deque(maxlen=8)
        self.resident = 0
        self._dirty = True
        self.started = time.time()

    # ---------------------------------------------------------------- load inputs
    def sample_cpu(self) -> None:
        """Once a second: CPU time used (for the 5 s average) and resident memory (for the load)."""
        times = os.times()
        self.cpu_samples.append((self.loop.time(), times.user + times.system))
        try:
            self.resident = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            self.resident = 0
        self.loop.call_later(1.0, self.sample_cpu)

    def cpu_percent(self) -> float:
        """CPU of this router (its daemon) over about the last 5 s, % of one core."""
        if len(self.cpu_samples) < 2:
            return 0.0
        now, used = self.cpu_samples[-1]
        old = next((s for s in self.cpu_samples if now - s[0] <= 5.5), self.cpu_samples[0])
        span = now - old[0]
        return 0.0 if span <= 0 else min(100.0, 100.0 * (used - old[1]) / span)

    def memory_percent(self, spec: ClusterConfig | None) -> float:
        """Resident memory of this router (its daemon) in % of the router's memory (`memory_mib`)."""
        memory_mib = spec.memory_mib if spec is not None and spec.memory_mib else 512
        return min(100.0, 100.0 * self.resident / (memory_mib * 1024 * 1024))

    def crypto_counts(self) -> dict[str, int]:
        if self.ike is None:
            return {"ike": 0, "ipsec": 0, "half_open": 0, "arrivals": 0}
        counts: dict[str, int] = self.ike.counts()
        return counts

    # ---------------------------------------------------------------- events between parts
    def hsrp_changed(self, group: HsrpGroup) -> None:
        if self.cluster is not None and self.cluster.group is group:
            self.cluster.refresh_role()
        self.status_dirty()

    def crypto_changed(self) -> None:
        if self.cluster is not None:
            self.cluster.crypto_changed()
        self.status_dirty()

    def admits(self) -> bool:
        """May this gateway take a new IKE SA? Not while overloaded with the cluster's strict_overload."""
        return self.cluster is None or not self.cluster.strict or not self.cluster.overloaded_self()

    def redirect_target(self, local_address: str) -> str | None:
        """Where the cluster master sends a client that reached LOCAL_ADDRESS (None: serve here)."""
        if self.cluster is None or self.cluster.role != "master" or local_address != self.cluster.cluster_ip:
            return None
        choice = self.cluster.choose()
        if choice is None or choice == self.cluster.address:
            return None
        return choice

    # ---------------------------------------------------------------- status
    def status_dirty(self) -> None:
        self._dirty = True

    def write_status(self) -> None:
        self._dirty = False
        wall = time.time()
        base: dict[str, Any] = {"node": self.config.node, "pid": os.getpid(), "updated_at": wall,
                                "started_at": self.started}
        if self.config.hsrp_status and self.groups:
            groups = [HsrpGroupStatus.model_validate(g.status(wall)) for g in self.groups]
            hsrp_status = HsrpStatus(**base, groups=groups, counters=dict(self.counters))
            write_status(self.config.hsrp_status, hsrp_status, indent=1)
        if self.config.ikev2_status and (self.cluster is not None or self.ike is not None):
            status = GatewayStatus(
                **base, cluster=ClbStatus.model_validate(self.cluster.status(wall)) if self.cluster else None,
                warnings=list(self.config.warnings), counters=dict(self.counters),
                cpu=round(self.cpu_percent(), 2), memory=round(self.memory_percent(self.config.cluster), 2),
                **(self.ike.status(wall) if self.ike is not None else {}))
            write_status(self.config.ikev2_status, status, indent=1)

    def status_tick(self) -> None:
        self.write_status()
        self.loop.call_later(1.0, self.status_tick)

    def flush_status(self) -> None:
        if self._dirty:
            self.write_status()
        self.loop.call_later(0.05, self.flush_status)

    # ---------------------------------------------------------------- links
    def links(self) -> None:
        assert self.monitor is not None
        events = self.monitor.read()
        for group in self.groups:
            index = link_index(group.ifname)
            if any(i == -1 or i == index for i, _ in events):
                flags = link_flags(group.ifname)
                group.link_event(bool(flags & IFF_UP) and bool(flags & IFF_RUNNING))

    # ---------------------------------------------------------------- run
    def start(self) -> None:
        for warning in self.config.warnings:
            log(warning.replace("\n", " "))
        self.monitor = LinkMonitor()
        self.loop.watch(self.monitor, selectors.EVENT_READ, lambda _m: self.links())
        previous = resumed(self.config.hsrp_status, HsrpStatus) if self.config.hsrp_status else None
        was_active = {(g.interface, g.group) for g in (previous.groups if previous else [])
                      if g.state == "Active" and g.vip_owned}
        for group in self.groups:
            flags = link_flags(group.ifname)
            carrier = bool(flags & IFF_UP and flags & IFF_RUNNING)
            resume = carrier and (group.alias, group.machine.config.group) in was_active \
                and link_index(group.vip.name) is not None
            if resume:  # restarted after a crash while Active: the macvlan still holds the VIP
                group.vip.owned = True
            else:
                try:
                    group.vip.prepare()
                except OSError as exc:
                    log(f"cannot prepare {group.vip.name} on {group.ifname}: {exc}")
            group.open()
            if resume:
                log(f"{group.alias} group {group.machine.config.group}: resumed as Active after a restart")
                group.open_vmac()
                group.apply(group.machine.resume_active(self.loop.time()))
            elif carrier:
                group.apply(group.machine.enable(self.loop.time()))
            else:
                log(f"{group.alias}: interface down, group {group.machine.config.group} stays in Init")
        if self.ike is not None:
            self.ike.open()
        if self.cluster is not None:
            self.cluster.refresh_role()
        self.sample_cpu()
        self.status_tick()
        self.flush_status()

    def stop(self) -> None:
        """Graceful stop: Resign, give the VIP back, say bye to the cluster."""
        now = self.loop.time()
        for group in self.groups:
            if group.machine.state is not hsrp.State.INIT:
                group.apply(group.machine.disable(now))
            group.release_vip()
            group.vip.remove()
            group.close()
        if self.cluster is not None:
            self.cluster.stop_member()
            self.cluster.stop_master()
        if self.ike is not None:
            self.ike.close()
        self.write_status()

    def run(self) -> None:
        def on_term(signum: int, frame: object) -> None:
            self.loop.stop()

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        self.start()
        try:
            self.loop.run()
        finally:
            self.stop()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m dataplane.daemons.flexvpnd CONFIG.json", file=sys.stderr)
        return 2
    config = FlexvpnConfig.read(argv[1])
    daemon = Daemon(config)
    groups = ", ".join(f"{g.alias} group {g.machine.config.group} VIP {g.vip.address} priority "
                       f"{g.machine.config.priority}" for g in daemon.groups)
    log(f"flexvpnd {config.node}: HSRP [{groups or 'none'}], cluster "
        f"{'on' if daemon.cluster else 'off'}, IKEv2 {'on' if daemon.ike else 'off'}")
    try:
        daemon.run()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            log(f"address in use: {exc}")
            return 1
        raise
    return 0


if __name__ == "__main__":
    exit_now(main(sys.argv))
