"""The receiver: a UDP or AF_PACKET socket drained into the accounting."""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from . import binding
from .batch import Batch, open_batch
from .frames import (
    ETH_LEN,
    ETH_P_IP,
    ETH_P_IPV6,
    HEADER,
    HEADER_LEN,
    MAGIC,
    MASK32,
    PACKET_IGNORE_OUTGOING,
    PAYLOAD_OFFSET,
    PAYLOAD_OFFSET6,
    SOL_PACKET,
    UDP_LEN,
)
from .netio import bind_socket, grow_rcvbuf, in_netns, pin_cpu, read_socket_drops, set_realtime
from .spawn import Spawned
from .stats import Accounting, FlowStats

SRC_ADDRESS = struct.Struct("!I")
RECV_SLOT = 2048  # bytes per receive slot: a whole 1514-byte frame (the header is at its start anyway)


# --------------------------------------------------------------------------- receiver
@dataclass
class Receiver:
    """Count our packets arriving in namespace NS.

    UDP mode (PORT given): a UDP socket bound to BIND:PORT (default any local address, which with
    the hosts' AnyIP routes means the whole prefix). Packet mode (IFACE given, no PORT): an
    AF_PACKET socket on IFACE sees every IPv4/UDP frame carrying our magic, whatever its port
    (outgoing frames ignored); the kernel then answers with ICMP port unreachable (rate-limited).
    Stops after DURATION seconds, after IDLE seconds without a packet (once one arrived), or on
    stop().

    POLL_INTERVAL > 0 (default 1 ms): drain the socket without blocking, sleep that long when it is
    empty. The sender's core then never wakes this thread per packet (which would cost it more than
    the packet: ~140 vs ~400 kpps measured), but receive times are those of the drain, up to one
    interval late: latency and first/last-seen figures carry that error; loss, duplicates,
    reordering, gaps and convergence (send times and sequence numbers) do not. 0: wait for the
    socket (select) and read at once. Either way each read takes up to 64 packets in one
    recvmmsg call (`batch`), all stamped with the time that call returned.

    Packet mode records, per flow, the source address and port its packets arrive with (behind
    CGNAT: the SRX's binding) and every change (report: ``bindings``, ``binding_changes``); with
    LEARN_FD (the write end of a pipe) or LEARN_PATH (a FIFO, opened for writing without blocking)
    each change is also published there for a reverse `Sender`.

    FAMILY 6: the same for IPv6 (UDP mode: an IPv6 socket, BIND default ``::``; packet mode: the
    IPv6/UDP frames, whose header follows a 40-byte IPv6 header with no extension header, as the
    sender builds them). No bindings are recorded for IPv6 (the lab translates no IPv6 source)."""

    port: int | None = None
    bind: str | None = None  # UDP mode: default any address of FAMILY
    iface: str | None = None
    ns: str | None = None
    duration: float | None = None
    idle: float | None = None
    rate_per_flow: float | None = None
    poll_interval: float = 0.001
    cpu: int | None = None  # pin the receiving thread to this CPU
    realtime: bool = False  # SCHED_FIFO: keep draining on a busy machine (its socket then does not overflow)
    learn_fd: int | None = None  # bindings pipe (write end): publish each flow's binding and its changes
    learn_path: str | None = None  # or a FIFO (see `binding.open_fifo`)
    family: int = 4
    # count only flow ids in [lo, hi) (another family's receiver on the same interface gets the rest)
    ids: tuple[int, int] | None = None
    accounting: Accounting = field(default_factory=Accounting, repr=False)
    ready: threading.Event = field(default_factory=threading.Event, repr=False)
    bound_port: int | None = field(default=None, init=False)  # UDP mode: the port bound (PORT 0: any)
    _stop: bool = field(default=False, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _error: BaseException | None = field(default=None, init=False, repr=False)
    _counters: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.port is None and self.iface is None:
            raise ValueError("give a UDP port, or an interface for packet mode")
        if self.family not in (4, 6):
            raise ValueError(f"IP family {self.family}: 4 or 6")
        if self.family == 6 and (self.learn_fd is not None or self.learn_path is not None):
            raise ValueError("NAT bindings are IPv4 only")
        if self.ids is not None:
            lo, hi = self.ids
            if not 0 <= lo < hi:
                raise ValueError(f"flow ids {lo}..{hi}: give 0 <= first < end")
            self.ids = (int(lo), int(hi))

    def config(self) -> dict[str, Any]:
        return {"port": self.port, "bind": self.bind, "iface": self.iface, "ns": self.ns,
                "duration": self.duration, "idle": self.idle, "rate_per_flow": self.rate_per_flow,
                "poll_interval": self.poll_interval, "cpu": self.cpu, "realtime": self.realtime,
                "learn_fd": self.learn_fd, "learn_path": self.learn_path, "family": self.family,
                "ids": list(self.ids) if self.ids is not None else None}

    @classmethod
    def from_config(cls, data: dict[str, Any]) -> Receiver:
        return cls(**data)

    def _open(self) -> tuple[socket.socket, int]:
        v6 = self.family == 6
        if self.port is not None:
            sock = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if v6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            grow_rcvbuf(sock)
            bind_socket(sock, (self.bind or ("::" if v6 else "0.0.0.0"), self.port), self.ns)
            self.bound_port = sock.getsockname()[1]
            return sock, 0
        assert self.iface is not None
        proto = ETH_P_IPV6 if v6 else ETH_P_IP
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(proto))
        with contextlib.suppress(OSError):
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        grow_rcvbuf(sock)
        bind_socket(sock, (self.iface, proto), self.ns)
        return sock, -6 if v6 else -1

    def run(self) -> dict[str, Any]:
        """Receive in the calling thread until a stop condition; return the report."""
        pin_cpu(self.cpu)
        with in_netns(self.ns):
            sock, mode = self._open()
        try:
            self.ready.set()
            with set_realtime(self.realtime):
                self._loop(sock, mode)
        finally:
            sock.close()
            self.ready.set()
        return self.report()

    def report(self, sent: dict[str, Any] | None = None) -> dict[str, Any]:
        result = self.accounting.report(self.rate_per_flow, sent)
        result.update({"ns": self.ns, "port": self.port, "iface": self.iface, **self._counters})
        return result

    def start(self, timeout: float = 5.0) -> Receiver:
        """Run in a background thread; returns once the socket is open (packets are counted)."""
        def body() -> None:
            try:
                self.run()
            except BaseException as exc:  # handed to stop()
                self._error = exc
                self.ready.set()
        self._thread = threading.Thread(target=body, name="traffic-receive", daemon=True)
        self._thread.start()
        if not self.ready.wait(timeout):
            raise TimeoutError("receiver did not open its socket")
        if self._error is not None:
            raise self._error
        return self

    def stop(self, sent: dict[str, Any] | None = None, timeout: float = 5.0) -> dict[str, Any]:
        """Stop a started receiver; the report (with SENT, a sender's report, for tail loss)."""
        self._stop = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError("receiver did not stop")
        if self._error is not None:
            raise self._error
        return self.report(sent)

    def spawn(self) -> Spawned:
        """Run in a child process; `Spawned.wait_ready()` then `Spawned.stop()` returns the report."""
        return Spawned("receive", self.config(), pass_fds=(self.learn_fd,) if self.learn_fd is not None else ())

    def _loop(self, sock: socket.socket, mode: int, batch: Batch | None = None) -> None:
        """The hot loop: one recvmmsg fills up to 64 slots of BATCH; per packet a few byte reads,
        one unpack and one FlowStats.add. Every packet of one call gets the call's receive time."""
        acc = self.accounting
        flows = acc.flows
        if batch is None:
            batch = open_batch(sock, RECV_SLOT)
        stage, slot = batch.stage, batch.slot
        receive, length = batch.receive, batch.length
        unpack = HEADER.unpack_from
        mono = time.monotonic_ns
        poll = self.poll_interval
        # poll > 0: drain, then sleep: the sender's kernel path never has to wake this thread up (a
        # wakeup per packet costs the sending core more than the packet itself). 0: wait in select.
        wait = select.select
        sleep = time.sleep
        started = mono()
        deadline = started + int(self.duration * 1e9) if self.duration else 1 << 62
        idle_ns = int(self.idle * 1e9) if self.idle else 0
        first_rx = 0
        last_rx = 0
        foreign = 0
        others = 0  # packets of flows outside IDS: another receiver's
        first_id, end_id = self.ids or (0, 1 << 32)
        packets = 0
        fixed_offset = mode >= 0
        v6 = mode == -6  # packet mode, IPv6: the header at a fixed offset behind IPv6 + UDP
        min_len = (mode if fixed_offset else PAYLOAD_OFFSET6 if v6 else PAYLOAD_OFFSET) + HEADER_LEN
        stop_at = 0  # once asked to stop: keep draining what is queued, for at most a second
        # packet mode, IPv4: each flow's source address and port (its NAT binding behind CGNAT)
        track = mode == -1
        bound = acc.bindings.current
        observe = acc.bindings.observe
        publisher = None
        if track and self.learn_fd is not None:
            publisher = binding.Publisher(self.learn_fd)
        elif track and self.learn_path is not None:
            publisher = binding.Publisher(binding.open_fifo(self.learn_path))
        src_at = SRC_ADDRESS.unpack_from
        while True:
            got = receive()
            if not got:
                now = mono()
                if self._stop or now >= deadline or (idle_ns and last_rx and now - last_rx >= idle_ns):
                    break
                if poll > 0:
                    sleep(poll)
                else:
                    wait([sock], [], [], 0.05)
                continue
            rx = mono()
            counted = packets
            for j in range(got):
                n = length(j)
                base = j * slot
                if n < min_len:
                    foreign += 1
                    continue
                if fixed_offset:
                    offset = base + mode
                elif v6:
                    if stage[base + 20] != 17:  # next header: UDP
                        foreign += 1
                        continue
                    offset = base + PAYLOAD_OFFSET6
                else:
                    # IPv4 (the socket's protocol), UDP, header after the IP options
                    if stage[base + 23] != 17:
                        foreign += 1
                        continue
                    offset = ETH_LEN + (stage[base + 14] & 0x0F) * 4 + UDP_LEN
                    if n < offset + HEADER_LEN:
                        foreign += 1
                        continue
                    offset += base
                magic, flow_id, seq, ts32 = unpack(stage, offset)
                if magic != MAGIC:
                    foreign += 1
                    continue
                if not first_id <= flow_id < end_id:
                    others += 1
                    continue
                stats = flows.get(flow_id)
                if stats is None:
                    stats = flows[flow_id] = FlowStats(flow_id)
                stats.add(seq, rx - ((rx - ts32) & MASK32), rx)
                if track:
                    key = src_at(stage, base + ETH_LEN + 12)[0] << 16 | stage[offset - 8] << 8 | stage[offset - 7]
                    if bound.get(flow_id) != key and observe(flow_id, key, rx) and publisher is not None:
                        publisher.publish(flow_id, key)
                packets += 1
            if packets != counted:
                if not first_rx:
                    first_rx = rx
                last_rx = rx
            if rx >= deadline:
                break
            if self._stop:
                if not stop_at:
                    stop_at = rx + 1_000_000_000
                elif rx >= stop_at:
                    break
        acc.foreign += foreign
        if self.ids is not None:
            self._counters["other_flows_packets"] = others
        if publisher is not None:
            self._counters["bindings_dropped"] = publisher.dropped
            publisher.close()
        acc.first_rx = first_rx or None
        acc.last_rx = last_rx or None
        self._counters.update({"started_ns": started, "stopped_ns": mono()})
        with in_netns(self.ns):
            self._counters.update(read_socket_drops(sock))
