"""The sender: flows round-robin at a constant aggregate rate from pre-built frames."""

from __future__ import annotations

import contextlib
import errno
import gc
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import binding, steal
from .batch import Batch, open_batch, slot_size
from .frames import (
    CYCLE_SEED,
    MASK32,
    PACKET_QDISC_BYPASS,
    PATCH,
    PATCH_OFFSET,
    SOL_PACKET,
    Flow,
    FrameSet,
    average_size,
    flow_packet_sizes,
    flows_family,
    parse_sizes,
    patch_udp_checksum,
)
from .netio import bind_socket, in_netns, mac_text, pin_cpu, resolve_dst_mac, set_realtime
from .spawn import Spawned

LAG_BUCKET_NS = 50_000  # resolution of the lateness histogram
STEAL_EVERY_NS = 50_000_000  # how often the sender reads the machine's steal time
STEAL_LAG_NS = 10_000_000  # a delay this long is compared with the steal time around it


def lag_percentile(lags: dict[int, int], fraction: float) -> float:
    """Milliseconds of lateness that FRACTION of the packets did not exceed, from a histogram of
    LAG_BUCKET_NS buckets (the bucket's upper edge: an upper bound); 0.0 without packets."""
    total = sum(lags.values())
    if not total:
        return 0.0
    need = fraction * total
    seen = 0
    for bucket in sorted(lags):
        seen += lags[bucket]
        if seen >= need:
            return (bucket + 1) * LAG_BUCKET_NS / 1e6
    return (max(lags) + 1) * LAG_BUCKET_NS / 1e6


# --------------------------------------------------------------------------- sender
def _flows_json(flows: Sequence[Flow]) -> list[list[Any]]:
    return [[f.flow_id, f.src, f.dst, f.sport, f.dport] for f in flows]


def _flows_from_json(items: Sequence[Sequence[Any]]) -> list[Flow]:
    return [Flow(int(i), str(s), str(d), int(sp), int(dp)) for i, s, d, sp, dp in items]


@dataclass
class Sender:
    """Send FLOWS round-robin out of IFACE at RATE packets/s aggregate (0: as fast as possible).

    Stops after COUNT packets, or after DURATION seconds (with a rate, DURATION becomes the count
    rate * duration, so per-flow counts are known exactly). NS: the namespace to run in (None:
    where the calling thread is). DST_MAC: the next hop's MAC (None: route lookup + neighbour
    table / ARP for the first flow's destination). CPU: pin the sending thread. REALTIME: run it
    SCHED_FIFO so CPU contention does not make it late; veth forwarding runs in softirq on the
    sending CPU and, when deferred to ksoftirqd, waits behind a realtime sender, so keep the rate
    well below what the path forwards (at 20 kpps it costs a fraction of a CPU).

    LEARN_FD: the read end of a pipe a packet-mode `Receiver` publishes NAT bindings on (see
    `binding`): each flow then sends nothing until the binding of forward flow (its id -
    LEARN_OFFSET) is known, and from then on sends to that address and port (the way a server
    answers the source it sees); a change (the flow re-bound on another SRX) redirects it at once.
    LEARN_PATH: a FIFO instead of the pipe (`binding.open_fifo`). LEARN_WAIT: seconds to wait for
    every binding before the first packet.

    Frames leave in batches (sendmmsg, see `batch`): at full speed 64 per call; paced, whatever
    is due each time the sender wakes up, about QUANTUM_MS apart (0: one packet per wakeup). The
    report's ``lag_p50_ms`` / ``lag_p99_ms`` / ``max_lag_ms`` say how late packets left against
    their schedule."""

    iface: str
    flows: list[Flow]
    rate: float = 0.0
    sizes: str | int | list[tuple[int, int]] = "imix"
    duration: float | None = None
    count: int | None = None
    ns: str | None = None
    dst_mac: str | None = None
    qdisc_bypass: bool = True
    seed: int = CYCLE_SEED
    cpu: int | None = None  # pin the sending thread to this CPU
    realtime: bool = False  # SCHED_FIFO for the sending thread (paced rates: keeps the schedule under load)
    learn_fd: int | None = None  # bindings pipe (read end), see the class docstring
    learn_path: str | None = None  # or a FIFO the receiver writes to
    learn_offset: int = 0  # this sender's flow id = forward flow id + LEARN_OFFSET
    learn_wait: float = 3.0
    host_stack: bool = False  # IPv4: a UDP checksum and DF, as a host's stack (a NAT64 translator needs them)
    quantum_ms: float = 0.25  # paced: send what is due in batches about this long apart
    # called once the socket is bound and the frames built, just before the first packet (the CLI
    # says "ready" then: whoever starts the answers waits for the flows that open their sessions)
    on_ready: Callable[[], None] | None = field(default=None, repr=False)
    _rebinds: int = field(default=0, init=False, repr=False)
    _stop: bool = field(default=False, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _result: dict[str, Any] | None = field(default=None, init=False, repr=False)
    _error: BaseException | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.flows:
            raise ValueError("no flows to send")
        if self.count is None and self.duration is None:
            raise ValueError("give a duration or a packet count")
        if self.rate < 0:
            raise ValueError("rate must be >= 0")
        if self.quantum_ms < 0:
            raise ValueError("quantum_ms must be >= 0")
        flows_family(self.flows)  # one family per sender
        if self.count is None and self.rate > 0:
            assert self.duration is not None
            self.count = max(1, round(self.rate * self.duration))

    # ---- configuration as JSON (for spawn and the CLI)
    def config(self) -> dict[str, Any]:
        return {"iface": self.iface, "flows": _flows_json(self.flows), "rate": self.rate,
                "sizes": parse_sizes(self.sizes), "duration": self.duration, "count": self.count,
                "ns": self.ns, "dst_mac": self.dst_mac, "qdisc_bypass": self.qdisc_bypass, "seed": self.seed,
                "cpu": self.cpu, "realtime": self.realtime, "learn_fd": self.learn_fd,
                "learn_path": self.learn_path, "learn_offset": self.learn_offset, "learn_wait": self.learn_wait,
                "quantum_ms": self.quantum_ms, "host_stack": self.host_stack}

    @classmethod
    def from_config(cls, data: dict[str, Any]) -> Sender:
        data = dict(data)
        data["flows"] = _flows_from_json(data["flows"])
        data["sizes"] = [(int(s), int(w)) for s, w in data["sizes"]]
        return cls(**data)

    def per_flow_rate(self) -> float:
        return self.rate / len(self.flows)

    def stop(self) -> None:
        """Ask a running sender to stop after the packet in flight."""
        self._stop = True

    def run(self) -> dict[str, Any]:
        """Send in the calling thread (entering NS for the duration); return the report."""
        pin_cpu(self.cpu)
        if self.realtime and self.rate <= 0:
            raise ValueError("realtime needs a paced rate (at full speed it would monopolise a CPU)")
        with in_netns(self.ns):
            return self._run()

    def start(self) -> Sender:
        """Run in a background thread; `join()` returns the report."""
        def body() -> None:
            try:
                self._result = self.run()
            except BaseException as exc:  # handed to join()
                self._error = exc
        self._thread = threading.Thread(target=body, name=f"traffic-send-{self.iface}", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> dict[str, Any]:
        if self._thread is None:
            raise RuntimeError("sender not started")
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError("sender still running")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def spawn(self) -> Spawned:
        """Run in a child process (`python -m dataplane.traffic send --config -`)."""
        return Spawned("send", self.config(), pass_fds=(self.learn_fd,) if self.learn_fd is not None else ())

    def _run(self) -> dict[str, Any]:
        sizes = parse_sizes(self.sizes)
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # protocol 0: receives nothing
        try:
            bind_socket(sock, (self.iface, 0), self.ns)
            src_mac = mac_text(sock.getsockname()[4])
            hop = None
            dst_mac = self.dst_mac
            if dst_mac is None:
                hop, dst_mac = resolve_dst_mac(self.iface, self.flows[0].dst)
            if self.qdisc_bypass:
                with contextlib.suppress(OSError):
                    sock.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
            built = time.monotonic()
            frames = FrameSet(self.flows, sizes, src_mac, dst_mac, self.seed, host_stack=self.host_stack)
            build_s = time.monotonic() - built
            learned = self._learn(frames) if self.learn_fd is not None or self.learn_path is not None else None
            # The frames (a few hundred ms of CPU) are built before the thread turns realtime: a
            # SCHED_FIFO thread busy that long would hold a CPU the other sender, the receivers and
            # the softirq work of the path need. What is built stays: the collector need not walk it.
            gc.collect()
            gc.freeze()
            if self.on_ready is not None:
                self.on_ready()
            cpu_before = time.thread_time()
            with set_realtime(self.realtime) as granted:
                seqs, errors, stats = self._loop(sock, frames)
            cpu_s = time.thread_time() - cpu_before
        finally:
            sock.close()
        cycle = frames.cycle
        sizes = frames.sizes  # IPv6: the sizes that hold its header (`frames.family_sizes`)
        sent = sum(seqs)
        total_bytes = sum(flow_packet_sizes(cycle, i, n) for i, n in enumerate(seqs))
        elapsed = (stats["end_ns"] - stats["start_ns"]) / 1e9
        per_flow = self.per_flow_rate()
        return {
            "role": "send", "ns": self.ns, "iface": self.iface, "src_mac": src_mac, "dst_mac": dst_mac,
            "next_hop": hop, "family": frames.family, "flows": len(self.flows), "rate_pps": self.rate,
            "per_flow_pps": per_flow, "resolution_ms": 1000.0 / per_flow if per_flow else None,
            "sizes": [list(p) for p in sizes], "avg_size": average_size(sizes),
            "sent": sent, "errors": errors, "error_kinds": stats["error_kinds"],
            "bytes": total_bytes, "start_ns": stats["start_ns"], "end_ns": stats["end_ns"],
            "elapsed_s": elapsed, "pps": sent / elapsed if elapsed > 0 else 0.0,
            "l2_mbps": total_bytes * 8 / elapsed / 1e6 if elapsed > 0 else 0.0,
            "max_lag_ms": stats["max_lag_ns"] / 1e6, "max_lag_at_ns": stats.get("max_lag_at_ns") or None,
            "late_1ms": stats["late"], "lag_p50_ms": lag_percentile(stats["lags"], 0.5),
            "lag_p99_ms": lag_percentile(stats["lags"], 0.99), "lag_p999_ms": lag_percentile(stats["lags"], 0.999),
            "send_calls": stats["calls"], "build_s": build_s,
            "cpu_s": cpu_s,  # this thread's CPU time while sending (softirq work done in its context included)
            "stopped": self._stop, "realtime": granted,
            # the most steal time (the hypervisor running something else) one CPU had during the
            # worst delay, and during the whole run: a paused machine, not a slow sender
            "max_lag_steal_ms": stats["max_lag_steal_ms"], "steal_ms": stats["steal_ms"],
            "per_flow_sent": {str(f.flow_id): n for f, n in zip(self.flows, seqs, strict=True)},
            **({"learned_before_start": learned, "rebinds": self._rebinds,
                "bindings": {str(f.flow_id): f"{f.dst}:{f.dport}" for f in frames.flows}}
               if learned is not None else {}),
        }

    def _learn(self, frames: FrameSet) -> int:
        """Withhold every flow, follow the bindings pipe in a thread; wait for all (LEARN_WAIT at
        most) and return how many flows were known before the first packet."""
        fd = self.learn_fd
        if fd is None:
            assert self.learn_path is not None
            fd = binding.open_fifo(self.learn_path, write=False)
        index = {f.flow_id - self.learn_offset: i for i, f in enumerate(frames.flows)}
        for i in range(len(frames.flows)):
            frames.withhold(i)
        known: set[int] = set()
        everyone = threading.Event()

        def follow() -> None:
            for flow_id, key in binding.read_records(fd):
                i = index.get(flow_id)
                if i is None:
                    continue
                address, port = binding.split(key)
                if frames.rebind(i, address, port) and i in known:
                    self._rebinds += 1
                known.add(i)
                if len(known) == len(index):
                    everyone.set()

        threading.Thread(target=follow, name="traffic-learn", daemon=True).start()
        everyone.wait(self.learn_wait)
        return len(known)

    def _loop(self, sock: socket.socket, frames: FrameSet,
              batch: Batch | None = None) -> tuple[list[int], int, dict[str, Any]]:
        """The hot loop: every packet due is copied from its pre-built frame into a slot of BATCH
        (default: sendmmsg on SOCK), given its sequence number and send time there, and each batch
        leaves in one call.

        Paced: the loop wakes when about QUANTUM_MS worth of packets are due (never before the
        first of them), sends everything due, and sleeps again; its lateness per packet is
        measured when the call that sent it returned (so it includes the forwarding the kernel did
        in that call) and kept in a histogram of LAG_BUCKET_NS (each packet of a batch counted at
        the batch's first, i.e. worst, due time: the percentiles are upper bounds)."""
        flows = len(self.flows)
        cycles = frames.cycles
        length = len(frames.cycle)
        seqs = [0] * flows
        total = self.count if self.count is not None else 1 << 62
        if batch is None:
            batch = open_batch(sock, slot_size(max(len(t) for t in frames.templates.values())))
        stage, slot, slots = batch.stage, batch.slot, batch.slots
        set_length = batch.set_length
        flush = batch.send
        pack = PATCH.pack_into
        offset = frames.payload_offset + PATCH_OFFSET
        summed = frames.checksum_at  # the UDP checksum follows the sequence and time
        checksum = patch_udp_checksum
        mono = time.monotonic_ns
        sleep = time.sleep
        errors = 0
        error_kinds: dict[str, int] = {}
        max_lag = 0
        max_lag_at = 0  # when the worst lateness happened (monotonic ns)
        late = 0  # packets sent more than 1 ms after their due time
        lags: dict[int, int] = {}  # lateness bucket (LAG_BUCKET_NS) -> packets
        calls = 0
        read_steal = steal.read
        steal_first = steal_last = read_steal()
        max_lag_steal = 0.0
        start = mono()
        steal_next = start + STEAL_EVERY_NS
        end = start + int(self.duration * 1e9) if self.duration is not None else 1 << 62
        if self.rate > 0:
            # hard bound: a sender that cannot keep the rate stops at twice its planned time + 1 s
            end = start + int((total / self.rate) * 2e9) + 1_000_000_000
        step = 1e9 / self.rate if self.rate > 0 else 0.0
        # paced: wake up when this many ns worth of packets are due (at least one packet's interval)
        ahead = max(0.0, self.quantum_ms * 1e6 - step) if step else 0.0
        k = 0
        i = 0
        while k < total and not self._stop:
            now = mono()
            if now >= end:
                break
            if step:
                due_first = start + int(k * step)
                if now < due_first + ahead:
                    sleep((due_first + ahead - now) / 1e9)
                    continue
                n = min(int((now - start) / step) + 1, total) - k  # packets due by now
                if n > slots:
                    n = slots
            else:
                due_first = now
                n = min(slots, total - k)
            k_first = k
            ts = now & MASK32
            j = 0
            for _ in range(n):
                seq = seqs[i]
                frame_cycle = cycles[i]
                if frame_cycle is not None:  # None: binding not known yet, this slot passes
                    buf = frame_cycle[seq % length]
                    size = len(buf)
                    at = j * slot
                    stage[at:at + size] = buf
                    pack(stage, at + offset, seq, ts)
                    if summed:
                        checksum(stage, at, seq, ts, summed)
                    set_length(j, size)
                    j += 1
                    seqs[i] = seq + 1
                i += 1
                if i == flows:
                    i = 0
            k += n
            if j:
                failed = flush(j)
                calls += 1
                if failed:
                    errors += len(failed)
                    for code in failed:
                        name = errno.errorcode.get(code, str(code))
                        error_kinds[name] = error_kinds.get(name, 0) + 1
            if step:
                after = mono()
                lag = after - due_first
                worst = lag > STEAL_LAG_NS and lag > max_lag
                if worst or after >= steal_next:
                    # steal read every STEAL_EVERY_NS, and after a long delay that is the worst so
                    # far (not again for each late batch while the sender catches up): what one CPU
                    # lost to the hypervisor since the reading before the delay
                    steal_now = read_steal()
                    if worst:
                        max_lag_steal = steal.most(steal_last, steal_now)
                    steal_last, steal_next = steal_now, after + STEAL_EVERY_NS
                if lag > 0:
                    bucket = lag // LAG_BUCKET_NS
                    lags[bucket] = lags.get(bucket, 0) + n
                    if lag > max_lag:
                        max_lag, max_lag_at = lag, after
                    if lag > 1_000_000:  # how many of this batch were due more than 1 ms before
                        late += min(n, int((after - 1_000_000 - start) / step) + 1 - k_first)
                else:
                    lags[0] = lags.get(0, 0) + n
        return seqs, errors, {"start_ns": start, "end_ns": mono(), "max_lag_ns": max_lag, "late": late,
                              "max_lag_at_ns": max_lag_at, "error_kinds": error_kinds, "lags": lags,
                              "max_lag_steal_ms": max_lag_steal, "steal_ms": steal.most(steal_first, read_steal()),
                              "calls": calls}
