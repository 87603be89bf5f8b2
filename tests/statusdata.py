"""Whole daemon status files for the tests (the JSON a daemon writes, every field of its labkit model):
readers parse them with the model, so a test gives the complete shape and changes what it is about."""

from __future__ import annotations

from typing import Any

from labkit.flexstatus import FlexclientStatus, GatewayStatus, HsrpStatus
from labkit.status import MnhaStatus, MxlbStatus


def _merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """BASE with CHANGES; a dict change merges into a dict field (one level: `icl={"up": False}`)."""
    out = dict(base)
    for key, value in changes.items():
        out[key] = {**out[key], **value} if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def mxlb_member(name: str, **changes: Any) -> dict[str, Any]:
    member = {"name": name, "mark": 0x100, "alive": True, "carrier": {"trust": True, "untrust": True},
              "routed": {"trust": True, "untrust": True}, "buckets": 0, "route_gate_open": True, "health": None,
              "via": {}, "via_settled": True, "counters": {}}
    return _merged(member, changes)


def mxlb_health(up: bool = True, last_result: str = "echo reply", probes: int = 0,
                profiles: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"up": up, "last_result": last_result, "probes": probes, "fail_streak": 0, "last_change": 0.0,
            "profiles": profiles or {}}


def mxlb_status(members: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    status = {"node": "mx1", "mode": "chash", "buckets": 64, "pid": 1, "updated_at": 0.0, "last_event_at": 0.0,
              "last_programmed_at": 0.0, "changes": 0, "settling": False, "members": members,
              "fallback_route": {}, "health_monitor": None, "table": [], "history": []}
    out = _merged(status, changes)
    MxlbStatus.model_validate(out)
    return out


def mnha_status(**changes: Any) -> dict[str, Any]:
    status = {
        "node": "srx1", "peer": "srx2", "mode": "srg1", "pid": 1, "updated_at": 0.0,
        "icl": {"device": "ge-0-0-4", "up": True, "peer_ip": "10.9.0.1"},
        "heartbeat": {"interval_ms": 1000, "threshold": 3, "sent": 0, "received": 0, "errors": 0,
                      "peer_alive": True, "last_heard_s_ago": None},
        "healthy": True, "peer_seen_in_network": True, "resumed": None, "sync": None,
        "srg0": {"role": "active", "signal_route": {"prefix": "192.168.255.0/32", "table": 50, "installed": False},
                 "monitor": None, "events": []},
        "srg2": None,
        "srg1": {"role": "active", "priority": 200, "preempt": True, "peer_role": "backup", "transitions": []},
    }
    out = _merged(status, changes)
    MnhaStatus.model_validate(out)
    return out


def hsrp_group(**changes: Any) -> dict[str, Any]:
    group = {"group": 1, "state": "Init", "vip": "10.10.10.100", "virtual_mac": "0000.0c07.ac01", "version": 1,
             "active_mac": None, "hello_ms": 3000, "hold_ms": 10000, "preempt": False, "preempt_delay": 0.0,
             "active": None, "standby": None, "priority": 100, "name": None, "authentication": "cisco",
             "changes": 0, "last_change_at": None, "ignored": {"auth": 0, "group": 0, "own": 0},
             "interface": "Ethernet0/1", "linux_interface": "Et0-1", "address": "10.10.10.2",
             "vip_interface": "hsrp1", "vip_owned": False}
    return _merged(group, changes)


def hsrp_status(groups: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    status = {"node": "router1", "pid": 1, "updated_at": 0.0, "started_at": 0.0, "groups": groups,
              "counters": {"hsrp_malformed": 0, "clb_malformed": 0, "ike_malformed": 0}}
    out = _merged(status, changes)
    HsrpStatus.model_validate(out)
    return out


def clb_status(**changes: Any) -> dict[str, Any]:
    return _merged({"role": "none", "shutdown": False, "cluster_ip": "10.10.10.100", "address": "10.10.10.2",
                    "holdtime_ms": 3000, "hello_ms": 1000, "update_ms": 1000, "overload_limit": 80, "port": 2012,
                    "events": [], "strict_overload": False, "standby_group": "group1"}, changes)


def gateway_status(**changes: Any) -> dict[str, Any]:
    """A FlexVPN router's ikev2-status.json with an IKEv2 gateway (no SA yet) and no cluster."""
    status = {"node": "router1", "pid": 1, "updated_at": 0.0, "started_at": 0.0, "cluster": None, "warnings": [],
              "counters": {"hsrp_malformed": 0, "clb_malformed": 0, "ike_malformed": 0}, "cpu": 0.0, "memory": 0.0,
              "ike": {"ike": 0, "ipsec": 0, "half_open": 0, "arrivals": 0, "settled": 0}, "gateway_counters": {},
              "redirect": "init", "pool": "172.16.3.0/24", "pool_free": 250, "sas": [], "certificates": False,
              "esp": None, "ipsec_sas": []}
    out = _merged(status, changes)
    GatewayStatus.model_validate(out)
    return out


def gateway_sa(**changes: Any) -> dict[str, Any]:
    """One IKE SA in a gateway's ikev2-status.json (dataplane.ikev2.showsa.status)."""
    return _merged({"id": 1, "local": "10.10.10.3/4500", "remote": "10.10.20.11/4500", "state": "READY",
                    "spi_i": "00" * 8, "spi_r": "11" * 8, "suite": "AES-CBC-256/PRF-HMAC-SHA2-256", "encr": "AES-CBC",
                    "keysize": 256, "dh": 19, "peer_id": "client", "auth_verify": "PSK", "auth_sign": "PSK",
                    "address": None, "redirected_from": None, "redirected_to": None, "active_s": 1.0,
                    "created_at": 0.0, "child": None}, changes)


def gateway_child(installed: bool = True) -> dict[str, Any]:
    return {"spi_in": "c190e458", "spi_out": "5147b0d6", "suite": "AES-GCM-256", "ts_i": [], "ts_r": [],
            "installed": installed}


def client_sa(**changes: Any) -> dict[str, Any]:
    """The IKE SA in a FlexVPN client's ikev2-status.json."""
    return _merged({"id": 1, "local": "10.10.20.11/4500", "remote": "10.10.10.3/4500", "state": "READY",
                    "spi_i": "00" * 8, "spi_r": "11" * 8, "suite": "AES-CBC-256/PRF-HMAC-SHA2-256", "encr": "AES-CBC",
                    "keysize": 256, "dh": 19, "auth_sign": "PSK", "auth_verify": "PSK", "address": "172.16.3.1",
                    "redirected_from": None, "redirected_to": None, "active_s": 1.0, "dpd": {"probes": 0}}, changes)


def ipsec_sa(**changes: Any) -> dict[str, Any]:
    """One CHILD_SA with its ESP counters (`show crypto ipsec sa`)."""
    return _merged({"interface": "Virtual-Access1", "local": "10.10.10.2", "remote": "10.10.20.6", "port": 4500,
                    "local_ident": ["0.0.0.0/0"], "remote_ident": ["172.16.2.1/32"], "spi_in": "c190e458",
                    "spi_out": "5147b0d6", "transform": "esp-gcm 256", "encaps": 0, "decaps": 0, "bytes_out": 0,
                    "bytes_in": 0, "verify_failed": 0, "replay_failed": 0, "malformed": 0}, changes)


def flexclient_status(client: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A FlexVPN client's ikev2-status.json around CLIENT (dataplane.core.flexclient.ClientStatus.as_dict())."""
    status = {"node": "branch1", "role": "flexvpn-client", "updated": 0.0, "client": client, "sas": [],
              "ipsec_sas": [], "esp": None}
    out = _merged(status, changes)
    FlexclientStatus.model_validate(out)
    return out
