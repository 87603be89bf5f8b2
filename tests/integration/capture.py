"""An independent witness of the traffic generator: dumpcap on a host's interface, and per-flow loss
read back from the capture (the generator's payload header: magic, flow id, sequence)."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import time
from pathlib import Path

MAGIC = 0x5447


class Capture:
    """dumpcap in namespace NS on IFACE with a BPF FILTER, writing PATH (a pcap file)."""

    def __init__(self, ns: str, iface: str, path: Path, bpf: str):
        self.ns, self.iface, self.path, self.bpf = ns, iface, path, bpf
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Capture:
        argv = ["dumpcap", "-q", "-P", "-s", "96", "-i", self.iface, "-f", self.bpf, "-B", "64", "-w", str(self.path)]
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, *argv],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while not (self.path.exists() and self.path.stat().st_size > 0):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"dumpcap did not start: {self.proc.stderr.read() if self.proc.stderr else ''!r}")
            time.sleep(0.05)
        time.sleep(0.3)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def sequences(path: Path) -> dict[int, set[int]]:
    """Flow id -> the sequence numbers captured (our payload header, IPv4/UDP over Ethernet; a
    classic pcap as dumpcap -P writes it)."""
    data = path.read_bytes()
    magic = struct.unpack_from("<I", data, 0)[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    offset = 24
    out: dict[int, set[int]] = {}
    while offset + 16 <= len(data):
        _, _, caplen, _ = struct.unpack_from(f"{endian}IIII", data, offset)
        frame = data[offset + 16: offset + 16 + caplen]
        offset += 16 + caplen
        if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
            continue
        header = 14 + (frame[14] & 0x0F) * 4 + 8
        if len(frame) < header + 14:
            continue
        tag, flow, seq = struct.unpack_from("!HIQ", frame, header)
        if tag == MAGIC:
            out.setdefault(flow, set()).add(seq)
    return out


def holes(seen: set[int]) -> int:
    """Sequence numbers missing below the highest one captured."""
    return (max(seen) + 1 - len(seen)) if seen else 0


def netns_exists(ns: str) -> bool:
    return os.path.exists(f"/run/netns/{ns}")
