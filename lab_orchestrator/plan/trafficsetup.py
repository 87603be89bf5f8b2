"""The two-way traffic of a lab: which host sends to which, and how the four processes are set up.

One builder for `lab events run` (children of the runner) and `lab traffic start` (daemons of the
lab's supervisor), so both send the same flows the same way. On a CGNAT lab the server only sees each
flow's NAT binding (the SRX's pool address and port): the forward receiver publishes the bindings it
sees on a FIFO and the reverse sender answers them, following a re-bind (`dataplane.traffic.binding`).

On a dual-stack lab the same hosts send IPv6 flows beside the IPv4 ones (`families`): each family has
its own four processes (`by_family`), from the hosts' `prefixes6` to the server's IPv6 prefix, with
flow ids from V6_ID_OFFSET so both families' flows stay apart in one verdict. The load is shared:
with both families each sends half the flows at half the rate (an odd count: IPv4 one more), so the
per-flow rate (the figures' resolution) and the machine's load are those of one family alone.

A lab with NAT64 (`services.nat64`) sends a third "family", NAT64 (numbered 64): IPv6 flows from the
NAT64 source prefix to the NAT64 address, which reach the server as IPv4 from the pair's NAT64 pool;
the server answers those bindings over IPv4 as it answers a CGNAT lab's, and the answers reach the
client as IPv6 again. Its forward receiver is an IPv4 one and its reverse receiver an IPv6 one;
its flow ids start at NAT64_ID_OFFSET and its source port is NAT64_SPORT, so that a receiver of
another family on the same interface and the SRX's sessions keep the flows apart.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from ipaddress import ip_network
from itertools import zip_longest
from pathlib import Path
from typing import Any

from dataplane.traffic import Receiver, Sender, make_flows, reverse_flows
from dataplane.traffic.frames import Flow, family_sizes, parse_sizes

from .. import kinds
from ..model import ipfamily
from ..model.diagnostics import BadInput, LabError
from ..model.ipfamily import NAT64
from ..model.ipfamily import name as family_name
from ..model.schema import NAT_USE_CASES
from .pipeline import LabPlan

REVERSE_ID_OFFSET = 100000
V6_ID_OFFSET = 50000  # IPv6 flows' ids start here (their reverse flows' at REVERSE_ID_OFFSET + V6_ID_OFFSET)
NAT64_ID_OFFSET = 75000  # NAT64 flows' ids start here
NAT64_SPORT = 40064  # and their source port (the IPv6 family's flows may come from the same addresses)
# each family's forward flow ids (its reverse flows': the same + REVERSE_ID_OFFSET)
ID_RANGE = {4: (0, V6_ID_OFFSET), 6: (V6_ID_OFFSET, NAT64_ID_OFFSET), NAT64: (NAT64_ID_OFFSET, REVERSE_ID_OFFSET)}
BINDINGS_FIFO = "bindings.fifo"


@dataclass
class Endpoints:
    client_ns: str
    client_iface: str
    client_prefix: str
    server_ns: str
    server_iface: str
    server_address: str
    # a mixed lab: every client prefix (SFW and NAPT44 ones), the flows drawn from each in turn;
    # empty: client_prefix alone
    client_prefixes: tuple[str, ...] = ()
    # NAT64: the server's IPv4 address the answers come from, and where they go before their
    # binding is known (an address of a NAT64 pool: only its route to the gateway is used)
    reply_from: str | None = None
    reply_to: str | None = None


def lab_families(plan: LabPlan) -> list[int]:
    """Every family PLAN's lab carries: IPv4; IPv6 with addressing.v6; NAT64 with services.nat64."""
    return [4] + ([6] if plan.dual_stack else []) + ([NAT64] if plan.nat64 is not None else [])


def families(plan: LabPlan, spec: str | None = None) -> list[int]:
    """The families a run sends: SPEC "4", "6", "64" (NAT64), "both" (IPv4 and IPv6) or "all"; None:
    every family of the lab (`lab_families`)."""
    have = lab_families(plan)
    spec = spec or "all"
    ipfamily.check_spec(spec)
    if spec in ("6", "both") and not plan.dual_stack:
        raise LabError(f"--family {spec}: this lab is IPv4 only (no addressing.v6)")
    if spec == "64" and plan.nat64 is None:
        raise LabError("--family 64: this lab has no NAT64 (no services.nat64)")
    return have if spec == "all" else [4, 6] if spec == "both" else [int(spec)]


def endpoints(plan: LabPlan, family: int = 4) -> Endpoints:
    """The subscriber host (behind the trust side) and the server host (behind the untrust side);
    FAMILY 6: their IPv6 prefixes (`prefixes6`); NAT64: the NAT64 source prefix and address (the
    server receives and answers in IPv4: `reply_from`)."""
    hosts = {n.name: n for n in plan.nodes if kinds.get(n.kind).end_host}
    ifaces = {i.node: i for i in plan.interfaces() if i.node in hosts}
    client = server = None
    for name, iface in ifaces.items():
        gw = iface.peer_node
        zone = {i.zone for i in plan.interfaces() if i.node == gw and i.zone}
        if "trust" in zone:
            client = name
        elif "untrust" in zone:
            server = name
    if client is None or server is None:
        raise LabError("this lab has no client host behind the trust side and server host behind the untrust side")
    c, s = ifaces[client], ifaces[server]
    if family == NAT64:
        if plan.nat64 is None:
            raise LabError("this lab has no NAT64 (no services.nat64)")
        pools = [n.nat64_pool for n in plan.nodes if n.nat64_pool]
        return Endpoints(c.ns, c.name, plan.nat64.source, s.ns, s.name, plan.nat64.address,
                         reply_from=plan.nat64.server, reply_to=str(ip_network(pools[0]).network_address))
    local = {r.ns: r.dst for r in plan.routes if r.kind == "local" and (":" in r.dst) == (family == 6)}
    if c.ns not in local or s.ns not in local:
        raise LabError(f"the client or the server host has no IPv{family} prefix")
    server_net = ip_network(local[s.ns])
    every = tuple(r.dst for r in plan.routes if r.kind == "local" and r.ns == c.ns and (":" in r.dst) == (family == 6))
    return Endpoints(c.ns, c.name, local[c.ns], s.ns, s.name, str(server_net.network_address + 10),
                     client_prefixes=every if plan.use_case == "mixed" and family == 4 else ())


@dataclass
class TwoWay:
    """The forward receiver and sender, and (with reverse traffic) the reverse ones."""

    flows: list[Flow]
    rx_forward: Receiver
    tx_forward: Sender
    rx_reverse: Receiver | None
    tx_reverse: Sender | None

    def jobs(self) -> list[tuple[str, str, Receiver | Sender]]:
        """(name, role, process) in start order: receivers before their senders, forward first (its
        packets open the sessions the reverse flows need)."""
        out: list[tuple[str, str, Receiver | Sender]] = [("rx-forward", "receive", self.rx_forward)]
        if self.rx_reverse is not None:
            out.append(("rx-reverse", "receive", self.rx_reverse))
        out.append(("tx-forward", "send", self.tx_forward))
        if self.tx_reverse is not None:
            out.append(("tx-reverse", "send", self.tx_reverse))
        return out


def bindings_fifo(folder: str | Path, family: int = 4) -> str:
    """A fresh FIFO in FOLDER for FAMILY's NAT bindings (its forward receiver writes, its reverse
    sender reads)."""
    path = Path(folder) / (BINDINGS_FIFO if family == 4 else f"bindings-{family_name(family).lower()}.fifo")
    path.unlink(missing_ok=True)
    os.mkfifo(path, 0o600)
    return str(path)


def two_way(ends: Endpoints, flows: int, rate: float, sizes: str, duration: float, *, reverse: bool = True,
            nat: bool = False, bindings: str | None = None, socket_mode: bool = False,
            receive_duration: float | None = None, realtime: bool = False, cpu: int | None = None,
            reverse_delay: float = 0.3, family: int = 4) -> TwoWay:
    """FLOWS flows at RATE packets/s per direction for DURATION seconds (senders). NAT (a CGNAT lab,
    with reverse traffic) needs BINDINGS, a FIFO (`bindings_fifo`): the forward receiver then reads
    frames (packet mode) to see each flow's translated source. SOCKET_MODE: receivers count what a
    UDP socket of the host gets instead of frames at its interface (the forward one stays in packet
    mode behind NAT). RECEIVE_DURATION: the receivers' own bound (None: until stopped). FAMILY 6:
    IPv6 flows (ENDS of `endpoints(plan, 6)`, never translated); NAT64: IPv6 flows answered in IPv4
    (ENDS of `endpoints(plan, NAT64)`, always translated). Each family's flow ids are its own
    (`ID_RANGE`); its receivers count only those."""
    nat = (nat and family == 4) or family == NAT64
    if nat and reverse and bindings is None:
        raise ValueError("reverse traffic through source NAT needs a bindings FIFO")
    lo, hi = ID_RANGE[family]
    learn = bindings if nat and reverse else None
    forward = client_flows(flows, ends, first_id=lo, sport=NAT64_SPORT if family == NAT64 else 40000)
    per_flow = rate / flows
    # packet mode behind NAT (the binding is in the frame) and for NAT64 always: a socket would share
    # the server's port with the IPv4 family's and take its datagrams
    packet_forward = not socket_mode or learn is not None or family == NAT64
    back = 6 if family == NAT64 else family  # the client's family, which the answers reach
    rx_f = Receiver(iface=ends.server_iface if packet_forward else None,
                    port=None if packet_forward else forward[0].dport, ns=ends.server_ns,
                    duration=receive_duration, rate_per_flow=per_flow, learn_path=learn,
                    family=4 if family == NAT64 else family, ids=(lo, hi))
    tx_f = Sender(iface=ends.client_iface, ns=ends.client_ns, flows=forward, rate=rate, sizes=sizes,
                  duration=duration, realtime=realtime, cpu=cpu)
    rx_r = tx_r = None
    if reverse:
        rx_r = Receiver(iface=None if socket_mode else ends.client_iface,
                        port=forward[0].sport if socket_mode else None, ns=ends.client_ns,
                        duration=receive_duration, rate_per_flow=per_flow, family=back,
                        ids=(lo + REVERSE_ID_OFFSET, hi + REVERSE_ID_OFFSET))
        answers = reverse_flows(forward, REVERSE_ID_OFFSET) if family != NAT64 else nat64_answers(forward, ends)
        tx_r = Sender(iface=ends.server_iface, ns=ends.server_ns, flows=answers, rate=rate,
                      sizes=sizes if family != NAT64 else translated_sizes(sizes),
                      duration=max(0.1, duration - reverse_delay), realtime=realtime, cpu=cpu,
                      learn_path=learn, learn_offset=REVERSE_ID_OFFSET, host_stack=family == NAT64)
    return TwoWay(forward, rx_f, tx_f, rx_r, tx_r)


def nat64_answers(forward: list[Flow], ends: Endpoints) -> list[Flow]:
    """The server's IPv4 answers to the NAT64 flows FORWARD: from its address (`reply_from`) and the
    flow's destination port, to a placeholder the flow's binding replaces before it is sent."""
    assert ends.reply_from is not None and ends.reply_to is not None
    return [Flow(f.flow_id + REVERSE_ID_OFFSET, ends.reply_from, ends.reply_to, f.dport, f.sport) for f in forward]


def translated_sizes(sizes: str) -> str:
    """The IPv4 frame sizes of answers that become the IPv6 frames SIZES once translated (20 bytes
    more): a tester's IPv6 sizes (`family_sizes`), each 20 bytes shorter, so the largest answer
    still fits the client's link after the translator adds its 20 bytes."""
    return ",".join(f"{size - 20}:{weight}" for size, weight in family_sizes(parse_sizes(sizes), 6))


def client_flows(count: int, ends: Endpoints, first_id: int = 0, sport: int = 40000) -> list[Flow]:
    """COUNT flows to the server: from the client prefix, or (a mixed lab) from each client prefix in
    turn (flow i from prefix i mod N), so that SFW and NAPT44 flows share every run."""
    prefixes = ends.client_prefixes or (ends.client_prefix,)
    if len(prefixes) == 1:
        return make_flows(count, prefixes[0], ends.server_address, sport=sport, first_id=first_id)
    each, left = divmod(count, len(prefixes))
    groups = [make_flows(each + (1 if i < left else 0), p, ends.server_address, sport=sport)
              for i, p in enumerate(prefixes)]
    turns = [f for turn in zip_longest(*groups) for f in turn if f is not None]
    return [replace(f, flow_id=first_id + i) for i, f in enumerate(turns)]


def shares(flows: int, fams: list[int]) -> dict[int, int]:
    """FLOWS shared between the families FAMS without losing one: as even as can be, the first
    families taking one more of a count that does not divide (7 over IPv4 and IPv6: 4 + 3). Fewer
    flows than families is a wrong argument (BadInput): a family without a flow would send nothing."""
    if flows < len(fams):
        if len(fams) == 1:
            raise BadInput(f"--flows {flows}: give at least one flow")
        names = " and ".join(family_name(f) for f in fams)
        raise BadInput(f"--flows {flows}: {names} need at least one flow each; give --flows {len(fams)} or "
                       f"more, or one family (--family 4, 6 or 64)")
    each, left = divmod(flows, len(fams))
    out = {f: each + (1 if i < left else 0) for i, f in enumerate(fams)}
    for fam, count in out.items():
        lo, hi = ID_RANGE[fam]
        if count > hi - lo:
            raise BadInput(f"--flows {flows}: {count} {family_name(fam)} flows; at most {hi - lo} per run "
                           f"(a family's flow ids are {hi - lo} wide)")
    return out


STEPS = ("rx-forward", "rx-reverse", "tx-forward", "tx-reverse")


def process_name(family: int, name: str) -> str:
    """A traffic process's name: NAME ("tx-forward", ...) for IPv4, with "-ipv6" for IPv6 and
    "-nat64" for NAT64 (they run side by side, so the names must differ)."""
    return name if family == 4 else f"{name}-{family_name(family).lower()}"


def family_of(process: str) -> int:
    """The family of a traffic process named by `process_name`."""
    return 6 if process.endswith("-ipv6") else NAT64 if process.endswith("-nat64") else 4


Job = tuple[int, str, str, Receiver | Sender]  # (family, name, role, process)


def start_steps(setups: dict[int, TwoWay]) -> list[list[Job]]:
    """The processes of every family in SETUPS, step by step (STEPS: a step's processes of every
    family start before the next step's), so that every receiver listens before any sender sends and
    every family's forward flows are under way before the reverse ones (they open the sessions)."""
    steps: list[list[Job]] = []
    for step in STEPS:
        here: list[Job] = [(fam, name, role, job) for fam, setup in setups.items()
                           for name, role, job in setup.jobs() if name == step]
        if here:
            steps.append(here)
    return steps


def translated(plan: LabPlan, family: int) -> bool:
    """Whether FAMILY's flows reach the server from an SRX's pool (their answers then follow the
    bindings): NAT64 always, IPv4 on a CGNAT or mixed lab (a mixed lab's SFW flows are their own binding)."""
    return family == NAT64 or (family == 4 and plan.use_case in NAT_USE_CASES)


def needs_bindings(plan: LabPlan, fams: list[int], reverse: bool = True) -> bool:
    """Whether a run of FAMS needs a folder for the bindings FIFOs (`by_family`'s FIFO_DIR)."""
    return reverse and any(translated(plan, f) for f in fams)


def by_family(plan: LabPlan, fams: list[int], flows: int, rate: float, sizes: str, duration: float, *,
              fifo_dir: str | Path | None = None, reverse: bool = True, **options: Any) -> dict[int, TwoWay]:
    """`two_way` for each family of FAMS, sharing FLOWS (`shares`) and RATE between them in proportion:
    the per-flow rate stays RATE / FLOWS whatever the split. A translated family (`translated`) with
    reverse traffic gets its own bindings FIFO in FIFO_DIR (`needs_bindings`: then required)."""
    out = {}
    for fam, count in shares(flows, fams).items():
        nat = translated(plan, fam)
        fifo = None
        if nat and reverse:
            if fifo_dir is None:
                raise ValueError("reverse traffic through source NAT needs a folder for its bindings FIFO")
            fifo = bindings_fifo(fifo_dir, fam)
        out[fam] = two_way(endpoints(plan, fam), count, rate * count / flows, sizes, duration, family=fam,
                           reverse=reverse, nat=nat, bindings=fifo, **options)
    return out
