"""IKEv2 gateway and client in one process (no sockets): every supported suite, PSK and RSA
certificates, CP and CHILD_SA, RFC 5685 redirect in IKE_SA_INIT and IKE_AUTH, the client's nonce
check and max-redirects, INVALID_KE, retransmissions, deletion, and fuzzing of both ends."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.ikev2 import client, codec, crypto, gateway, iana, redirect_notify, showsa
from dataplane.ikev2.client import ClientConfig, Initiator
from dataplane.ikev2.gateway import Gateway, GatewayConfig

PSK = b"lab-unit-test-key"  # the pre-shared key of the gateways and clients below

CLIENT = ("10.10.20.6", 500)
VIP, MEMBER = "10.10.10.100", "10.10.10.3"


def make_gateway(redirect: str = "init", target: str | None = None, **config: object) -> Gateway:
    cfg = GatewayConfig(**{"identities": [MEMBER, VIP], "psk": PSK, "redirect": redirect,  # type: ignore[arg-type]
                           "pool_first": "172.16.3.1", "pool_last": "172.16.3.254", **config})
    return Gateway(cfg, redirect=(lambda local, peer, exchange: target if local == VIP else None))


def exchange(gw: Gateway, ini: Initiator, local: str) -> tuple[str, object]:
    """Run one initiator against one gateway until it ends; returns the last event."""
    data = ini.start()
    for _ in range(6):
        replies = gw.handle(data, CLIENT, (local, 500))
        if not replies:
            return "no answer", None
        kind, value = ini.receive(replies[0].data)
        if kind != "send":
            return kind, value
        data = value
    return "loop", None


SUITES = [client.parse_suite(f"{e}-{h}-{g}", False) for e, h, g in itertools.product(
    ("aes128", "aes256", "aes128gcm16", "aes256gcm16"), ("sha1", "sha256", "sha384", "sha512"),
    ("modp2048", "ecp256", "ecp384", "curve25519"))]


@pytest.mark.parametrize("suite", SUITES, ids=lambda s: s.name())
def test_psk_every_suite_establishes_with_address_and_child(suite: crypto.Suite) -> None:
    gw = make_gateway()
    esp = client.parse_suite("aes128gcm16" if suite.aead else "aes256-sha384", True)
    ini = Initiator(ClientConfig(MEMBER, ike=suite, esp=esp, psk=PSK), MEMBER, CLIENT, None)
    assert exchange(gw, ini, MEMBER) == ("established", None)
    assert ini.address == "172.16.3.1"
    sa = next(iter(gw.sas.values()))
    assert sa.state == "established" and sa.child is not None
    assert sa.child.spi_out == ini.child_spi and ini.peer_child_spi == sa.child.spi_in
    assert sa.child.ts_i[0].start == sa.child.ts_i[0].end == "172.16.3.1"
    # Both ends derived the same CHILD_SA keys.
    assert ini.suite is not None and ini.suite.prf is not None and ini.keys is not None
    keys = crypto.derive_child_keys(ini.suite.prf, ini.keys.sk_d, esp, ini.nonce_i, ini.nonce_r)
    assert keys == sa.child.keys
    assert gw.counts() == {"ike": 1, "ipsec": 2, "half_open": 0, "arrivals": 0, "settled": 1}


def test_wrong_psk_is_refused_and_gives_the_address_back() -> None:
    gw = make_gateway()
    ini = Initiator(ClientConfig(MEMBER, psk=b"wrong"), MEMBER, CLIENT, None)
    kind, why = exchange(gw, ini, MEMBER)
    assert kind == "failed" and "AUTHENTICATION_FAILED" in str(why)
    assert gw.counters["auth_failed"] == 1 and not gw.sas and len(gw.pool.free) == gw.pool.size


@pytest.fixture(scope="module")
def lab_pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from dataplane.ikev2 import pki

    folder = tmp_path_factory.mktemp("pki")
    pki.issue(folder, "router3", [MEMBER, VIP])
    pki.issue(folder, "client1", [], ["client1.lab"])
    return folder


def test_rsa_certificates_both_ways(lab_pki: Path) -> None:
    from dataplane.ikev2 import pki

    ca = pki.load_ca(lab_pki)
    cert, key = pki.issue(lab_pki, "router3")
    gw = make_gateway(cert=cert, key=key, ca=ca)
    ccert, ckey = pki.issue(lab_pki, "client1")
    ini = Initiator(ClientConfig(MEMBER, identity="client1.lab", psk=None, cert=ccert, key=ckey, ca=ca),
                    MEMBER, CLIENT, None)
    assert exchange(gw, ini, MEMBER) == ("established", None)
    sa = next(iter(gw.sas.values()))
    assert (sa.auth_method, sa.local_auth) == (iana.AUTH_DIGITAL_SIGNATURE, iana.AUTH_DIGITAL_SIGNATURE)
    assert sa.peer_id == "client1.lab"


def test_certificate_of_another_ca_is_refused(lab_pki: Path, tmp_path: Path) -> None:
    from dataplane.ikev2 import pki

    ca = pki.load_ca(lab_pki)
    cert, key = pki.issue(lab_pki, "router3")
    gw = make_gateway(cert=cert, key=key, ca=ca)
    rogue_cert, rogue_key = pki.issue(tmp_path, "client1", [], ["client1.lab"])
    ini = Initiator(ClientConfig(MEMBER, identity="client1.lab", psk=None, cert=rogue_cert, key=rogue_key, ca=ca),
                    MEMBER, CLIENT, None)
    kind, why = exchange(gw, ini, MEMBER)
    assert kind == "failed" and "AUTHENTICATION_FAILED" in str(why)


def test_rsa_method_1_sha1_is_verified() -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signature = crypto.rsa_sign(key, b"octets", iana.AUTH_RSA_SIG)
    assert crypto.rsa_verify(key.public_key(), b"octets", iana.AUTH_RSA_SIG, signature)
    assert not crypto.rsa_verify(key.public_key(), b"other", iana.AUTH_RSA_SIG, signature)
    for name in ("sha256", "sha384", "sha512"):
        data = crypto.rsa_sign(key, b"octets", iana.AUTH_DIGITAL_SIGNATURE, name)
        assert crypto.rsa_verify(key.public_key(), b"octets", iana.AUTH_DIGITAL_SIGNATURE, data)


# ------------------------------------------------------------------------------------------ redirect
def test_redirect_in_ike_sa_init_carries_the_initiator_nonce_and_no_state() -> None:
    gw = make_gateway(target=MEMBER)
    ini = Initiator(ClientConfig(VIP, psk=PSK), VIP, CLIENT, None)
    reply = gw.handle(ini.start(), CLIENT, (VIP, 500))[0]
    message = codec.decode(reply.data)
    assert message.summary() == "NOTIFY(REDIRECT)"
    assert message.header.spi_r == bytes(8)
    notify = message.notify(iana.REDIRECT)
    assert notify is not None and notify.data == bytes.fromhex("01040a0a0a03") + ini.nonce_i
    assert not gw.sas and gw.counters["redirects_init"] == 1
    assert ini.receive(reply.data) == ("redirect", MEMBER)


def test_no_redirect_without_redirect_supported() -> None:
    gw = make_gateway(target=MEMBER)
    ini = Initiator(ClientConfig(VIP, redirect_supported=False, psk=PSK), VIP, CLIENT, None)
    assert exchange(gw, ini, VIP) == ("established", None)
    assert gw.counters["redirects_init"] == 0 and gw.counters["no_redirect_support"] == 1


def test_redirected_client_sends_redirected_from_and_is_counted() -> None:
    member = make_gateway()
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, redirected_from=VIP)
    first = codec.decode(ini.start())
    notify = first.notify(iana.REDIRECTED_FROM)
    assert notify is not None and notify.data == bytes.fromhex("01040A0A0A64")
    assert first.notify(iana.REDIRECT_SUPPORTED) is None
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, redirected_from=VIP)
    assert exchange(member, ini, MEMBER) == ("established", None)
    assert member.counts()["arrivals"] == 1
    assert next(iter(member.sas.values())).redirected_from == VIP


def test_redirect_in_ike_auth_after_mutual_authentication() -> None:
    gw = make_gateway(redirect="auth", target=MEMBER)
    ini = Initiator(ClientConfig(VIP, psk=PSK), VIP, CLIENT, None)
    kind, value = exchange(gw, ini, VIP)
    assert (kind, value) == ("redirect", MEMBER)
    sa = next(iter(gw.sas.values()))
    assert sa.state == "redirected" and sa.child is None and sa.address is None
    assert gw.counts()["ike"] == 0  # not counted as a session
    # The REDIRECT of IKE_AUTH has no nonce data.
    assert ini.keys is not None
    # The client deletes the redirected SA.
    replies = gw.handle(ini.delete(), CLIENT, (VIP, 500))
    assert replies and not gw.sas


def test_auth_mode_does_not_redirect_in_ike_sa_init() -> None:
    gw = make_gateway(redirect="auth", target=MEMBER)
    ini = Initiator(ClientConfig(VIP, psk=PSK), VIP, CLIENT, None)
    reply = gw.handle(ini.start(), CLIENT, (VIP, 500))[0]
    assert codec.decode(reply.data).notify(iana.REDIRECT) is None


def test_client_ignores_a_redirect_with_a_wrong_nonce() -> None:
    ini = Initiator(ClientConfig(VIP, psk=PSK), VIP, CLIENT, None)
    request = codec.decode(ini.start())
    forged_header = codec.Header(request.header.spi_i, bytes(8), 0, iana.IKE_SA_INIT, iana.FLAG_RESPONSE, 0)
    forged = codec.encode(forged_header, [codec.NotifyPayload(
        iana.REDIRECT, redirect_notify.encode_redirect("192.0.2.66", bytes(32)))])
    kind, why = ini.receive(forged)
    assert kind == "ignore" and "wrong nonce" in str(why) and ini.ignored == 1
    assert ini.state == "init"  # still waiting for the genuine answer
    genuine = codec.encode(forged_header, [codec.NotifyPayload(
        iana.REDIRECT, redirect_notify.encode_redirect(MEMBER, ini.nonce_i))])
    assert ini.receive(genuine) == ("redirect", MEMBER)


def test_client_ignores_answers_for_other_spis() -> None:
    ini = Initiator(ClientConfig(VIP, psk=PSK), VIP, CLIENT, None)
    ini.start()
    other = codec.encode(codec.Header(b"\x01" * 8, bytes(8), 0, iana.IKE_SA_INIT, iana.FLAG_RESPONSE, 0),
                         [codec.NotifyPayload(iana.REDIRECT, redirect_notify.encode_redirect(MEMBER, ini.nonce_i))])
    assert ini.receive(other)[0] == "ignore"


class FakeSocket:
    """Stands for the UDP socket of client.Runner; delivers to in-process gateways by address."""

    def __init__(self, gateways: dict[str, Gateway]):
        self.gateways = gateways
        self.inbox: list[bytes] = []

    def sendto(self, data: bytes, address: tuple[str, int]) -> None:
        gw = self.gateways.get(address[0])
        if gw is not None:
            self.inbox += [r.data for r in gw.handle(data, CLIENT, (address[0], 500))]


def run_client(gateways: dict[str, Gateway], config: ClientConfig) -> client.Result:
    """Drive client.Runner's redirect logic synchronously over FakeSocket."""
    runner = client.Runner.__new__(client.Runner)
    fake = FakeSocket(gateways)
    runner.sock = fake  # type: ignore[assignment]
    runner.local = CLIENT
    runner.keep, runner.concurrency, runner.by_spi, runner.sessions, runner.log = True, 1, {}, [], []
    session = client._Session("c1", config, client.Result("c1"), 0.0)
    runner.sessions.append(session)
    runner._begin(session, config.gateway, None, 0.0)
    while fake.inbox and not session.done:
        data = fake.inbox.pop(0)
        owner = runner.by_spi.get(data[:8])
        if owner is not None:
            runner._event(owner, data, 0.0)
    return session.result


def test_runner_follows_redirect_to_the_member() -> None:
    result = run_client({VIP: make_gateway(target=MEMBER), MEMBER: make_gateway()}, ClientConfig(VIP, psk=PSK))
    assert result.ok and result.gateway == MEMBER and result.path == [VIP, MEMBER] and result.redirects == 1


def test_redirect_loop_stops_at_max_redirects() -> None:
    looping = Gateway(GatewayConfig([VIP], PSK), redirect=lambda local, peer, ex: VIP)
    for limit in (1, 3, 5):
        result = run_client({VIP: looping}, ClientConfig(VIP, max_redirects=limit, psk=PSK))
        assert not result.ok and "redirect loop" in str(result.error)
        assert result.redirects == limit + 1 and len(result.path) == limit + 1


# ------------------------------------------------------------------------------------------ details
def test_invalid_ke_then_the_requested_group() -> None:
    gw = make_gateway(dh_groups=(14,))
    ini = Initiator(ClientConfig(MEMBER, extra_groups=(14,), psk=PSK), MEMBER, CLIENT, None)
    reply = gw.handle(ini.start(), CLIENT, (MEMBER, 500))[0]
    notify = codec.decode(reply.data).notify(iana.INVALID_KE_PAYLOAD)
    assert notify is not None and notify.data == b"\x00\x0e"
    kind, data = ini.receive(reply.data)
    assert kind == "send" and ini.group == 14
    replies = gw.handle(data, CLIENT, (MEMBER, 500))
    kind, data = ini.receive(replies[0].data)
    assert kind == "send"
    replies = gw.handle(data, CLIENT, (MEMBER, 500))
    assert ini.receive(replies[0].data) == ("established", None)


def test_no_proposal_chosen() -> None:
    gw = make_gateway(dh_groups=())
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    reply = gw.handle(ini.start(), CLIENT, (MEMBER, 500))[0]
    assert codec.decode(reply.data).notify(iana.NO_PROPOSAL_CHOSEN) is not None


def test_retransmissions_get_the_same_answers() -> None:
    gw = make_gateway()
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    first = ini.start()
    a = gw.handle(first, CLIENT, (MEMBER, 500))[0].data
    assert gw.handle(first, CLIENT, (MEMBER, 500))[0].data == a
    _, auth = ini.receive(a)
    b = gw.handle(auth, CLIENT, (MEMBER, 500))[0].data
    assert gw.handle(auth, CLIENT, (MEMBER, 500))[0].data == b
    assert gw.counters["retransmits"] == 2 and len(gw.sas) == 1


def test_pool_exhaustion_is_internal_address_failure() -> None:
    gw = make_gateway(pool_first="172.16.3.1", pool_last="172.16.3.1")
    assert exchange(gw, Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None), MEMBER)[0] == "established"
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, ("10.10.20.7", 500), None)
    data = ini.start()
    replies = gw.handle(data, ("10.10.20.7", 500), (MEMBER, 500))
    _, data = ini.receive(replies[0].data)
    replies = gw.handle(data, ("10.10.20.7", 500), (MEMBER, 500))
    message = codec.decode(replies[0].data)
    assert ini.suite is not None and ini.keys is not None
    inner = crypto.open_sk(replies[0].data, message, ini.suite, ini.keys, from_initiator=False)
    assert any(isinstance(p, codec.NotifyPayload) and p.type == iana.INTERNAL_ADDRESS_FAILURE for p in inner)


def test_delete_releases_address_and_child() -> None:
    gw = make_gateway()
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    exchange(gw, ini, MEMBER)
    replies = gw.handle(ini.delete(), CLIENT, (MEMBER, 500))
    assert ini.receive(replies[0].data) == ("deleted", None)
    assert gw.counts() == {"ike": 0, "ipsec": 0, "half_open": 0, "arrivals": 0, "settled": 1}
    assert len(gw.pool.free) == gw.pool.size


def test_create_child_sa_is_refused_politely() -> None:
    gw = make_gateway()
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    exchange(gw, ini, MEMBER)
    assert ini.suite is not None and ini.keys is not None
    header = codec.Header(ini.spi_i, ini.spi_r, iana.SK, iana.CREATE_CHILD_SA, iana.FLAG_INITIATOR, 2)
    request = crypto.seal(header, [codec.NoncePayload(b"\x01" * 32)], ini.suite, ini.keys, True)
    reply = gw.handle(request, CLIENT, (MEMBER, 500))[0].data
    inner = crypto.open_sk(reply, codec.decode(reply), ini.suite, ini.keys, from_initiator=False)
    assert inner == [codec.NotifyPayload(iana.NO_ADDITIONAL_SAS)]


def test_half_open_sas_expire() -> None:
    now = [0.0]
    gw = Gateway(GatewayConfig([MEMBER], PSK), clock=lambda: now[0])
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    gw.handle(ini.start(), CLIENT, (MEMBER, 500))
    assert gw.counts()["half_open"] == 1
    now[0] = gateway.HALF_OPEN_TIMEOUT + 1
    assert gw.expire() == 1 and not gw.sas


def test_show_sa() -> None:
    gw = make_gateway()
    exchange(gw, Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, VIP), MEMBER)
    from labkit.flexstatus import GatewaySa, IkeCounts

    sas = [GatewaySa.model_validate(sa) for sa in gw.status(0.0)]  # what flexvpnd's status file holds
    assert sas[0].state == "READY" and sas[0].child is not None and IkeCounts.model_validate(gw.counts()).ike == 1
    text = showsa.show_sa(sas)
    assert "READY" in text and "10.10.10.3/500" in text and "Assigned host addr: 172.16.3.1" in text
    assert "Redirected from: 10.10.10.100" in text


def test_tampered_ike_auth_is_dropped() -> None:
    gw = make_gateway()
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    reply = gw.handle(ini.start(), CLIENT, (MEMBER, 500))[0]
    _, auth = ini.receive(reply.data)
    tampered = bytearray(auth)
    tampered[-1] ^= 1
    assert gw.handle(bytes(tampered), CLIENT, (MEMBER, 500)) == []
    assert gw.counters["integrity_failed"] == 1


# ------------------------------------------------------------------------------------------ fuzz
def _valid_sa_init() -> bytes:
    return Initiator(ClientConfig(VIP, psk=PSK), VIP, CLIENT, None).start()


SA_INIT = _valid_sa_init()


@settings(max_examples=1500, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_gateway_random(data: bytes) -> None:
    make_gateway(target=MEMBER).handle(data, CLIENT, (VIP, 500))


@settings(max_examples=1500, deadline=None)
@given(st.integers(0, len(SA_INIT) - 1), st.integers(0, 255))
def test_fuzz_gateway_mutated_sa_init(position: int, value: int) -> None:
    data = bytearray(SA_INIT)
    data[position] = value
    for target in (MEMBER, None):
        make_gateway(target=target).handle(bytes(data), CLIENT, (VIP, 500))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 400), st.integers(0, 255))
def test_fuzz_gateway_mutated_ike_auth(position: int, value: int) -> None:
    gw = make_gateway()
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    reply = gw.handle(ini.start(), CLIENT, (MEMBER, 500))[0]
    _, auth = ini.receive(reply.data)
    data = bytearray(auth)
    data[position % len(data)] = value
    gw.handle(bytes(data), CLIENT, (MEMBER, 500))


@settings(max_examples=1500, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_client_receive(data: bytes) -> None:
    ini = Initiator(ClientConfig(VIP, psk=PSK), VIP, CLIENT, None)
    ini.start()
    ini.receive(ini.spi_i + data)
    ini.receive(data)


def test_gateway_survives_every_truncation() -> None:
    gw = make_gateway()
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    reply = gw.handle(ini.start(), CLIENT, (MEMBER, 500))[0]
    _, auth = ini.receive(reply.data)
    for message in (SA_INIT, auth):
        for cut in range(len(message)):
            make_gateway().handle(message[:cut], CLIENT, (MEMBER, 500))



def _recount(gw: Gateway) -> dict[str, int]:
    half = sum(1 for sa in gw.sas.values() if sa.state == "half-open")
    est = [sa for sa in gw.sas.values() if sa.state == "established"]
    return {"ike": len(est), "ipsec": 2 * sum(1 for sa in est if sa.child is not None), "half_open": half,
            "arrivals": gw.counters["arrivals"], "settled": gw.counters["settled"]}


def test_running_tallies_match_a_recount() -> None:
    now = [0.0]
    gw = Gateway(GatewayConfig([MEMBER], PSK, pool_first="172.16.3.1", pool_last="172.16.3.250"),
                 clock=lambda: now[0])
    initiators = []
    for i in range(40):
        peer = (f"10.10.20.{i + 10}", 500)
        ini = Initiator(ClientConfig(MEMBER, psk=PSK if i % 7 else b"bad", child=bool(i % 3),
                                     request_address=bool(i % 2)), MEMBER, peer, VIP if i % 5 == 0 else None)
        data = ini.start()
        if i % 4 == 0:  # left half-open
            gw.handle(data, peer, (MEMBER, 500))
            continue
        for _ in range(3):
            replies = gw.handle(data, peer, (MEMBER, 500))
            if not replies:
                break
            kind, data = ini.receive(replies[0].data)
            if kind != "send":
                break
        initiators.append((ini, peer))
        assert gw.counts() == _recount(gw)
    for ini, peer in initiators[::3]:
        if ini.state == "established":
            gw.handle(ini.delete(), peer, (MEMBER, 500))
            assert gw.counts() == _recount(gw)
    now[0] = gateway.HALF_OPEN_TIMEOUT + 1
    gw.expire()
    assert gw.counts() == _recount(gw) and gw.counts()["half_open"] == 0
    assert len(gw.pool.free) + sum(1 for sa in gw.sas.values() if sa.address) == gw.pool.size
