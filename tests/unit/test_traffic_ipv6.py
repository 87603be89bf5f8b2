"""The traffic generator's IPv6 frames (rootless): headers, sizes, the UDP checksum kept right per packet,
derived frames against scapy builds, the sender loop and the packet-mode receiver on IPv6 frames."""

from __future__ import annotations

import socket
import struct
import time
from collections import Counter

import pytest

from dataplane.traffic import IMIX, Flow, FrameSet, Receiver, Sender, build_frame, derive_frame, make_flows, patch
from dataplane.traffic.batch import LoopBatch
from dataplane.traffic.frames import (
    HEADER,
    MIN_SIZE6,
    PAYLOAD_OFFSET6,
    average_size,
    family_sizes,
    flows_family,
    patch_udp_checksum,
    reverse_flows,
    udp6_checksum,
)

SRC_MAC, DST_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
FLOW6 = Flow(7, "2001:db8:172:80::2", "2001:db8:203::a", 40000, 7000)


def _scapy_checksum_ok(frame: bytes | bytearray) -> bool:
    """scapy's own verdict: the frame rebuilt with its UDP checksum recomputed is the same frame."""
    from scapy.layers.inet import UDP
    from scapy.layers.l2 import Ether

    packet = Ether(bytes(frame))
    del packet[UDP].chksum
    return bytes(packet) == bytes(frame)


@pytest.mark.parametrize("size", [84, 127, 255, 511, 1024, 1518])
def test_ipv6_frame_keeps_the_size_and_carries_20_fewer_payload_bytes(size: int) -> None:
    frame = build_frame(FLOW6, size, SRC_MAC, DST_MAC)
    assert len(frame) == size - 4 and frame[12:14] == b"\x86\xdd"
    ip = frame[14:54]
    assert ip[0] >> 4 == 6 and ip[6] == 17 and ip[7] == 64  # version, next header UDP, hop limit
    assert struct.unpack("!H", ip[4:6])[0] == size - 4 - 14 - 40  # payload length
    assert socket.inet_pton(socket.AF_INET6, FLOW6.src) == ip[8:24]
    assert socket.inet_pton(socket.AF_INET6, FLOW6.dst) == ip[24:40]
    sport, dport, length, checksum = struct.unpack("!HHHH", frame[54:62])
    assert (sport, dport, length) == (40000, 7000, size - 4 - 54)
    assert checksum != 0 and checksum == udp6_checksum(frame)  # IPv6 forbids a zero UDP checksum
    assert HEADER.unpack_from(frame, PAYLOAD_OFFSET6)[:2] == (0x5447, 7)
    payload = size - 4 - PAYLOAD_OFFSET6
    ipv4 = build_frame(Flow(7, "100.64.1.2", "203.0.113.10", 40000, 7000), size, SRC_MAC, DST_MAC)
    assert payload == len(ipv4) - 42 - 20  # the same frame size, 20 bytes less payload than IPv4


def test_ipv6_minimum_is_84_and_imix_64_becomes_84() -> None:
    assert MIN_SIZE6 == 84 and len(build_frame(FLOW6, 84, SRC_MAC, DST_MAC)) - PAYLOAD_OFFSET6 == 18
    with pytest.raises(ValueError, match="below 84 for IPv6"):
        build_frame(FLOW6, 83, SRC_MAC, DST_MAC)
    six = family_sizes(IMIX, 6)
    assert six == [(84, 8), (127, 36), (255, 11), (511, 4), (1024, 2), (1518, 39)]
    assert family_sizes(IMIX, 4) == list(IMIX)
    assert average_size(six) == pytest.approx(average_size(IMIX) + 8 * 20 / 100)  # 713.43


def test_per_packet_checksum_update_matches_a_full_build() -> None:
    """What the sender does per packet (sequence and time written, checksum updated from the
    pre-built one) gives the frame scapy builds with that sequence and time, for any values."""
    template = build_frame(FLOW6, 127, SRC_MAC, DST_MAC)
    for seq, ts in [(0, 0), (1, 2), (2**40 + 5, 0x5678_9ABC), (2**64 - 1, 0xFFFF_FFFF), (0xFFFF, 0x1_0000)]:
        frame = bytearray(template)
        struct.pack_into("!QI", frame, PAYLOAD_OFFSET6 + 6, seq, ts)
        patch_udp_checksum(frame, 0, seq, ts)
        assert frame == build_frame(FLOW6, 127, SRC_MAC, DST_MAC, seq=seq, timestamp=ts)
        assert _scapy_checksum_ok(frame)
    patched = bytearray(template)
    patch(patched, 2**40 + 5, 0x5678_9ABC)
    assert patched == build_frame(FLOW6, 127, SRC_MAC, DST_MAC, seq=2**40 + 5, timestamp=0x5678_9ABC)


def test_derived_ipv6_frames_are_byte_identical_to_scapy_builds() -> None:
    flows = make_flows(40, "2001:db8:172:80::/112", "2001:db8:203::a", vary_ports=True)
    flows += reverse_flows(flows, 100000)[:5]
    for size in (84, 512, 1518):
        template = build_frame(flows[0], size, SRC_MAC, DST_MAC)
        for flow in flows:
            assert derive_frame(template, flow) == build_frame(flow, size, SRC_MAC, DST_MAC)


def test_flows_are_of_one_family() -> None:
    flows = make_flows(3, "2001:db8:172:80::/120", "2001:db8:203::a")
    assert [f.src for f in flows] == ["2001:db8:172:80::1", "2001:db8:172:80::2", "2001:db8:172:80::3"]
    assert flows_family(flows) == 6 and flows[0].family == 6
    with pytest.raises(ValueError, match="not of one IP version"):
        make_flows(3, "2001:db8:172:80::/120", "203.0.113.10")
    with pytest.raises(ValueError, match="IPv4 and IPv6 in one sender"):
        Sender(iface="x", flows=flows + make_flows(1), rate=10, duration=1)


class FakeSocket:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def send(self, data: bytearray | memoryview) -> int:
        self.frames.append(bytes(data))
        return len(data)


def test_sender_loop_sends_ipv6_frames_with_valid_checksums() -> None:
    flows = make_flows(4, "2001:db8:172:80::/112", "2001:db8:203::a")
    sender = Sender(iface="fake", flows=flows, rate=4000, sizes="imix", duration=0.05)
    fake = FakeSocket()
    frames = FrameSet(flows, IMIX, SRC_MAC, DST_MAC)
    assert frames.family == 6 and frames.sizes[0] == (84, 8)
    seqs, errors, _ = sender._loop(fake, frames, LoopBatch(fake, 2048))  # type: ignore[arg-type]
    assert seqs == [50] * 4 and errors == 0
    seen = []
    for data in fake.frames:
        _, flow_id, seq, _ = HEADER.unpack_from(data, PAYLOAD_OFFSET6)
        assert struct.unpack_from("!H", data, 60)[0] == udp6_checksum(data), (flow_id, seq)
        seen.append((flow_id, seq))
    assert seen == [(k % 4, k // 4) for k in range(200)]
    assert set(Counter(len(d) + 4 for d in fake.frames)) <= {84, 127, 255, 511, 1024, 1518}


def test_packet_mode_receiver_counts_ipv6_frames() -> None:
    other = Flow(8, "2001:db8:172:80::9", "2001:db8:203::a", 40000, 7000)
    frames = []
    for seq in range(3):
        for flow in (FLOW6, other):
            frame = build_frame(flow, 127, SRC_MAC, DST_MAC)
            patch(frame, seq, time.monotonic_ns())
            frames.append(bytes(frame))
    tcp = bytearray(frames[0])
    tcp[20] = 6  # next header TCP: not ours
    frames += [bytes(tcp), bytes(70)]

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

    receiver = Receiver(iface="fake", family=6, poll_interval=0.001)
    queued = Queued()
    with queued.sock:
        receiver._loop(queued.sock, -6, queued)
    report = receiver.report()
    per_flow = {f["flow"]: f for f in report["per_flow"]}
    assert report["foreign"] == 2 and per_flow[7]["received"] == 3 and per_flow[8]["received"] == 3
    assert per_flow[7]["lost"] == 0 and "bindings" not in per_flow[7]


def test_ipv6_receiver_has_no_nat_bindings() -> None:
    with pytest.raises(ValueError, match="IPv4 only"):
        Receiver(iface="x", family=6, learn_path="/nonexistent")
    with pytest.raises(ValueError, match="4 or 6"):
        Receiver(port=1, family=5)


def test_udp_receiver_counts_ipv6_datagrams_on_loopback() -> None:
    receiver = Receiver(port=0, bind="::1", family=6, poll_interval=0.001).start()
    try:
        assert receiver.bound_port is not None
        payload = build_frame(FLOW6, 127, SRC_MAC, DST_MAC)[PAYLOAD_OFFSET6:]
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
            for seq in range(5):
                struct.pack_into("!QI", payload, 6, seq, time.monotonic_ns() & 0xFFFFFFFF)
                sock.sendto(payload, ("::1", receiver.bound_port))
        deadline = time.monotonic() + 5
        while receiver.accounting.flows.get(7) is None or receiver.accounting.flows[7].received < 5:
            assert time.monotonic() < deadline, "the datagrams did not arrive"
            time.sleep(0.01)
    finally:
        report = receiver.stop()
    assert report["per_flow"][0]["received"] == 5 and report["per_flow"][0]["lost"] == 0


def test_ipv4_frames_with_a_host_stack_for_a_nat64_translator() -> None:
    """A NAT64 translator drops IPv4 UDP without a checksum and fragments a large one without DF (tayga
    does): the server's answers to NAT64 flows carry both, the checksum correct for every flow,
    sequence and time, as scapy computes it."""
    from dataplane.traffic.frames import PAYLOAD_OFFSET, UDP4_CHECKSUM, udp4_checksum

    flows = [Flow(175000 + i, "203.0.113.64", f"198.51.100.{33 + i}", 7000, 40064 + i) for i in range(5)]
    template = build_frame(flows[0], 127, SRC_MAC, DST_MAC, host_stack=True)
    plain = build_frame(flows[0], 127, SRC_MAC, DST_MAC)
    assert plain[UDP4_CHECKSUM:UDP4_CHECKSUM + 2] == b"\0\0" and not plain[20] & 0x40  # the default: neither
    assert template[20] & 0x40, "DF, or the translator splits a large answer into IPv6 fragments"
    for flow in flows:
        assert derive_frame(template, flow) == build_frame(flow, 127, SRC_MAC, DST_MAC, host_stack=True)
    for seq, ts in [(0, 0), (1, 2), (2**40 + 5, 0x5678_9ABC), (2**64 - 1, 0xFFFF_FFFF)]:
        frame = bytearray(template)
        struct.pack_into("!QI", frame, PAYLOAD_OFFSET + 6, seq, ts)
        patch_udp_checksum(frame, 0, seq, ts, UDP4_CHECKSUM)
        assert frame == build_frame(flows[0], 127, SRC_MAC, DST_MAC, seq=seq, timestamp=ts, host_stack=True)
        assert struct.unpack_from("!H", frame, UDP4_CHECKSUM)[0] == udp4_checksum(frame)
        assert _scapy_checksum_ok(frame)
    sender = Sender(iface="fake", flows=flows, rate=5000, sizes="127", duration=0.01, host_stack=True)
    fake = FakeSocket()
    sender._loop(fake, FrameSet(flows, [(127, 1)], SRC_MAC, DST_MAC, host_stack=True),  # type: ignore[arg-type]
                 LoopBatch(fake, 2048))  # type: ignore[arg-type]
    assert fake.frames and all(struct.unpack_from("!H", d, UDP4_CHECKSUM)[0] == udp4_checksum(d) for d in fake.frames)
    assert Sender.from_config(sender.config()).host_stack
