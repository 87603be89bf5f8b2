"""The capture parser and the comparison with the generator (pure; tshark cross-check if installed)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from lab_orchestrator.events import capture


def _frame(flow: int, seq: int, ihl: int = 5, size: int = 60, magic: int = 0x5447) -> bytes:
    options = b"\x01" * ((ihl - 5) * 4)
    payload = struct.pack("!HIQI", magic, flow, seq, 0).ljust(size - 14 - 4 * ihl - 8, b"\0")
    udp = struct.pack("!HHHH", 40000, 7000, 8 + len(payload), 0) + payload
    total = 4 * ihl + len(udp)
    ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, total, 0, 0, 64, 17, 0, bytes([100, 64, 0, 1]),
                     bytes([203, 0, 113, 10])) + options
    return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + udp


def pcap(packets: list[tuple[float, bytes]], ns: bool = False, big_endian: bool = False, snap: int = 96) -> bytes:
    e = ">" if big_endian else "<"
    out = struct.pack(e + "IHHiIII", capture.PCAP_MAGIC_NS if ns else capture.PCAP_MAGIC_US, 2, 4, 0, 0, snap, 1)
    for ts, frame in packets:
        sec = int(ts)
        frac = round((ts - sec) * (1e9 if ns else 1e6))
        kept = frame[:snap]
        out += struct.pack(e + "IIII", sec, frac, len(kept), len(frame)) + kept
    return out


def traffic(flows: int = 3, packets: int = 100, interval: float = 0.005,
            drop: dict[int, range] | None = None) -> list[tuple[float, bytes]]:
    out = []
    for seq in range(packets):
        for flow in range(flows):
            if drop and seq in drop.get(flow, range(0)):
                continue
            out.append((1000.0 + seq * interval + flow * 1e-5, _frame(flow, seq, size=1514 if seq % 3 else 60)))
    return out


def test_loss_and_longest_gap_per_flow() -> None:
    data = pcap(traffic(drop={1: range(40, 52)}))
    flows, frames = capture.parse_pcap(data)
    assert frames == 300 - 12
    assert {f: (c.received, c.lost) for f, c in flows.items()} == {0: (100, 0), 1: (88, 12), 2: (100, 0)}
    assert flows[1].max_gap_s == pytest.approx(13 * 0.005, abs=1e-6)
    assert flows[0].max_gap_s == pytest.approx(0.005, abs=1e-6)


@pytest.mark.parametrize(("ns", "big_endian"), [(False, False), (True, False), (False, True)])
def test_timestamp_resolutions_and_byte_orders(ns: bool, big_endian: bool) -> None:
    flows, _ = capture.parse_pcap(pcap(traffic(flows=1, drop={0: range(10, 20)}), ns=ns, big_endian=big_endian))
    assert flows[0].lost == 10 and flows[0].max_gap_s == pytest.approx(0.055, abs=2e-6)


def test_foreign_frames_ip_options_and_direction_filter() -> None:
    packets = traffic(flows=2, packets=10)
    packets.append((1001.0, _frame(5, 0, magic=0x1234)))  # not ours
    packets.append((1001.0, _frame(100003, 4, ihl=7)))  # a reverse flow, with IP options
    flows, frames = capture.parse_pcap(pcap(packets), keep=lambda fid: fid < capture.REVERSE_ID_OFFSET)
    assert set(flows) == {0, 1} and frames == 22
    back, _ = capture.parse_pcap(pcap(packets), keep=lambda fid: fid >= capture.REVERSE_ID_OFFSET)
    assert set(back) == {100003} and back[100003].lost == 4  # seqs 0-3 never seen


def test_truncated_and_wrong_files() -> None:
    data = pcap(traffic(flows=1, packets=5))
    flows, frames = capture.parse_pcap(data[:-10])  # the last record cut mid-write
    assert frames == 4 and flows[0].received == 4
    with pytest.raises(capture.CaptureError, match="not a pcap"):
        capture.parse_pcap(b"\x0a\x0d\x0d\x0a" + b"\0" * 40)  # pcapng
    with pytest.raises(capture.CaptureError, match="shorter"):
        capture.parse_pcap(b"")


def _result(lost: dict[int, tuple[int, int]], gaps: dict[int, float]) -> dict[str, object]:
    return {"per_flow": [{"flow": f, "lost_forward": lf, "lost_reverse": lr, "max_gap_ms": gaps[f]}
                         for f, (lf, lr) in lost.items()]}


def test_compare_flags_flows_beyond_one_interval() -> None:
    fwd, _ = capture.parse_pcap(pcap(traffic(flows=3, drop={1: range(40, 52)})))
    rev, _ = capture.parse_pcap(pcap([(t, _frame(capture.REVERSE_ID_OFFSET + f, s)) for f in range(3)
                                      for s, t in enumerate(1000.0 + i * 0.005 for i in range(100))]))
    agree = _result({0: (0, 0), 1: (12, 0), 2: (1, 0)}, {0: 5.0, 1: 65.0, 2: 9.0})
    rows = capture.compare(agree, fwd, rev, 200.0)
    assert len(rows) == 6 and not any(r["differs"] for r in rows), rows  # one packet / one interval: tolerated
    differ = _result({0: (0, 0), 1: (0, 0), 2: (0, 0)}, {0: 5.0, 1: 5.0, 2: 5.0})  # the generator saw no loss
    rows = capture.compare(differ, fwd, rev, 200.0)
    flagged = {(r["flow"], r["direction"]) for r in rows if r["differs"]}
    assert flagged == {(1, "forward"), (1, "reverse")}  # the gap is per flow (both directions)
    summary = capture.summarise(rows, "dumpcap", 600, 0)
    assert summary["flagged"] == 1 and summary["flows"][0]["flow"] == 1


def test_each_direction_is_held_against_its_own_figures() -> None:
    """A drop behind the capture in the forward direction only (every 4th packet of flow 1, the
    generator's receiver misses them): the forward row differs, the reverse row, whose figures
    agree, does not, even though the forward gap is twice the interval."""
    fwd, _ = capture.parse_pcap(pcap(traffic(flows=2)))
    rev, _ = capture.parse_pcap(pcap([(t, _frame(capture.REVERSE_ID_OFFSET + f, s)) for f in range(2)
                                      for s, t in enumerate(1000.0 + i * 0.005 for i in range(100))]))
    result = {"per_flow": [
        {"flow": 0, "lost_forward": 0, "lost_reverse": 0, "max_gap_ms": 5.0,
         "max_gap_forward_ms": 5.0, "max_gap_reverse_ms": 5.0},
        {"flow": 1, "lost_forward": 25, "lost_reverse": 0, "max_gap_ms": 11.0,
         "max_gap_forward_ms": 11.0, "max_gap_reverse_ms": 5.0},
    ]}
    rows = capture.compare(result, fwd, rev, 200.0)
    assert {(r["flow"], r["direction"]) for r in rows if r["differs"]} == {(1, "forward")}
    back = next(r for r in rows if r["flow"] == 1 and r["direction"] == "reverse")
    assert back["generator_gap_ms"] == 5.0 and back["capture_gap_ms"] == pytest.approx(5.0, abs=0.01)
    # a gap of one direction alone (no loss) is flagged on that direction only
    result["per_flow"][1].update(lost_forward=0, max_gap_forward_ms=40.0)
    rows = capture.compare(result, fwd, rev, 200.0)
    assert {(r["flow"], r["direction"]) for r in rows if r["differs"]} == {(1, "forward")}


def test_a_flow_the_capture_never_saw_differs() -> None:
    rows = capture.compare(_result({7: (0, 0)}, {7: 5.0}), {}, None, 200.0)
    assert rows == [{"flow": 7, "direction": "forward", "generator_lost": 0, "capture_lost": None,
                     "capture_received": 0, "generator_gap_ms": 5.0, "capture_gap_ms": None, "differs": True}]


def test_dumpcap_summary_line() -> None:
    assert capture._dropped("Packets received/dropped on interface 'eth1': 1234/5 (pcap:0/dumpcap:0/flushed:5)") == 5
    assert capture._dropped("nothing") is None


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_tshark_reads_the_same_sequence_numbers(tmp_path: Path) -> None:
    """Our parser against Wireshark's on the same file: the same (flow, seq) pairs."""
    path = tmp_path / "t.pcap"
    path.write_bytes(pcap(traffic(flows=2, packets=20, drop={0: range(3, 6)})))
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "udp.payload"], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    theirs = set()
    for line in out.split():
        raw = bytes.fromhex(line)
        _, flow, seq = struct.unpack_from("!HIQ", raw)
        theirs.add((flow, seq))
    flows, _ = capture.parse_pcap(path.read_bytes())
    ours = {(f, s) for f, c in flows.items() for s in c.seqs}
    assert ours == theirs and len(ours) == 37
