"""CLB, the FlexVPN cluster load balancing: the load formula, the member<->master protocol, the
master's table and choice of the least-loaded gateway, and `show crypto ikev2 cluster`. Pure.

Load formula (documented in docs/flexvpn.md, "Cluster load"):

    system  = (cpu + memory) / 2            cpu: the router's CPU over the last 5 s, % of one core;
                                            memory: its resident memory, % of the router's memory
    crypto  = 100 x (IKE SAs + IPsec SAs) / max-session
    raw     = (weight_system / 100 x system + weight_crypto / 100 x crypto) / 2
    load    = min(100, raw x (200 - priority) / 100)

Half system, half crypto at the default weights of 100 matches the seed's figures: a member with no
SA at 13.2 % and one with 1 IKE + 2 IPsec SAs (max-session 10) at 28.2 % differ by exactly
100 x 3 / 10 / 2 = 15 points. `slave priority` (1..100) scales the load by (200 - priority) / 100: at
the default 100 nothing changes, at 50 the load is 1.5 times higher (13.2 % -> 19.8 %, the seed's
example); "the higher the slave priority, the lower the load". Lowering a `master weight` lowers the
computed load, as the seed says. A gateway is overloaded (`-`, no new redirect) when its load reaches
`master overload-limit` or its SAs reach `slave max-session` ("maximum number of IKEv2 and IPsec
SAs"). The master counts, for its choice, the SAs that half-open negotiations and clients it has
just redirected will add (a burst of clients spreads before the next load update arrives).

Protocol (CLB runs over TCP, port 2012 by default; Cisco's encoding is not public, so this one is
ours): every message is an 8-byte header `'CLB' version(1)=1 type(1) flags(1)=0 length(2)` (length
of the whole message, network order) and a fixed body per type:

    HELLO      member -> master   address(4) seq(4) hello_ms(4) holdtime_ms(4)
    HELLO_ACK  master -> member   address(4) seq(4)
    LOAD       member -> master   address(4) seq(4) priority(1) 0(1) cpu(2) memory(2) 0(2)
                                  max_session(4) ike(4) ipsec(4) half_open(4) arrivals(4)
                                  (cpu, memory in tenths of a percent; ike: established IKE SAs,
                                  half-open ones apart and not load; arrivals: clients that came
                                  with REDIRECTED_FROM and finished IKE_AUTH, a running count)
    BYE        either way         address(4)

Anything else (bad magic, version, type, length, out-of-range field) is a `ClbError`: the receiver
closes that connection.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from enum import IntEnum
from ipaddress import IPv4Address
from typing import Any

from labkit.flexstatus import ClbStatus

PORT = 2012
MAGIC = b"CLB"
VERSION = 1
HEADER = struct.Struct("!3sBBBH")
MAX_MESSAGE = 256
SAS_PER_SESSION = 3  # a FlexVPN session: 1 IKE SA + 2 IPsec SAs (in and out), as the seed counts them
PENDING_TTL = 10.0  # seconds a redirect not yet seen by its member still counts on it


class ClbError(ValueError):
    """A malformed CLB message (the only exception the decoder raises)."""


class MsgType(IntEnum):
    HELLO = 1
    HELLO_ACK = 2
    LOAD = 3
    BYE = 4


_BODIES = {
    MsgType.HELLO: struct.Struct("!4sIII"),
    MsgType.HELLO_ACK: struct.Struct("!4sI"),
    MsgType.LOAD: struct.Struct("!4sIBxHHxxIIIII"),
    MsgType.BYE: struct.Struct("!4s"),
}
_KINDS = frozenset(int(k) for k in _BODIES)


@dataclass(frozen=True)
class Hello:
    address: str
    seq: int
    hello_ms: int
    holdtime_ms: int


@dataclass(frozen=True)
class HelloAck:
    address: str
    seq: int


@dataclass(frozen=True)
class Load:
    address: str
    seq: int
    priority: int
    cpu: float  # percent
    memory: float  # percent
    max_session: int
    ike: int
    ipsec: int
    half_open: int = 0
    arrivals: int = 0


@dataclass(frozen=True)
class Bye:
    address: str


Message = Hello | HelloAck | Load | Bye


def _permille(value: float) -> int:
    return max(0, min(1000, round(value * 10)))


def encode(message: Message) -> bytes:
    body: tuple[Any, ...]
    if isinstance(message, Hello):
        kind, body = MsgType.HELLO, (IPv4Address(message.address).packed, message.seq, message.hello_ms,
                                     message.holdtime_ms)
    elif isinstance(message, HelloAck):
        kind, body = MsgType.HELLO_ACK, (IPv4Address(message.address).packed, message.seq)
    elif isinstance(message, Load):
        kind, body = MsgType.LOAD, (IPv4Address(message.address).packed, message.seq, message.priority,
                                    _permille(message.cpu), _permille(message.memory), message.max_session,
                                    message.ike, message.ipsec, message.half_open, message.arrivals)
    else:
        kind, body = MsgType.BYE, (IPv4Address(message.address).packed,)
    packed = _BODIES[kind].pack(*body)
    return HEADER.pack(MAGIC, VERSION, kind, 0, HEADER.size + len(packed)) + packed


def decode(data: bytes) -> Message:
    """One whole message; raise ClbError if it is not a valid CLB message."""
    if len(data) < HEADER.size:
        raise ClbError(f"CLB message too short ({len(data)} bytes)")
    magic, version, kind, _flags, length = HEADER.unpack_from(data)
    if magic != MAGIC or version != VERSION:
        raise ClbError("not a CLB version 1 message")
    if kind not in _KINDS:
        raise ClbError(f"unknown CLB message type {kind}")
    body = _BODIES[MsgType(kind)]
    if length != HEADER.size + body.size or len(data) != length:
        raise ClbError(f"CLB message type {kind} of length {len(data)} (header says {length})")
    fields = body.unpack_from(data, HEADER.size)
    address = str(IPv4Address(fields[0]))
    if kind == MsgType.HELLO:
        _, seq, hello_ms, holdtime_ms = fields
        if not (100 <= hello_ms <= 30000 and 100 <= holdtime_ms <= 120000):
            raise ClbError("CLB hello with timers out of range")
        return Hello(address, seq, hello_ms, holdtime_ms)
    if kind == MsgType.HELLO_ACK:
        return HelloAck(address, fields[1])
    if kind == MsgType.LOAD:
        _, seq, priority, cpu, memory, max_session, ike, ipsec, half_open, arrivals = fields
        if not (1 <= priority <= 100 and cpu <= 1000 and memory <= 1000 and 1 <= max_session <= 100000):
            raise ClbError("CLB load with fields out of range")
        return Load(address, seq, priority, cpu / 10, memory / 10, max_session, ike, ipsec, half_open, arrivals)
    return Bye(address)


class Reader:
    """Splits a TCP byte stream into messages; raises ClbError on garbage (then close the connection)."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> list[Message]:
        self.buffer += data
        out: list[Message] = []
        while len(self.buffer) >= HEADER.size:
            magic, version, _kind, _flags, length = HEADER.unpack_from(self.buffer)
            if magic != MAGIC or version != VERSION or not HEADER.size <= length <= MAX_MESSAGE:
                raise ClbError("bad CLB message header in the stream")
            if len(self.buffer) < length:
                break
            chunk, self.buffer = self.buffer[:length], self.buffer[length:]
            out.append(decode(chunk))
        return out


# ------------------------------------------------------------------------------------------ load
@dataclass(frozen=True)
class Weights:
    system: int = 100
    crypto: int = 100


def load_percent(cpu: float, memory: float, ike: int, ipsec: int, max_session: int, priority: int,
                 weights: Weights = Weights()) -> float:
    """The formula of the module docstring, in percent (0..100)."""
    system = (min(100.0, max(0.0, cpu)) + min(100.0, max(0.0, memory))) / 2
    crypto = 100.0 * (ike + ipsec) / max(1, max_session)
    raw = (weights.system / 100 * system + weights.crypto / 100 * crypto) / 2
    return min(100.0, raw * (200 - priority) / 100)


# ------------------------------------------------------------------------------------------ master
@dataclass
class Gateway:
    """One row of the master's table (the master itself included)."""

    address: str
    role: str  # "Master" | "Slave"
    priority: int = 100
    cpu: float = 0.0
    memory: float = 0.0
    max_session: int = 10
    ike: int = 0
    ipsec: int = 0
    half_open: int = 0
    arrivals: int = 0
    last_seen: float | None = None  # monotonic; None for the master itself
    pending: deque[float] = field(default_factory=deque)  # times of redirects it has not reported yet

    settled: int = 0  # the master's own: IKE_AUTH exchanges over, as last seen

    def sas(self, now: float) -> int:
        """SAs counted for the choice: established ones reported, plus what the clients sent there
        and not yet authenticated will add (so a burst of clients spreads before the next load
        update arrives). Half-open SAs are not load: anyone can make them (an IKE_SA_INIT flood)."""
        while self.pending and now - self.pending[0] > PENDING_TTL:
            self.pending.popleft()
        return self.ike + self.ipsec + SAS_PER_SESSION * len(self.pending)

    def load(self, now: float, weights: Weights) -> float:
        return load_percent(self.cpu, self.memory, self.sas(now), 0, self.max_session, self.priority, weights)

    def overloaded(self, now: float, weights: Weights, limit: float) -> bool:
        return self.load(now, weights) >= limit or self.sas(now) >= self.max_session


class Master:
    """The cluster master's view: its own row and one per member, the hold-time check, the choice."""

    def __init__(self, address: str, holdtime: float, overload_limit: float, weights: Weights = Weights()):
        self.address = address
        self.holdtime = holdtime
        self.overload_limit = overload_limit
        self.weights = weights
        self.local = Gateway(address, "Master")
        self.members: dict[str, Gateway] = {}
        self.redirects = 0
        self.dropped: list[tuple[float, str, str]] = []  # (when, address, why)

    def hello(self, message: Hello, now: float) -> HelloAck:
        member = self.members.setdefault(message.address, Gateway(message.address, "Slave"))
        member.last_seen = now
        return HelloAck(self.address, message.seq)

    def update(self, message: Load, now: float) -> None:
        member = self.members.setdefault(message.address, Gateway(message.address, "Slave"))
        newly_arrived = max(0, message.arrivals - member.arrivals) if member.last_seen is not None else 0
        for _ in range(min(newly_arrived, len(member.pending))):
            member.pending.popleft()
        member.priority, member.cpu, member.memory = message.priority, message.cpu, message.memory
        member.max_session, member.ike, member.ipsec = message.max_session, message.ike, message.ipsec
        member.half_open, member.arrivals = message.half_open, message.arrivals
        member.last_seen = now

    def remove(self, address: str, now: float, why: str) -> None:
        if self.members.pop(address, None) is not None:
            self.dropped = (self.dropped + [(now, address, why)])[-20:]

    def expire(self, now: float) -> list[str]:
        """Members whose last message is older than the hold time are dropped."""
        late = [a for a, m in self.members.items() if m.last_seen is not None and now - m.last_seen > self.holdtime]
        for address in late:
            self.remove(address, now, "hold time expired")
        return late

    def rows(self) -> list[Gateway]:
        return [self.local, *sorted(self.members.values(), key=lambda g: IPv4Address(g.address))]

    def least_loaded(self, now: float) -> Gateway | None:
        best: tuple[float, int, bool, int] | None = None
        choice = None
        for gateway in self.rows():
            load = gateway.load(now, self.weights)
            if gateway.overloaded(now, self.weights, self.overload_limit):
                continue
            # Ties go to a member rather than the master (it has redirects to answer), then to the lower address.
            key = (round(load, 6), gateway.sas(now), gateway is self.local, int(IPv4Address(gateway.address)))
            if best is None or key < best:
                best, choice = key, gateway
        return choice

    def choose(self, now: float) -> str | None:
        """Where the next client goes: a member's address, the master's own, or None (all overloaded)."""
        gateway = self.least_loaded(now)
        if gateway is None:
            return None
        gateway.pending.append(now)
        if gateway is not self.local:
            self.redirects += 1
        return gateway.address

    def settle_local(self, settled: int) -> None:
        """The master's own gateway finished SETTLED IKE_AUTH exchanges in all: as many of the
        clients it kept for itself are no longer on their way (a member reports this as arrivals)."""
        done = max(0, settled - self.local.settled)
        self.local.settled = settled
        for _ in range(min(done, len(self.local.pending))):
            self.local.pending.popleft()

    def status(self, now: float, wall: float) -> list[dict[str, object]]:
        least = self.least_loaded(now)
        out = []
        for gateway in self.rows():
            load = gateway.load(now, self.weights)
            code = "-" if gateway.overloaded(now, self.weights, self.overload_limit) else \
                "*" if gateway is least else ""
            out.append({
                "address": gateway.address, "role": gateway.role, "priority": gateway.priority,
                "load": round(load, 1), "ike": gateway.ike, "ipsec": gateway.ipsec,
                "half_open": gateway.half_open, "pending": len(gateway.pending), "code": code,
                "cpu": gateway.cpu, "memory": gateway.memory, "max_session": gateway.max_session,
                "last_seen_at": None if gateway.last_seen is None else wall - (now - gateway.last_seen),
            })
        return out


# ------------------------------------------------------------------------------------------ show
def _mmss(seconds: float) -> str:
    seconds = max(0.0, seconds)
    minutes = int(seconds // 60)
    return f"{minutes:02d}:{seconds - minutes * 60:06.3f}"


def show_cluster(status: ClbStatus | None, now_wall: float) -> str:
    """`show crypto ikev2 cluster` in the seed's layout, from the daemon's cluster status."""
    if status is None or status.shutdown or status.role == "none":
        return "Cluster is shutdown\n"
    strict = ["Overload mode : strict (an overloaded gateway refuses new IKE SAs)"] if status.strict_overload else []
    lines = []
    if status.role == "master":
        rows = status.rows or []
        lines += [
            "Role : CLB Master",
            f"Status : {status.status or 'Up'}",
            f"CLB Slaves : {sum(1 for r in rows if r.role == 'Slave')}",
            f"Cluster IP : {status.cluster_ip}",
            f"Hold time : {status.holdtime_ms} msec",
            f"Overload limit : {status.overload_limit}%",
            *strict,
            "Codes : '*' Least loaded, '-' Overloaded",
            "Load statistics:",
            f" {'Gateway':<16}{'Role':<8}{'Last-seen':<11}{'Prio':>4}{'Load':>8}{'IKE':>6}{'Ipsec':>7}",
            "-" * 62,
        ]
        for r in rows:
            seen = "--" if r.last_seen_at is None else _mmss(now_wall - r.last_seen_at)
            lines.append(f"{r.code or ' ':1}{r.address:<16}{r.role:<8}{seen:<11}{r.priority:>4}"
                         f"{r.load:>7.1f}%{r.ike:>6}{r.ipsec:>7}")
        return "\n".join(lines) + "\n"
    lines += [
        "Role : CLB Slave",
        f"Status : {status.status or 'Down'}",
        f"Cluster IP : {status.cluster_ip}",
        f"Hold time : {status.holdtime_ms} msec",
        f"Hello-interval : {status.hello_ms} msec",
        f"Update-interval: {status.update_ms} msec",
        *strict,
        "Load statistics:",
        f"{'Gateway':<16}{'Last-Ack':<11}{'Prio':>4}{'Load':>8}{'IKE':>6}{'IPsec':>7}",
        "-" * 55,
    ]
    own = status.own
    if own is not None:
        ack = "--" if own.last_ack_at is None else _mmss(now_wall - own.last_ack_at)
        code = "-" if own.overloaded else ""
        lines.append(f"{code}{own.address:<16}{ack:<11}{own.priority:>4}{own.load:>7.1f}%{own.ike:>6}{own.ipsec:>7}")
    return "\n".join(lines) + "\n"
