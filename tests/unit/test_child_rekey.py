"""CHILD_SA rekeying (RFC 7296 1.3.3, without PFS) on the gateway core: the new SA's keys come from
SK_d and the new nonces, the old SA stays until the initiator deletes it, both are ESP tunnels of the
service meanwhile (outbound on the new one), and anything but a rekey of our CHILD_SA is refused."""

from __future__ import annotations

import os
from typing import Any

from dataplane.esp.tunnel import TunnelTable
from dataplane.ikev2 import codec, crypto, iana
from dataplane.ikev2.client import ClientConfig, Initiator, parse_suite
from dataplane.ikev2.gateway import Gateway, GatewayConfig
from dataplane.ikev2.sa import IkeSa
from dataplane.ikev2.service import tunnel_of

PSK = b"lab-unit-test-key"  # the pre-shared key of the gateways and clients below

CLIENT, MEMBER = ("10.10.20.6", 4500), ("10.10.10.3", 4500)
ESP = parse_suite("aes256gcm16", True)
EVERYTHING = (codec.TrafficSelector("0.0.0.0", "255.255.255.255"),)


def established() -> tuple[Gateway, Initiator, IkeSa]:
    gw = Gateway(GatewayConfig(identities=[MEMBER[0]], psk=PSK, redirect="none", pool_first="172.16.3.1",
                               pool_last="172.16.3.254"))
    ini = Initiator(ClientConfig(MEMBER[0], port=4500, esp=ESP, psk=PSK), MEMBER[0], CLIENT, None)
    data = ini.start()
    for _ in range(4):
        kind, value = ini.receive(gw.handle(data, CLIENT, MEMBER)[0].data)
        if kind != "send":
            break
        data = value
    assert ini.state == "established"
    return gw, ini, next(iter(gw.sas.values()))


def request(ini: Initiator, exchange: int, inner: list[Any]) -> bytes:
    assert ini.suite is not None and ini.keys is not None
    ini.message_id += 1
    header = codec.Header(ini.spi_i, ini.spi_r, iana.SK, exchange, iana.FLAG_INITIATOR, ini.message_id)
    return crypto.seal(header, inner, ini.suite, ini.keys, True)


def answer(gw: Gateway, ini: Initiator, data: bytes) -> list[Any]:
    assert ini.suite is not None and ini.keys is not None
    raw = gw.handle(data, CLIENT, MEMBER)[0].data
    return crypto.open_sk(raw, codec.decode(raw), ini.suite, ini.keys, False)


def rekey_request(ini: Initiator, spi: bytes, nonce: bytes, old_spi: bytes | None = None) -> bytes:
    return request(ini, iana.CREATE_CHILD_SA, [
        codec.NotifyPayload(iana.REKEY_SA, b"", iana.PROTO_ESP, old_spi or ini.child_spi),
        codec.SaPayload((crypto.esp_proposal(ESP, spi),)), codec.NoncePayload(nonce),
        codec.TsPayload(EVERYTHING, True), codec.TsPayload(EVERYTHING, False)])


def test_rekey_makes_a_new_child_sa_with_fresh_keys() -> None:
    gw, ini, sa = established()
    old = sa.child
    assert old is not None
    spi, nonce_i = os.urandom(4), os.urandom(32)
    inner = answer(gw, ini, rekey_request(ini, spi, nonce_i))
    chosen = next(p for p in inner if isinstance(p, codec.SaPayload)).proposals[0]
    nonce_r = next(p for p in inner if isinstance(p, codec.NoncePayload)).data
    ts_i = next(p for p in inner if isinstance(p, codec.TsPayload) and p.initiator)
    assert sa.child is not None and sa.child is not old and sa.retiring == [old]
    assert chosen.spi == sa.child.spi_in != old.spi_in and sa.child.spi_out == spi
    assert ts_i.selectors == old.ts_i  # still narrowed to the client's address
    assert ini.suite is not None and ini.suite.prf is not None and ini.keys is not None
    assert sa.child.keys == crypto.derive_child_keys(ini.suite.prf, ini.keys.sk_d, ESP, nonce_i, nonce_r)
    assert sa.child.keys != old.keys
    assert gw.counters["child_rekeys"] == 1 and gw.counts()["ipsec"] == 2  # the old one is not load


def test_old_and_new_are_tunnels_until_the_old_is_deleted() -> None:
    gw, ini, sa = established()
    old = sa.child
    assert old is not None
    answer(gw, ini, rekey_request(ini, os.urandom(4), os.urandom(32)))
    new = sa.child
    assert new is not None
    table = TunnelTable()
    for child in (*sa.retiring, new):  # the order the service installs them in
        table.add(tunnel_of(sa, child))
    packet = bytes([0x45]) + bytes(11) + bytes([10, 10, 10, 254]) + bytes([172, 16, 3, 1])
    peer, sealed = table.encapsulate(packet) or (None, b"")
    assert sealed[:4] == new.spi_out, "outbound traffic takes the new CHILD_SA"
    out = answer(gw, ini, request(ini, iana.INFORMATIONAL, [codec.DeletePayload(iana.PROTO_ESP, (ini.child_spi,))]))
    assert out == [codec.DeletePayload(iana.PROTO_ESP, (old.spi_in,))]
    assert sa.retiring == [] and sa.child is new and sa.state == "established"


def test_only_a_rekey_of_our_child_sa_is_accepted() -> None:
    gw, ini, sa = established()
    old = sa.child
    additional = request(ini, iana.CREATE_CHILD_SA, [
        codec.SaPayload((crypto.esp_proposal(ESP, os.urandom(4)),)), codec.NoncePayload(os.urandom(32)),
        codec.TsPayload(EVERYTHING, True), codec.TsPayload(EVERYTHING, False)])
    assert answer(gw, ini, additional) == [codec.NotifyPayload(iana.NO_ADDITIONAL_SAS)]
    stranger = rekey_request(ini, os.urandom(4), os.urandom(32), old_spi=b"\x01\x02\x03\x04")
    assert answer(gw, ini, stranger) == [codec.NotifyPayload(iana.NO_ADDITIONAL_SAS)]
    pfs = request(ini, iana.CREATE_CHILD_SA, [
        codec.NotifyPayload(iana.REKEY_SA, b"", iana.PROTO_ESP, ini.child_spi),
        codec.SaPayload((crypto.esp_proposal(ESP, os.urandom(4)),)), codec.NoncePayload(os.urandom(32)),
        codec.KePayload(19, crypto.Dh(19).public),
        codec.TsPayload(EVERYTHING, True), codec.TsPayload(EVERYTHING, False)])
    assert answer(gw, ini, pfs) == [codec.NotifyPayload(iana.NO_PROPOSAL_CHOSEN)]
    assert sa.child is old and sa.retiring == [] and gw.counters["create_child_refused"] == 3


def test_a_new_child_sa_once_the_old_one_is_gone() -> None:
    """strongSwan with kernel-libipsec lets its CHILD_SA expire, deletes it and asks for a new one
    (CREATE_CHILD_SA without REKEY_SA): granted, narrowed to the IKE SA's address."""
    gw, ini, sa = established()
    assert answer(gw, ini, request(ini, iana.INFORMATIONAL, [codec.DeletePayload(iana.PROTO_ESP,
                                                                                  (ini.child_spi,))]))
    assert sa.child is None and gw.counts()["ipsec"] == 0
    nonce_i = os.urandom(32)
    new = request(ini, iana.CREATE_CHILD_SA, [
        codec.SaPayload((crypto.esp_proposal(ESP, os.urandom(4)),)), codec.NoncePayload(nonce_i),
        codec.TsPayload(EVERYTHING, True), codec.TsPayload(EVERYTHING, False)])
    inner = answer(gw, ini, new)
    ts_i = next(p for p in inner if isinstance(p, codec.TsPayload) and p.initiator)
    nonce_r = next(p for p in inner if isinstance(p, codec.NoncePayload)).data
    assert ts_i.selectors[0].start == ts_i.selectors[0].end == sa.address == "172.16.3.1"
    assert sa.child is not None and sa.retiring == [] and gw.counters["children_created"] == 1
    assert ini.suite is not None and ini.suite.prf is not None and ini.keys is not None
    assert sa.child.keys == crypto.derive_child_keys(ini.suite.prf, ini.keys.sk_d, ESP, nonce_i, nonce_r)
    assert gw.counts()["ipsec"] == 2
    no_ts = request(ini, iana.CREATE_CHILD_SA, [
        codec.NotifyPayload(iana.REKEY_SA, b"", iana.PROTO_ESP, b"\x09\x09\x09\x09"),
        codec.SaPayload((crypto.esp_proposal(ESP, os.urandom(4)),)), codec.NoncePayload(os.urandom(32))])
    assert answer(gw, ini, no_ts) == [codec.NotifyPayload(iana.NO_ADDITIONAL_SAS)]  # names no SA of ours
