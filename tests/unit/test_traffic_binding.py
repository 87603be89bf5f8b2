"""NAT bindings in the traffic generator: the receiver learns each flow's translated source, the
reverse sender answers it (CGNAT labs), and a flow that re-binds is reported and followed."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from dataplane.traffic import IMIX, PAYLOAD_OFFSET, Flow, FrameSet, Receiver, Sender, build_frame, make_flows
from dataplane.traffic import binding as bmod
from dataplane.traffic.batch import LoopBatch
from dataplane.traffic.binding import Bindings
from dataplane.traffic.frames import HEADER

SRC_MAC, DST_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"


def test_binding_keys_records_and_text() -> None:
    key = bmod.key("198.51.100.3", 1025)
    assert bmod.text(key) == "198.51.100.3:1025" and bmod.split(key) == ("198.51.100.3", 1025)
    data = bmod.encode(7, key) + bmod.encode(100000, bmod.key("198.51.100.17", 65535))
    assert len(data) == 2 * bmod.RECORD.size == 20
    assert list(bmod.decode(data)) == [(7, key), (100000, bmod.key("198.51.100.17", 65535))]


def test_bindings_record_changes_not_repeats() -> None:
    b = Bindings()
    one, two = bmod.key("198.51.100.1", 1024), bmod.key("198.51.100.17", 2048)
    assert b.observe(3, one, 10) and not b.observe(3, one, 11)
    assert b.report(3) == {"bindings": ["198.51.100.1:1024"], "binding_changes": 0, "rebound_at_ns": None}
    assert b.observe(3, two, 20) and b.observe(3, one, 21) and b.observe(3, two, 22)  # flapping while it moves
    report = b.report(3)
    assert report["bindings"] == ["198.51.100.1:1024", "198.51.100.17:2048"]
    assert report["binding_changes"] == 3 and report["rebound_at_ns"] == 20
    assert b.report(4) == {}
    again = Bindings.from_state(b.state())
    assert again.report(3) == report and again.current == {3: two}


def test_rebind_rewrites_one_flow_identically_to_a_fresh_build() -> None:
    flows = make_flows(3, dst="203.0.113.10")
    frames = FrameSet(flows, IMIX, SRC_MAC, DST_MAC)
    untouched = [bytes(f) for f in frames.cycles[2] or []]
    assert frames.rebind(1, "198.51.100.5", 3001)
    assert not frames.rebind(1, "198.51.100.5", 3001), "same destination: nothing rebuilt"
    moved = Flow(flows[1].flow_id, flows[1].src, "198.51.100.5", flows[1].sport, 3001)
    assert frames.flows[1] == moved
    for n in range(len(frames.cycle)):
        size = frames.cycle[(n + 1) % len(frames.cycle)]
        assert frames.frame(1, n) == build_frame(moved, size, SRC_MAC, DST_MAC)
    assert [bytes(f) for f in frames.cycles[2] or []] == untouched
    frames.withhold(0)
    with pytest.raises(LookupError, match="withheld"):
        frames.frame(0, 0)
    assert frames.rebind(0, flows[0].dst, flows[0].dport), "a withheld flow comes back even to the same address"


class FakeSocket:
    def __init__(self) -> None:
        self.packets: list[tuple[int, int, str, int]] = []  # (flow id, seq, dst, dport)

    def send(self, data: bytearray | memoryview) -> int:
        _, flow_id, seq, _ = HEADER.unpack_from(data, PAYLOAD_OFFSET)
        dport = int.from_bytes(data[36:38], "big")
        self.packets.append((flow_id, seq, socket.inet_ntoa(bytes(data[30:34])), dport))
        return len(data)


def test_reverse_sender_answers_the_learnt_binding_and_follows_a_rebind() -> None:
    forward = make_flows(3)
    reverse = [Flow(f.flow_id + 1000, f.dst, f.src, f.dport, f.sport) for f in forward]
    read_end, write_end = os.pipe()
    sender = Sender(iface="fake", flows=reverse, rate=3000, sizes=64, duration=0.3, learn_fd=read_end,
                    learn_offset=1000, learn_wait=0.2)
    frames = FrameSet(reverse, [(64, 1)], SRC_MAC, DST_MAC)
    a, b, c = bmod.key("198.51.100.1", 1024), bmod.key("198.51.100.2", 1100), bmod.key("198.51.100.17", 5000)
    os.write(write_end, bmod.encode(0, a) + bmod.encode(1, b) + bmod.encode(99, c))  # 99: not ours
    assert sender._learn(frames) == 2, "flow 2's binding never came: it waits, the others start"
    fake = FakeSocket()

    def later() -> None:
        time.sleep(0.1)
        os.write(write_end, bmod.encode(2, c) + bmod.encode(0, c))  # flow 2 learnt, flow 0 re-bound
        os.close(write_end)

    thread = threading.Thread(target=later)
    thread.start()
    seqs, _, _ = sender._loop(fake, frames, LoopBatch(fake, 2048))  # type: ignore[arg-type]
    thread.join()
    by_flow: dict[int, list[tuple[int, str, int]]] = {}
    for flow_id, seq, dst, dport in fake.packets:
        by_flow.setdefault(flow_id, []).append((seq, dst, dport))
    assert [s for s, _, _ in by_flow[1001]] == list(range(seqs[1])) and seqs[1] == 300
    assert {(d, p) for _, d, p in by_flow[1001]} == {("198.51.100.2", 1100)}
    # flow 2 sent nothing before its binding was known, and its sequence started at 0 then
    assert 0 < seqs[2] < 300 and [s for s, _, _ in by_flow[1002]] == list(range(seqs[2]))
    assert {(d, p) for _, d, p in by_flow[1002]} == {("198.51.100.17", 5000)}
    # flow 0 answered its first binding, then the new one, without a gap in its sequence
    targets = [(d, p) for _, d, p in by_flow[1000]]
    first_new = targets.index(("198.51.100.17", 5000))
    assert set(targets[:first_new]) == {("198.51.100.1", 1024)}
    assert set(targets[first_new:]) == {("198.51.100.17", 5000)}
    assert seqs[0] == 300 and sender._rebinds == 1
    os.close(read_end)


class FakePacketSocket:
    """Frames handed to a packet-mode receiver loop (as an AF_PACKET socket would), then empty."""

    family = socket.AF_INET

    def __init__(self, frames: list[bytes], receiver: Receiver):
        self.frames = list(frames)
        self.receiver = receiver

    def setblocking(self, flag: bool) -> None:
        pass

    def fileno(self) -> int:
        return -1

    def recv_into(self, buf: bytearray | memoryview, nbytes: int = 0, flags: int = 0) -> int:
        if not self.frames:
            self.receiver._stop = True
            raise BlockingIOError
        frame = self.frames.pop(0)
        buf[:len(frame)] = frame
        return len(frame)


def test_packet_mode_receiver_records_and_publishes_translated_sources() -> None:
    flows = make_flows(2)
    nat = [Flow(f.flow_id, "198.51.100.1", f.dst, 1024 + f.flow_id, f.dport) for f in flows]
    rebound = Flow(1, "198.51.100.17", flows[1].dst, 3333, flows[1].dport)
    seq_frames = []
    for seq, (f0, f1) in enumerate([(nat[0], nat[1]), (nat[0], nat[1]), (nat[0], rebound), (nat[0], rebound)]):
        for flow in (f0, f1):
            frame = build_frame(flow, 64, SRC_MAC, DST_MAC)
            HEADER.pack_into(frame, PAYLOAD_OFFSET, 0x5447, flow.flow_id, seq, time.monotonic_ns() & 0xFFFFFFFF)
            seq_frames.append(bytes(frame))
    read_end, write_end = os.pipe()
    receiver = Receiver(iface="fake", learn_fd=write_end, poll_interval=0.0001)
    fake = FakePacketSocket(seq_frames, receiver)
    receiver._loop(fake, -1, LoopBatch(fake, 2048))  # type: ignore[arg-type]
    published = list(bmod.decode(os.read(read_end, 4096)))
    os.close(read_end)
    assert published == [(0, bmod.key("198.51.100.1", 1024)), (1, bmod.key("198.51.100.1", 1025)),
                         (1, bmod.key("198.51.100.17", 3333))]
    report = {f["flow"]: f for f in receiver.report()["per_flow"]}
    assert report[0]["bindings"] == ["198.51.100.1:1024"] and report[0]["binding_changes"] == 0
    assert report[1]["bindings"] == ["198.51.100.1:1025", "198.51.100.17:3333"]
    assert report[1]["received"] == 4 and report[1]["lost"] == 0
    assert receiver.report()["flows_rebound"] == 1


def test_bindings_through_a_fifo_reach_a_sender_started_later(tmp_path: Path) -> None:
    """`lab traffic start` runs receiver and sender as separate daemons: the receiver publishes on a
    FIFO before the sender exists; the records wait there and the sender learns them all."""
    from lab_orchestrator.plan.trafficsetup import bindings_fifo

    fifo = bindings_fifo(tmp_path)
    assert bindings_fifo(tmp_path) == fifo, "a second start replaces the FIFO"
    flows = make_flows(2)
    nat = [Flow(f.flow_id, "198.51.100.1", f.dst, 2000 + f.flow_id, f.dport) for f in flows]
    frames_in = []
    for seq in range(2):
        for flow in nat:
            frame = build_frame(flow, 64, SRC_MAC, DST_MAC)
            HEADER.pack_into(frame, PAYLOAD_OFFSET, 0x5447, flow.flow_id, seq, time.monotonic_ns() & 0xFFFFFFFF)
            frames_in.append(bytes(frame))
    receiver = Receiver(iface="fake", learn_path=fifo, poll_interval=0.0001)
    drained, learnt = threading.Event(), threading.Event()

    class StillRunning(FakePacketSocket):  # the receiver goes on running once its frames are drained
        def recv_into(self, buf: bytearray | memoryview, nbytes: int = 0, flags: int = 0) -> int:
            if not self.frames:
                self.empty = getattr(self, "empty", 0) + 1
                if self.empty > 1:  # the read after the one that ended the last batch: all was handled
                    drained.set()
                    if learnt.wait(5):
                        self.receiver._stop = True
                raise BlockingIOError
            return super().recv_into(buf)

    still = StillRunning(frames_in, receiver)
    thread = threading.Thread(target=receiver._loop, args=(still, -1, LoopBatch(still, 2048)))  # type: ignore[arg-type]
    thread.start()
    assert drained.wait(5)
    reverse = [Flow(f.flow_id + 500, f.dst, f.src, f.dport, f.sport) for f in flows]
    sender = Sender(iface="fake", flows=reverse, rate=1000, sizes=64, duration=0.1, learn_path=fifo,
                    learn_offset=500, learn_wait=2.0)
    frames = FrameSet(reverse, [(64, 1)], SRC_MAC, DST_MAC)
    try:
        assert sender._learn(frames) == 2
    finally:
        learnt.set()
        thread.join(5)
    assert receiver.report()["bindings_dropped"] == 0
    assert [(f.dst, f.dport) for f in frames.flows] == [("198.51.100.1", 2000), ("198.51.100.1", 2001)]


def test_two_way_setup_is_the_same_for_events_and_traffic_by_hand(tmp_path: Path) -> None:
    from lab_orchestrator.plan.trafficsetup import REVERSE_ID_OFFSET, Endpoints, bindings_fifo, two_way

    ends = Endpoints("c-ns", "eth1", "100.64.0.0/16", "s-ns", "eth1", "203.0.113.10")
    fifo = bindings_fifo(tmp_path)
    nat = two_way(ends, 4, 400, "imix", 10, nat=True, bindings=fifo, receive_duration=13)
    assert [name for name, _, _ in nat.jobs()] == ["rx-forward", "rx-reverse", "tx-forward", "tx-reverse"]
    assert nat.rx_forward.iface == "eth1" and nat.rx_forward.learn_path == fifo and nat.rx_forward.duration == 13
    assert nat.tx_reverse is not None and nat.tx_reverse.learn_path == fifo
    assert nat.tx_reverse.learn_offset == REVERSE_ID_OFFSET
    assert [f.flow_id for f in nat.tx_reverse.flows] == [REVERSE_ID_OFFSET + i for i in range(4)]
    assert nat.tx_reverse.flows[0].dst == nat.tx_forward.flows[0].src
    # the configuration a daemon is started with gives back the same process
    again = Sender.from_config(nat.tx_reverse.config())
    assert again.learn_path == fifo and again.flows == nat.tx_reverse.flows
    assert Receiver.from_config(nat.rx_forward.config()).learn_path == fifo
    sfw = two_way(ends, 4, 400, "imix", 10, socket_mode=True)
    assert sfw.rx_forward.port == 7000 and sfw.rx_forward.learn_path is None
    assert sfw.tx_reverse is not None and sfw.tx_reverse.learn_path is None
    # behind NAT the forward receiver must read frames to see the translated source, even in socket mode
    assert two_way(ends, 4, 400, "imix", 10, nat=True, bindings=fifo, socket_mode=True).rx_forward.port is None
    one_way = two_way(ends, 4, 400, "imix", 10, reverse=False, nat=True)
    assert one_way.rx_reverse is None and one_way.tx_reverse is None and one_way.rx_forward.learn_path is None
    with pytest.raises(ValueError, match="bindings FIFO"):
        two_way(ends, 4, 400, "imix", 10, nat=True)


def test_a_receiver_with_ids_counts_only_its_flows_and_learns_only_their_bindings() -> None:
    """Two IPv4 receivers on one interface (a lab's NAPT44 flows and its NAT64 flows): each counts
    and publishes only the flow ids it was given; the other's packets are counted apart, not foreign."""
    mine = Flow(75000, "198.51.100.33", "203.0.113.64", 40064, 7000)
    other = Flow(3, "198.51.100.1", "203.0.113.10", 1024, 7000)
    frames = []
    for seq in range(3):
        for flow in (mine, other):
            frame = build_frame(flow, 64, SRC_MAC, DST_MAC)
            HEADER.pack_into(frame, PAYLOAD_OFFSET, 0x5447, flow.flow_id, seq, time.monotonic_ns() & 0xFFFFFFFF)
            frames.append(bytes(frame))
    read_end, write_end = os.pipe()
    receiver = Receiver(iface="fake", learn_fd=write_end, poll_interval=0.0001, ids=(75000, 100000))
    fake = FakePacketSocket(frames, receiver)
    receiver._loop(fake, -1, LoopBatch(fake, 2048))  # type: ignore[arg-type]
    published = list(bmod.decode(os.read(read_end, 4096)))
    os.close(read_end)
    assert published == [(75000, bmod.key("198.51.100.33", 40064))]
    report = receiver.report()
    assert [f["flow"] for f in report["per_flow"]] == [75000] and report["per_flow"][0]["received"] == 3
    assert report["other_flows_packets"] == 3 and report["foreign"] == 0
    with pytest.raises(ValueError, match="flow ids"):
        Receiver(iface="fake", ids=(5, 5))
    assert Receiver.from_config(receiver.config()).ids == (75000, 100000)
