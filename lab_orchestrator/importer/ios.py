"""What an IOS configuration says in the lab's terms: interfaces and addresses, HSRP, the IKEv2
cluster (FlexVPN load balancer), IKEv2 redirect and address pools, FlexVPN clients, static routes and
BGP. Every statement read is marked with what the lab does with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Interface, IPv4Network, summarize_address_range

from .parse import Statement


@dataclass
class Ios:
    statements: list[Statement]
    hostname: str | None = None
    addresses: dict[str, tuple[IPv4Interface, Statement]] = field(default_factory=dict)
    standby: dict[str, dict[str, object]] = field(default_factory=dict)  # interface -> Standby fields
    cluster: dict[str, object] | None = None
    cluster_shutdown: bool = True
    redirect: str | None = None  # init | auth
    pools: dict[str, IPv4Network] = field(default_factory=dict)
    auth_pool: str | None = None
    routes: list[tuple[IPv4Network, str, Statement]] = field(default_factory=list)  # prefix, next hop/iface
    bgp_as: int | None = None
    bgp_neighbors: dict[IPv4Address, int] = field(default_factory=dict)
    bgp_networks: list[IPv4Network] = field(default_factory=list)
    client: dict[str, object] | None = None
    tunnel_source: dict[str, str] = field(default_factory=dict)  # TunnelN -> source interface

    @property
    def gateway(self) -> bool:
        return self.cluster is not None or self.redirect is not None


def _int(word: str) -> int | None:
    try:
        return int(word)
    except ValueError:
        return None


def read(statements: list[Statement]) -> Ios:
    d = Ios(statements)
    for s in statements:
        w = s.path
        if w[:1] == ("hostname",) and len(w) == 2:
            d.hostname = w[1]
            s.mark("emulated", "hostname: the node's name")
        elif w[:1] == ("interface",) and len(w) >= 2:
            _interface(d, w[1], w[2:], s)
        elif w[:3] == ("crypto", "ikev2", "cluster"):
            _cluster(d, w[3:], s)
        elif w[:4] == ("crypto", "ikev2", "redirect", "gateway") and len(w) >= 5:
            d.redirect = w[4]
            s.mark("emulated", f"IKEv2 redirect in {'IKE_SA_INIT' if w[4] == 'init' else 'IKE_AUTH'}: ikev2.redirect")
        elif w[:4] == ("crypto", "ikev2", "redirect", "client"):
            s.tags.append("client-redirect")
            if client := d.client:
                if "max-redirects" in w:
                    client["max_redirects"] = _int(w[w.index("max-redirects") + 1])
            else:
                d.client = {"max_redirects": _int(w[w.index("max-redirects") + 1])} if "max-redirects" in w else {}
            s.mark("emulated", "redirect client: flexvpn_client (follows redirects, max_redirects)")
        elif w[:3] == ("crypto", "ikev2", "dpd") and len(w) >= 5:
            client = d.client = d.client if d.client is not None else {}
            client["dpd_interval"], client["dpd_retry"] = _int(w[3]), _int(w[4])
            s.mark("emulated", "dead peer detection: flexvpn_client.dpd_interval/dpd_retry")
        elif w[:4] == ("crypto", "ikev2", "client", "flexvpn") and len(w) >= 5:
            _client(d, w[4], w[5:], s)
        elif w[:3] == ("crypto", "ikev2", "authorization") and "pool" in w:
            d.auth_pool = w[w.index("pool") + 1]
            s.mark("emulated", "authorization policy pool: the pool the gateway assigns (ikev2.pool)")
        elif w[:3] == ("ip", "local", "pool") and len(w) >= 5:
            first, last = IPv4Address(w[4]), IPv4Address(w[5] if len(w) > 5 else w[4])
            nets = list(summarize_address_range(first, last))
            d.pools[w[3]] = IPv4Network(f"{first}/{_cover(first, last)}", strict=False) if len(nets) > 1 else nets[0]
            if d.pools[w[3]].prefixlen == 32 and len(w) > 5:
                d.pools[w[3]] = IPv4Network(f"{first}/24", strict=False)
            s.mark("emulated", f"address pool: ikev2.pool {d.pools[w[3]]} (the range's covering prefix)")
        elif w[:2] == ("ip", "route") and len(w) >= 5:
            net = IPv4Network(f"{w[2]}/{w[3]}", strict=False)
            d.routes.append((net, w[4], s))
        elif w[:2] == ("router", "bgp") and len(w) >= 3:
            d.bgp_as = _int(w[2])
            rest = w[3:]
            if not rest:
                s.mark("emulated", "BGP AS: bgp.as")
            elif rest[:1] == ("neighbor",) and len(rest) >= 4 and rest[2] == "remote-as":
                d.bgp_neighbors[IPv4Address(rest[1])] = _int(rest[3]) or 0
                s.mark("emulated", "BGP neighbor: an eBGP session on the link toward it")
            elif rest[:1] == ("network",) and len(rest) >= 2:
                mask = rest[3] if len(rest) >= 4 and rest[2] == "mask" else None
                net = IPv4Network(f"{rest[1]}/{mask}" if mask else rest[1], strict=False)
                d.bgp_networks.append(net)
                s.mark("emulated", "network statement: bgp.announce (originated as a blackhole static)")
            elif rest[:1] == ("bgp",) and rest[1:2] == ("router-id",):
                s.mark("approximated", "router-id: the lab uses the node's loopback")
            else:
                s.mark("unsupported", "BGP setting not modelled")
        elif w[:1] in (("version",), ("service",), ("boot",), ("logging",), ("ntp",), ("snmp-server",),
                       ("line",), ("banner",), ("enable",), ("username",)) or w[:2] in (("ip", "domain"),
                                                                                      ("ip", "name-server")):
            s.mark("ignored", "device management (the lab runs its own management and SSH)")
    return d


def _cover(first: IPv4Address, last: IPv4Address) -> int:
    length = 32
    while length > 0 and IPv4Network(f"{first}/{length}", strict=False).broadcast_address < last:
        length -= 1
    return length


def _interface(d: Ios, name: str, rest: tuple[str, ...], s: Statement) -> None:
    if not rest:
        s.mark("ignored", "interface without settings")
        return
    if rest[:2] == ("ip", "address") and len(rest) >= 4:
        d.addresses[name] = (IPv4Interface(f"{rest[2]}/{rest[3]}"), s)
        s.tags.append("address")
    elif rest[:1] == ("standby",) and len(rest) >= 3:
        group = _int(rest[1])
        sb = d.standby.setdefault(name, {"group": group})
        key, args = rest[2], rest[3:]
        if key == "ip" and args:
            sb["ip"] = args[0]
            s.mark("emulated", "HSRP virtual IP: interfaces.NAME.standby.ip")
        elif key == "priority" and args:
            sb["priority"] = _int(args[0])
            s.mark("emulated", "HSRP priority: standby.priority")
        elif key == "name" and args:
            sb["name"] = args[0]
            s.mark("emulated", "HSRP group name: standby.name (the cluster's standby-group)")
        elif key == "preempt":
            sb["preempt"] = True
            if "delay" in args and "minimum" in args:
                sb["preempt_delay"] = _int(args[args.index("minimum") + 1])
            s.mark("emulated", "HSRP preemption: standby.preempt")
        elif key == "timers" and len(args) >= 2:
            if args[0] == "msec":
                sb["hello_ms"], sb["hold_ms"] = _int(args[1]), _int(args[3]) if len(args) > 3 else None
            else:
                sb["hello_ms"], sb["hold_ms"] = (_int(args[0]) or 0) * 1000, (_int(args[1]) or 0) * 1000
            s.mark("emulated", "HSRP timers: standby.hello_ms/hold_ms")
        elif key == "authentication" and args:
            sb["authentication"] = args[-1]
            s.mark("emulated", "HSRP authentication: standby.authentication")
        elif key == "version" and args:
            sb["version"] = _int(args[0])
            s.mark("emulated", "HSRP version: standby.version")
        else:
            s.mark("unsupported", "HSRP setting not modelled")
    elif rest[:1] == ("description",):
        s.mark("emulated", "description: interfaces.NAME.description")
        s.tags.append("description")
    elif rest[:2] == ("tunnel", "source") and len(rest) >= 3:
        d.tunnel_source[name] = rest[2]
        s.tags.append("tunnel-source")
    elif rest[:1] == ("shutdown",) or rest[:2] == ("no", "shutdown"):
        s.mark("approximated", "interface state: every lab interface is up")
    else:
        s.tags.append("interface-other")


def _cluster(d: Ios, rest: tuple[str, ...], s: Statement) -> None:
    c = d.cluster = d.cluster if d.cluster is not None else {}
    fields = {("standby-group",): "standby_group", ("slave", "max-session"): "max_session",
              ("slave", "priority"): "priority", ("slave", "hello"): "hello_ms", ("slave", "update"): "update_ms",
              ("holdtime",): "holdtime_ms", ("port",): "port",
              ("master", "weight", "crypto-load"): "weight_crypto_load",
              ("master", "weight", "system-load"): "weight_system_load", ("master", "overload-limit"): "overload_limit"}
    for words, name in fields.items():
        if rest[:len(words)] == words and len(rest) > len(words):
            value = rest[len(words)]
            c[name] = value if name == "standby_group" else _int(value)
            s.mark("emulated", f"cluster {' '.join(words)}: ikev2_cluster.{name}")
            return
    if rest == ("no", "shutdown"):
        d.cluster_shutdown = False
        s.mark("emulated", "cluster enabled (ikev2_cluster.shutdown false)")
    elif rest == ("shutdown",):
        d.cluster_shutdown = True
        s.mark("emulated", "cluster shut down: ikev2_cluster.shutdown")
    elif not rest:
        s.mark("emulated", "IKEv2 cluster: ikev2_cluster")
    else:
        s.mark("unsupported", "cluster setting not modelled")


def _client(d: Ios, name: str, rest: tuple[str, ...], s: Statement) -> None:
    c = d.client = d.client if d.client is not None else {}
    c["name"] = name
    if rest[:1] == ("peer",) and len(rest) >= 3:
        peers = c.setdefault("peers", [])
        assert isinstance(peers, list)
        peers.append(rest[2])
        s.mark("emulated", "client peer: flexvpn_client.peers (in order)")
    elif rest[:2] == ("client", "connect") and len(rest) >= 3:
        c["tunnel_if"] = rest[2]
        s.mark("emulated", "client connect: flexvpn_client.tunnel")
    elif not rest:
        s.mark("emulated", "FlexVPN client profile: flexvpn_client.name")
    else:
        s.mark("unsupported", "FlexVPN client setting not modelled")
