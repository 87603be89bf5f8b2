"""mxlb's route evidence on a dual-stack lab (pure: fake netlink route messages, and the plan): an ECMP
member is routed on a side only when its IPv4 and its IPv6 next hops are both in the watched routes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dataplane.daemons.mxlb import _route_nexthops, _routed
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod

REPO = Path(__file__).resolve().parents[2]


class Hop:
    def __init__(self, gateway: str):
        self.gateway = gateway

    def get_attr(self, name: str) -> str | None:
        return self.gateway if name == "RTA_GATEWAY" else None


class Route(dict[str, Any]):
    """A route as pyroute2 dumps it: dst_len in the header, RTA_DST absent for a default route."""

    def __init__(self, dst: str | None, dst_len: int, gateway: str | None = None, multipath: tuple[str, ...] = ()):
        super().__init__(dst_len=dst_len)
        self.attrs = {"RTA_DST": dst, "RTA_GATEWAY": gateway,
                      "RTA_MULTIPATH": [Hop(g) for g in multipath] or None}

    def get_attr(self, name: str) -> Any:
        return self.attrs.get(name)


IPV6_ROUTES = [
    Route(None, 0, multipath=("2001:db8:1::12", "2001:db8:1:0::1a")),  # ::/0 through two SRXs
    Route("2001:db8:172:80::", 96, gateway="2001:db8:1::16"),
    Route("2001:db8:ff::5", 128, gateway="2001:db8:1::99"),
]


def test_ipv6_next_hops_of_the_default_and_of_a_prefix_in_canonical_form() -> None:
    assert _route_nexthops(IPV6_ROUTES, "::/0") == {"2001:db8:1::12", "2001:db8:1::1a"}
    assert _route_nexthops(IPV6_ROUTES, "2001:db8:172:80::/96") == {"2001:db8:1::16"}
    assert _route_nexthops(IPV6_ROUTES, "2001:db8:172::/48") == set(), "another length is another route"


def test_ipv4_next_hops_unchanged() -> None:
    routes = [Route(None, 0, multipath=("198.18.0.9", "198.18.0.13")), Route("100.64.0.0", 17, gateway="198.18.0.11")]
    assert _route_nexthops(routes, "0.0.0.0/0") == {"198.18.0.9", "198.18.0.13"}
    assert _route_nexthops(routes, "100.64.0.0/17") == {"198.18.0.11"}
    assert _route_nexthops(routes, "100.64.128.0/17") == set()


def test_a_member_is_routed_only_when_both_families_are() -> None:
    v4 = {"198.18.0.9"}
    assert _routed("198.18.0.9", v4, "2001:db8:1::12", {"2001:db8:1::12"})
    assert not _routed("198.18.0.9", v4, "2001:db8:1::12", set()), "IPv4 back, IPv6 not yet: not routed"
    assert not _routed("198.18.0.9", v4, "2001:db8:1::12", {"2001:db8:1::1a"})
    assert not _routed("198.18.0.13", v4, "2001:db8:1::12", {"2001:db8:1::12"}), "IPv6 alone is not enough"
    assert _routed("198.18.0.9", v4, "2001:db8:1:0:0::12", {"2001:db8:1::12"}), "compared as addresses"
    assert not _routed("198.18.0.9", v4, "", {"2001:db8:1::12"}), "no IPv6 next hop where IPv6 is watched"
    assert _routed("198.18.0.9", v4, "", None), "no IPv6 watched (an IPv4 lab, TLB): IPv4 decides"


def _selectors(lab: str) -> dict[str, dict[str, Any]]:
    path = REPO / "labs" / f"{lab}.yml"
    plan = planmod.build(load_topology(path).topology, str(path), "/run/lab")
    config = json.loads(plan.files["nodes/mx1/mxlb.json"])
    return {s["side"]: s for s in config["selectors"]}


def test_a_dual_stack_ecmp_lab_watches_the_ipv6_default_and_the_ipv6_clients() -> None:
    sides = _selectors("topology1-dualstack")
    assert sides["trust"]["watch_prefixes6"] == ["::/0"]
    assert sides["untrust"]["watch_prefixes6"] == ["2001:db8:172:80::/96"]
    assert all(m["nexthop6"] for s in sides.values() for m in s["members"]), "every member has an IPv6 next hop"


def test_ipv4_and_tlb_labs_watch_no_ipv6_route() -> None:
    assert all(s["watch_prefixes6"] == [] for s in _selectors("topology1").values())
    assert all(not s["watch_prefixes6"] for s in _selectors("topology3-dualstack").values()), \
        "TLB: the health checks decide, routes do not"
