"""IKEv2 codec (dataplane.ikev2.codec): payload round trips, the RFC 5685 notify data (the seed's
`01 04 0A 0A 0A 64`), a real strongSwan IKE_SA_INIT, and fuzzing (only IkeError may come out)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.ikev2 import codec, iana, redirect_notify
from dataplane.ikev2.codec import IkeError

# An IKE_SA_INIT request of strongSwan 5.9.8 (charon on this machine, captured with tshark on the lab's
# LAN) to the VIP 10.10.10.100: SA KE No N(NATD_S_IP) N(NATD_D_IP) N(FRAG_SUP) N(HASH_ALG) N(REDIR_SUP).
STRONGSWAN_SA_INIT = bytes.fromhex(
    "5ed82672241b6da80000000000000000212022080000000000000110220000300000002c010100040300000c0100000c"
    "800e0100030000080300000c030000080200000500000008040000132800004800130000533235bf757bad2484420b43"
    "7a97a137f0ccbb8942b8a61266751a74f4ce5256b45654db1118f3677db942f1fcc4c2ee88a95bbb3e3ff55f3806b6f2"
    "ce6e5fbf29000024f38e39ae7121b895563a7f9ca78c024bdbd76de1aec76fb95c2080608c7756c72900001c00004004"
    "57250b9e050f63f7b67df24adc41618b66b79bd22900001c0000400556caafd9f2b383b64dbe4b19d36a35496b4a1184"
    "290000080000402e290000100000402f00020003000400050000000800004016")

# Its next IKE_SA_INIT, to 10.10.10.3 after our REDIRECT: N(REDIR_FROM) instead of N(REDIR_SUP).
STRONGSWAN_REDIRECTED = bytes.fromhex(
    "5c5eb49783faacfc0000000000000000212022080000000000000116220000300000002c010100040300000c0100000c"
    "800e0100030000080300000c030000080200000500000008040000132800004800130000533235bf757bad2484420b43"
    "7a97a137f0ccbb8942b8a61266751a74f4ce5256b45654db1118f3677db942f1fcc4c2ee88a95bbb3e3ff55f3806b6f2"
    "ce6e5fbf29000024f38e39ae7121b895563a7f9ca78c024bdbd76de1aec76fb95c2080608c7756c72900001c00004004"
    "29d70aa4e56ad9e8f3967cdbbd3254c1a20cf7fe2900001c000040058fefcb8eb51716ebf7570674ba9af3e5babc6df4"
    "290000080000402e290000100000402f00020003000400050000000e0000401801040a0a0a64")


def test_redirected_from_vip_is_the_seed_hexdump() -> None:
    data = redirect_notify.encode_redirected_from("10.10.10.100")
    assert data == bytes.fromhex("01040A0A0A64")
    # "NOTIFY(REDIRECTED_FROM) Next payload: NONE, reserved: 0x0, length: 14 ... spi size: 0"
    first, chain = codec.encode_payloads([codec.NotifyPayload(iana.REDIRECTED_FROM, data)])
    assert first == iana.NOTIFY
    assert chain == bytes.fromhex("0000000e" "00" "00" "4018") + data
    assert redirect_notify.decode_gateway(data) == ("10.10.10.100", b"")


def test_redirect_carries_gateway_and_nonce() -> None:
    nonce = bytes(range(32))
    data = redirect_notify.encode_redirect("10.10.10.3", nonce)
    assert data[:6] == bytes.fromhex("01040a0a0a03") and data[6:] == nonce
    assert redirect_notify.decode_gateway(data) == ("10.10.10.3", nonce)
    assert redirect_notify.encode_redirect("10.10.10.3", None) == bytes.fromhex("01040a0a0a03")


@pytest.mark.parametrize("gateway,kind", [("2001:db8::1", iana.GW_IPV6), ("vpn.example.net", iana.GW_FQDN)])
def test_redirect_other_identity_types(gateway: str, kind: int) -> None:
    data = redirect_notify.encode_redirect(gateway, b"n" * 16)
    assert data[0] == kind
    assert redirect_notify.decode_gateway(data) == (gateway, b"n" * 16)


@pytest.mark.parametrize("data", [b"", b"\x01", b"\x01\x04\x0a\x0a", b"\x01\x05" + bytes(5), b"\x07\x04" + bytes(4),
                                  b"\x03\x00", b"\x03\x02\xff\xfe"])
def test_bad_redirect_data(data: bytes) -> None:
    with pytest.raises(IkeError):
        redirect_notify.decode_gateway(data)


def test_strongswan_ike_sa_init_decodes() -> None:
    message = codec.decode(STRONGSWAN_SA_INIT)
    assert message.header.exchange == iana.IKE_SA_INIT and message.header.from_initiator
    assert message.summary() == ("SA KE N NOTIFY(NAT_DETECTION_SOURCE_IP) NOTIFY(NAT_DETECTION_DESTINATION_IP) "
                                 "NOTIFY(IKEV2_FRAGMENTATION_SUPPORTED) NOTIFY(SIGNATURE_HASH_ALGORITHMS) "
                                 "NOTIFY(REDIRECT_SUPPORTED)")
    sa = message.first(codec.SaPayload)
    assert isinstance(sa, codec.SaPayload)
    transforms = sa.proposals[0].transforms
    assert codec.Transform(iana.T_ENCR, iana.ENCR_AES_CBC, 256) in transforms
    assert codec.Transform(iana.T_DH, 19) in transforms
    ke = message.first(codec.KePayload)
    assert isinstance(ke, codec.KePayload) and ke.group == 19 and len(ke.data) == 64
    assert codec.encode(message.header, message.payloads) == STRONGSWAN_SA_INIT


def test_strongswan_redirected_from_is_the_vip() -> None:
    message = codec.decode(STRONGSWAN_REDIRECTED)
    assert message.notify(iana.REDIRECT_SUPPORTED) is None
    notify = message.notify(iana.REDIRECTED_FROM)
    assert notify is not None and notify.data == bytes.fromhex("01040A0A0A64")
    assert codec.encode(message.header, message.payloads) == STRONGSWAN_REDIRECTED


def _all_payloads() -> list[codec.Payload]:
    return [
        codec.SaPayload((codec.Proposal(1, iana.PROTO_IKE, b"", (
            codec.Transform(iana.T_ENCR, iana.ENCR_AES_CBC, 256), codec.Transform(iana.T_PRF, 5),
            codec.Transform(iana.T_INTEG, 12), codec.Transform(iana.T_DH, 19))),
            codec.Proposal(2, iana.PROTO_ESP, b"\x01\x02\x03\x04", (
                codec.Transform(iana.T_ENCR, iana.ENCR_AES_GCM_16, 128), codec.Transform(iana.T_ESN, 0))))),
        codec.KePayload(14, b"\x05" * 256),
        codec.IdPayload(iana.ID_FQDN, b"client1"),
        codec.IdPayload(iana.ID_IPV4_ADDR, b"\x0a\x0a\x0a\x64", initiator=False),
        codec.CertPayload(iana.CERT_X509_SIGNATURE, b"\x30\x82"),
        codec.CertReqPayload(iana.CERT_X509_SIGNATURE, b"\x11" * 20),
        codec.AuthPayload(iana.AUTH_PSK, b"\x22" * 32),
        codec.NoncePayload(b"\x33" * 32),
        codec.NotifyPayload(iana.REDIRECT_SUPPORTED),
        codec.NotifyPayload(iana.REKEY_SA, b"", iana.PROTO_ESP, b"\x01\x02\x03\x04"),
        codec.DeletePayload(iana.PROTO_ESP, (b"\x01\x02\x03\x04", b"\x05\x06\x07\x08")),
        codec.DeletePayload(iana.PROTO_IKE),
        codec.VendorPayload(b"strongSwan"),
        codec.TsPayload((codec.TrafficSelector("0.0.0.0", "255.255.255.255"),
                         codec.TrafficSelector("172.16.1.5", "172.16.1.5", 6, 80, 80))),
        codec.TsPayload((codec.TrafficSelector("10.0.0.0", "10.0.0.255"),), initiator=False),
        codec.CpPayload(iana.CFG_REQUEST, ((iana.INTERNAL_IP4_ADDRESS, b""), (iana.INTERNAL_IP4_DNS, b""))),
        codec.UnknownPayload(99, b"future"),
    ]


def test_every_payload_round_trips() -> None:
    header = codec.Header(b"\x01" * 8, b"\x02" * 8, 0, iana.IKE_AUTH, iana.FLAG_INITIATOR, 1)
    data = codec.encode(header, _all_payloads())
    message = codec.decode(data)
    assert message.payloads == _all_payloads()
    assert message.header.length == len(data)
    assert codec.encode(message.header, message.payloads) == data


def test_sk_payload_must_be_last_and_is_opaque() -> None:
    header = codec.Header(b"\x01" * 8, b"\x02" * 8, 0, iana.IKE_AUTH, iana.FLAG_INITIATOR, 1)
    data = codec.encode(header, [codec.SkPayload(iana.IDI, b"\x99" * 48)])
    message = codec.decode(data)
    assert message.payloads == [codec.SkPayload(iana.IDI, b"\x99" * 48)]


def test_critical_unknown_payload_is_an_error() -> None:
    header = codec.Header(b"\x01" * 8, bytes(8), 0, iana.IKE_SA_INIT, iana.FLAG_INITIATOR, 0)
    data = bytearray(codec.encode(header, [codec.UnknownPayload(99, b"x", critical=True)]))
    with pytest.raises(IkeError):
        codec.decode(bytes(data))


@pytest.mark.parametrize("mutate", [
    lambda d: d[:27],  # header cut
    lambda d: d[:-1],  # length mismatch
    lambda d: d[:17] + b"\x10" + d[18:],  # version 1
    lambda d: d[:28] + b"\x00\x00\x00\x02" + d[32:],  # payload length < 4
])
def test_malformed_messages(mutate: object) -> None:
    with pytest.raises(IkeError):
        codec.decode(mutate(STRONGSWAN_SA_INIT))  # type: ignore[operator]


@settings(max_examples=5000, deadline=None)
@given(st.binary(max_size=400))
def test_fuzz_random_bytes(data: bytes) -> None:
    with contextlib.suppress(IkeError):
        codec.decode(data)


@settings(max_examples=5000, deadline=None)
@given(st.integers(0, len(STRONGSWAN_SA_INIT) - 1), st.integers(0, 255), st.integers(0, len(STRONGSWAN_SA_INIT)))
def test_fuzz_mutated_real_message(position: int, value: int, cut: int) -> None:
    data = bytearray(STRONGSWAN_SA_INIT)
    data[position] = value
    data = data[:cut] if cut >= codec.HEADER.size else data
    if cut >= codec.HEADER.size:
        data[24:28] = len(data).to_bytes(4, "big")  # keep the header length consistent: reach the payloads
    try:
        message = codec.decode(bytes(data))
    except IkeError:
        return
    for p in message.payloads:
        if isinstance(p, codec.NotifyPayload) and p.type in (iana.REDIRECT, iana.REDIRECTED_FROM):
            with contextlib.suppress(IkeError):
                redirect_notify.decode_gateway(p.data)


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=64))
def test_fuzz_redirect_data(data: bytes) -> None:
    with contextlib.suppress(IkeError):
        redirect_notify.decode_gateway(data)
