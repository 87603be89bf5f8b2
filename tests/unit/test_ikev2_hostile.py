"""The IKEv2 gateway against hostile initiators: an unauthenticated IKE_SA_INIT carrying the SPIi of
an established SA, IKE_SA_INIT floods (bounds, stateless cookies, secret rotation), requests not
kept whole, and protected messages with hostile contents sent by a peer that knows the keys."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.ikev2 import client, codec, crypto, gateway, iana
from dataplane.ikev2.client import ClientConfig, Initiator
from dataplane.ikev2.cookies import COOKIE_SECRET_LIFETIME, Cookies
from dataplane.ikev2.gateway import Gateway, GatewayConfig
from dataplane.ikev2.sa import IkeSa

PSK = b"lab-unit-test-key"  # the pre-shared key of the gateways and clients below

CLIENT = ("10.10.20.6", 500)
ATTACKER = ("10.10.20.66", 500)
VIP, MEMBER = "10.10.10.100", "10.10.10.3"


def make_gateway(clock: list[float] | None = None, target: str | None = None, **config: object) -> Gateway:
    cfg = GatewayConfig(**{"identities": [MEMBER, VIP], "psk": PSK,  # type: ignore[arg-type]
                           "pool_first": "172.16.3.1", "pool_last": "172.16.3.254", **config})
    now = clock if clock is not None else [0.0]
    return Gateway(cfg, redirect=(lambda local, peer, exchange: target if local == VIP else None),
                   clock=lambda: now[0])


def run(gw: Gateway, ini: Initiator, peer: tuple[str, int] = CLIENT, local: str = MEMBER) -> tuple[str, object]:
    data = ini.start()
    for _ in range(8):
        replies = gw.handle(data, peer, (local, 500))
        if not replies:
            return "no answer", None
        kind, value = ini.receive(replies[0].data)
        if kind != "send":
            return kind, value
        data = value
    return "loop", None


def established(gw: Gateway) -> tuple[Initiator, IkeSa]:
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    assert run(gw, ini) == ("established", None)
    sa = next(sa for sa in gw.sas.values() if sa.state == "established")
    return ini, sa


def snapshot(sa: IkeSa) -> tuple[object, ...]:
    return (sa.state, sa.spi_r, sa.keys, sa.child, sa.address, sa.peer, sa.next_id)


# ------------------------------------------------------------------------------------------ SPIi reuse
def test_unauthenticated_sa_init_with_an_established_spi_leaves_the_sa_alone() -> None:
    """The reproducer: 33 bytes (header + 5) with the SPIi of a live SA, same address and port."""
    gw = make_gateway()
    ini, sa = established(gw)
    before = snapshot(sa)
    header = codec.Header(ini.spi_i, bytes(8), iana.NONE, iana.IKE_SA_INIT, iana.FLAG_INITIATOR, 0)
    short = codec.encode(header, []) + b"\0" * 5
    assert len(short) == 33
    gw.handle(short, CLIENT, (MEMBER, 500))
    reply = gw.handle(codec.encode(header, []), CLIENT, (MEMBER, 500))
    assert codec.decode(reply[0].data).notify(iana.INVALID_SYNTAX) is not None
    assert gw.sas[sa.spi_r] is sa and snapshot(sa) == before
    assert gw.counts()["ike"] == 1 and gw.counts()["ipsec"] == 2 and len(gw.pool.free) == gw.pool.size - 1


def test_a_complete_sa_init_with_the_same_spi_makes_a_new_half_open_sa_beside_it() -> None:
    gw = make_gateway()
    ini, sa = established(gw)
    before = snapshot(sa)
    rogue = Initiator(ClientConfig(MEMBER, psk=b"guess"), MEMBER, CLIENT, None)
    rogue.spi_i = ini.spi_i
    kind, auth = rogue.receive(gw.handle(rogue.start(), CLIENT, (MEMBER, 500))[0].data)
    assert kind == "send" and len(gw.sas) == 2 and gw.counts()["half_open"] == 1
    assert snapshot(sa) == before
    # Its failed IKE_AUTH deletes only the new SA.
    kind, _ = rogue.receive(gw.handle(auth, CLIENT, (MEMBER, 500))[0].data)
    assert kind == "failed" and list(gw.sas.values()) == [sa] and snapshot(sa) == before
    # The genuine client still owns its SA: its Delete (protected) is what removes it.
    replies = gw.handle(ini.delete(), CLIENT, (MEMBER, 500))
    assert ini.receive(replies[0].data) == ("deleted", None) and not gw.sas
    assert len(gw.pool.free) == gw.pool.size


def test_retransmitted_sa_init_gets_the_stored_answer_and_no_second_sa() -> None:
    gw = make_gateway()
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    first = ini.start()
    answer = gw.handle(first, CLIENT, (MEMBER, 500))[0].data
    for _ in range(3):
        assert gw.handle(first, CLIENT, (MEMBER, 500))[0].data == answer
    assert len(gw.sas) == 1 and gw.counters["retransmits"] == 3
    # The same bytes from another port are another initiator: a new SA.
    gw.handle(first, (CLIENT[0], 4500), (MEMBER, 500))
    assert len(gw.sas) == 2


def test_half_open_sa_keeps_a_digest_not_the_request() -> None:
    gw = make_gateway()
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    message = codec.decode(ini.start())
    big = [*message.payloads, codec.VendorPayload(b"\xaa" * 60000)]
    data = codec.encode(message.header, big)
    gw.handle(data, CLIENT, (MEMBER, 500))
    sa = next(iter(gw.sas.values()))
    held = sum(len(v) for v in vars(sa).values() if isinstance(v, bytes))
    assert len(data) > 60000 and held < 2048
    assert not any(isinstance(v, bytes) and len(v) > 2048 for v in vars(sa.signed).values())


# ------------------------------------------------------------------------------------------ floods
def flood(gw: Gateway, count: int, distinct_addresses: bool, answer_cookies: bool) -> int:
    """COUNT IKE_SA_INITs replaying one KE value; returns how many were asked for a cookie."""
    template = Initiator(ClientConfig(MEMBER, redirect_supported=False, psk=PSK), MEMBER, ATTACKER, None)
    template.start()
    asked = 0
    for n in range(count):
        template.spi_i = struct.pack("!Q", n + 1)
        template.cookie = None
        peer = (f"10.{20 + n // 60000}.{(n // 250) % 240}.{n % 250 + 1}", 500) if distinct_addresses \
            else (ATTACKER[0], 1024 + n)
        replies = gw.handle(template.start(), peer, (MEMBER, 500))
        if replies and (cookie := codec.decode(replies[0].data).notify(iana.COOKIE)) is not None:
            asked += 1
            if answer_cookies:
                template.cookie = cookie.data
                gw.handle(template.start(), peer, (MEMBER, 500))
    return asked


def test_flood_from_one_address_is_bounded_and_cookies_are_demanded() -> None:
    """The reproducer: 5,000 IKE_SA_INITs from distinct ports of one address."""
    gw = make_gateway()
    asked = flood(gw, 5000, distinct_addresses=False, answer_cookies=False)
    assert gw.counts()["half_open"] <= gateway.COOKIE_THRESHOLD
    assert asked >= 5000 - gateway.COOKIE_THRESHOLD
    assert gw.counts()["ike"] == 0  # half-open SAs are no load


def test_flood_from_spoofed_addresses_cannot_pass_the_cookie() -> None:
    gw = make_gateway()
    asked = flood(gw, 5000, distinct_addresses=True, answer_cookies=False)
    assert gw.counts()["half_open"] <= gateway.COOKIE_THRESHOLD and asked >= 4900
    assert gw.counters["cookies_sent"] == asked


def test_flood_that_answers_cookies_is_bounded_per_source_and_globally() -> None:
    gw = make_gateway(max_half_open=300, max_half_open_per_source=40)
    flood(gw, 600, distinct_addresses=False, answer_cookies=True)
    assert gw.counts()["half_open"] == 40 and gw.counters["half_open_source_full"] > 0
    gw = make_gateway(max_half_open=300, max_half_open_per_source=40)
    flood(gw, 600, distinct_addresses=True, answer_cookies=True)
    assert gw.counts()["half_open"] == 300 and gw.counters["half_open_full"] > 0


def test_legitimate_client_gets_through_while_cookies_are_demanded() -> None:
    gw = make_gateway()
    flood(gw, 300, distinct_addresses=True, answer_cookies=False)
    assert gw.cookies_wanted()
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    assert run(gw, ini) == ("established", None)
    assert ini.cookies == 1 and gw.counters["cookies_accepted"] >= 1


def test_redirect_needs_a_cookie_under_a_flood() -> None:
    gw = make_gateway(target=MEMBER)
    template = Initiator(ClientConfig(VIP, psk=PSK), VIP, CLIENT, None)
    template.start()
    for n in range(gateway.COOKIE_RATE + 1):  # a burst of redirect requests: stateless, but counted
        template.spi_i = struct.pack("!Q", n + 1)
        gw.handle(template.start(), (f"10.30.{n // 250}.{n % 250 + 1}", 500), (VIP, 500))
    assert gw.counters["redirects_init"] == gateway.COOKIE_RATE  # the last one was asked for a cookie
    redirects = gw.counters["redirects_init"]
    ini = Initiator(ClientConfig(VIP, psk=PSK), VIP, CLIENT, None)
    assert run(gw, ini, local=VIP) == ("redirect", MEMBER)
    assert ini.cookies == 1 and gw.counters["redirects_init"] == redirects + 1


def test_cookies_calm_down_after_the_flood() -> None:
    now = [0.0]
    gw = make_gateway(clock=now)
    flood(gw, 400, distinct_addresses=True, answer_cookies=False)
    assert gw.cookies_wanted()
    now[0] = gateway.HALF_OPEN_TIMEOUT + 1
    gw.expire()
    gw.handle(b"", CLIENT, (MEMBER, 500))
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    assert run(gw, ini) == ("established", None) and ini.cookies == 0


def test_cookie_is_bound_to_address_spi_and_nonce_and_the_secret_rotates() -> None:
    now = [0.0]
    jar = Cookies(lambda: now[0])
    nonce, spi = b"n" * 32, b"s" * 8
    cookie = jar.make(nonce, "10.0.0.1", spi)
    assert len(cookie) == 20 and jar.check(cookie, nonce, "10.0.0.1", spi)
    assert not jar.check(cookie, nonce, "10.0.0.2", spi)
    assert not jar.check(cookie, b"m" * 32, "10.0.0.1", spi)
    assert not jar.check(cookie, nonce, "10.0.0.1", b"t" * 8)
    assert not jar.check(cookie[:-1] + bytes([cookie[-1] ^ 1]), nonce, "10.0.0.1", spi)
    assert not jar.check(b"", nonce, "10.0.0.1", spi)
    now[0] = COOKIE_SECRET_LIFETIME + 1  # one rotation: still accepted
    fresh = jar.make(nonce, "10.0.0.1", spi)
    assert fresh != cookie and jar.check(cookie, nonce, "10.0.0.1", spi)
    now[0] = 2 * COOKIE_SECRET_LIFETIME + 2  # two: the old secret is gone
    jar.make(nonce, "10.0.0.1", spi)
    assert not jar.check(cookie, nonce, "10.0.0.1", spi) and jar.check(fresh, nonce, "10.0.0.1", spi)


def test_client_gives_up_on_endless_cookies() -> None:
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    ini.start()
    header = codec.Header(ini.spi_i, bytes(8), iana.NOTIFY, iana.IKE_SA_INIT, iana.FLAG_RESPONSE, 0)
    answer = codec.encode(header, [codec.NotifyPayload(iana.COOKIE, b"c" * 20)])
    kinds = [ini.receive(answer)[0] for _ in range(4)]
    assert kinds == ["send", "send", "send", "failed"]
    first = codec.decode(ini.request)
    assert isinstance(first.payloads[0], codec.NotifyPayload) and first.payloads[0].type == iana.COOKIE


# ------------------------------------------------------------------------------------------ protected fuzz
SUITE = client.parse_suite("aes128gcm16-prfsha256-ecp256", False)


def _seal_raw(ini: Initiator, exchange: int, message_id: int, first: int, body: bytes) -> bytes:
    """A protected request as a peer holding the keys would send it, with any inner bytes."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    assert ini.keys is not None
    iv, plaintext = b"\x01" * 8, body + b"\0"
    sk_len = codec.GENERIC.size + 8 + len(plaintext) + 16
    head = codec.HEADER.pack(ini.spi_i, ini.spi_r, iana.SK, iana.VERSION, exchange, iana.FLAG_INITIATOR,
                             message_id, codec.HEADER.size + sk_len)
    aad = head + codec.GENERIC.pack(first, 0, sk_len)
    key = ini.keys.sk_ei
    return aad + iv + AESGCM(key[:-4]).encrypt(key[-4:] + iv, plaintext, aad)


def _half_open() -> tuple[Gateway, Initiator]:
    gw = make_gateway()
    ini = Initiator(ClientConfig(MEMBER, ike=SUITE, psk=PSK), MEMBER, CLIENT, None)
    kind, _ = ini.receive(gw.handle(ini.start(), CLIENT, (MEMBER, 500))[0].data)
    assert kind == "send"
    return gw, ini


def _consistent(gw: Gateway, decodable: bool = True) -> None:
    half = sum(1 for sa in gw.sas.values() if sa.state == "half-open")
    est = [sa for sa in gw.sas.values() if sa.state == "established"]
    assert gw.counts()["half_open"] == half and gw.counts()["ike"] == len(est)
    assert len(gw.pool.free) + sum(1 for sa in gw.sas.values() if sa.address) == gw.pool.size
    if decodable:
        assert gw.counters["integrity_failed"] == 0  # the message got past the integrity check


PAYLOAD_TYPES = st.sampled_from([iana.SA, iana.KE, iana.IDI, iana.IDR, iana.CERT, iana.AUTH, iana.NONCE,
                                 iana.NOTIFY, iana.DELETE, iana.TSI, iana.TSR, iana.CP, iana.EAP, 0, 200])


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([iana.IKE_AUTH, iana.INFORMATIONAL, iana.CREATE_CHILD_SA]), PAYLOAD_TYPES,
       st.binary(max_size=200))
def test_fuzz_encrypted_raw_inner_bytes(exchange: int, first: int, body: bytes) -> None:
    gw, ini = _half_open()
    gw.handle(_seal_raw(ini, exchange, 1, first, body), CLIENT, (MEMBER, 500))
    _consistent(gw, decodable=False)


def test_raw_sealing_reaches_the_gateway() -> None:
    gw, ini = _half_open()
    replies = gw.handle(_seal_raw(ini, iana.INFORMATIONAL, 1, iana.NONE, b""), CLIENT, (MEMBER, 500))
    assert len(replies) == 1 and gw.counters["integrity_failed"] == 0  # an empty INFORMATIONAL: liveness


ADDRESSES = st.builds(lambda n: f"10.0.0.{n}", st.integers(0, 255))
INNER = st.one_of(
    st.builds(codec.DeletePayload, st.sampled_from([1, 2, 3, 9]), st.lists(st.binary(max_size=9), max_size=4)
              .map(tuple)),
    st.builds(codec.NotifyPayload, st.integers(0, 65535), st.binary(max_size=40)),
    st.builds(codec.CpPayload, st.integers(0, 4), st.lists(st.tuples(st.integers(0, 30), st.binary(max_size=8)),
                                                          max_size=4).map(tuple)),
    st.builds(lambda kind, data, ini: codec.IdPayload(kind, data, initiator=ini), st.sampled_from([1, 2, 3, 9, 11]),
              st.binary(max_size=20), st.booleans()),
    st.builds(codec.AuthPayload, st.sampled_from([1, 2, 14, 99]), st.binary(max_size=64)),
    st.builds(lambda sels, ini: codec.TsPayload(tuple(sels), ini),
              st.lists(st.builds(lambda a, b, p: codec.TrafficSelector(a, b, p, 0, 65535), ADDRESSES, ADDRESSES,
                                 st.integers(0, 255)), max_size=3), st.booleans()),
    st.builds(codec.NoncePayload, st.binary(max_size=40)),
)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([iana.IKE_AUTH, iana.INFORMATIONAL, iana.CREATE_CHILD_SA]), st.lists(INNER, max_size=6))
def test_fuzz_encrypted_structured_payloads(exchange: int, inner: list[codec.Payload]) -> None:
    gw, ini = _half_open()
    assert ini.keys is not None
    header = codec.Header(ini.spi_i, ini.spi_r, iana.SK, exchange, iana.FLAG_INITIATOR, 1)
    gw.handle(crypto.seal(header, inner, SUITE, ini.keys, True), CLIENT, (MEMBER, 500))
    _consistent(gw)


@settings(max_examples=60, deadline=None)
@given(st.lists(INNER, max_size=6), st.integers(2, 4))
def test_fuzz_encrypted_after_establishment(inner: list[codec.Payload], message_id: int) -> None:
    gw = make_gateway()
    ini = Initiator(ClientConfig(MEMBER, ike=SUITE, psk=PSK), MEMBER, CLIENT, None)
    assert run(gw, ini) == ("established", None)
    assert ini.keys is not None
    for exchange in (iana.INFORMATIONAL, iana.CREATE_CHILD_SA, iana.IKE_AUTH):
        header = codec.Header(ini.spi_i, ini.spi_r, iana.SK, exchange, iana.FLAG_INITIATOR, message_id)
        gw.handle(crypto.seal(header, inner, SUITE, ini.keys, True), CLIENT, (MEMBER, 500))
        message_id += 1
        _consistent(gw)
