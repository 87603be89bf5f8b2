"""Juniper SRX: zones and sessions (conntrack, per-session counters), CGNAT pool, MNHA."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .base import ROUTER_SYSCTLS, Kind, NodeProblem, no_bgp_as_instances

if TYPE_CHECKING:
    from ..model.schema import Node


def check(node: Node) -> Iterable[NodeProblem]:
    if node.bgp is None or node.bgp.as_ is None:
        yield ("bgp",), "an srx needs bgp.as", "e.g. bgp: {as: 65001}"
    yield from no_bgp_as_instances(node)


def exports(protocol: str, zone: str | None, local_as: int, use_case: str, nat_sources: tuple[str, ...] = ()) -> str:
    """Trust side: the untrust routes (0/0, servers); untrust side: the trust routes (clients), or
    with CGNAT the SRX's pool (its own or its MNHA pair's); mixed: the pool and the trust routes but
    the translated client prefixes (NAT_SOURCES), as the JVD's MX announces 172.160.0.0/12 (SFW) and the NAT pools, not
    172.80.0.0/12 (NAPT44), toward the untrust gateway."""
    if zone == "trust":
        return 'where proto ~ "untrust_*" || proto = "loopback"'
    if use_case in ("cgnat", "mixed"):
        # A pair with a pool per SRX: the MNHA peer's pool too (a pair sharing one pool has no peer
        # pool: plan.render drops this term), prepended more than its owner prepends it while healthy, less
        # than once it has lost activeness (render: once more with equal prepends; with the A/B
        # roles, the A node twice more, the B node not more): after a failover the pool's return
        # traffic reaches this node, which holds the synchronised NAT bindings.
        prepend = f"bgp_path.prepend({local_as});"
        # mixed: an SFW client's answers come back by its own prefix; a translated client's never
        # carry its address (they come back to the pool), so its prefix is not announced
        sfw = ""
        if use_case == "mixed":
            hidden = ", ".join(f"{p}+" for p in nat_sources)
            sfw = f'if proto ~ "trust_*" && !(net ~ [ {hidden} ]) then accept; ' if hidden else \
                'if proto ~ "trust_*" then accept; '
        return ('filter { if proto = "originated" || proto = "loopback" then accept; '
                f'if proto = "peer_pool" then {{ {prepend} accept; }} {sfw}reject; }}')
    return 'where proto ~ "trust_*" || proto = "loopback"'


# The SRX's TCP session handling (docs/fidelity.md, "SRX: TCP sessions"): Junos's default timeouts
# (tcp-initial-timeout 20 s, a closed session 10 s; an idle established one: `services.tcp_timeout`,
# default 1800 s, set with the UDP timeouts by plan.pipeline.session_timeouts) and a liberal
# sequence check. The two nodes of an MNHA pair must accept the same segments of a session whichever
# of them carries it; conntrackd synchronises state changes, not each segment's sequence numbers, so
# a node's own copy of a session goes stale while its peer carries it and a strict window check would
# drop every segment once the session comes back. Out-of-window RSTs are still dropped.
TCP_SYSCTLS = (
    ("net.netfilter.nf_conntrack_tcp_be_liberal", "1"),
    ("net.netfilter.nf_conntrack_tcp_timeout_syn_sent", "20"),
    ("net.netfilter.nf_conntrack_tcp_timeout_syn_recv", "20"),
    ("net.netfilter.nf_conntrack_tcp_timeout_fin_wait", "10"),
    ("net.netfilter.nf_conntrack_tcp_timeout_close_wait", "10"),
    ("net.netfilter.nf_conntrack_tcp_timeout_last_ack", "10"),
    ("net.netfilter.nf_conntrack_tcp_timeout_time_wait", "10"),
    ("net.netfilter.nf_conntrack_tcp_timeout_close", "10"),
)

NFT_TABLE = "srx"  # `table inet srx` of srx.nft.j2: zones, the security policy, NAT

KIND = Kind(
    name="srx",
    # per-session packet and byte counters (`show security flow session`)
    sysctls=ROUTER_SYSCTLS + (("net.netfilter.nf_conntrack_acct", "1"),) + TCP_SYSCTLS,
    mgmt_port="fxp0",
    routes=True,
    firewall=True,
    device_config=("juniper.conf", "junos-srx.conf.j2"),
    ssh_vendor="junos",
    bgp_naming="zone",
    bgp_export=exports,
    check_node=check,
    graph_shape="octagon",
    clab_kinds=("juniper_vsrx",),
)
