"""Each measured flow's session in each SRX, looked up by its 5-tuple (ctnetlink GET), not dumped.

The kernel keeps one session hash for every namespace, and a dump in one namespace (`conntrack -L`)
walks all of it with the CPU's softirqs off until a message is full. With a million background
sessions (`--sessions`) a namespace that holds few of them (an SRX just powered off) makes one call
walk every namespace's sessions: hundreds of milliseconds in which that CPU neither runs the senders
nor forwards, so the flows being measured fall behind. A lookup by tuple is one hash bucket, whatever
the table holds: the readings cost what the flows are, not what the tables are.

The requests are raw ctnetlink messages written with `struct`, many of them in one send, and only the
packet counters are read from the answers. A library such as pyroute2 builds and parses a message
object per request (about a millisecond each; when SCHED_FIFO senders leave normal tasks a few
percent of the CPU, the readings of 100 flows on four SRXs took 90 to 147 s instead of 3). Here a
flow's request is built once and kept, and a lookup costs a few microseconds of Python: one struct
header and a short walk of the answer's attributes. The kernel answers every message of one send
before the send returns, so the requests go in chunks small enough for their answers to fit in the
receive buffer, each chunk read back fully before the next.

One netlink socket per SRX namespace, opened once from a thread that entered the namespace (a socket
stays in the namespace it was created in; the thread's move does not touch the rest of the process).
It serves both families: each request's nfgenmsg names the family the kernel reads the tuple in.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import threading
from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol

from ..model.diagnostics import LabError

UDP = 17

# linux/netlink.h
NETLINK_NETFILTER = 12  # the protocol of netfilter's netlink sockets (not in Python's socket module)
NLM_F_REQUEST = 0x01
NLMSG_ERROR = 0x2  # payload: struct nlmsgerr { int error; struct nlmsghdr msg; ... }
NLA_F_NESTED = 1 << 15
NLA_F_NET_BYTEORDER = 1 << 14
NLA_TYPE_MASK = 0xFFFF & ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER)  # 0x3fff
SO_RCVBUFFORCE = 33  # asm-generic/socket.h: SO_RCVBUF beyond net.core.rmem_max (CAP_NET_ADMIN)

# linux/netfilter/nfnetlink.h
NFNL_SUBSYS_CTNETLINK = 1  # the subsystem is a message type's high byte
NFNETLINK_V0 = 0

# linux/netfilter/nfnetlink_conntrack.h
IPCTNL_MSG_CT_GET = 1
CTA_TUPLE_ORIG = 1  # enum ctattr_type
CTA_COUNTERS_ORIG = 9
CTA_COUNTERS_REPLY = 10
CTA_TUPLE_IP = 1  # enum ctattr_tuple
CTA_TUPLE_PROTO = 2
CTA_IP_V4_SRC, CTA_IP_V4_DST, CTA_IP_V6_SRC, CTA_IP_V6_DST = 1, 2, 3, 4  # enum ctattr_ip
CTA_PROTO_NUM, CTA_PROTO_SRC_PORT, CTA_PROTO_DST_PORT = 1, 2, 3  # enum ctattr_l4proto
CTA_COUNTERS_PACKETS = 1  # enum ctattr_counters: be64
CTA_COUNTERS32_PACKETS = 3  # the old be32 counter

CT_GET = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET

NLMSG_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, seq, port id (host order)
NFGEN_HEADER = struct.Struct("=BB2s")  # nfgenmsg: family, version, res_id (be16)
ATTR_HEADER = struct.Struct("=HH")  # nlattr: length (header included), type
ERROR_CODE = struct.Struct("=i")  # nlmsgerr's error: minus the errno, 0 for an acknowledgement
BE64 = struct.Struct(">Q")
BE32 = struct.Struct(">I")

CHUNK = 64  # requests per send: their answers (about 1 KiB each in the buffer) fit it many times over
RECEIVE_BUFFER = 4 << 20
ANSWER_TIMEOUT_S = 5.0  # a lost answer is an error, never a hang
RECEIVE_SIZE = 1 << 16  # one datagram: a session's answer is a few hundred bytes
SEQ_WRAP = 1 << 31
BODY_CACHE_LIMIT = 1 << 17  # flows whose requests are kept (a bench may look up a million distinct flows)


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


class Answer(NamedTuple):
    """The kernel's answer to one request."""

    seq: int
    error: int  # 0: the session was found; else its errno (ENOENT: no such session)
    packets: int  # both directions' packets (0 when not found, or when the kernel does not count)


def _align(length: int) -> int:
    """LENGTH rounded up to the 4-byte boundary netlink messages and attributes start on."""
    return (length + 3) & ~3


def _attr(kind: int, value: bytes) -> bytes:
    """One attribute: its header, its value, and zeros up to the next boundary."""
    length = ATTR_HEADER.size + len(value)
    return ATTR_HEADER.pack(length, kind) + value + bytes(_align(length) - length)


def _nested(kind: int, *children: bytes) -> bytes:
    return _attr(kind | NLA_F_NESTED, b"".join(children))


def family_of(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def request_body(src: str, dst: str, sport: int, dport: int) -> bytes:
    """What follows the netlink header in a GET of the UDP session SRC:SPORT -> DST:DPORT (the same at
    every reading: kept per flow)."""
    family = family_of(src)
    src_kind, dst_kind = (CTA_IP_V6_SRC, CTA_IP_V6_DST) if family == socket.AF_INET6 else (CTA_IP_V4_SRC,
                                                                                          CTA_IP_V4_DST)
    addresses = _nested(CTA_TUPLE_IP, _attr(src_kind, socket.inet_pton(family, src)),
                        _attr(dst_kind, socket.inet_pton(family, dst)))
    ports = _nested(CTA_TUPLE_PROTO, _attr(CTA_PROTO_NUM, bytes([UDP])),
                    _attr(CTA_PROTO_SRC_PORT, sport.to_bytes(2, "big")),
                    _attr(CTA_PROTO_DST_PORT, dport.to_bytes(2, "big")))
    return NFGEN_HEADER.pack(family, NFNETLINK_V0, bytes(2)) + _nested(CTA_TUPLE_ORIG, addresses, ports)


def framed(seq: int, body: bytes) -> bytes:
    """BODY as a GET request numbered SEQ. Only NLM_F_REQUEST: a found session answers with its
    message, a missing one with an error (ENOENT); no acknowledgement to read besides."""
    return NLMSG_HEADER.pack(NLMSG_HEADER.size + len(body), CT_GET, NLM_F_REQUEST, seq, 0) + body


def encode_request(flow: FlowTuple, seq: int) -> bytes:
    """The whole GET request of FLOW's session, numbered SEQ."""
    return framed(seq, request_body(flow.src, flow.dst, flow.sport, flow.dport))


def _attributes(data: bytes | memoryview, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(type without its flags, value's start, value's end) of each attribute between START and END."""
    while start + ATTR_HEADER.size <= end:
        length, kind = ATTR_HEADER.unpack_from(data, start)
        if length < ATTR_HEADER.size or start + length > end:
            return  # malformed: nothing after it can be trusted
        yield kind & NLA_TYPE_MASK, start + ATTR_HEADER.size, start + length
        start += _align(length)


def _direction_packets(data: bytes | memoryview, start: int, end: int) -> int:
    """The packets in one CTA_COUNTERS_* nest (the 64-bit counter, or the old 32-bit one)."""
    for kind, value, value_end in _attributes(data, start, end):
        if kind == CTA_COUNTERS_PACKETS and value_end - value >= BE64.size:
            return int(BE64.unpack_from(data, value)[0])
        if kind == CTA_COUNTERS32_PACKETS and value_end - value >= BE32.size:
            return int(BE32.unpack_from(data, value)[0])
    return 0


def _session_packets(data: bytes | memoryview, start: int, end: int) -> int:
    """Both directions' packets of the session whose attributes lie between START and END."""
    total = 0
    for kind, value, value_end in _attributes(data, start, end):
        if kind in (CTA_COUNTERS_ORIG, CTA_COUNTERS_REPLY):
            total += _direction_packets(data, value, value_end)
    return total


def _answer(data: bytes | memoryview, start: int, end: int) -> Answer | None:
    """The answer in the message between START and END, None for a message that answers nothing
    (an acknowledgement, or not a session)."""
    _, kind, _, seq, _ = NLMSG_HEADER.unpack_from(data, start)
    payload = start + NLMSG_HEADER.size
    if kind == NLMSG_ERROR and end - payload >= ERROR_CODE.size:
        code = ERROR_CODE.unpack_from(data, payload)[0]
        return Answer(seq, -code, 0) if code else None
    if kind >> 8 == NFNL_SUBSYS_CTNETLINK:
        return Answer(seq, 0, _session_packets(data, payload + NFGEN_HEADER.size, end))
    return None


def decode_answers(data: bytes | memoryview) -> Iterator[Answer]:
    """Each answer in DATA, as many netlink messages as one receive gave."""
    start = 0
    while start + NLMSG_HEADER.size <= len(data):
        length = NLMSG_HEADER.unpack_from(data, start)[0]
        if length < NLMSG_HEADER.size or start + length > len(data):
            return  # truncated or malformed
        answer = _answer(data, start, start + length)
        if answer is not None:
            yield answer
        start += _align(length)


def _conntrack_socket() -> socket.socket:
    """A ctnetlink socket in this thread's namespace, with room for a chunk's answers."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    try:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER)
        except PermissionError:  # without CAP_NET_ADMIN: as much as net.core.rmem_max allows
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        sock.bind((0, 0))  # the kernel picks the port id its answers come to
        sock.settimeout(ANSWER_TIMEOUT_S)
    except OSError:
        sock.close()
        raise
    return sock


def _open_in(ns: str) -> socket.socket:
    """A ctnetlink socket created inside namespace NS."""
    from labkit import netnsutil

    made: list[socket.socket] = []
    failed: list[OSError] = []

    def enter_and_open() -> None:
        try:
            netnsutil.enter(ns)  # this thread only, and it ends here
            made.append(_conntrack_socket())
        except OSError as exc:
            failed.append(exc)

    thread = threading.Thread(target=enter_and_open, name="flowlookup-open")
    thread.start()
    thread.join()
    if failed:
        raise LabError(f"cannot open a conntrack socket in {netnsutil.path(ns)}: {failed[0]}")
    return made[0]


def _failed(node: str, why: str) -> LabError:
    return LabError(f"conntrack lookup on {node} failed: {why}")


class FlowCounters:
    """Per SRX (name -> namespace), the packets each flow's session has counted there."""

    def __init__(self, namespaces: dict[str, str]):
        self.sockets: dict[str, socket.socket] = {}
        self._bodies: dict[tuple[str, str, int, int], bytes] = {}
        self._next_seq = 1
        try:
            for node, ns in namespaces.items():
                self.sockets[node] = _open_in(ns)
        except BaseException:
            self.close()
            raise

    def read(self, flows: Sequence[FlowTuple]) -> dict[tuple[str, int], dict[str, int]]:
        """(source address, source port) -> {srx: packets} for each flow with a session on that SRX
        (the same shape as `sessions.udp_counts`)."""
        bodies = [self._body(flow) for flow in flows]
        counts: dict[tuple[str, int], dict[str, int]] = {}
        for node, sock in self.sockets.items():
            for index, packets in self._lookup(node, sock, bodies).items():
                flow = flows[index]
                counts.setdefault((flow.src, flow.sport), {})[node] = packets
        return counts

    def _body(self, flow: FlowTuple) -> bytes:
        """FLOW's request without its header, built at its first reading (a case reads the same flows
        several times); the kept ones are forgotten past a bound rather than grow without one."""
        key = (flow.src, flow.dst, flow.sport, flow.dport)
        body = self._bodies.get(key)
        if body is None:
            if len(self._bodies) >= BODY_CACHE_LIMIT:
                self._bodies.clear()
            body = self._bodies[key] = request_body(*key)
        return body

    def _take_seqs(self, count: int) -> int:
        """The first of COUNT sequence numbers no recent request used (an answer left over from a
        failed reading is then recognised as stale)."""
        if self._next_seq + count >= SEQ_WRAP:
            self._next_seq = 1
        first = self._next_seq
        self._next_seq += count
        return first

    def _lookup(self, node: str, sock: socket.socket, bodies: list[bytes]) -> dict[int, int]:
        """Index of the flow -> its packets, for each flow (request BODIES) with a session on NODE."""
        found: dict[int, int] = {}
        buffer = bytearray(RECEIVE_SIZE)
        for first in range(0, len(bodies), CHUNK):
            chunk = bodies[first:first + CHUNK]
            base = self._take_seqs(len(chunk))
            try:
                sock.send(b"".join(framed(base + i, body) for i, body in enumerate(chunk)))
                answered = _collect(node, sock, buffer, base, len(chunk))
            except TimeoutError:
                raise _failed(node, f"no answer within {ANSWER_TIMEOUT_S:g} s") from None
            except OSError as exc:
                raise _failed(node, str(exc)) from None
            found.update((first + i, packets) for i, packets in answered.items())
        return found

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close()
        self.sockets = {}

    def __enter__(self) -> FlowCounters:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _collect(node: str, sock: socket.socket, buffer: bytearray, base: int, count: int) -> dict[int, int]:
    """Read until each of the COUNT requests numbered from BASE is answered: index in the chunk ->
    packets for the sessions found. An answer to no request of the chunk (a failed reading's) is
    skipped."""
    waiting = set(range(count))
    found: dict[int, int] = {}
    view = memoryview(buffer)
    while waiting:
        size = sock.recv_into(buffer)
        for answer in decode_answers(view[:size]):
            index = answer.seq - base
            if index not in waiting:
                continue
            waiting.discard(index)
            if answer.error == 0:
                found[index] = answer.packets
            elif answer.error != errno.ENOENT:  # ENOENT: no session for it on this SRX
                raise _failed(node, os.strerror(answer.error))
    return found
