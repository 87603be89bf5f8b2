"""User-space ESP (dataplane.esp): transforms checked against scapy's independent ESP implementation,
the anti-replay window, tampering, the tunnel table's routing and inbound policy, RFC 3948 framing."""

from __future__ import annotations

import os
import random
from ipaddress import IPv4Network

import pytest
from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.ipsec import ESP, SecurityAssociation
from scapy.packet import Raw

from dataplane.esp import encap
from dataplane.esp.replay import ReplayWindow
from dataplane.esp.sa import ENCR_AES_CBC, ENCR_AES_GCM_16, EspDrop, EspSa
from dataplane.esp.tunnel import Tunnel, TunnelTable

SPI = bytes.fromhex("c0ffee01")
INNER = bytes(IP(src="172.16.1.5", dst="10.10.10.254") / ICMP(id=7, seq=1) / (b"x" * 57))
TUNNEL_HDR = IP(src="10.10.20.6", dst="10.10.10.2")

SUITES = [  # (ours, scapy's names, encryption key length, integrity key length)
    ((ENCR_AES_GCM_16, None), ("AES-GCM", "NULL"), 16 + 4, 0),
    ((ENCR_AES_GCM_16, None), ("AES-GCM", "NULL"), 32 + 4, 0),
    ((ENCR_AES_CBC, 12), ("AES-CBC", "SHA2-256-128"), 16, 32),
    ((ENCR_AES_CBC, 12), ("AES-CBC", "SHA2-256-128"), 32, 32),
    ((ENCR_AES_CBC, 2), ("AES-CBC", "HMAC-SHA1-96"), 32, 20),
    ((ENCR_AES_CBC, 14), ("AES-CBC", "SHA2-512-256"), 32, 64),
]


def pair(suite: tuple[int, int | None], ekey: bytes, ikey: bytes) -> tuple[EspSa, EspSa]:
    return (EspSa(SPI, suite[0], ekey, suite[1], ikey), EspSa(SPI, suite[0], ekey, suite[1], ikey))


@pytest.mark.parametrize(("ours", "theirs", "elen", "ilen"), SUITES)
def test_scapy_opens_what_we_seal_and_we_open_what_scapy_seals(ours, theirs, elen, ilen) -> None:
    ekey, ikey = os.urandom(elen), os.urandom(ilen)
    sender, receiver = pair(ours, ekey, ikey)
    ref = SecurityAssociation(ESP, spi=int.from_bytes(SPI, "big"), crypt_algo=theirs[0], crypt_key=ekey,
                              auth_algo=theirs[1], auth_key=ikey or None, tunnel_header=TUNNEL_HDR)
    for n in range(1, 4):
        wire = IP(bytes(IP(src="10.10.20.6", dst="10.10.10.2", proto=50) / Raw(sender.seal(INNER))))
        assert bytes(ref.decrypt(wire)) == INNER, f"packet {n}"
    theirs_packet = ref.encrypt(IP(INNER))
    next_header, inner = receiver.open(bytes(theirs_packet[ESP]))
    assert next_header == 4 and inner == INNER


@pytest.mark.parametrize(("ours", "theirs", "elen", "ilen"), SUITES)
def test_every_size_round_trips(ours, theirs, elen, ilen) -> None:
    sender, receiver = pair(ours, os.urandom(elen), os.urandom(ilen))
    for size in (20, 21, 22, 23, 64, 127, 255, 511, 1024, 1400, 1518):
        inner = INNER[:20] + os.urandom(size - 20)
        assert receiver.open(sender.seal(inner)) == (4, inner)
    assert receiver.counters.packets == 11 and sender.counters.packets == 11


@pytest.mark.parametrize(("ours", "theirs", "elen", "ilen"), SUITES)
def test_any_bit_flip_is_dropped_and_counted(ours, theirs, elen, ilen) -> None:
    sender, receiver = pair(ours, os.urandom(elen), os.urandom(ilen))
    packet = sender.seal(INNER)
    rng = random.Random(5)
    flipped = 0
    for _ in range(200):
        pos = rng.randrange(4, len(packet))  # the SPI is the table's job (unknown SPI)
        bad = bytearray(packet)
        bad[pos] ^= 1 << rng.randrange(8)
        with pytest.raises(EspDrop):
            receiver.open(bytes(bad))
        flipped += 1
    c = receiver.counters
    assert c.packets == 0 and c.auth_failures + c.replay_drops + c.malformed == flipped
    assert receiver.open(packet) == (4, INNER)  # forgeries did not move the window


def test_replays_and_old_packets_are_dropped() -> None:
    sender, receiver = pair((ENCR_AES_GCM_16, None), os.urandom(20), b"")
    packets = [sender.seal(INNER) for _ in range(1100)]
    receiver.open(packets[5])
    with pytest.raises(EspDrop, match="replay"):
        receiver.open(packets[5])
    receiver.open(packets[2])  # late but inside the window
    receiver.open(packets[1099])  # seq 1100: packets 1..76 are now left of a 1024 window
    with pytest.raises(EspDrop, match="replay"):
        receiver.open(packets[3])
    receiver.open(packets[500])
    assert receiver.counters.replay_drops == 2 and receiver.counters.packets == 4


def test_replay_window_bits() -> None:
    w = ReplayWindow(64)
    assert not w.check(0)
    for seq in (1, 3, 2, 64, 100):
        assert w.check(seq)
        w.accept(seq)
        assert not w.check(seq)
    assert not w.check(36) and w.check(37) and not w.check(64) and w.check(99)
    w.accept(10_000)
    assert not w.check(100) and w.check(9_999)
    with pytest.raises(ValueError):
        ReplayWindow(8)


def test_sequence_number_never_wraps() -> None:
    sa = EspSa(SPI, ENCR_AES_GCM_16, os.urandom(20), seq=0xFFFFFFFE)
    sa.seal(INNER)
    with pytest.raises(EspDrop, match="sequence_exhausted"):
        sa.seal(INNER)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError):
        EspSa(bytes(4), ENCR_AES_GCM_16, os.urandom(20))
    with pytest.raises(ValueError):
        EspSa(SPI, ENCR_AES_CBC, os.urandom(16))  # no integrity
    with pytest.raises(ValueError):
        EspSa(SPI, 3, os.urandom(24))  # 3DES


def make_tunnel(name: str, spi_in: bytes, spi_out: bytes, remote: str, peer: tuple[str, int]) -> tuple[Tunnel, Tunnel]:
    """Both ends of one tunnel (gateway side, client side) with shared keys."""
    k_ir, k_ri = os.urandom(20), os.urandom(20)
    gw = Tunnel(name, peer, EspSa(spi_out, ENCR_AES_GCM_16, k_ri), EspSa(spi_in, ENCR_AES_GCM_16, k_ir),
                (IPv4Network(remote),))
    client = Tunnel(name, ("10.10.10.2", 4500), EspSa(spi_in, ENCR_AES_GCM_16, k_ir),
                    EspSa(spi_out, ENCR_AES_GCM_16, k_ri), (IPv4Network("0.0.0.0/0"),))
    return gw, client


def test_table_routes_by_most_specific_selector_and_checks_inbound_source() -> None:
    table = TunnelTable()
    gw1, cl1 = make_tunnel("c1", b"\x01\x01\x01\x01", b"\x02\x02\x02\x02", "172.16.1.5/32", ("10.10.20.6", 4500))
    gw2, cl2 = make_tunnel("c2", b"\x03\x03\x03\x03", b"\x04\x04\x04\x04", "172.16.1.0/24", ("10.10.20.7", 4500))
    table.add(gw1)
    table.add(gw2)
    reply = bytes(IP(src="10.10.10.254", dst="172.16.1.5") / ICMP())
    peer, datagram = table.encapsulate(reply)
    assert peer == ("10.10.20.6", 4500) and datagram[:4] == gw1.outbound.spi
    assert cl1.inbound.open(datagram)[1] == reply
    peer, _ = table.encapsulate(bytes(IP(src="10.10.10.254", dst="172.16.1.9") / ICMP()))
    assert peer == ("10.10.20.7", 4500)
    assert table.encapsulate(bytes(IP(src="10.10.10.254", dst="172.16.2.1") / ICMP())) is None
    assert table.counters.no_tunnel == 1
    # client 1 may only send from its own address
    good = bytes(IP(src="172.16.1.5", dst="10.10.10.254") / ICMP())
    assert table.decapsulate(cl1.outbound.seal(good), ("10.10.20.6", 4500)) == good
    spoofed = bytes(IP(src="172.16.1.9", dst="10.10.10.254") / ICMP())
    assert table.decapsulate(cl1.outbound.seal(spoofed), ("10.10.20.6", 4500)) is None
    assert table.counters.policy_drops == 1
    assert table.decapsulate(b"\x09" * 64) is None and table.counters.unknown_spi == 1
    replayed = cl1.outbound.seal(good)
    assert table.decapsulate(replayed) == good and table.decapsulate(replayed) is None
    assert table.counters.replay_drops == 1
    table.remove(gw1.inbound.spi)
    assert table.route(IPv4Network("172.16.1.5/32").network_address) is gw2


def test_verified_packets_follow_the_peer_nat_mapping() -> None:
    table = TunnelTable()
    gw, client = make_tunnel("c1", b"\x01\x01\x01\x01", b"\x02\x02\x02\x02", "172.16.1.5/32", ("10.10.20.6", 4500))
    table.add(gw)
    forged = bytearray(client.outbound.seal(bytes(IP(src="172.16.1.5", dst="1.2.3.4") / UDP())))
    forged[-1] ^= 1
    table.decapsulate(bytes(forged), ("10.10.20.99", 4500))
    assert gw.peer == ("10.10.20.6", 4500)  # a forgery moves nothing
    table.decapsulate(client.outbound.seal(bytes(IP(src="172.16.1.5", dst="1.2.3.4") / UDP())), ("10.10.20.6", 6000))
    assert gw.peer == ("10.10.20.6", 6000)


def test_udp_4500_framing() -> None:
    assert encap.classify(b"\xff") == "keepalive"
    assert encap.classify(bytes(4) + b"ike message") == "ike"
    assert encap.classify(bytes(4)) == "junk"
    assert encap.classify(SPI + bytes(40)) == "esp"
    assert encap.classify(SPI + bytes(3)) == "junk"
