"""mxlb's TLB fallback route (pure, a fake netlink socket): through the first member in service whose
link is up, and a route the kernel refuses does not end the daemon."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from dataplane.daemons.mxlb import Daemon


class FakeRoutes:
    def __init__(self, refuse: bool = False):
        self.refuse = refuse
        self.added: list[dict[str, Any]] = []
        self.verbs: list[str] = []

    def link_lookup(self, ifname: str) -> list[int]:
        return [{"ge-0-0-0": 2, "ge-0-0-1": 3}[ifname]]

    def route(self, verb: str, **kw: Any) -> None:
        self.verbs.append(verb)
        if verb == "replace":
            if self.refuse:
                raise OSError(101, "Network is unreachable")
            self.added.append(kw)


def daemon(routes: FakeRoutes, srx1_link_up: bool) -> Any:
    members = [SimpleNamespace(name="MNHA_SRX1", dev="ge-0-0-0", nexthop="198.18.0.1", nexthop6=None),
               SimpleNamespace(name="MNHA_SRX3", dev="ge-0-0-1", nexthop="198.18.0.3", nexthop6=None)]
    return SimpleNamespace(selectors=[SimpleNamespace(side="trust", members=members)], query={"trust": routes},
                           fallback_route={}, dev_up={"trust": {"ge-0-0-0": srx1_link_up, "ge-0-0-1": True}},
                           config=SimpleNamespace(fallback_table=200))


def table(*names: str) -> Any:
    return SimpleNamespace(members=lambda: set(names))


def test_the_fallback_goes_through_the_first_member_in_service_whose_link_is_up() -> None:
    routes = FakeRoutes()
    state = daemon(routes, srx1_link_up=False)
    Daemon.program_fallback(state, table("MNHA_SRX1", "MNHA_SRX3"))
    assert [r["gateway"] for r in routes.added] == ["198.18.0.3"]
    assert state.fallback_route == {"trust": "198.18.0.3"}


def test_a_refused_fallback_route_is_retried_not_fatal() -> None:
    routes = FakeRoutes(refuse=True)
    state = daemon(routes, srx1_link_up=True)
    Daemon.program_fallback(state, table("MNHA_SRX1"))
    assert state.fallback_route == {}, "not recorded: the next change tries again"
    routes.refuse = False
    Daemon.program_fallback(state, table("MNHA_SRX1"))
    assert state.fallback_route == {"trust": "198.18.0.1"}


def test_a_restarted_daemon_rewrites_the_route_in_place_and_only_deletes_it_with_no_member() -> None:
    routes = FakeRoutes()
    state = daemon(routes, srx1_link_up=True)  # fallback_route {}: what a restarted daemon knows
    Daemon.program_fallback(state, table("MNHA_SRX1", "MNHA_SRX3"))
    assert routes.verbs == ["replace", "del"], "no delete before: the route the kernel kept is never missing " \
        "(the IPv6 one goes: this member has no IPv6 next hop)"
    routes.verbs.clear()
    Daemon.program_fallback(state, table())
    assert routes.verbs == ["del", "del"] and state.fallback_route == {"trust": None}


def test_the_ipv6_fallback_follows_the_member_and_goes_with_a_member_without_ipv6() -> None:
    routes = FakeRoutes()
    state = daemon(routes, srx1_link_up=True)
    state.selectors[0].members[0].nexthop6 = "2001:db8::1"
    Daemon.program_fallback(state, table("MNHA_SRX1", "MNHA_SRX3"))
    assert [(v, r.get("family", 2), r["gateway"]) for v, r in zip(routes.verbs, routes.added, strict=True)] == [
        ("replace", 2, "198.18.0.1"), ("replace", 10, "2001:db8::1")]
    routes.verbs.clear()
    Daemon.program_fallback(state, table("MNHA_SRX3"))  # the next member has no IPv6 next hop
    assert routes.verbs == ["replace", "del"]
