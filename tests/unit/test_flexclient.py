"""The IOS-like FlexVPN client: dead peer detection, the peer list, `show crypto session`, the planner
and validation of `flexvpn_client`, and its daemon's DPD exchange against the real gateway core."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest
from statusdata import client_sa, flexclient_status, gateway_child, gateway_sa, gateway_status, ipsec_sa

from dataplane.core import flexclient
from dataplane.core.flexclient import DPD_RETRIES, Liveness, PeerList, show_session
from dataplane.daemons.flexclientd import Client
from dataplane.ikev2.client import ClientConfig, Initiator, Runner
from dataplane.ikev2.gateway import Gateway, GatewayConfig
from lab_orchestrator.model.validate import TopologyInvalid, load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.plan.features import flexvpn
from labkit.configs import FlexclientConfig
from labkit.flexstatus import FlexclientStatus, GatewayStatus

PSK = b"lab-unit-test-key"  # the pre-shared key of the gateways and clients below

REPO = Path(__file__).resolve().parents[2]
BRANCH = REPO / "labs/flexvpn-branch.yml"


# ------------------------------------------------------------------------------------------ DPD
def test_liveness_probes_after_the_interval_of_silence() -> None:
    dpd = Liveness(interval=10, retry=2, now=0.0)
    assert dpd.poll(9.9) is None
    assert dpd.poll(10.0) == "probe"
    assert dpd.poll(11.0) is None  # the answer has RETRY seconds to come
    dpd.heard(11.5)
    assert dpd.poll(21.4) is None
    assert dpd.poll(21.5) == "probe"
    assert dpd.probes == 2


def test_liveness_declares_the_peer_dead_after_the_retries() -> None:
    dpd = Liveness(interval=3, retry=1, now=0.0)
    verdicts = [dpd.poll(float(t)) for t in range(3, 3 + DPD_RETRIES + 2)]
    assert verdicts == ["probe"] + ["retransmit"] * DPD_RETRIES + ["dead"]


def test_traffic_from_the_peer_postpones_the_probe() -> None:
    dpd = Liveness(interval=3, retry=1, now=0.0)
    assert dpd.poll(3.0) == "probe"
    assert dpd.poll(4.0) == "retransmit"
    dpd.heard(4.5)  # the answer (or any ESP from the peer) came
    assert [dpd.poll(t) for t in (5.0, 7.4)] == [None, None]
    assert dpd.poll(7.5) == "probe"


def test_peer_list_tries_each_peer_then_backs_off() -> None:
    peers = PeerList(["10.10.10.100", "10.10.10.1"])
    assert peers.current() == "10.10.10.100"
    assert peers.failed() == 0.0 and peers.current() == "10.10.10.1"
    assert peers.failed() == flexclient.BACKOFF_FIRST and peers.current() == "10.10.10.100"
    waits = [peers.failed() for _ in range(12)]
    assert max(waits) == flexclient.BACKOFF_MAX
    assert waits[1] == 2 * flexclient.BACKOFF_FIRST  # doubling, once per round of two peers
    peers.connected()
    peers.index = 1
    peers.restart()
    assert peers.current() == "10.10.10.100" and peers.failed() == 0.0


# ------------------------------------------------------------------------------------------ show
def _client_status(state: str = "up") -> FlexclientStatus:
    client = flexclient.ClientStatus("flex_client", "Tunnel1", ["10.10.10.100"], state=state,
                                     gateway="10.10.10.3" if state == "up" else None,
                                     redirected_from="10.10.10.100" if state == "up" else None,
                                     address="172.16.3.1" if state == "up" else None, local="10.10.20.11")
    up = state == "up"
    return FlexclientStatus.model_validate(flexclient_status(
        client.as_dict(), sas=[client_sa()] if up else [], ipsec_sas=[ipsec_sa(remote="10.10.10.3")] if up else []))


def test_show_crypto_session_of_a_redirected_client() -> None:
    text = show_session(_client_status())
    assert text.startswith("Crypto session current status\n\nInterface: Tunnel1\n")
    assert "Session status: UP-ACTIVE\nPeer: 10.10.10.3 port 4500\n" in text
    assert "IKEv2 SA: local 10.10.20.11/4500 remote 10.10.10.3/4500 Active" in text
    assert "IPSEC FLOW: permit ip host 172.16.3.1 0.0.0.0/0.0.0.0" in text
    assert "Active SAs: 2, origin: crypto map" in text
    assert "Redirected from: 10.10.10.100" in text


def test_show_crypto_session_of_a_client_whose_tunnel_is_down() -> None:
    text = show_session(_client_status("connecting"))
    assert "Session status: DOWN\nPeer: 10.10.10.100 port 500" in text
    assert "UP-ACTIVE" not in text


def test_show_crypto_session_of_a_gateway_lists_its_clients() -> None:
    status = GatewayStatus.model_validate(gateway_status(sas=[
        gateway_sa(address="172.16.3.1", redirected_from="10.10.10.100", child=gateway_child()),
        gateway_sa(id=2, local="10.10.10.3/500", remote="10.10.20.6/500", state="IN-NEG"),
    ]))
    text = show_session(status)
    assert text.count("Interface: Virtual-Access") == 1  # the half-open SA is no session
    assert "Peer: 10.10.20.11 port 4500" in text and "permit ip 0.0.0.0/0.0.0.0 host 172.16.3.1" in text
    assert "Active SAs: 2" in text
    assert show_session(None) == "Crypto session current status\n\n"


# ------------------------------------------------------------------------------------------ plan
def _plan(path: Path) -> planmod.LabPlan:
    return planmod.build(load_topology(path).topology, "labs/x.yml", "/run/lab", python="python3")


def test_each_ios_client_gets_its_daemon_and_config() -> None:
    plan = _plan(BRANCH)
    procs = [p for p in plan.processes if p.name == flexvpn.CLIENT_PROCESS_NAME]
    assert [(p.node, p.ns) for p in procs] == [("branch1", "fvios-branch1"), ("branch2", "fvios-branch2")]
    assert procs[0].argv == ("python3", "-m", "dataplane.daemons.flexclientd",
                             "/run/lab/fvios/nodes/branch1/flexclient.json")
    config = json.loads(plan.files["nodes/branch1/flexclient.json"])
    assert (config["peers"], config["source"], config["device"], config["interface"]) == \
        (["10.10.10.100"], "10.10.20.11", "Tu1", "Tunnel1")
    assert (config["routes"], config["dpd_interval"], config["dpd_retry"]) == (["10.10.10.254/32"], 3, 1)
    assert config["status"] == "/run/lab/fvios/nodes/branch1/ikev2-status.json"
    # the branches run no gateway; the cluster routers no client
    assert {p.node for p in plan.processes if p.name == flexvpn.PROCESS_NAME} == {"router1", "router2", "router3"}


def test_ios_client_running_config() -> None:
    text = _plan(BRANCH).files["nodes/branch2/running-config"]
    for line in ("crypto ikev2 client flexvpn flex_client\n peer 1 10.10.10.100\n client connect Tunnel1\n",
                 "crypto ikev2 redirect client\n", "crypto ikev2 dpd 3 1 periodic\n",
                 "interface Tunnel1\n ip address negotiated\n tunnel source Ethernet0/0\n tunnel destination dynamic\n",
                 "ip route 10.10.10.254 255.255.255.255 Tunnel1\n"):
        assert line in text


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    text = BRANCH.read_text()
    assert old in text
    path = tmp_path / "lab.yml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(("old", "new", "message"), [
    ("      source: Ethernet0/0\n      routes: [10.10.10.254/32]\n      dpd_interval: 3\n      dpd_retry: 1\n"
     "  branch2", "      source: Ethernet0/9\n      routes: [10.10.10.254/32]\n      dpd_interval: 3\n"
     "      dpd_retry: 1\n  branch2", "tunnel source Ethernet0/9 is not an interface of branch1"),
    ("  client1: {kind: host}", "  client1: {kind: host, flexvpn_client: {peers: [10.10.10.100], source: eth1}}",
     "a FlexVPN client runs on an ios-router"),
    ("    ikev2: {redirect: init, pool: 172.16.3.0/24}",
     "    ikev2: {redirect: init, pool: 172.16.3.0/24}\n    flexvpn_client: {peers: [10.10.10.100], "
     "source: Ethernet0/1}", "router3 is a FlexVPN gateway already"),
])
def test_flexvpn_client_mistakes_are_located(tmp_path: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(TopologyInvalid) as caught:
        load_topology(_edited(tmp_path, old, new), [])
    texts = [d.render() for d in caught.value.diagnostics]
    assert any(message in t and "flexvpn_client" in t and ":" in t.split(" ")[0] for t in texts), texts


# ------------------------------------------------------------------------------------------ daemon's DPD
class _Sent:
    """Stands in for the client's Runner: what the daemon sends."""

    def __init__(self) -> None:
        self.messages: list[tuple[bytes, str, int]] = []

    def send_ike(self, data: bytes, target: str, port: int) -> None:
        self.messages.append((data, target, port))


def _established(tmp_path: Path) -> tuple[Client, _Sent, Gateway]:
    gw = Gateway(GatewayConfig(identities=["10.10.10.3"], psk=PSK, redirect="none",
                               pool_first="172.16.3.1", pool_last="172.16.3.254"))
    ini = Initiator(ClientConfig("10.10.10.3", port=4500, psk=PSK), "10.10.10.3", ("10.10.20.11", 4500), "10.10.10.100")
    data = ini.start()
    for _ in range(4):
        kind, value = ini.receive(gw.handle(data, ("10.10.20.11", 4500), ("10.10.10.3", 4500))[0].data)
        if kind != "send":
            break
        data = value
    assert ini.state == "established"
    client = Client(FlexclientConfig(
        node="branch1", lab="t", name="flex_client", interface="Tunnel1", device="Tu1", source_interface="Gi1",
        source="10.10.20.11", peers=["10.10.10.100"], routes=[], psk_file=str(tmp_path / "psk.secret.json"),
        identity="branch1",
        ike="aes256-sha256-ecp256", esp="aes256-sha256", max_redirects=5, dpd_interval=3, dpd_retry=1,
        status=str(tmp_path / "ikev2-status.json")))
    sent = _Sent()
    client.attempt, client.runner = ini, cast(Runner, sent)
    client.liveness = Liveness(3, 1, 0.0)
    return client, sent, gw


def test_daemon_liveness_check_is_answered_by_the_gateway(tmp_path: Path) -> None:
    client, sent, gw = _established(tmp_path)
    assert client.liveness is not None and client.liveness.poll(3.0) == "probe"
    client.liveness_request()
    client.liveness_request()  # a retransmission is the same message (same message ID)
    assert len(sent.messages) == 2 and sent.messages[0] == sent.messages[1]
    assert sent.messages[0][1:] == ("10.10.10.3", 4500)
    replies = gw.handle(sent.messages[0][0], ("10.10.20.11", 4500), ("10.10.10.3", 4500))
    assert len(replies) == 1
    client.ike_message(replies[0].data, 3.5)
    assert not client.liveness.waiting and client.dpd_message_id is None
    assert client.liveness.poll(6.4) is None and client.liveness.poll(6.5) == "probe"


def test_daemon_ignores_a_forged_liveness_answer(tmp_path: Path) -> None:
    client, sent, gw = _established(tmp_path)
    assert client.liveness is not None and client.liveness.poll(3.0) == "probe"
    client.liveness_request()
    reply = bytearray(gw.handle(sent.messages[0][0], ("10.10.20.11", 4500), ("10.10.10.3", 4500))[0].data)
    reply[-1] ^= 1  # the integrity check fails
    client.ike_message(bytes(reply), 3.5)
    assert client.liveness.waiting and client.dpd_message_id is not None
