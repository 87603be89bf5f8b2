"""User-space ESP data plane against strongSwan's kernel-libipsec on the same path, in the same run.

Three namespaces of its own (never a lab's): A (client, 198.18.250.1) — B (gateway, .2 / 198.18.251.1)
— C (north, 198.18.251.2). UDP flows between the client's virtual address 172.16.9.1 and C through an
ESP tunnel between A and B (ESP-in-UDP 4500, AES-GCM-256, tunnel MTU 1400 on both ends):

* up:   A → C, the gateway B decrypts (ESP in, cleartext out toward the north);
* down: C → A, the gateway B encrypts (the return traffic the northbound router sends to its member).

Two set-ups take turns, each on the same three namespaces: the project's ESP engine on both ends
(`dataplane.esp`, static keys: the data plane alone, as the gateway daemon runs it), and strongSwan
(charon + kernel-libipsec, IKEv2 then a CHILD_SA with a virtual IP from a pool) on both ends.
Packet sizes: 1400-byte frames and the JVD's IMIX (64:8, 127:36, 255:11, 511:4, 1024:2, 1518:39).
The sender offers as much as its socket takes; the receiver counts what arrives. Per run: received
packets/s and Mbit/s (Ethernet frame sizes), and the gateway process's CPU time per delivered packet
(from /proc: all its threads). Medians over rounds; ratios project / strongSwan per round.
Writes docs/benchmarks-esp.md.

    python3 bench/esp.py [--rounds 2] [--seconds 3]     (root; about 2 minutes with the defaults)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import secrets
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import BenchError, logger, write_doc  # noqa: E402
from dataplane.ikev2 import swan  # noqa: E402

NS = {"a": "espb-a", "b": "espb-b", "c": "espb-c"}
A, B_A, B_C, C = "198.18.250.1", "198.18.250.2", "198.18.251.1", "198.18.251.2"
POOL = "172.16.9.0/24"
NORTH = "198.18.251.0/30"
VIRTUAL = "172.16.9.1"  # the client's inner address (strongSwan's pool gives its first address)
PORT = 9000
MTU = 1400
IMIX = ((64, 8), (127, 36), (255, 11), (511, 4), (1024, 2), (1518, 39))
FRAME_OVERHEAD = 14 + 20 + 8  # Ethernet, IPv4, UDP: a frame of N bytes carries N - 42 bytes of UDP payload
KEY_AB, KEY_BA = bytes(range(36)), bytes(range(36, 72))  # AES-256 key + 4-byte salt per direction
SPI_AB, SPI_BA = b"\x00\x00\x10\x01", b"\x00\x00\x10\x02"
PROFILES = ("1400", "imix")
DIRECTIONS = ("up", "down")
IMPLS = ("project", "strongswan")
log = logger("esp")


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise BenchError(f"{' '.join(argv)}: {result.stderr.strip()}")
    return result


def in_ns(ns: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


# ------------------------------------------------------------------------------------------ topology
def setup() -> None:
    teardown()
    for ns in NS.values():
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
    # distinct ifindexes on both ends of a veth (the same index on both delays carrier events)
    sh("ip", "link", "add", "a0", "netns", NS["a"], "index", "50", "type", "veth", "peer", "name", "b0", "netns",
       NS["b"], "index", "51")
    sh("ip", "link", "add", "b1", "netns", NS["b"], "index", "52", "type", "veth", "peer", "name", "c0", "netns",
       NS["c"], "index", "53")
    for ns, dev, addr in (("a", "a0", A), ("b", "b0", B_A), ("b", "b1", B_C), ("c", "c0", C)):
        sh("ip", "-n", NS[ns], "addr", "add", f"{addr}/30", "dev", dev)
        sh("ip", "-n", NS[ns], "link", "set", dev, "up")
    sh("ip", "-n", NS["c"], "route", "add", POOL, "via", B_C)
    sh("ip", "netns", "exec", NS["b"], "sysctl", "-qw", "net.ipv4.ip_forward=1")


def teardown() -> None:
    for ns in NS.values():
        sh("ip", "netns", "del", ns, check=False)


def cpu_seconds(pid: int) -> float:
    """User + system time of every thread of PID so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------------------ roles
def node(role: str) -> None:
    """Inside A or B: the project's ESP engine with static keys, until SIGTERM."""
    from ipaddress import IPv4Network

    from dataplane.esp import encap
    from dataplane.esp.engine import EspEngine
    from dataplane.esp.sa import ENCR_AES_GCM_16, EspSa
    from dataplane.esp.tunnel import Tunnel

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind(("0.0.0.0", 4500))
    sock.setblocking(False)
    client = role == "a"
    a_to_b, b_to_a = EspSa(SPI_AB, ENCR_AES_GCM_16, KEY_AB), EspSa(SPI_BA, ENCR_AES_GCM_16, KEY_BA)
    if client:  # as the tunnel client: everything it routes in goes to B, from its virtual address
        tunnel = Tunnel("a", (B_A, 4500), a_to_b, b_to_a, (IPv4Network("0.0.0.0/0"),),
                        (IPv4Network(f"{VIRTUAL}/32"),))
        routes: tuple[IPv4Network, ...] = (IPv4Network(f"{C}/32"),)
    else:  # as the gateway: the pool is routed in, the client's address goes to A
        tunnel = Tunnel("b", (A, 4500), b_to_a, a_to_b, (IPv4Network(f"{VIRTUAL}/32"),))
        routes = (IPv4Network(POOL),)

    def send(peer: tuple[str, int], data: bytes) -> None:
        with contextlib.suppress(BlockingIOError):  # a full socket buffer drops, as a NIC queue would
            sock.sendto(data, peer)

    engine = EspEngine("esp0", send, routes, by_source=client)
    fd = engine.open((VIRTUAL,) if client else ())
    engine.add(tunnel)
    sh("ip", "link", "set", "esp0", "mtu", str(MTU))
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ, "tun")
    sel.register(sock, selectors.EVENT_READ, "udp")
    print("ready", flush=True)
    while not stop["now"]:
        for key, _ in sel.select(0.2):
            if key.data == "tun":
                engine.tun_readable()
                continue
            for _ in range(256):
                try:
                    data, source = sock.recvfrom(65535)
                except BlockingIOError:
                    break
                if encap.classify(data) == "esp":
                    engine.from_network(data, source)
    engine.close()


def sizes(profile: str, count: int) -> list[int]:
    """UDP payload sizes: 1400-byte frames, or IMIX frames in random order (fixed seed)."""
    if profile == "1400":
        return [1400 - FRAME_OVERHEAD] * count
    rng = random.Random(7)
    population = [size for size, weight in IMIX for _ in range(weight)]
    return [max(18, rng.choice(population) - FRAME_OVERHEAD) for _ in range(count)]


def sender(source: str, target: str, profile: str, seconds: float) -> None:
    """UDP from SOURCE to TARGET as fast as the socket takes it, for SECONDS."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((source, 0))
    sock.connect((target, PORT))
    payloads = [bytes(n) for n in sizes(profile, 1000)]
    sent = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for payload in payloads:
            try:
                sock.send(payload)
                sent += 1
            except OSError:
                time.sleep(0.0001)
    print(json.dumps({"sent": sent}), flush=True)


def receiver(address: str) -> None:
    """Count what arrives on UDP PORT from the first packet until 0.5 s of silence."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    sock.bind((address, PORT))
    print("ready", flush=True)
    sock.settimeout(15)
    try:
        first = sock.recv(65535)
    except TimeoutError:
        print(json.dumps({"packets": 0, "octets": 0, "seconds": 0.0}), flush=True)
        return
    start = last = time.monotonic()
    packets, octets = 1, len(first) + FRAME_OVERHEAD
    sock.settimeout(0.5)
    while True:
        try:
            data = sock.recv(65535)
        except TimeoutError:
            break
        last = time.monotonic()
        packets += 1
        octets += len(data) + FRAME_OVERHEAD
    print(json.dumps({"packets": packets, "octets": octets, "seconds": last - start}), flush=True)


# ------------------------------------------------------------------------------------------ runs
def measure(direction: str, profile: str, seconds: float, gateway_pid: int) -> dict[str, float]:
    rx_ns, rx_addr, tx_ns, tx_src = (NS["c"], C, NS["a"], VIRTUAL) if direction == "up" else \
        (NS["a"], VIRTUAL, NS["c"], C)
    recv = subprocess.Popen(in_ns(rx_ns, sys.executable, __file__, "receiver", "--address", rx_addr),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert recv.stdout is not None
    if recv.stdout.readline().strip() != "ready":
        raise BenchError(f"the receiver did not start: {recv.communicate(timeout=10)[1][-300:]}")
    cpu0 = cpu_seconds(gateway_pid)
    send = subprocess.run(in_ns(tx_ns, sys.executable, __file__, "sender", "--source", tx_src, "--target", rx_addr,
                                "--profile", profile, "--seconds", str(seconds)),
                          capture_output=True, text=True, timeout=seconds + 30)
    out, err = recv.communicate(timeout=30)
    cpu = cpu_seconds(gateway_pid) - cpu0
    if send.returncode != 0 or not out.strip():
        raise BenchError(f"{direction} {profile}: sender {send.stderr[-300:]} receiver {err[-300:]}")
    got = json.loads(out)
    sent = json.loads(send.stdout)["sent"]
    if got["packets"] < 100 or got["seconds"] <= 0:
        raise BenchError(f"{direction} {profile}: only {got['packets']} of {sent} packets arrived")
    return {"pps": got["packets"] / got["seconds"], "mbps": got["octets"] * 8 / got["seconds"] / 1e6,
            "offered_pps": sent / seconds, "cpu_us": cpu / got["packets"] * 1e6}


def with_ours(direction: str, profile: str, seconds: float) -> dict[str, float]:
    nodes = {r: subprocess.Popen(in_ns(NS[r], sys.executable, __file__, "node", "--role", r),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in ("b", "a")}
    try:
        for proc in nodes.values():
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise BenchError(f"an ESP node did not start: {proc.communicate(timeout=10)[1][-500:]}")
        return measure(direction, profile, seconds, nodes["b"].pid)
    finally:
        for proc in nodes.values():
            proc.terminate()
            proc.wait(10)


def with_strongswan(direction: str, profile: str, seconds: float, folder: Path) -> dict[str, float]:
    key = secrets.token_urlsafe(24)  # drawn for this run, as `lab up` draws a lab's
    gw = swan.responder(NS["b"], folder / "b", B_A, key, esp="aes256gcm16", pool=POOL, log_level=1)
    # The north subnet as the remote selector: it holds an address of the gateway, which kernel-libipsec
    # needs as the source of the route it installs for the client's virtual IP (with C/32 alone it
    # fails: "unable to install IPsec policies (SPD)").
    client = swan.initiator(NS["a"], folder / "a", B_A, A, "client", key, esp="aes256gcm16", remote_ts=NORTH,
                            install_routes=True)
    try:
        gw.start()
        client.start()
        result = client.initiate()
        if result.returncode != 0:
            raise BenchError(f"strongSwan did not establish: {result.stdout[-800:]}\nresponder log: "
                             f"{gw.log.read_text()[-800:] if gw.log.exists() else ''}")
        vip = re.search(r"installing new virtual IP (\S+)", result.stdout)
        if not vip or vip.group(1) != VIRTUAL:
            raise BenchError(f"strongSwan's client got {vip.group(1) if vip else 'no virtual IP'}, not {VIRTUAL}")
        for ns in (NS["a"], NS["b"]):
            sh(*in_ns(ns, "ip", "link", "set", "ipsec0", "mtu", str(MTU)))
        # the gateway side routes its pool into kernel-libipsec's TUN device (its SPD picks the SA)
        sh(*in_ns(NS["b"], "ip", "route", "replace", POOL, "dev", "ipsec0"))
        assert gw.process is not None
        return measure(direction, profile, seconds, gw.process.pid)
    finally:
        client.stop()
        gw.stop()


def strongswan_version() -> str:
    result = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "strongswan-charon"], capture_output=True,
                            text=True)
    return result.stdout.strip() if result.returncode == 0 else "unknown"


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


# ------------------------------------------------------------------------------------------ report
Rows = dict[tuple[str, str, str], list[dict[str, float]]]


def ratio(rows: Rows, direction: str, profile: str, key: str) -> float:
    ours, theirs = rows[(direction, profile, "project")], rows[(direction, profile, "strongswan")]
    return statistics.median(o[key] / t[key] for o, t in zip(ours, theirs, strict=True))


def med(rows: Rows, direction: str, profile: str, impl: str, key: str) -> float:
    return statistics.median(r[key] for r in rows[(direction, profile, impl)])


def report(rows: Rows, args: argparse.Namespace, when: str) -> str:
    label = {"1400": "1400 bytes", "imix": "IMIX (JVD)"}
    way = {"up": "client → north (gateway decrypts)", "down": "north → client (gateway encrypts)"}
    lines = ["# ESP data plane: user-space ESP against strongSwan kernel-libipsec", "",
             f"Measured by `bench/esp.py --rounds {args.rounds} --seconds {args.seconds}` on {when}. "
             f"Machine: {cpu_model()}, {os.cpu_count()} cores, kernel {platform.release()}, "
             f"Python {platform.python_version()}, strongSwan {strongswan_version()}. Noisy shared machine: "
             "compare figures of the same run.", "",
             "Path: client namespace → ESP-in-UDP 4500 (AES-GCM-256, tunnel MTU 1400) → gateway namespace → "
             "north namespace, and back. Both ends run the same implementation: the project's ESP engine "
             "(`dataplane.esp`, as the gateway daemon runs it, keys set statically) or strongSwan 5.9 charon "
             "with kernel-libipsec (ESP in user space on a TUN device, after IKEv2; the same AES-GCM-256). "
             "A Python sender offers as much as its socket takes; the other side counts what arrives. Every "
             "process (sender, both ESP ends, receiver) shares the machine's 2 cores, so these are the "
             "figures of the whole path on one box, not of a gateway with cores to itself; the gateway's CPU "
             "time per delivered packet is the per-gateway cost. Frames counted with Ethernet, IPv4 and UDP "
             "headers; IMIX frames above the tunnel MTU are fragmented before encryption (two ESP packets, "
             "one frame counted).", "",
             "## Packets per second and throughput", "",
             "| direction | frames | project pps | strongSwan pps | ratio pps (goal >= 0.5) "
             "| project Mbit/s | strongSwan Mbit/s |",
             "|---|---|---|---|---|---|---|"]
    for direction in DIRECTIONS:
        for profile in PROFILES:
            lines.append(
                f"| {way[direction]} | {label[profile]} "
                f"| {med(rows, direction, profile, 'project', 'pps'):,.0f} "
                f"| {med(rows, direction, profile, 'strongswan', 'pps'):,.0f} "
                f"| **{ratio(rows, direction, profile, 'pps'):.2f}** "
                f"| {med(rows, direction, profile, 'project', 'mbps'):,.1f} "
                f"| {med(rows, direction, profile, 'strongswan', 'mbps'):,.1f} |")
    lines += ["", "## Gateway CPU per delivered packet", "",
              "CPU time (user + system, all threads) of the gateway's process — the project's ESP engine or "
              "strongSwan's charon — divided by the packets that arrived.", "",
              "| direction | frames | project µs/packet | strongSwan µs/packet | ratio (strongSwan / project) |",
              "|---|---|---|---|---|"]
    for direction in DIRECTIONS:
        for profile in PROFILES:
            ours = [r["cpu_us"] for r in rows[(direction, profile, "project")]]
            theirs = [r["cpu_us"] for r in rows[(direction, profile, "strongswan")]]
            lines.append(f"| {way[direction]} | {label[profile]} | {statistics.median(ours):.1f} "
                         f"| {statistics.median(theirs):.1f} "
                         f"| {statistics.median(t / o for o, t in zip(ours, theirs, strict=True)):.2f} |")
    lines += ["", "## Every run", "",
              "| round | direction | frames | implementation | offered pps | received pps | Mbit/s "
              "| gateway µs/packet |", "|---|---|---|---|---|---|---|---|"]
    for (direction, profile, impl), runs in rows.items():
        for i, r in enumerate(runs):
            lines.append(f"| {i + 1} | {direction} | {label[profile]} | {impl} | {r['offered_pps']:,.0f} "
                         f"| {r['pps']:,.0f} | {r['mbps']:,.1f} | {r['cpu_us']:.1f} |")
    up = ratio(rows, "up", "1400", "pps")
    lines += ["", "## Headline", "", f"Median: **{med(rows, 'up', '1400', 'project', 'pps'):,.0f} pps** "
              f"({med(rows, 'up', '1400', 'project', 'mbps'):,.0f} Mbit/s) through one gateway at 1400-byte "
              f"frames, client → north: **{up:.2f}×** strongSwan kernel-libipsec on the same path.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd")
    n = sub.add_parser("node")
    n.add_argument("--role", choices=("a", "b"), required=True)
    s = sub.add_parser("sender")
    s.add_argument("--source", required=True)
    s.add_argument("--target", required=True)
    s.add_argument("--profile", choices=PROFILES, required=True)
    s.add_argument("--seconds", type=float, required=True)
    r = sub.add_parser("receiver")
    r.add_argument("--address", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks-esp.md")
    args = parser.parse_args()
    if args.cmd == "node":
        node(args.role)
        return 0
    if args.cmd == "sender":
        sender(args.source, args.target, args.profile, args.seconds)
        return 0
    if args.cmd == "receiver":
        receiver(args.address)
        return 0
    if os.geteuid() != 0:
        raise SystemExit("bench/esp.py creates namespaces: run it as root")
    why = swan.available()
    if why:
        raise SystemExit(f"bench/esp.py compares against strongSwan: {why}")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows: Rows = {}
    setup()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for round_ in range(args.rounds):
                for direction in DIRECTIONS:
                    for profile in PROFILES:
                        for impl in IMPLS:
                            folder = Path(tmp) / f"{round_}{direction}{profile}"
                            got = (with_ours(direction, profile, args.seconds) if impl == "project"
                                   else with_strongswan(direction, profile, args.seconds, folder))
                            log(f"round {round_ + 1} {direction} {profile} {impl}: {got['pps']:,.0f} pps "
                                f"{got['mbps']:.1f} Mbit/s, gateway {got['cpu_us']:.1f} µs/packet "
                                f"(offered {got['offered_pps']:,.0f} pps)")
                            rows.setdefault((direction, profile, impl), []).append(got)
    finally:
        teardown()
    write_doc(report(rows, args, when), args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
