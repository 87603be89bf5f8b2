"""The strict reading of overload (`ikev2_cluster.strict_overload`): an overloaded gateway refuses new
IKE SAs (drops their IKE_SA_INIT, counted), while a master still redirects; `show crypto ikev2 cluster`
says the mode and marks the member's own row when it is overloaded."""

from __future__ import annotations

from statusdata import clb_status

from dataplane.core import clb
from dataplane.ikev2.client import ClientConfig, Initiator
from dataplane.ikev2.gateway import Gateway, GatewayConfig
from labkit.flexstatus import ClbStatus

PSK = b"lab-unit-test-key"  # the pre-shared key of the gateways and clients below

CLIENT = ("10.10.20.6", 500)
VIP, MEMBER = "10.10.10.100", "10.10.10.3"


def gateway(admit: bool, target: str | None = None) -> tuple[Gateway, dict[str, bool]]:
    """A gateway and the switch its admission hook reads (the daemon's: not overloaded, or not strict)."""
    state = {"admit": admit}
    config = GatewayConfig(identities=[MEMBER, VIP], psk=PSK, redirect="init", pool_first="172.16.3.1",
                           pool_last="172.16.3.254")
    gw = Gateway(config, redirect=lambda local, peer, exchange: target if local == VIP else None,
                 admit=lambda: state["admit"])
    return gw, state


def test_an_overloaded_gateway_drops_new_ike_sa_inits() -> None:
    gw, _ = gateway(admit=False)
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    assert gw.handle(ini.start(), CLIENT, (MEMBER, 500)) == []
    assert not gw.sas and gw.counters["overload_refused"] == 1


def test_admission_comes_back_when_the_load_goes_down() -> None:
    gw, state = gateway(admit=False)
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    request = ini.start()
    assert gw.handle(request, CLIENT, (MEMBER, 500)) == []
    state["admit"] = True
    replies = gw.handle(request, CLIENT, (MEMBER, 500))  # the client's retransmission
    assert len(replies) == 1 and ini.receive(replies[0].data)[0] == "send"
    assert len(gw.sas) == 1 and gw.counters["overload_refused"] == 1


def test_an_overloaded_master_still_redirects() -> None:
    gw, _ = gateway(admit=False, target="10.10.10.2")
    ini = Initiator(ClientConfig(VIP, psk=PSK), VIP, CLIENT, None)
    replies = gw.handle(ini.start(), CLIENT, (VIP, 500))
    assert len(replies) == 1 and ini.receive(replies[0].data) == ("redirect", "10.10.10.2")
    assert gw.counters["overload_refused"] == 0


def test_an_established_sa_keeps_working_while_overloaded() -> None:
    gw, state = gateway(admit=True)
    ini = Initiator(ClientConfig(MEMBER, psk=PSK), MEMBER, CLIENT, None)
    data = ini.start()
    for _ in range(3):
        kind, value = ini.receive(gw.handle(data, CLIENT, (MEMBER, 500))[0].data)
        if kind != "send":
            break
        data = value
    assert ini.state == "established"
    state["admit"] = False
    assert gw.handle(ini.delete(), CLIENT, (MEMBER, 500)), "the Delete of an existing SA is answered"
    assert not gw.sas


def test_show_cluster_says_strict_and_marks_an_overloaded_member() -> None:
    own = {"address": MEMBER, "priority": 100, "load": 95.0, "ike": 4, "ipsec": 8, "last_ack_at": 99.5,
           "overloaded": True}
    slave = ClbStatus.model_validate(clb_status(role="slave", status="Up", cluster_ip=VIP, update_ms=3000,
                                                strict_overload=True, own=own))
    lines = clb.show_cluster(slave, 100.0).splitlines()
    assert "Overload mode : strict (an overloaded gateway refuses new IKE SAs)" in lines
    assert lines[-1].split()[0] == f"-{MEMBER}"
    master = ClbStatus.model_validate(clb_status(role="master", cluster_ip=VIP, overload_limit=90,
                                                 strict_overload=True, rows=[]))
    assert "Overload mode : strict" in clb.show_cluster(master, 0.0)
    assert slave.own is not None
    relaxed = slave.model_copy(update={"strict_overload": False,
                                       "own": slave.own.model_copy(update={"overloaded": False})})
    text = clb.show_cluster(relaxed, 100.0)
    assert "Overload mode" not in text and text.splitlines()[-1].split()[0] == MEMBER
