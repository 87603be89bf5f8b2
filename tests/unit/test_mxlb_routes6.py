"""mxlb's route evidence on a dual-stack lab (pure: fake netlink route messages, and the plan): an ECMP
member is routed on a side only when its IPv4 and its IPv6 next hops are both in the watched routes."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dataplane.core.selector import MemberState
from dataplane.daemons.mxlb import Daemon, _route_nexthops, ipv6_standing
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


def test_the_ipv6_standing_follows_the_routes_and_is_kept_when_every_route_is_gone() -> None:
    hops6 = {"2001:db8:1::12"}
    assert ipv6_standing(None, "2001:db8:1::12", hops6) is True
    assert ipv6_standing(True, "2001:db8:1::1a", hops6) is False, "out of the routes: out"
    assert ipv6_standing(None, "2001:db8:1:0:0::12", hops6) is True, "compared as addresses"
    assert ipv6_standing(None, "", hops6) is False, "no IPv6 next hop where IPv6 is watched"
    assert ipv6_standing(None, "2001:db8:1::12", set()) is None, "no IPv6 route seen yet"
    assert ipv6_standing(False, "2001:db8:1::12", set()) is False, "every route gone: the standing is kept"
    assert ipv6_standing(True, "2001:db8:1::1a", set()) is True


class Netlink:
    """One routing instance's routes and links, as mxlb's query socket reads them."""

    def __init__(self) -> None:
        self.v4: list[Route] = []
        self.v6: list[Route] = []

    def get_links(self) -> list[Any]:
        return [_Link(name, 0x1 | 0x10000) for name in ("ge-0-1-1", "ge-0-1-2")]  # IFF_UP | IFF_LOWER_UP

    def get_routes(self, family: int, table: int) -> list[Route]:
        return self.v6 if family == 10 else self.v4


class _Link(dict[str, Any]):
    def __init__(self, name: str, flags: int):
        super().__init__(flags=flags)
        self.name = name

    def get_attr(self, attr: str) -> str:
        return self.name


def _trust_side() -> tuple[Any, Netlink]:
    """A dual-stack ECMP MX's trust side with two SRXs (Daemon.observe on a stand-in for the daemon)."""
    members = [SimpleNamespace(name=f"srx{i}", nexthop=f"198.18.0.{i}", nexthop6=f"2001:db8:1::{i}", loopback="",
                               hops=(SimpleNamespace(dev=f"ge-0-1-{i}"),)) for i in (1, 2)]
    selector = SimpleNamespace(side="trust", watch_prefixes=("0.0.0.0/0",), watch_prefixes6=("::/0",), members=members)
    netlink = Netlink()
    daemon = SimpleNamespace(selectors=[selector], query={"trust": netlink}, dev_up={"trust": {}},
                             route_hops={"trust": {}}, routed6={},
                             members={m.name: MemberState(m.name, 0x100 + i) for i, m in enumerate(members, 1)},
                             routes_seen=lambda now: None)
    return daemon, netlink


def _routed(daemon: Any) -> dict[str, bool]:
    Daemon.observe(daemon)
    return {name: state.routed["trust"] for name, state in daemon.members.items()}


def test_an_srx_is_routed_only_once_both_families_route_through_it() -> None:
    daemon, netlink = _trust_side()
    netlink.v4 = [Route(None, 0, multipath=("198.18.0.1", "198.18.0.2"))]
    assert _routed(daemon) == {"srx1": False, "srx2": False}, "IPv4 up, no IPv6 route yet: not routed"
    assert _routed(daemon) == {"srx1": False, "srx2": False}, "and not on the next read either"
    netlink.v6 = [Route(None, 0, gateway="2001:db8:1::1")]
    assert _routed(daemon) == {"srx1": True, "srx2": False}, "srx2's IPv6 sessions are not back"
    netlink.v6 = [Route(None, 0, multipath=("2001:db8:1::1", "2001:db8:1::2"))]
    assert _routed(daemon) == {"srx1": True, "srx2": True}
    netlink.v4 = [Route(None, 0, gateway="198.18.0.2")]
    assert _routed(daemon) == {"srx1": False, "srx2": True}, "srx1 withdrew its IPv4 default"


def test_every_ipv6_route_gone_keeps_each_srx_standing() -> None:
    daemon, netlink = _trust_side()
    netlink.v4 = [Route(None, 0, multipath=("198.18.0.1", "198.18.0.2"))]
    netlink.v6 = [Route(None, 0, gateway="2001:db8:1::1")]
    assert _routed(daemon) == {"srx1": True, "srx2": False}
    netlink.v6 = []  # the IPv6 default withdrawn upstream: nothing said about the SRXs
    assert _routed(daemon) == {"srx1": True, "srx2": False}, "srx2 stays out, srx1 in: no flow moves"


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
