"""The responder's IKE SAs and CHILD_SAs, and the table that holds them with running tallies.

The tallies (established SAs, CHILD_SAs, half-open SAs in all and per source address, half-open
SAs by the digest of their request) are kept as SAs enter, change and leave the table, because the
cluster load balancer asks for them on every change.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from ipaddress import IPv4Address

from . import codec, crypto


class AddressPool:
    """`ip local pool`: addresses handed out in order, given back when the IKE SA goes."""

    def __init__(self, first: str | None, last: str | None):
        self.free: deque[str] = deque()
        if first and last:
            start, end = int(IPv4Address(first)), int(IPv4Address(last))
            self.free.extend(str(IPv4Address(n)) for n in range(start, end + 1))
        self.size = len(self.free)

    def take(self) -> str | None:
        return self.free.popleft() if self.free else None

    def give(self, address: str) -> None:
        self.free.append(address)


@dataclass
class ChildSa:
    spi_in: bytes  # ours: the peer sends with it
    spi_out: bytes  # the peer's
    suite: crypto.Suite
    keys: crypto.ChildKeys
    ts_i: tuple[codec.TrafficSelector, ...]
    ts_r: tuple[codec.TrafficSelector, ...]
    installed: bool = False


@dataclass
class IkeSa:
    spi_i: bytes
    spi_r: bytes
    peer: tuple[str, int]
    local: tuple[str, int]
    created: float
    suite: crypto.Suite
    keys: crypto.IkeKeys
    nonce_i: bytes
    nonce_r: bytes
    signed: crypto.SignedPrefix | None  # the initiator's IKE_SA_INIT, absorbed (for its AUTH); None after
    msg2: bytes  # our IKE_SA_INIT answer (retransmissions, our AUTH); emptied once authenticated
    request_digest: bytes = b""  # SHA-256 of (address, port, IKE_SA_INIT): retransmissions
    source: str = ""  # the address the IKE_SA_INIT came from (per-source bound)
    state: str = "half-open"  # half-open | established | redirected
    next_id: int = 1
    last_response: tuple[int, list[bytes]] | None = None
    hash_algorithms: set[int] = field(default_factory=set)
    redirect_supported: bool = False
    redirected_from: str | None = None
    peer_id: str = ""
    auth_method: int = 0
    local_auth: int = 0
    address: str | None = None
    child: ChildSa | None = None
    retiring: list[ChildSa] = field(default_factory=list)  # rekeyed CHILD_SAs, until the initiator deletes them
    established_at: float | None = None
    redirected_to: str | None = None
    in_table: bool = False


class SaTable:
    """IKE SAs by our SPI. Every change of an SA's state or CHILD_SA goes through here, so that the
    tallies stay true."""

    def __init__(self) -> None:
        self.sas: dict[bytes, IkeSa] = {}
        self.tally: Counter[str] = Counter()
        self.by_request: dict[bytes, bytes] = {}  # request digest -> SPIr, half-open SAs only
        self.half_open_by_source: Counter[str] = Counter()

    def track(self, sa: IkeSa, sign: int) -> None:
        self.tally[sa.state] += sign
        if sa.state == "half-open":
            self.half_open_by_source[sa.source] += sign
            if self.half_open_by_source[sa.source] <= 0:
                del self.half_open_by_source[sa.source]
            if sign < 0:
                self.by_request.pop(sa.request_digest, None)
            else:
                self.by_request[sa.request_digest] = sa.spi_r
        if sa.child is not None and sa.state == "established":
            self.tally["child"] += sign

    def set_state(self, sa: IkeSa, state: str) -> None:
        if sa.in_table:
            self.track(sa, -1)
        sa.state = state
        if sa.in_table:
            self.track(sa, +1)

    def set_child(self, sa: IkeSa, child: ChildSa | None) -> None:
        if sa.in_table:
            self.track(sa, -1)
        sa.child = child
        if sa.in_table:
            self.track(sa, +1)

    def insert(self, sa: IkeSa) -> None:
        self.sas[sa.spi_r] = sa
        sa.in_table = True
        self.track(sa, +1)

    def remove(self, sa: IkeSa) -> None:
        if self.sas.pop(sa.spi_r, None) is not None and sa.in_table:
            self.track(sa, -1)
            sa.in_table = False
