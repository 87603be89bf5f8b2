"""The two NAT64 candidates side by side, tayga and a tc eBPF program: docs/benchmarks-nat64-translators.md.

    python3 bench/nat64_translators.py [--seconds 4] [--repeats 3] [--sizes 64,1200]

Three network namespaces in a row (an IPv6 and IPv4 client, a translator, an IPv4 and IPv6 server;
veth links, nothing else) and one UDP flow at full speed (iperf3 `-b 0`) from the client to the
server, four ways in turn (each repeated, the order rotated):

- IPv4 and IPv6: the translator namespace routes (the kernel's forwarding, the baseline);
- tayga: the client sends to the NAT64 prefix 2001:db8:64::/96; the translator namespace routes the
  prefix and the pool into tayga's TUN device, tayga (SCHED_FIFO, as the lab runs it) maps the client
  2001:db8:c::/120 to the pool 192.0.2.0/24 and the prefix to IPv4 (`map` and `prefix`, stateless);
- eBPF: the same mapping by `bench/nat64prog.py` on the ingress (clsact) of the translator's two
  interfaces, in the kernel's receive path.

Figures: packets/s received by the server (iperf3's count), each translator's as a ratio of IPv6
routing in the same run, and tayga's CPU time per packet it was handed. A run fails if the server's
stack refused a packet for its checksum. Each program is first checked on one
packet of each kind (BPF_PROG_TEST_RUN: addresses, lengths and both checksums). Root; about a minute
and a half. Nothing is left behind: the namespaces are deleted at the end, whatever happened.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path
from typing import Any

import nat64prog
from common import ROOT, logger, publish

from dataplane.kernel import bpfsys

DOC = ROOT / "docs" / "benchmarks-nat64-translators.md"
NS = {"client": "labbench-n64c", "xlat": "labbench-n64x", "server": "labbench-n64s"}
PREFIX6, POOL4, CLIENTS6 = "2001:db8:64::/96", "192.0.2.0/24", "2001:db8:c::/120"
CLIENT6, SERVER4, SERVER6, CLIENT4 = "2001:db8:c::2", "198.51.100.2", "2001:db8:5::2", "198.18.64.2"
TARGET = {"IPv4": SERVER4, "IPv6": SERVER6, "tayga": "2001:db8:64::c633:6402", "eBPF": "2001:db8:64::c633:6402"}
PATHS = ("IPv4", "IPv6", "tayga", "eBPF")
TAYGA_PRIORITY = 20  # dataplane.daemons.nat64d.TRANSLATOR_PRIORITY
log = logger("nat64-translators")


def _ip(ns: str, *argv: str) -> None:
    subprocess.run(["ip", "-n", ns, *argv], check=True, capture_output=True, text=True)


def _in(ns: str, *argv: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=timeout)


def build() -> None:
    for ns in NS.values():
        subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
        _ip(ns, "link", "set", "lo", "up")
    c, x, s = NS["client"], NS["xlat"], NS["server"]
    _ip(c, "link", "add", "c0", "type", "veth", "peer", "name", "x0", "netns", x)
    _ip(x, "link", "add", "x1", "type", "veth", "peer", "name", "s0", "netns", s)
    ends = ((c, "c0", f"{CLIENT4}/24", f"{CLIENT6}/64"), (x, "x0", "198.18.64.1/24", "2001:db8:c::1/64"),
            (x, "x1", "198.51.100.1/24", "2001:db8:5::1/64"), (s, "s0", f"{SERVER4}/24", f"{SERVER6}/64"))
    for ns, dev, v4, v6 in ends:
        _ip(ns, "addr", "add", v4, "dev", dev)
        _ip(ns, "-6", "addr", "add", v6, "dev", dev, "nodad")
        _ip(ns, "link", "set", dev, "up")
    # forwarding; no reverse-path filter (a namespace starts with the host's, and in the eBPF runs the
    # translated packets come in on x0 from pool addresses the namespace routes nowhere)
    for name, value in (("net.ipv4.ip_forward", "1"), ("net.ipv6.conf.all.forwarding", "1"),
                        ("net.ipv4.conf.all.rp_filter", "0"), ("net.ipv4.conf.default.rp_filter", "0"),
                        ("net.ipv4.conf.x0.rp_filter", "0"), ("net.ipv4.conf.x1.rp_filter", "0")):
        done = _in(x, "sysctl", "-qw", f"{name}={value}")
        if done.returncode != 0:
            raise SystemExit(f"sysctl {name}={value} in {x}: {done.stderr.strip()}")
    _ip(c, "route", "add", "default", "via", "198.18.64.1")
    _ip(c, "-6", "route", "add", "default", "via", "2001:db8:c::1")
    _ip(s, "route", "add", "default", "via", "198.51.100.1")
    _ip(s, "-6", "route", "add", "default", "via", "2001:db8:5::1")


def teardown() -> None:
    for ns in NS.values():
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            subprocess.run(["kill", "-9", pid], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class Tayga:
    """tayga in the translator namespace, on its TUN device, with the routes into it."""

    def __init__(self, folder: Path):
        self.conf = folder / "tayga.conf"
        self.conf.write_text("\n".join([
            "tun-device nat64", "ipv4-addr 192.0.2.254", f"prefix {PREFIX6}", f"map {POOL4} {CLIENTS6}",
            f"data-dir {folder}", ""]))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        x = NS["xlat"]
        made = _in(x, "tayga", "-c", str(self.conf), "--mktun")
        if made.returncode != 0:
            raise SystemExit(f"tayga --mktun: {made.stdout.strip()} {made.stderr.strip()}")
        _ip(x, "link", "set", "nat64", "up")
        _ip(x, "-6", "route", "replace", PREFIX6, "dev", "nat64")
        _ip(x, "route", "replace", POOL4, "dev", "nat64")
        log_path = self.conf.with_suffix(".log")
        with log_path.open("w") as out:
            self.proc = subprocess.Popen(["ip", "netns", "exec", x, "chrt", "-f", str(TAYGA_PRIORITY), "tayga",
                                          "-c", str(self.conf), "-d"], stdout=out, stderr=subprocess.STDOUT)
        time.sleep(0.5)
        if self.proc.poll() is not None:
            raise SystemExit(f"tayga ended at its start: {log_path.read_text()[-400:]}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        x = NS["xlat"]
        subprocess.run(["ip", "-n", x, "link", "del", "nat64"], capture_output=True)

    def packets(self) -> int:
        """Packets the kernel handed tayga so far (its device's transmit count: what it was to translate)."""
        if self.proc is None:
            return 0
        out = _in(NS["xlat"], "cat", "/sys/class/net/nat64/statistics/tx_packets")
        return int(out.stdout.strip() or 0)

    def cpu_s(self) -> float:
        """tayga's CPU seconds so far (user + system)."""
        if self.proc is None:
            return 0.0
        pid = self.proc.pid  # `ip netns exec` and chrt each become the next program: tayga's own pid
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Ebpf:
    """The two programs on the ingress of the translator's interfaces (x0: from the clients, x1: from
    the servers); detached by deleting the clsact qdiscs."""

    def start(self) -> None:
        from pyroute2 import IPRoute

        from labkit import netnsutil

        programs = {"x0": nat64prog.six_to_four(PREFIX6, POOL4, CLIENTS6),
                    "x1": nat64prog.four_to_six(PREFIX6, POOL4, CLIENTS6)}
        with netnsutil.entered(NS["xlat"]):
            ipr = IPRoute()
        try:
            for dev, code in programs.items():
                fd = bpfsys.prog_load(code, f"nat64_{dev}")
                try:
                    index = ipr.link_lookup(ifname=dev)[0]
                    ipr.tc("add", "clsact", index)
                    ipr.tc("add-filter", "bpf", index, 1, fd=fd, name=f"nat64_{dev}", parent=0xFFFFFFF2,
                           classid=1, direct_action=True, prio=1)
                finally:
                    os.close(fd)
        finally:
            ipr.close()

    def stop(self) -> None:
        for dev in ("x0", "x1"):
            subprocess.run(["tc", "-n", NS["xlat"], "qdisc", "del", "dev", dev, "clsact"], capture_output=True)
        shown = subprocess.run(["tc", "-n", NS["xlat"], "qdisc", "show"], capture_output=True, text=True).stdout
        if "clsact" in shown:  # else the next tayga run would measure the program
            raise SystemExit(f"the eBPF programs could not be taken off: {shown}")


# ------------------------------------------------------------------ the programs checked on one packet
def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def frame6(src: str, dst: str, proto: int, payload: bytes) -> bytes:
    """An Ethernet frame of IPv6 with a UDP or TCP header (checksum filled) and PAYLOAD."""
    s, d = IPv6Address(src).packed, IPv6Address(dst).packed
    l4 = _l4(proto, payload, s + d + struct.pack("!I3xB", 8 + len(payload) if proto == 17 else 20 + len(payload),
                                                 proto))
    return b"\2" * 6 + b"\4" * 6 + b"\x86\xdd" + struct.pack("!IHBB", 0x60000000, len(l4), proto, 64) + s + d + l4


def frame4(src: str, dst: str, proto: int, payload: bytes) -> bytes:
    s, d = IPv4Address(src).packed, IPv4Address(dst).packed
    length = (8 if proto == 17 else 20) + len(payload)
    l4 = _l4(proto, payload, s + d + struct.pack("!xBH", proto, length))
    ip = bytearray(struct.pack("!BBHHHBBH", 0x45, 0, 20 + length, 7, 0x4000, 61, proto, 0) + s + d)
    ip[10:12] = struct.pack("!H", _csum(bytes(ip)))
    return b"\2" * 6 + b"\4" * 6 + b"\x08\x00" + bytes(ip) + l4


def _l4(proto: int, payload: bytes, pseudo: bytes) -> bytes:
    if proto == 17:
        head = struct.pack("!HHHH", 40000, 5201, 8 + len(payload), 0)
        check = _csum(pseudo + head + payload) or 0xFFFF
        return struct.pack("!HHHH", 40000, 5201, 8 + len(payload), check) + payload
    head = struct.pack("!HHIIBBHHH", 40000, 5201, 1, 0, 0x50, 0x02, 64240, 0, 0)
    check = _csum(pseudo + head + payload)
    return struct.pack("!HHIIBBHHH", 40000, 5201, 1, 0, 0x50, 0x02, 64240, check, 0) + payload


def test_run(code: bytes, frame: bytes) -> tuple[int, bytes]:
    """Load CODE, run it once on FRAME (BPF_PROG_TEST_RUN): (return value, the frame it leaves)."""
    fd = bpfsys.prog_load(code, "nat64_check")
    try:
        data = ctypes.create_string_buffer(frame, len(frame))
        out = ctypes.create_string_buffer(len(frame) + 64)
        attr = bpfsys._attr(struct.pack("<IIIIQQIIIIQQ", fd, 0, len(frame), len(out), bpfsys._addr(data),
                                        bpfsys._addr(out), 1, 0, 0, 0, 0, 0))
        bpfsys._call(bpfsys.PROG_TEST_RUN, attr, "program test run")
        retval, _, size = struct.unpack_from("<III", attr.raw, 4)
        return retval, out.raw[:size]
    finally:
        os.close(fd)


def check(frame: bytes) -> dict[str, Any]:
    """What a translated FRAME holds, with both checksums verified."""
    etype = frame[12:14]
    if etype == b"\x08\x00":
        ip, l4 = frame[14:34], frame[34:]
        pseudo = ip[12:20] + struct.pack("!xBH", ip[9], len(l4))
        return {"family": 4, "src": str(IPv4Address(ip[12:16])), "dst": str(IPv4Address(ip[16:20])),
                "length": struct.unpack("!H", ip[2:4])[0], "header_ok": _csum(ip) == 0,
                "l4_ok": _csum(pseudo + l4) == 0}
    ip, l4 = frame[14:54], frame[54:]
    pseudo = ip[8:40] + struct.pack("!I3xB", len(l4), ip[6])
    return {"family": 6, "src": str(IPv6Address(ip[8:24])), "dst": str(IPv6Address(ip[24:40])),
            "length": struct.unpack("!H", ip[4:6])[0], "header_ok": True, "l4_ok": _csum(pseudo + l4) == 0}


def self_check() -> list[str]:
    """Each program on one UDP and one TCP packet: what is wrong (empty: nothing)."""
    wrong = []
    for proto in (17, 6):
        ret, out = test_run(nat64prog.six_to_four(PREFIX6, POOL4, CLIENTS6),
                            frame6(CLIENT6, TARGET["eBPF"], proto, b"x" * 11))
        got = check(out)
        if ret != nat64prog.TC_ACT_OK or got != {"family": 4, "src": "192.0.2.2", "dst": SERVER4,
                                                 "length": len(out) - 14, "header_ok": True, "l4_ok": True}:
            wrong.append(f"6->4 protocol {proto}: {ret} {got}")
        answer = frame4(SERVER4, "192.0.2.2", proto, b"y" * 9)
        ret, out = test_run(nat64prog.four_to_six(PREFIX6, POOL4, CLIENTS6), answer)
        got = check(out)
        if ret != nat64prog.TC_ACT_OK or got != {"family": 6, "src": TARGET["eBPF"], "dst": CLIENT6,
                                                 "length": len(out) - 54, "header_ok": True, "l4_ok": True}:
            wrong.append(f"4->6 protocol {proto}: {ret} {got}")
    # what is not for the translator passes unchanged; a UDP datagram without a checksum is dropped
    stranger = frame6("2001:db8:d::2", TARGET["eBPF"], 17, b"z")
    if test_run(nat64prog.six_to_four(PREFIX6, POOL4, CLIENTS6), stranger) != (nat64prog.TC_ACT_OK, stranger):
        wrong.append("6->4 translated a source outside the mapped clients")
    bare = bytearray(frame4(SERVER4, "192.0.2.2", 17, b"w"))
    bare[40:42] = b"\0\0"
    if test_run(nat64prog.four_to_six(PREFIX6, POOL4, CLIENTS6), bytes(bare))[0] != nat64prog.TC_ACT_SHOT:
        wrong.append("4->6 passed a UDP datagram without a checksum")
    return wrong


# ------------------------------------------------------------------ the measurement
def csum_errors(ns: str) -> int:
    """Datagrams and segments the namespace's stack refused for a bad checksum (/proc/net/snmp)."""
    text = _in(ns, "cat", "/proc/net/snmp").stdout.splitlines()
    total = 0
    for head, values in zip(text[::2], text[1::2], strict=False):
        fields = dict(zip(head.split()[1:], values.split()[1:], strict=False))
        total += int(fields.get("InCsumErrors", 0))
    return total


def measure(path: str, size: int, seconds: float, tayga: Tayga) -> dict[str, float]:
    server = subprocess.Popen(["ip", "netns", "exec", NS["server"], "iperf3", "-s", "-1", "-J"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.4)
        cpu, translated, errors = tayga.cpu_s(), tayga.packets(), csum_errors(NS["server"])
        client = _in(NS["client"], "iperf3", "-c", TARGET[path], "-u", "-l", str(size), "-b", "0", "-t",
                     str(seconds), "-J", timeout=seconds + 30)
        cpu, translated = tayga.cpu_s() - cpu, tayga.packets() - translated
        if client.returncode != 0:
            raise SystemExit(f"{path}: the iperf3 client failed: {client.stdout[-400:]} {client.stderr[-400:]}")
        out, err = server.communicate(timeout=seconds + 30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    if server.returncode != 0:
        raise SystemExit(f"{path}: the iperf3 server failed: {err[-400:]}")
    errors = csum_errors(NS["server"]) - errors
    if errors:
        raise SystemExit(f"{path}: the server refused {errors} packets for a bad checksum")
    end = json.loads(out)["end"]["sum"]
    received = end["packets"] - end["lost_packets"]
    return {"pps": received / end["seconds"], "loss_pct": 100.0 * end["lost_packets"] / max(1, end["packets"]),
            "cpu_us_per_packet": 1e6 * cpu / max(1, translated) if path == "tayga" else 0.0}


def run(seconds: float, repeats: int, sizes: list[int]) -> dict[int, dict[str, list[dict[str, float]]]]:
    results: dict[int, dict[str, list[dict[str, float]]]] = {s: {p: [] for p in PATHS} for s in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        tayga, ebpf = Tayga(Path(tmp)), Ebpf()
        teardown()
        try:
            build()
            for size in sizes:
                for round_ in range(repeats):
                    order = PATHS[round_ % len(PATHS):] + PATHS[:round_ % len(PATHS)]
                    for path in order:
                        if path == "tayga":
                            tayga.start()
                        elif path == "eBPF":
                            ebpf.start()
                        try:
                            got = measure(path, size, seconds, tayga)
                        finally:
                            tayga.stop()
                            ebpf.stop()
                        log(f"{size} B {path}: {got['pps']:.0f} pps, loss {got['loss_pct']:.1f} %")
                        results[size][path].append(got)
        finally:
            tayga.stop()
            teardown()
    return results


def markdown(results: dict[int, dict[str, list[dict[str, float]]]], seconds: float, repeats: int) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        "# NAT64 translators: tayga and a tc eBPF program",
        "",
        f"Measured {when} by `python3 bench/nat64_translators.py {' '.join(sys.argv[1:])}`. Machine: "
        f"{os.cpu_count()} CPUs, kernel {platform.release()}.",
        "",
        f"One UDP flow at full speed (iperf3 `-b 0`, {seconds:g} s, {repeats} runs per path and size, the order "
        "rotated) from a client namespace through a translator namespace to a server namespace (veth links); "
        "packets/s received by the server (medians). IPv4 and IPv6: the translator namespace routes. tayga: "
        "its TUN device, in user space, SCHED_FIFO. eBPF: bench/nat64prog.py on the ingress of the translator's "
        "interfaces. The same stateless mapping for both (client 2001:db8:c::/120 to pool 192.0.2.0/24, prefix "
        "2001:db8:64::/96).",
        "",
        "| ratio | UDP payload (bytes) | IPv4 (pps) | IPv6 (pps) | tayga (pps) | eBPF (pps) | tayga / IPv6 | "
        "eBPF / IPv6 | eBPF / tayga | tayga loss (%) | eBPF loss (%) | tayga CPU per packet (µs) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, paths in results.items():
        med = {p: statistics.median(r["pps"] for r in runs) for p, runs in paths.items()}
        loss = {p: statistics.median(r["loss_pct"] for r in runs) for p, runs in paths.items()}
        cpu = statistics.median(r["cpu_us_per_packet"] for r in paths["tayga"])
        lines.append(
            f"| translators / IPv6 routing | {size} | {med['IPv4']:.0f} | {med['IPv6']:.0f} | {med['tayga']:.0f} | "
            f"{med['eBPF']:.0f} | {med['tayga'] / med['IPv6']:.2f} | {med['eBPF'] / med['IPv6']:.2f} | "
            f"{med['eBPF'] / med['tayga']:.2f} | {loss['tayga']:.1f} | {loss['eBPF']:.1f} | {cpu:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default="64,1200")
    parser.add_argument("--no-doc", action="store_true", help="print the table only")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces, bpf)", file=sys.stderr)
        return 2
    for tool in ("iperf3", "tayga", "tc"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed (make deps)", file=sys.stderr)
            return 2
    wrong = self_check()
    if wrong:
        print("the eBPF translator is wrong:\n" + "\n".join(wrong), file=sys.stderr)
        return 1
    log("the eBPF translator checked on UDP and TCP packets, both ways")
    results = run(args.seconds, args.repeats, [int(s) for s in args.sizes.split(",")])
    return publish(markdown(results, args.seconds, args.repeats), DOC, keep=not args.no_doc)


if __name__ == "__main__":
    sys.exit(main())
