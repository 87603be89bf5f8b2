"""Each measured flow's session in each SRX, looked up by its 5-tuple (ctnetlink GET), not dumped.

The kernel keeps one session hash for every namespace, and a dump in one namespace (`conntrack -L`)
walks all of it with the CPU's softirqs off until a message is full. With a million background
sessions (`--sessions`) a namespace that holds few of them (an SRX just powered off) makes one call
walk every namespace's sessions: hundreds of milliseconds in which that CPU neither runs the senders
nor forwards, so the flows being measured fall behind. A lookup by tuple is one hash bucket, whatever
the table holds: the readings cost what the flows are, not what the tables are.

One netlink socket per SRX namespace, opened once from a thread that entered the namespace (a socket
stays in the namespace it was created in; the thread's move does not touch the rest of the process).
"""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from ..model.diagnostics import LabError

UDP = 17


class FlowTuple(Protocol):
    """What a measured flow (`dataplane.traffic.frames.Flow`) gives to find its session."""

    @property
    def src(self) -> str: ...

    @property
    def dst(self) -> str: ...

    @property
    def sport(self) -> int: ...

    @property
    def dport(self) -> int: ...


def packets_of(message: Any) -> int:
    """Packets of both directions of the session in a ctnetlink answer (0 when the kernel does not
    count: `nf_conntrack_acct` off)."""
    total = 0
    for name in ("CTA_COUNTERS_ORIG", "CTA_COUNTERS_REPLY"):
        counters = message.get_attr(name)
        if counters is not None:
            total += int(counters.get_attr("CTA_COUNTERS_PACKETS") or 0)
    return total


def _open_in(ns: str) -> dict[int, Any]:
    """NFCTSockets created inside namespace NS, one per address family (the request's header names
    the family the kernel reads the tuple in)."""
    from pyroute2.netlink.nfnetlink.nfctsocket import NFCTSocket

    from labkit import netnsutil

    made: dict[str, Any] = {}

    def enter_and_open() -> None:
        try:
            netnsutil.enter(ns)  # this thread only, and it ends here
            made["sockets"] = {family: NFCTSocket(nfgen_family=family)
                               for family in (socket.AF_INET, socket.AF_INET6)}
        except OSError as exc:
            made["error"] = exc

    thread = threading.Thread(target=enter_and_open, name="flowlookup-open")
    thread.start()
    thread.join()
    if "error" in made:
        raise LabError(f"cannot open a conntrack socket in {netnsutil.path(ns)}: {made['error']}")
    sockets: dict[int, Any] = made["sockets"]
    return sockets


class FlowCounters:
    """Per SRX (name -> namespace), the packets each flow's session has counted there."""

    def __init__(self, namespaces: dict[str, str]):
        self.sockets: dict[str, dict[int, Any]] = {}
        try:
            for node, ns in namespaces.items():
                self.sockets[node] = _open_in(ns)
        except BaseException:
            self.close()
            raise

    def read(self, flows: Sequence[FlowTuple]) -> dict[tuple[str, int], dict[str, int]]:
        """(source address, source port) -> {srx: packets} for each flow with a session on that SRX
        (the same shape as `sessions.udp_counts`)."""
        from pyroute2.netlink.exceptions import NetlinkError
        from pyroute2.netlink.nfnetlink.nfctsocket import NFCTAttrTuple

        counts: dict[tuple[str, int], dict[str, int]] = {}
        for node, by_family in self.sockets.items():
            for flow in flows:
                family = socket.AF_INET6 if ":" in flow.src else socket.AF_INET
                sock = by_family[family]
                wanted = NFCTAttrTuple(family=family, saddr=flow.src, daddr=flow.dst, proto=UDP,
                                       sport=flow.sport, dport=flow.dport)
                try:
                    answer = sock.entry("get", tuple_orig=wanted)
                except NetlinkError as exc:
                    if exc.code == errno.ENOENT:  # no session for it on this SRX
                        continue
                    raise LabError(f"conntrack lookup on {node} failed: {exc}") from None
                if answer:
                    counts.setdefault((flow.src, flow.sport), {})[node] = packets_of(answer[0])
        return counts

    def close(self) -> None:
        for by_family in self.sockets.values():
            for sock in by_family.values():
                sock.close()
        self.sockets = {}

    def __enter__(self) -> FlowCounters:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
