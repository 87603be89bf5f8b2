"""A second opinion on the generator's figures: packet captures on the receiving hosts.

While a case runs, ``dumpcap`` (Wireshark's capture engine, not this tool) writes every UDP frame
arriving on each receiving host's interface to a pcap file. This module then reads those files
with its own parser, which shares no code with the generator's receiver (``dataplane.traffic``):
per flow, the sequence numbers seen and the capture timestamps of their arrival. From them:

- loss: sequence numbers missing below the highest one captured (a loss at the very end of the
  run, after the last packet captured, cannot be seen by a capture and is not counted);
- longest gap: the longest time between two consecutive captured packets of the flow, on the
  capture's own clock (the kernel's receive timestamps), not on the sender's timestamps.

`compare` puts them next to the generator's per-flow figures and flags every flow where the two
differ by more than one packet interval: more than one packet of loss, or more than one per-flow
interval (1 / per-flow rate) of gap.

What is read of each frame (the wire format of the generator's payload, as documented in
``dataplane/traffic.py``): Ethernet (type 0x0800), IPv4 (header length from IHL), UDP (protocol
17), then the payload: u16 magic 0x5447, u32 flow id, u64 sequence number, all big-endian.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import struct
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
LINKTYPE_ETHERNET = 1
SNAPLEN = 96  # enough for Ethernet + IPv4 with options + UDP + the 14 bytes read of the payload
PAYLOAD_MAGIC = 0x5447
REVERSE_ID_OFFSET = 100000  # reverse flows carry the forward flow's id + this (see trafficsetup)


class CaptureError(Exception):
    pass


@dataclass
class FlowCapture:
    """What the capture saw of one flow."""

    flow: int
    seqs: set[int] = field(default_factory=set)
    highest: int = -1
    last_ts: float | None = None
    max_gap_s: float = 0.0
    packets: int = 0

    def add(self, seq: int, ts: float) -> None:
        self.packets += 1
        self.seqs.add(seq)
        if seq > self.highest:
            self.highest = seq
        if self.last_ts is not None and ts - self.last_ts > self.max_gap_s:
            self.max_gap_s = ts - self.last_ts
        self.last_ts = ts

    @property
    def received(self) -> int:
        return len(self.seqs)

    @property
    def lost(self) -> int:
        return self.highest + 1 - len(self.seqs)


# --------------------------------------------------------------------------- pcap reading (pure)
def parse_pcap(data: bytes, keep: Callable[[int], bool] = lambda _: True) -> tuple[dict[int, FlowCapture], int]:
    """Flows (by flow id) in a classic pcap file's bytes, and the number of frames read. KEEP
    selects flow ids (one direction)."""
    if len(data) < 24:
        raise CaptureError("not a pcap file: shorter than its header")
    magic_le = struct.unpack_from("<I", data, 0)[0]
    magic_be = struct.unpack_from(">I", data, 0)[0]
    if magic_le in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
        endian, magic = "<", magic_le
    elif magic_be in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
        endian, magic = ">", magic_be
    else:
        raise CaptureError(f"not a pcap file (magic {magic_le:#x}); write it with dumpcap -P")
    divisor = 1e9 if magic == PCAP_MAGIC_NS else 1e6
    linktype = struct.unpack_from(endian + "I", data, 20)[0]
    if linktype != LINKTYPE_ETHERNET:
        raise CaptureError(f"link type {linktype} is not Ethernet")
    record = struct.Struct(endian + "IIII")
    flows: dict[int, FlowCapture] = {}
    offset, frames = 24, 0
    size = len(data)
    while offset + 16 <= size:
        sec, frac, incl, _orig = record.unpack_from(data, offset)
        offset += 16
        frame = offset
        offset += incl
        if offset > size:
            break  # a truncated last record (capture stopped mid-write)
        frames += 1
        if incl < 14 + 20 + 8 + 14 or data[frame + 12:frame + 14] != b"\x08\x00":
            continue
        ip = frame + 14
        if data[ip] >> 4 != 4 or data[ip + 9] != 17:
            continue
        udp = ip + (data[ip] & 0x0F) * 4
        payload = udp + 8
        if payload + 14 > frame + incl:
            continue
        magic, flow_id, seq = struct.unpack_from("!HIQ", data, payload)
        if magic != PAYLOAD_MAGIC or not keep(flow_id):
            continue
        entry = flows.get(flow_id)
        if entry is None:
            entry = flows[flow_id] = FlowCapture(flow_id)
        entry.add(seq, sec + frac / divisor)
    return flows, frames


# --------------------------------------------------------------------------- comparison (pure)
def compare(result: dict[str, Any], forward: dict[int, FlowCapture], reverse: dict[int, FlowCapture] | None,
            rate_per_flow: float) -> list[dict[str, Any]]:
    """Per flow and direction: the generator's loss and the capture's, the longest gaps, and
    whether they differ by more than one packet interval. Each direction is held against its own
    figures (`max_gap_forward_ms` / `max_gap_reverse_ms` of the generator's row): a loss in one
    direction says nothing about the other. A row with only the generator's per-flow gap (the
    longer of its two directions, older reports) is compared with the longer of the capture's."""
    interval_ms = 1000.0 / rate_per_flow
    rows = []
    for row in result.get("per_flow", []):
        fid = int(row["flow"])
        f = forward.get(fid)
        b = reverse.get(fid + REVERSE_ID_OFFSET) if reverse is not None else None
        per_direction = "max_gap_forward_ms" in row
        directions = [("forward", f, row.get("lost_forward"), row.get("max_gap_forward_ms"))]
        if reverse is not None:
            directions.append(("reverse", b, row.get("lost_reverse"), row.get("max_gap_reverse_ms")))
        for name, cap, gen_lost, own_gap in directions:
            if per_direction:
                cap_gap = cap.max_gap_s * 1000 if cap is not None else None
                gen_gap = own_gap
            else:
                cap_gap = max((c.max_gap_s * 1000 for c in (f, b) if c is not None), default=None)
                gen_gap = row.get("max_gap_ms")
            gap_differs = cap_gap is not None and gen_gap is not None and abs(cap_gap - float(gen_gap)) > interval_ms
            cap_lost = cap.lost if cap is not None else None
            loss_differs = cap_lost is None or gen_lost is None or abs(cap_lost - int(gen_lost)) > 1
            rows.append({"flow": fid, "direction": name, "generator_lost": gen_lost, "capture_lost": cap_lost,
                         "capture_received": cap.received if cap is not None else 0,
                         "generator_gap_ms": gen_gap, "capture_gap_ms": round(cap_gap, 3) if cap_gap is not None
                         else None, "differs": bool(loss_differs or gap_differs)})
    return rows


def summarise(rows: list[dict[str, Any]], tool: str, packets: int, drops: int | None) -> dict[str, Any]:
    flagged = len({r["flow"] for r in rows if r["differs"]})
    return {"tool": tool, "packets": packets, "capture_drops": drops, "flagged": flagged,
            "flows": sorted(rows, key=lambda r: (not r["differs"], r["flow"], r["direction"]))}


# --------------------------------------------------------------------------- dumpcap (edge)
def available() -> str | None:
    """Why captures cannot run here, or None."""
    if shutil.which("dumpcap") is None:
        return "dumpcap is not installed (apt-get install -y tshark, or wireshark-common)"
    return None


def tool_version() -> str:
    try:
        out = subprocess.run(["dumpcap", "--version"], capture_output=True, text=True, timeout=10).stdout
        return out.splitlines()[0].strip() if out else "dumpcap"
    except (OSError, subprocess.TimeoutExpired):
        return "dumpcap"


@dataclass
class Dumpcap:
    """dumpcap on IFACE in namespace NS, writing a classic pcap to PATH (UDP frames, SNAPLEN bytes)."""

    ns: str
    iface: str
    path: Path
    proc: subprocess.Popen[bytes] | None = None
    drops: int | None = None
    _stderr: bytes = b""

    def start(self, timeout: float = 10.0) -> Dumpcap:
        argv = ["ip", "netns", "exec", self.ns, "dumpcap", "-q", "-P", "-i", self.iface, "-s", str(SNAPLEN),
                "-B", "64", "-f", "udp", "-w", str(self.path)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + timeout
        # dumpcap says "Capturing on 'IFACE'" once the socket is open; with -q that is all it prints
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        seen = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.05)
            chunk = os.read(fd, 4096) if ready else b""
            seen += chunk
            if b"Capturing on" in seen:
                self._stderr = seen
                return self
            if (ready and not chunk) or self.proc.poll() is not None:
                raise CaptureError(f"dumpcap in {self.ns} on {self.iface} failed: "
                                   f"{seen.decode(errors='replace').strip()[-500:]}")
        self.kill()
        raise CaptureError(f"dumpcap in {self.ns} on {self.iface} did not start in {timeout} s")

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        assert self.proc.stderr is not None
        text = (self._stderr + self.proc.stderr.read()).decode(errors="replace")
        self.drops = _dropped(text)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def read(self, keep: Callable[[int], bool]) -> tuple[dict[int, FlowCapture], int]:
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise CaptureError(f"cannot read the capture {self.path}: {exc.strerror}") from None
        return parse_pcap(data, keep)


def _dropped(stderr: str) -> int | None:
    """dumpcap's closing line: 'Packets received/dropped on interface 'eth1': 123/0 (...)'."""
    match = re.search(r"received/dropped on interface '[^']*': (\d+)/(\d+)", stderr)
    return int(match.group(2)) if match else None
