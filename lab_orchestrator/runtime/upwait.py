"""What `lab up` waits for before it returns: a lab ready for traffic.

Each condition is announced once as a progress line when `lab up` starts waiting for it, and
recorded (`ReadyWait.waited`) so `lab up` can say what it waited for:

- every BGP session Established (each BIRD's protocols);
- the expected routes in the gateways' kernel tables;
- the TLB health-check responder listening;
- each MX selector forwarding as the lab means to (`readiness.selector_pending`); with TLB the
  health monitor is asked for its fresh rounds at once (dataplane.daemons.healthd, HEALTH_PROBE_NOW);
- the MNHA pairs in step: each node hears its peer, SRG1 roles settled, and in a pair that syncs
  sessions the session daemons answer and the initial sync is done (`readiness.mnha_pending`);
- FlexVPN routers: every HSRP group elected, one Active and one Standby (`readiness.hsrp_pending`),
  and the IKEv2 cluster's master listing every other router as a member (`readiness.clb_pending`).

- the lab's SSH server ready (its own start, looked at beside the rest).

The forwarding conditions are looked at in that order, every LOOK_S; a later one is only looked at
once the earlier ones hold. A condition that held is not looked at again (nor a BIRD whose sessions
were all Established) until every condition has held once; then all of them are looked at again in
one pass, and `lab up` returns only when that pass finds every one met.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from ipaddress import ip_network
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkDumpInterrupted

from labkit import birdctl
from labkit.contracts import (
    HEALTH_PROBE_NOW,
    HEALTH_STATUS,
    HSRP_STATUS,
    IKEV2_STATUS,
    MNHA_STATUS,
    MXLB_STATUS,
    RESPONDER_READY,
)
from labkit.status import MnhaStatus, MxlbStatus, read_status

from ..model.diagnostics import LabError
from ..plan.features import mnha
from ..plan.pipeline import LabPlan
from . import netlinkcfg, readiness, supervisor
from .state import LabState

LOOK_S = 0.02
FLEXVPN_PROCESS = "flexvpn"
# FlexVPN: the wait allows at least this many HSRP hold times (with the default timers the Standby is
# elected three hold times after the start: Listen, Speak, then Speak again once the Active is known)
HSRP_HOLDS_ALLOWED = 5


def _route_dst(route: Any, wanted: str) -> bool:
    """ROUTE's destination is WANTED (a default route has no RTA_DST)."""
    for key, value in route.get("attrs", []):
        if key == "RTA_DST":
            return ip_network(str(value)).network_address == ip_network(wanted).network_address
    return wanted in ("0.0.0.0", "::")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data


def flexvpn_configs(plan: LabPlan) -> dict[str, dict[str, Any]]:
    """Each FlexVPN router's daemon configuration (its HSRP groups, its cluster), by node."""
    out = {}
    for process in plan.processes:
        if process.name != FLEXVPN_PROCESS:
            continue
        try:
            data = json.loads(plan.files.get(str(Path(process.argv[-1]).relative_to(plan.state_dir)), ""))
        except ValueError:
            continue
        if isinstance(data, dict):
            out[process.node] = data
    return out


def hsrp_hold_s(plan: LabPlan) -> float:
    """The longest HSRP hold time of the lab's FlexVPN routers (0: none)."""
    return max([float(g.get("hold_ms", 0)) / 1000 for c in flexvpn_configs(plan).values()
                for g in c.get("groups") or []], default=0.0)


class ReadyWait:
    """Wait until PLAN's lab is ready for traffic (see the module). IPR opens a namespace's netlink
    socket (the backend's, reused)."""

    def __init__(self, plan: LabPlan, progress: Callable[[str, str], None], ipr: Callable[[str], IPRoute]):
        self.plan = plan
        self.progress = progress
        self.ipr = ipr
        self.waited: list[str] = []  # what was waited for, in order (lab up's summary)
        self._announced: set[str] = set()
        self._probe_baseline: dict[str, dict[str, int]] = {}  # MX -> TLB probe counts
        self._asked: dict[str, int] = {}  # MX -> the fewest probes heard when its monitor was last asked
        self._nodes = Path(plan.state_dir) / "nodes"
        self._held: set[str] = set()  # conditions met at an earlier look (not looked at until the final pass)
        self._established: set[str] = set()  # control sockets of BIRDs with every session Established
        self._full = False  # the final pass: every condition, every BIRD
        flexvpn = flexvpn_configs(plan)
        self._hsrp_routers = sorted(n for n, c in flexvpn.items() if c.get("groups"))
        self._clb_routers = sorted(n for n, c in flexvpn.items()
                                   if isinstance(c.get("cluster"), dict) and not c["cluster"].get("shutdown"))

    def timeout_for(self, timeout: float) -> float:
        """TIMEOUT, or more for a lab whose HSRP election takes longer with its timers."""
        return max(timeout, HSRP_HOLDS_ALLOWED * hsrp_hold_s(self.plan))

    def wait(self, state: LabState, timeout: float) -> None:
        timeout = self.timeout_for(timeout)
        deadline = time.monotonic() + timeout
        pending: list[str] = []
        while time.monotonic() < deadline:
            for record in state.processes:
                if not supervisor.alive(record):
                    raise LabError(f"{record.name} on {record.node} exited during start-up: "
                                   f"{log_tail(record.log)} (log: {record.log})")
            try:
                pending = self.pending()
            except NetlinkDumpInterrupted:  # the kernel changed mid-dump (busy host): look again
                continue
            if not pending:
                return
            time.sleep(LOOK_S)
        raise LabError(f"lab {self.plan.name} not ready after {timeout:.0f} s: " + "; ".join(pending[:6]))

    def _waiting(self, step: str, detail: str, done: str) -> None:
        """One progress line per condition `lab up` starts waiting for; DONE is what it records."""
        if step not in self._announced:
            self._announced.add(step)
            self.progress(step, detail)
            self.waited.append(done)

    def pending(self) -> list[str]:
        """What keeps the lab from being ready ([] when it is): the first unmet condition's reasons of
        the forwarding chain, and the SSH server's (it starts on its own, looked at every time). Once
        each condition has held, all are looked at again at once: [] only when they all hold together."""
        left = self._chain(full=False)
        if not left:
            left = self._chain(full=True)
        return left + self._ssh()

    def _chain(self, full: bool) -> list[str]:
        looks = {"bgp": self._bgp, "routes": self._routes, "responder": self._responder,
                 "selectors": self._selectors, "mnha": self._mnha, "flexvpn": self._flexvpn}
        self._full = full
        if full:
            self._held.clear()
        for name, look in looks.items():
            if name in self._held:
                continue
            left = look()
            if left:
                return left
            self._held.add(name)
        return []

    def _bgp(self) -> list[str]:
        plan = self.plan
        if not plan.sessions:
            return []
        self._waiting("bgp", f"waiting for {len(plan.sessions) // 2} BGP sessions",
                      f"{len(plan.sessions) // 2} BGP sessions established")
        by_socket: dict[str, set[str]] = {}
        for session in plan.sessions:
            proc = next(p for p in plan.processes if p.ns == session.ns and p.control_socket)
            by_socket.setdefault(proc.control_socket or "", set()).add(session.protocol)
        pending = []
        for sock, names in by_socket.items():
            if sock in self._established and not self._full:
                continue
            try:
                states = {p.name: p.info for p in birdctl.protocols(sock)}
            except birdctl.BirdError as exc:
                pending.append(str(exc))
                continue
            waiting = [f"{name} {states.get(name, 'missing')}" for name in sorted(names)
                       if not states.get(name, "").startswith("Established")]
            if waiting:
                self._established.discard(sock)
            else:
                self._established.add(sock)
            pending += waiting
        return pending

    def _ssh(self) -> list[str]:
        if not any(p.name == "sshd" for p in self.plan.processes):
            return []
        self._waiting("ssh", "waiting for the SSH server", "the SSH server ready")
        if (Path(self.plan.state_dir) / "ssh" / "ready").exists():
            return []
        return ["SSH server not listening yet"]

    def _routes(self) -> list[str]:
        expected = self.plan.expected_routes
        if not expected:
            return []
        self._waiting("routes", f"waiting for {len(expected)} routes at the gateways",
                      f"{len(expected)} routes at the gateways")
        pending = []
        tables: dict[tuple[str, int], list[Any]] = {}  # one dump of the main table per namespace and family
        for route in expected:
            net = ip_network(route.prefix)
            key = (route.ns, netlinkcfg.FAMILY[net.version])
            if key not in tables:
                tables[key] = list(self.ipr(route.ns).get_routes(family=key[1], table=254))
            if not any(r["dst_len"] == net.prefixlen and _route_dst(r, str(net.network_address))
                       for r in tables[key]):
                pending.append(f"route {route.prefix} missing in {route.ns}")
        return pending

    def _responder(self) -> list[str]:
        if not any(p.name == "responder" for p in self.plan.processes):
            return []
        if (Path(self.plan.state_dir) / RESPONDER_READY).exists():
            return []
        return ["health-check responder not listening yet"]

    def _selectors(self) -> list[str]:
        """Each MX selector forwards as the lab means to; the first time everything else is ready,
        the TLB probe counts are the baseline fresh probes count from."""
        pending = []
        srg1_peers = mnha.srg1_peers(self.plan.state_dir)
        for node in sorted({p.node for p in self.plan.processes if p.name == "mxlb"}):
            selector = read_status(self._nodes / node / MXLB_STATUS, MxlbStatus)
            if selector is not None and node not in self._probe_baseline:
                self._probe_baseline[node] = readiness.probe_counts(selector)
                if selector.mode == "tlb":
                    self._waiting(f"health {node}", f"{node}: waiting for health checks on the reachable lab",
                                  f"{node}: fresh health checks, every real-service up in its table")
                else:
                    self._waiting(f"selector {node}", f"{node}: waiting for every SRX in service in the "
                                  "selector's table", f"{node}: every SRX in service in its selector table")
            left = readiness.selector_pending(node, selector, self._probe_baseline.get(node), srg1_peers)
            if left and selector is not None and selector.mode == "tlb":
                self._probe_now(node, selector)
            pending += left
        return pending

    def _probe_now(self, node: str, selector: MxlbStatus) -> None:
        """Ask NODE's health monitor for a round of every profile now, instead of waiting up to an
        interval for each of the fresh rounds: once at the baseline, again each time a round asked
        for has reached the selector (the fewest probes heard of any member and profile grew)."""
        heard = min(readiness.probe_counts(selector).values(), default=0)
        if node in self._asked and heard <= self._asked[node]:
            return
        health = _read(self._nodes / node / HEALTH_STATUS)
        if health is None or not health.get("pid"):
            return  # not started yet: it has not blocked the signal (its first status file says it has)
        try:
            os.kill(int(health["pid"]), getattr(signal, HEALTH_PROBE_NOW))
        except (OSError, ValueError):
            return
        self._asked[node] = heard

    def _mnha(self) -> list[str]:
        pairs = [list(p) for p in self.plan.mnha]
        if not pairs:
            return []
        self._waiting("mnha", f"waiting for {len(pairs)} MNHA pairs in step (peer heard, roles, initial sync)",
                      f"{len(pairs)} MNHA pairs in step (peer heard, SRG1 roles settled, initial sync done)")
        statuses = {node: read_status(self._nodes / node / MNHA_STATUS, MnhaStatus) for pair in pairs for node in pair}
        return readiness.mnha_pending(pairs, statuses, set())

    def _flexvpn(self) -> list[str]:
        if self._hsrp_routers:
            self._waiting("hsrp", f"waiting for the HSRP election ({len(self._hsrp_routers)} routers)",
                          "HSRP elected (one Active and one Standby per group)")
            pending = readiness.hsrp_pending({n: _read(self._nodes / n / HSRP_STATUS) for n in self._hsrp_routers},
                                             set())
            if pending:
                return pending
        if len(self._clb_routers) > 1:
            self._waiting("clb", "waiting for the IKEv2 cluster's master to list its members",
                          "IKEv2 cluster formed (its master lists every member)")
            return readiness.clb_pending({n: _read(self._nodes / n / IKEV2_STATUS) for n in self._clb_routers},
                                         set())
        return []


def log_tail(log: str, lines: int = 3) -> str:
    try:
        return " | ".join(Path(log).read_text().strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
