"""The traffic generator's pure parts: frames, sizes, IMIX, pacing loop and receiver accounting."""

from __future__ import annotations

import errno
import random
import socket
import struct
import threading
import time
from collections import Counter

import pytest

from dataplane import traffic
from dataplane.traffic import (
    HEADER,
    IMIX,
    MAGIC,
    PAYLOAD_OFFSET,
    Accounting,
    Flow,
    FlowStats,
    FrameSet,
    Receiver,
    Sender,
    average_size,
    build_frame,
    derive_frame,
    flow_packet_sizes,
    ipv4_checksum,
    make_flows,
    parse_sizes,
    patch,
    restore_timestamp,
    reverse_flows,
    size_cycle,
)
from dataplane.traffic import batch as batchmod
from dataplane.traffic.batch import LoopBatch, MmsgBatch
from dataplane.traffic.send import LAG_BUCKET_NS, lag_percentile

SRC_MAC, DST_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
FLOW = Flow(7, "100.64.1.2", "203.0.113.10", 40000, 7000)
MS = 1_000_000


# --------------------------------------------------------------------------- frames
@pytest.mark.parametrize("size", [64, 65, 127, 255, 511, 700, 1024, 1518])
def test_frame_is_size_minus_fcs_with_consistent_headers(size: int) -> None:
    frame = build_frame(FLOW, size, SRC_MAC, DST_MAC)
    assert len(frame) == size - 4  # sizes count the FCS, a veth carries none
    assert frame[0:6] == bytes.fromhex("020000000002") and frame[6:12] == bytes.fromhex("020000000001")
    assert frame[12:14] == b"\x08\x00"
    ip = frame[14:34]
    assert ip[0] == 0x45 and ip[9] == 17 and ip[8] == 64
    assert struct.unpack("!H", ip[2:4])[0] == size - 4 - 14  # IP total length
    assert ipv4_checksum(ip[:10] + b"\0\0" + ip[12:]) == struct.unpack("!H", ip[10:12])[0]
    assert socket.inet_ntoa(ip[12:16]) == FLOW.src and socket.inet_ntoa(ip[16:20]) == FLOW.dst
    sport, dport, length, checksum = struct.unpack("!HHHH", frame[34:42])
    assert (sport, dport, length, checksum) == (40000, 7000, size - 4 - 34, 0)
    assert HEADER.unpack_from(frame, PAYLOAD_OFFSET) == (MAGIC, 7, 0, 0)
    assert not any(frame[PAYLOAD_OFFSET + HEADER.size:])  # zero padding


def test_64_byte_frame_has_exactly_the_header_as_payload() -> None:
    frame = build_frame(FLOW, 64, SRC_MAC, DST_MAC)
    assert len(frame) - PAYLOAD_OFFSET == HEADER.size == 18


def test_too_small_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="below 64"):
        build_frame(FLOW, 63, SRC_MAC, DST_MAC)
    with pytest.raises(ValueError, match="below 64"):
        parse_sizes("60")


def test_patch_writes_only_sequence_and_timestamp() -> None:
    frame = build_frame(FLOW, 127, SRC_MAC, DST_MAC)
    before = bytes(frame)
    patch(frame, 2**40 + 5, 0x1234_5678_9ABC)
    assert HEADER.unpack_from(frame, PAYLOAD_OFFSET) == (MAGIC, 7, 2**40 + 5, 0x5678_9ABC)
    changed = [i for i in range(len(frame)) if frame[i] != before[i]]
    assert changed and min(changed) >= PAYLOAD_OFFSET + 6 and max(changed) < PAYLOAD_OFFSET + 18
    # no IP field changed, so the IP checksum stays valid; UDP checksum 0 needs no update
    assert frame[14:34] == before[14:34]


def test_derived_frames_are_byte_identical_to_scapy_builds() -> None:
    flows = make_flows(500, "100.64.0.0/16", ["203.0.113.10", "203.0.113.77"], vary_ports=True, first_id=1000)
    rng = random.Random(1)
    for size, _ in IMIX:
        template = build_frame(flows[0], size, SRC_MAC, DST_MAC)
        for flow in rng.sample(flows, 15):
            assert derive_frame(template, flow) == build_frame(flow, size, SRC_MAC, DST_MAC)


# --------------------------------------------------------------------------- sizes and IMIX
def test_parse_sizes() -> None:
    assert parse_sizes("imix") == list(IMIX)
    assert parse_sizes("IMIX") == list(IMIX)
    assert parse_sizes("700") == [(700, 1)]
    assert parse_sizes(700) == [(700, 1)]
    assert parse_sizes("64,1518") == [(64, 1), (1518, 1)]
    assert parse_sizes("64:7, 1518:3") == [(64, 7), (1518, 3)]
    assert parse_sizes([(128, 2)]) == [(128, 2)]
    with pytest.raises(ValueError, match="weight"):
        parse_sizes("128:0")


def test_imix_weights_and_average() -> None:
    assert sum(w for _, w in IMIX) == 100
    assert average_size(IMIX) == pytest.approx(711.83)  # with FCS; 707.83 bytes on a veth
    cycle = size_cycle(IMIX)
    assert len(cycle) == 100
    assert Counter(cycle) == dict(IMIX)
    assert cycle == size_cycle(IMIX)  # deterministic
    assert cycle != sorted(cycle)  # but mixed, not in blocks
    assert sum(cycle) / len(cycle) == pytest.approx(711.83)


def test_every_flow_and_the_aggregate_follow_the_imix_weights() -> None:
    flows = make_flows(7)
    frames = FrameSet(flows, IMIX, SRC_MAC, DST_MAC)
    length = len(frames.cycle)
    aggregate: Counter[int] = Counter()
    for index in range(len(flows)):
        sizes = Counter(len(frames.frame(index, seq)) + 4 for seq in range(length))
        assert sizes == dict(IMIX)
        aggregate += sizes
        assert flow_packet_sizes(frames.cycle, index, 237) == sum(
            len(frames.frame(index, seq)) + 4 for seq in range(237))
    assert sum(s * n for s, n in aggregate.items()) / sum(aggregate.values()) == pytest.approx(711.83)
    # flows start at different points of the cycle: the first packets are not all the same size
    assert len({len(frames.frame(i, 0)) for i in range(len(flows))}) > 1
    # each size is built once per flow: the cycle holds references, not copies
    assert len({id(f) for f in frames.cycles[0]}) == len(IMIX)


def test_fixed_size_frame_set() -> None:
    frames = FrameSet(make_flows(3), parse_sizes("512"), SRC_MAC, DST_MAC)
    assert {len(f) for cycle in frames.cycles for f in cycle} == {508}


# --------------------------------------------------------------------------- flows
def test_make_flows_distinct_sources_and_reverse() -> None:
    flows = make_flows(200, "100.64.0.0/16", "203.0.113.10")
    assert len({f.src for f in flows}) == 200 and flows[0].src == "100.64.0.1"
    assert {f.dst for f in flows} == {"203.0.113.10"} and {f.sport for f in flows} == {40000}
    assert [f.flow_id for f in flows] == list(range(200))
    varied = make_flows(3, sport=65534, vary_ports=True)
    assert [f.sport for f in varied] == [65534, 65535, 1024]
    back = reverse_flows(flows[:2], id_offset=1000)
    assert back[1] == Flow(1001, "203.0.113.10", "100.64.0.2", 7000, 40000)
    with pytest.raises(ValueError, match="source addresses"):
        make_flows(300, "100.64.0.0/24")


# --------------------------------------------------------------------------- sender loop (fake socket)
class FakeSocket:
    def __init__(self, fail: set[int] | None = None):
        self.packets: list[tuple[int, int, int]] = []  # (flow id, seq, size)
        self.times: list[int] = []
        self.fail = fail or set()
        self.calls = 0

    def send(self, data: bytearray | memoryview) -> int:
        self.calls += 1
        if self.calls in self.fail:
            raise OSError(errno.ENOBUFS, "No buffer space available")
        _, flow_id, seq, _ = HEADER.unpack_from(data, PAYLOAD_OFFSET)
        self.packets.append((flow_id, seq, len(data) + 4))
        self.times.append(time.monotonic_ns())
        return len(data)


def test_sender_loop_round_robin_paced_and_counted() -> None:
    flows = make_flows(4)
    sender = Sender(iface="fake", flows=flows, rate=4000, sizes="imix", duration=0.1)
    assert sender.count == 400
    fake = FakeSocket(fail={5, 6})
    frames = FrameSet(flows, IMIX, SRC_MAC, DST_MAC)
    seqs, errors, stats = sender._loop(fake, frames, LoopBatch(fake, 2048))  # type: ignore[arg-type]
    assert seqs == [100, 100, 100, 100] and errors == 2 and stats["error_kinds"] == {"ENOBUFS": 2}
    # round robin, per-flow sequence numbers; the failed sends (calls 5 and 6) used theirs up
    expected = [(k % 4, k // 4) for k in range(400) if k not in (4, 5)]
    assert [(f, s) for f, s, _ in fake.packets] == expected
    elapsed = (fake.times[-1] - fake.times[0]) / 1e9
    assert 0.09 <= elapsed < 1.0  # 400 packets at 4000 pps: ~0.1 s (paced, not as fast as possible)
    sizes = Counter(size for _, _, size in fake.packets)
    assert set(sizes) <= {s for s, _ in IMIX}


def test_sender_needs_a_bound() -> None:
    with pytest.raises(ValueError, match="duration or a packet count"):
        Sender(iface="x", flows=make_flows(1))
    unpaced = Sender(iface="x", flows=make_flows(1), rate=0, duration=1.0)
    assert unpaced.count is None


def test_sender_config_round_trip() -> None:
    sender = Sender(iface="eth1", flows=make_flows(3), rate=300, sizes="64:1,1518:2", count=30, ns="tg1-client")
    again = Sender.from_config(sender.config())
    assert again.config() == sender.config() and again.flows == sender.flows


# --------------------------------------------------------------------------- receiver accounting
def feed(stats: FlowStats, seqs: list[int], interval: int = 10 * MS, start: int = 10**12) -> None:
    for seq in seqs:
        ts = start + seq * interval
        stats.add(seq, ts, ts + 50_000)


def test_in_order_flow_has_no_loss() -> None:
    stats = FlowStats(1)
    feed(stats, list(range(100)))
    report = stats.report(rate=100, sent=100)
    assert (report["received"], report["lost"], report["duplicates"], report["reordered"]) == (100, 0, 0, 0)
    assert report["convergence_ms"] == 0 and report["max_gap_ms"] == 10.0
    assert report["latency_us"] == {"min": 50.0, "avg": 50.0, "max": 50.0}
    assert stats.estimated_rate() == pytest.approx(100)


def test_outage_gives_loss_gap_and_convergence() -> None:
    stats = FlowStats(1)
    feed(stats, [s for s in range(200) if not 50 <= s < 80])  # 30 packets lost at 100 pps
    report = stats.report(rate=100, sent=200)
    assert report["lost"] == 30
    assert report["convergence_ms"] == 300.0  # lost / rate
    assert report["max_gap_ms"] == 310.0  # from packet 49 to packet 80, on send times
    assert report["max_gap_start_ns"] == 10**12 + 49 * 10 * MS
    assert report["first_seen_ns"] == 10**12 + 50_000 and report["last_seen_ns"] == 10**12 + 199 * 10 * MS + 50_000


def test_duplicates_and_reordering() -> None:
    stats = FlowStats(1)
    feed(stats, [0, 1, 2, 4, 5, 3, 5, 6, 2, 9, 7, 10])
    report = stats.report(rate=100)
    assert report["reordered"] == 2  # 3 after 5, 7 after 9
    assert report["duplicates"] == 2  # the second 5 and the second 2
    assert report["received"] == 10 and report["lost"] == 1  # 8 never came
    assert stats.holes == [[8, 9]]


def test_late_packets_split_and_close_holes() -> None:
    stats = FlowStats(1)
    feed(stats, [0, 10, 5, 1, 9, 3])
    assert stats.holes == [[2, 3], [4, 5], [6, 9]]
    assert stats.lost() == 5 and stats.reordered == 4
    feed(stats, [2, 4, 6, 7, 8])
    assert stats.holes == [] and stats.lost() == 0 and stats.received == 11


def test_leading_and_tail_loss() -> None:
    stats = FlowStats(1)
    feed(stats, list(range(5, 90)))
    assert stats.lost() == 5  # 0..4 never seen
    report = stats.report(rate=100, sent=100, end_ts=10**12 + 100 * 10 * MS)
    assert report["lost"] == 15 and report["convergence_ms"] == 150.0
    assert report["max_gap_ms"] == 110.0  # from packet 89 to the sender's end
    assert stats.estimated_rate() == pytest.approx(100)


def test_convergence_without_a_given_rate_uses_the_send_times() -> None:
    stats = FlowStats(1)
    feed(stats, [s for s in range(100) if s % 10], interval=4 * MS)  # 250 pps, 10 lost
    assert stats.report()["convergence_ms"] == pytest.approx(40.0, abs=0.01)


def test_timestamp_restored_across_the_32_bit_wrap() -> None:
    for sent in (5, 2**32 - 10, 2**32 + 3, 7 * 2**32 + 123456789):
        for delay in (0, 1, 999_999, 4_000_000_000):
            assert restore_timestamp(sent & 0xFFFFFFFF, sent + delay) == sent


def test_accounting_of_payloads_and_report_with_a_sender_report() -> None:
    flows = make_flows(3)
    frames = {f.flow_id: build_frame(f, 64, SRC_MAC, DST_MAC) for f in flows}
    acc = Accounting()
    base = 5 * 2**32 + 1000
    for seq in range(20):
        for flow in flows:
            if flow.flow_id == 1 and 5 <= seq < 8:
                continue
            if flow.flow_id == 2 and seq >= 15:
                continue  # tail lost
            frame = frames[flow.flow_id]
            patch(frame, seq, base + seq * 10 * MS)
            assert acc.add_payload(frame, base + seq * 10 * MS + 30_000, offset=PAYLOAD_OFFSET)
    assert not acc.add_payload(b"\x00" * 64, base)  # no magic
    assert not acc.add_payload(b"TG", base)  # too short
    sent = {"per_flow_sent": {"0": 20, "1": 20, "2": 20, "3": 20}, "per_flow_pps": 100.0,
            "end_ns": base + 20 * 10 * MS}
    report = acc.report(sent=sent)
    per_flow = {f["flow"]: f for f in report["per_flow"]}
    assert [per_flow[i]["lost"] for i in range(4)] == [0, 3, 5, 20]
    assert [per_flow[i]["convergence_ms"] for i in range(4)] == [0.0, 30.0, 50.0, 200.0]
    assert per_flow[1]["max_gap_start_ns"] == base + 4 * 10 * MS  # send time restored from 32 bits
    assert per_flow[0]["latency_us"]["avg"] == 30.0
    assert report["flows"] == 4 and report["flows_never_seen"] == 1 and report["flows_with_loss"] == 3
    assert report["lost"] == 28 and report["foreign"] == 2 and report["resolution_ms"] == 10.0
    assert report["convergence_ms"] == {"min": 0.0, "avg": 70.0, "max": 200.0}


def test_accounting_state_round_trip() -> None:
    acc = Accounting()
    for seq in (0, 1, 4, 2, 2, 7):
        acc.add(3, seq, 10**9 + seq * MS, 10**9 + seq * MS + 1000)
    again = Accounting.from_state(acc.state())
    assert again.report(rate_per_flow=1000) == acc.report(rate_per_flow=1000)


# --------------------------------------------------------------------------- receiver loop (loopback, no root)
@pytest.mark.parametrize("poll", [0.0, 0.001])
def test_receiver_thread_counts_udp_payloads(poll: float) -> None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    receiver = Receiver(port=port, bind="127.0.0.1", rate_per_flow=1000, poll_interval=poll).start()
    flows = [Flow(i, "127.0.0.1", "127.0.0.1", 1, port) for i in range(2)]
    payloads = {f.flow_id: build_frame(f, 100, SRC_MAC, DST_MAC)[PAYLOAD_OFFSET:] for f in flows}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
        for seq in range(50):
            for flow_id, payload in payloads.items():
                if flow_id == 1 and seq in (10, 11):
                    continue
                struct.pack_into("!QI", payload, 6, seq, time.monotonic_ns() & 0xFFFFFFFF)
                out.sendto(payload, ("127.0.0.1", port))
        out.sendto(b"not ours", ("127.0.0.1", port))
    time.sleep(0.05)
    report = receiver.stop()
    per_flow = {f["flow"]: f for f in report["per_flow"]}
    assert per_flow[0]["received"] == 50 and per_flow[0]["lost"] == 0
    assert per_flow[1]["received"] == 48 and per_flow[1]["lost"] == 2
    assert per_flow[1]["convergence_ms"] == 2.0
    assert report["foreign"] == 1
    assert 0 <= per_flow[0]["latency_us"]["min"] < 1e6


def test_receiver_stops_by_itself_when_idle() -> None:
    receiver = Receiver(port=0, bind="127.0.0.1", idle=0.1, duration=5)
    result: dict[str, object] = {}

    def body() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
            assert receiver.ready.wait(2)
            payload = build_frame(FLOW, 64, SRC_MAC, DST_MAC)[PAYLOAD_OFFSET:]
            struct.pack_into("!QI", payload, 6, 0, time.monotonic_ns() & 0xFFFFFFFF)
            out.sendto(payload, ("127.0.0.1", port_of(receiver)))

    threading.Thread(target=body, daemon=True).start()
    started = time.monotonic()
    result.update(receiver.run())
    assert time.monotonic() - started < 2  # the idle limit, not the 5 s duration, ended it
    assert result["received"] == 1 and result["flows"] == 1


def port_of(receiver: Receiver) -> int:
    assert receiver.ready.wait(2) and receiver.bound_port
    return receiver.bound_port


def test_receiver_stops_when_asked_without_traffic() -> None:
    receiver = Receiver(port=0, bind="127.0.0.1", duration=5).start()
    time.sleep(0.1)
    report = receiver.stop()
    assert report["received"] == 0 and report["flows"] == 0


def test_receiver_needs_a_port_or_an_interface() -> None:
    with pytest.raises(ValueError, match="port"):
        Receiver()


def test_cli_rejects_a_sender_without_bound() -> None:
    with pytest.raises(SystemExit):
        traffic.main(["send", "--iface", "eth1"])


def test_realtime_is_refused_at_full_speed() -> None:
    with pytest.raises(ValueError, match="paced rate"):
        Sender(iface="x", flows=make_flows(1), rate=0, duration=1, realtime=True).run()


def test_spawned_receiver_reports_with_the_senders_counts() -> None:
    """The child-process protocol (config on stdin, ready line, report line, stop = stdin closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = Receiver(port=port, bind="127.0.0.1", duration=20).spawn()
    try:
        child.wait_ready()
        payload = build_frame(FLOW, 64, SRC_MAC, DST_MAC)[PAYLOAD_OFFSET:]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
            for seq in (0, 1, 2, 4):
                struct.pack_into("!QI", payload, 6, seq, time.monotonic_ns() & 0xFFFFFFFF)
                out.sendto(payload, ("127.0.0.1", port))
        time.sleep(0.1)
        report = child.stop(sent={"per_flow_sent": {"7": 6}, "per_flow_pps": 100.0})
    finally:
        child.kill()
    assert child.proc.returncode == 0
    flow = report["per_flow"][0]
    assert (flow["flow"], flow["received"], flow["lost"], flow["convergence_ms"]) == (7, 4, 2, 20.0)
    assert report["rate_per_flow_pps"] == 100.0 and "state" not in report


# --------------------------------------------------------------------------- batched I/O (socket pairs, no root)
BATCHES = [LoopBatch, *([MmsgBatch] if batchmod.available() else [])]


def unix_pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    b.setblocking(False)
    return a, b


def drain(sock: socket.socket) -> list[bytes]:
    out = []
    while True:
        try:
            out.append(sock.recv(65536))
        except BlockingIOError:
            return out


@pytest.mark.parametrize("kind", BATCHES)
def test_batch_sends_slots_in_order_and_skips_a_refused_one(kind: type[LoopBatch]) -> None:
    a, b = unix_pair()
    with a, b:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # a datagram above it: EMSGSIZE
        out = kind(a, 16384, 4)
        lengths = [100, 15000, 60, 1514]
        for j, n in enumerate(lengths):
            out.stage[j * 16384:j * 16384 + n] = bytes([j + 1]) * n
            out.set_length(j, n)
        assert out.send(4) == [errno.EMSGSIZE]  # the second is refused, the others still go, in order
        assert [(len(d), d[0]) for d in drain(b)] == [(100, 1), (60, 3), (1514, 4)]
        assert out.send(1) == [] and drain(b) == [bytes([1]) * 100]  # slots and lengths are kept


@pytest.mark.parametrize("kind", BATCHES)
def test_batch_receives_what_is_queued_without_blocking(kind: type[LoopBatch]) -> None:
    a, b = unix_pair()
    with a, b:
        into = kind(b, 2048, 3)
        assert into.receive() == 0
        for n in (70, 1514, 64, 200):
            a.send(bytes([n % 251]) * n)
        assert into.receive() == 3  # at most its slots
        assert [into.length(j) for j in range(3)] == [70, 1514, 64]
        assert into.stage[2048:2048 + 1514] == bytes([1514 % 251]) * 1514
        assert into.receive() == 1 and into.length(0) == 200 and into.stage[:200] == bytes([200]) * 200
        assert into.receive() == 0


def test_lag_percentiles_are_bucket_upper_edges() -> None:
    assert lag_percentile({}, 0.99) == 0.0
    lags = {0: 980, 3: 15, 40: 5}  # 98 % under 50 us, 1.5 % in 150-200 us, 0.5 % in 2.0-2.05 ms
    assert lag_percentile(lags, 0.5) == LAG_BUCKET_NS / 1e6
    assert lag_percentile(lags, 0.99) == 4 * LAG_BUCKET_NS / 1e6
    assert lag_percentile(lags, 0.999) == 41 * LAG_BUCKET_NS / 1e6


@pytest.mark.skipif(not batchmod.available(), reason="no sendmmsg in this C library")
def test_paced_sender_batches_every_flow_in_order_over_sendmmsg() -> None:
    a, b = unix_pair()
    with a, b:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        flows = make_flows(5)
        sender = Sender(iface="x", flows=flows, rate=2000, duration=0.2, quantum_ms=10)
        frames = FrameSet(flows, IMIX, SRC_MAC, DST_MAC)
        started = time.monotonic()
        seqs, errors, stats = sender._loop(a, frames)
        elapsed = time.monotonic() - started
        got = drain(b)
    assert seqs == [80] * 5 and errors == 0 and len(got) == 400
    seen: dict[int, list[int]] = {}
    for data in got:
        magic, flow_id, seq, _ = HEADER.unpack_from(data, PAYLOAD_OFFSET)
        assert magic == MAGIC and data[:PAYLOAD_OFFSET] == frames.frame(flow_id, seq)[:PAYLOAD_OFFSET]
        assert len(data) + 4 == frames.cycle[(seq + flow_id) % len(frames.cycle)]  # the flow's IMIX position
        seen.setdefault(flow_id, []).append(seq)
    assert seen == {i: list(range(80)) for i in range(5)}
    assert elapsed >= 0.18  # paced: 400 packets at 2000 pps
    # 10 ms quanta at 2000 pps: about 20 packets per call (not one call per packet)
    assert stats["calls"] < 100 and sum(stats["lags"].values()) == 400


def test_a_sender_held_up_reports_how_late_it_was() -> None:
    class SlowSocket(FakeSocket):
        def send(self, data: bytearray | memoryview) -> int:
            if self.calls == 20:
                time.sleep(0.02)  # one send takes 20 ms: the packets due meanwhile leave late
            return super().send(data)

    flows = make_flows(4)
    sender = Sender(iface="fake", flows=flows, rate=2000, count=200, quantum_ms=0)
    slow = SlowSocket()
    seqs, errors, stats = sender._loop(slow, FrameSet(flows, IMIX, SRC_MAC, DST_MAC), LoopBatch(slow, 2048))
    assert seqs == [50] * 4 and errors == 0
    assert stats["max_lag_ns"] >= 18 * MS and stats["late"] >= 10  # 20 ms at 0.5 ms per packet
    assert lag_percentile(stats["lags"], 1.0) >= 18  # the histogram holds the worst packet too


def test_packet_mode_receiver_parses_batches_and_tracks_bindings() -> None:
    """Packet mode on frames read in batches: our UDP frames counted per flow, the rest foreign,
    each flow's source address:port (its NAT binding) recorded with its change."""
    frames = []
    for seq in range(3):
        for flow in (FLOW, Flow(8, "198.51.100.1", "203.0.113.10", 1024, 7000)):
            if seq == 2 and flow.flow_id == 8:  # flow 8 re-bound on another address and port
                flow = Flow(8, "198.51.100.17", "203.0.113.10", 2048, 7000)
            frame = build_frame(flow, 127, SRC_MAC, DST_MAC)
            patch(frame, seq, time.monotonic_ns())
            frames.append(bytes(frame))
    frames.insert(2, bytes(60))  # not IPv4/UDP: foreign

    class Queued(LoopBatch):
        def __init__(self) -> None:
            super().__init__(socket.socket(socket.AF_INET, socket.SOCK_DGRAM), 2048, 4)
            self.queue = list(frames)

        def receive(self) -> int:
            count = min(self.slots, len(self.queue))
            for j in range(count):
                data = self.queue.pop(0)
                self.stage[j * self.slot:j * self.slot + len(data)] = data
                self.lengths[j] = len(data)
            if not count:
                receiver._stop = True
            return count

    receiver = Receiver(iface="fake", poll_interval=0.001)
    queued = Queued()
    with queued.sock:
        receiver._loop(queued.sock, -1, queued)
    report = receiver.report()
    per_flow = {f["flow"]: f for f in report["per_flow"]}
    assert report["foreign"] == 1 and per_flow[7]["received"] == 3 and per_flow[8]["received"] == 3
    assert per_flow[7]["bindings"] == ["100.64.1.2:40000"] and per_flow[7]["binding_changes"] == 0
    assert per_flow[8]["bindings"] == ["198.51.100.1:1024", "198.51.100.17:2048"]
    assert per_flow[8]["binding_changes"] == 1
