"""Typed topology model: what the user says (intent), checked field by field by pydantic.

Cross-references between fields (link endpoints naming nodes, MNHA pairs, pools) are checked
afterwards by `validate.py`, which has the source map and collects every error at once.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Interface, IPv4Network, IPv6Address, IPv6Interface, IPv6Network
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from dataplane.core.chash import DEFAULT_BUCKETS

NodeKind = Literal["mx", "srx", "ios-router", "host"]
Zone = Literal["trust", "untrust", "icl"]
LoadBalancing = Literal["ecmp-chash", "ecmp", "tlb"]
UseCase = Literal["sfw", "cgnat", "mixed"]
# the use cases in which SRXs translate sources into their pools (cgnat: every client; mixed: nat_sources)
NAT_USE_CASES = ("cgnat", "mixed")
DefaultPolicy = Literal["deny-all", "permit-all"]

NAME_PATTERN = r"^[a-z][a-z0-9-]*$"
AuthorizedKey = Annotated[str, StringConstraints(
    pattern=r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,3}( [^\n]*)?$")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Bgp(Strict):
    """BGP intent of one node. `as_` is the node's AS (srx, ios-router); an MX has one AS per side."""

    as_: int | None = Field(default=None, alias="as", ge=1, le=4294967294)
    trust_as: int | None = Field(default=None, ge=1, le=4294967294)
    untrust_as: int | None = Field(default=None, ge=1, le=4294967294)
    # an mx: the AS of its MNHA-VR, which peers each SRX over its ICL link (the JVD's local-as 65050)
    icl_as: int = Field(default=65050, ge=1, le=4294967294)
    announce: list[IPv4Network] = []
    announce6: list[IPv6Network] = []  # dual-stack: IPv6 prefixes originated (blackhole), like announce
    default_originate: bool = False  # dual-stack: ::/0 too


class Standby(Strict):
    """HSRP group on an IOS-like interface (RFC 2281 defaults, as Cisco's FlexVPN load balancer guide uses them)."""

    group: int = Field(default=0, ge=0, le=255)
    ip: IPv4Address
    priority: int = Field(default=100, ge=1, le=255)
    preempt: bool = False
    preempt_delay: int = Field(default=0, ge=0, le=3600)  # `standby N preempt delay minimum S` (seconds)
    name: str | None = None
    hello_ms: int = Field(default=3000, ge=50, le=255000)
    hold_ms: int = Field(default=10000, ge=150, le=255000)
    authentication: str = "cisco"
    version: Literal[1, 2] = 1


class InterfaceSettings(Strict):
    description: str | None = None
    standby: Standby | None = None


class Ikev2Cluster(Strict):
    """`crypto ikev2 cluster` with the defaults of Cisco's FlexVPN IKEv2 load balancer guide."""

    standby_group: str
    max_session: int = Field(default=10, ge=1, le=100000)
    priority: int = Field(default=100, ge=1, le=100)
    hello_ms: int = Field(default=1000, ge=100, le=30000)
    update_ms: int = Field(default=3000, ge=100, le=60000)
    holdtime_ms: int = Field(default=3000, ge=100, le=120000)
    port: int = Field(default=2012, ge=1, le=65535)
    weight_crypto_load: int = Field(default=100, ge=0, le=100)
    weight_system_load: int = Field(default=100, ge=0, le=100)
    overload_limit: int = Field(default=90, ge=1, le=100)
    shutdown: bool = False
    # the strict reading of "marked as unavailable and will not accept any more connections": an
    # overloaded gateway also refuses (drops) new IKE_SA_INITs; default: only skipped by redirects
    strict_overload: bool = False


class Ikev2(Strict):
    redirect: Literal["init", "auth", "none"] = "init"
    pool: IPv4Network | None = None
    # pre-shared key; null: the lab's own, drawn at random by `lab up` (nodes/NODE/psk.secret.json, 0600)
    psk: str | None = Field(default=None, min_length=8, max_length=128)




class FlexvpnClient(Strict):
    """`crypto ikev2 client flexvpn NAME` on an IOS-like router: `peer N ADDRESS` in order (the cluster
    VIP first), `client connect TunnelN` with `tunnel destination dynamic` and `ip address negotiated`,
    `crypto ikev2 redirect client max-redirects N`, `crypto ikev2 dpd INTERVAL RETRY periodic`."""

    name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")] = "flex_client"  # profile name
    peers: list[IPv4Address] = Field(min_length=1, max_length=10)  # `peer N ADDRESS`, in order: the cluster VIP
    source: str  # `tunnel source INTERFACE`: the interface whose address IKE and ESP leave from
    tunnel: int = Field(default=1, ge=0, le=999)  # the Tunnel interface number (`client connect TunnelN`)
    routes: list[IPv4Network] = []  # `ip route PREFIX TunnelN`: what goes through the tunnel
    max_redirects: int = Field(default=5, ge=1, le=255)  # redirects followed before giving up (a loop)
    dpd_interval: int = Field(default=10, ge=2, le=3600)  # seconds without news from the gateway before a DPD check
    dpd_retry: int = Field(default=2, ge=1, le=60)  # seconds between unanswered DPD checks (5, then the peer is dead)
    esp: Literal["aes256-sha256", "aes128-sha256", "aes256-sha1", "aes256gcm16", "aes128gcm16"] = \
        "aes256-sha256"  # the CHILD_SA's transform (IOS: esp-aes 256 esp-sha256-hmac)
    # pre-shared key; null: the lab's own, drawn at random by `lab up` (nodes/NODE/psk.secret.json, 0600)
    psk: str | None = Field(default=None, min_length=8, max_length=128)


class Node(Strict):
    kind: NodeKind
    bgp: Bgp | None = None
    loopback: IPv4Address | None = None
    loopback6: IPv6Address | None = None  # dual-stack: lo0.0 inet6 (else from addressing.v6.loopback)
    mgmt_ip: IPv4Address | None = None
    # host: subscriber or server prefixes it answers for (AnyIP local routes); the adjacent
    # router routes them to the host and announces them in BGP.
    prefixes: list[IPv4Network] = []
    prefixes6: list[IPv6Network] = []  # dual-stack: the host's IPv6 prefixes (AnyIP), as prefixes
    # srx with use_case cgnat: its own source NAT pool (else taken from addressing.nat); in an MNHA pair
    # that shares its pool (services.nat_pool_scope), the pair's pool, set on either node.
    nat_pool: IPv4Network | None = None
    interfaces: dict[str, InterfaceSettings] = {}
    # host: default gateway (else the peer of its first link, or the first router on its LAN)
    gateway: IPv4Address | None = None
    routes: list[StaticRoute] = []
    ikev2_cluster: Ikev2Cluster | None = None
    ikev2: Ikev2 | None = None
    flexvpn_client: FlexvpnClient | None = None  # ios-router: an IOS FlexVPN client (remote access)
    # srx: false = built (namespaces, links, configuration) but not in service: powered off once the
    # lab is ready, so neither advertised nor health-checked up; `nexthop-add` brings it into service.
    in_service: bool = True
    # `lab import`: the configuration statements this node emulates, as FILE:LINE: statement (status),
    # or why the import added it; `lab render` prints them at the top of the node's configuration.
    source: list[str] = []


class StaticRoute(Strict):
    prefix: IPv4Network
    via: IPv4Address


class Link(Strict):
    """Two endpoints: a point-to-point veth. More: a LAN (a bridge in a namespace of its own)."""

    endpoints: list[str] = Field(min_length=2, max_length=64)
    zone: Zone | None = None
    addresses: list[IPv4Interface] | None = None
    # dual-stack: one IPv6 address per endpoint, in one subnet (else from addressing.v6)
    addresses6: list[IPv6Interface] | None = None
    mtu: int = Field(default=1500, ge=576, le=9216)


class Addressing6(Strict):
    """The IPv6 pools of a dual-stack lab (the JVD's addressing: a /126 per link, /128 loopbacks, beside
    the IPv4 addresses on the same interfaces). RFC 3849 documentation space by default."""

    p2p: IPv6Network = IPv6Network("2001:db8:1::/48")
    p2p_prefixlen: int = Field(default=126, ge=64, le=127)
    loopback: IPv6Network = IPv6Network("2001:db8:ff::/64")  # /128 each
    lan: IPv6Network = IPv6Network("2001:db8:2::/48")  # a /64 per LAN


class Addressing(Strict):
    p2p: IPv4Network = IPv4Network("198.18.0.0/17")
    loopback: IPv4Network = IPv4Network("198.18.128.0/20")
    lan: IPv4Network = IPv4Network("198.18.192.0/18")
    nat: IPv4Network = IPv4Network("198.51.100.0/24")
    nat_prefixlen: int = Field(default=28, ge=8, le=32)
    mgmt: IPv4Network | None = None
    # IPv6 beside IPv4 on every link and loopback (dual stack); None: the lab is IPv4 only
    v6: Addressing6 | None = None


class SrgMonitor(Strict):
    """`services-redundancy-group 0 monitor` as the JVD configures it: one monitor-object (the links of
    ZONE toward the MX) with a BFD-liveliness destination per link (the MX-side address), each of
    WEIGHT; failed weights reaching THRESHOLD fail the object, whose OBJECT_THRESHOLD counts toward
    SRG_THRESHOLD; reaching it, the node loses activeness (detection: INTERVAL_MS x MULTIPLIER)."""

    zone: Literal["trust", "untrust"] = "trust"
    interval_ms: int = Field(default=300, ge=50, le=10000)  # minimum-interval
    multiplier: int = Field(default=3, ge=1, le=255)
    weight: int = Field(default=300, ge=1, le=1000)
    threshold: int = Field(default=300, ge=1, le=1000)  # bfd-liveliness threshold
    object_threshold: int = Field(default=300, ge=1, le=1000)
    srg_threshold: int = Field(default=300, ge=1, le=1000)


class MnhaPair(Strict):
    """An SRX MNHA pair. srg0: both active (the JVD's scale-out use), with the JVD's monitoring and
    failure signal route. srg1: SRG1 active/backup (srg1_active is the active one). srg1+srg2: SRG1
    active on srg1_active, SRG2 active on the other node; each node carries the traffic of its
    active group (TLB: the pair's two real-services)."""

    nodes: list[str] = Field(min_length=2, max_length=2)
    mode: Literal["srg0", "srg1", "srg1+srg2"] = "srg0"
    srg1_active: str | None = None
    preempt: bool = True
    heartbeat_ms: int = Field(default=1000, ge=100, le=60000)
    heartbeat_threshold: int = Field(default=3, ge=1, le=100)
    sync: bool = True  # session synchronisation over the ICL (off only to show why it matters)
    monitor: SrgMonitor | None = SrgMonitor()  # null: no SRG monitoring
    # install-on-failure-route: the signal route put in MNHA-VR while the node has lost activeness
    signal_route: IPv4Address = IPv4Address("192.168.255.0")
    pair_address: IPv4Address | None = None  # lo0.1 of both nodes, the TLB real-service (default: pool)
    # a-b (the JVD): the first node (A) prepends its AS once, 3 times while it has lost activeness; the second
    # (B) 2 and 4 times, on the routes of the JVD's export policies (lo0.1, lo0.2, NAT pools). per-srx (lab
    # option): both nodes as A, so both are equal paths in a healthy pair.
    prepend: Literal["a-b", "per-srx"] = "a-b"


class Srd(Strict):
    """Dual-MX Services Redundancy: mastership, signal route, prepend on the standby."""

    nodes: list[str] = Field(min_length=2, max_length=2)
    master: str | None = None  # the preferred master (default: the first node)
    preempt: bool = False
    heartbeat_ms: int = Field(default=1000, ge=100, le=60000)
    heartbeat_threshold: int = Field(default=3, ge=1, le=100)


class HealthCheck(Strict):
    """One TLB network-monitoring profile, probed from the MX toward each real-service address.

    Defaults are the JVD's profiles: probe-interval 1 s, failure-retries 1, recovery-retries 1 (a
    probe fails after the interval; detection = interval x failures, + 1 interval)."""

    type: Literal["icmp", "tcp", "udp", "http"] = "icmp"
    port: int | None = Field(default=None, ge=1, le=65535)  # tcp/udp/http (tcp 8088, http 80, udp 7)
    interval_ms: int = Field(default=1000, ge=50, le=60000)
    timeout_ms: int | None = Field(default=None, ge=10, le=60000)  # default: the interval
    failures: int = Field(default=1, ge=1, le=100)
    recoveries: int = Field(default=1, ge=1, le=100)
    http_path: str = "/"


JVD_HEALTH_CHECKS = [HealthCheck(type="icmp"), HealthCheck(type="tcp", port=8088)]


class Bfd(Strict):
    """BFD on every eBGP session (BIRD's `bfd` protocol): the JVD's bfd-liveness-detection."""

    interval_ms: int = Field(default=300, ge=10, le=10000)  # minimum-interval and minimum-receive-interval
    multiplier: int = Field(default=3, ge=1, le=255)


class Nat64(Strict):
    """NAT64 on the SRXs (the JVD's srx-nat64.conf): an IPv6 client of `source` that sends to `address`
    reaches the IPv4 server `server` (destination NAT, `nat_64_dest_rule`), its source translated into
    a NAT64 pool (`nat_64_source_ipv4_pool`: one per MNHA pair, from addressing.nat). The translator
    maps each client address 1:1 to an address of `mapped` (the same on every SRX, so the pair's
    synchronised sessions fit either node) before the pool's address-and-port translation."""

    source: IPv6Network  # the clients translated (NAT64_CLIENT_V6): a /112 or longer (one mapped address each)
    address: IPv6Address  # the IPv6 address the clients send to (NAT64_DST_V6, 2001:db8:1::1 in the JVD)
    server: IPv4Address  # the IPv4 server it stands for (NAT64_DST_V4, 172.16.10.3 in the JVD)
    # the translator's private IPv4 range for the clients (never leaves an SRX: translated into the pool)
    mapped: IPv4Network = IPv4Network("10.255.0.0/16")


class Services(Strict):
    load_balancing: LoadBalancing = "ecmp-chash"
    use_case: UseCase = "sfw"
    # use_case mixed (the JVD's SRXs run SFW and NAPT44 side by side, chosen by source prefix): the client
    # prefixes whose flows the SRXs translate into their pools (`security nat source rule-set ... match
    # source-address`), each one of the client hosts' prefixes; every other client prefix is SFW.
    nat_sources: list[IPv4Network] = []
    # The SRXs' `security policies default-policy`: what a packet that opens a session no policy
    # permits meets. deny-all drops it; permit-all (the JVD's test bed) accepts it as a new session,
    # so sessions opened from untrust, and answers reaching an SRX that holds no session, pass.
    default_policy: DefaultPolicy = "deny-all"
    buckets: int = Field(default=DEFAULT_BUCKETS, ge=2, le=65536)
    hash_seed: int = Field(default=0x5EED, ge=0, le=0xFFFFFFFF)
    # TLB: every profile must pass for a real-service to be up (the JVD: icmp-profile + tcp-profile)
    health_checks: list[HealthCheck] = Field(default_factory=lambda: list(JVD_HEALTH_CHECKS), min_length=1)
    # TLB real-services: one per MNHA pair (its lo0.1 pair address, the JVD) or one per SRX (loopback)
    tlb_real_service: Literal["pair", "srx"] = "pair"
    # The source NAT pool of an MNHA pair's two SRXs: pair (the JVD: one pool, the same on both nodes, each
    # announcing it with its A/B prepends) or srx (a pool per SRX, each node also announcing its peer's as a
    # backup path). null: pair where one node of the pair translates at a time (TLB, tlb_real_service pair,
    # mode srg0, prepend a-b) unless its nodes set two different nat_pool, else srx. pair where both nodes
    # translate at once is an error: two clients could get the same address and port.
    nat_pool_scope: Literal["pair", "srx"] | None = None
    # A member (SRX or real-service) that comes back after a failure: "proportional" takes an equal
    # share from every member (an ECMP addition, as Junos does); "keep-buckets" gets back exactly
    # the buckets it had, so only the flows that moved away move back.
    restore_policy: Literal["proportional", "keep-buckets"] = "proportional"
    # How the MX computes the bucket: an nftables rule (the default) or a tc eBPF program on the same
    # interfaces (same jhash, seed, buckets, map and counters; needs bpf(2) and cls_bpf in the kernel).
    selector: Literal["nftables", "ebpf"] = "nftables"
    # BFD on every eBGP session (the JVD: 300 ms x 3). Off by default: BIRD has no nonstop routing, so
    # with BFD a restart of an MX's BIRD (restart routing, GRES) takes its peers' sessions down.
    bfd: Bfd | None = None
    # The session table: `lab up` raises the kernel's conntrack limit (one value for every
    # namespace on this kernel) to max_sessions, `lab down` gives it back; the SRXs' session timeouts are
    # an SRX's: UDP 60 s of inactivity, established TCP 1800 s (Junos's defaults).
    max_sessions: int = Field(default=262144, ge=1024, le=16777216)
    udp_timeout: int = Field(default=60, ge=1, le=86400)
    tcp_timeout: int = Field(default=1800, ge=10, le=432000)
    # NAT64 beside the lab's use case (dual-stack labs): IPv6 clients reaching an IPv4 server
    nat64: Nat64 | None = None


class SshUser(Strict):
    """A login of every emulated node (docs/ssh-cli.md). Without `password`: a random one drawn by
    `lab up` (shown by `lab status`) unless the user has `keys` (then keys only); with `ssh.lab_key`,
    also a client key the lab makes for this user alone."""

    name: str = Field(pattern=r"^[a-z_][a-z0-9_.-]*$", max_length=32)
    password: str | None = Field(default=None, min_length=1, max_length=128)
    keys: list[AuthorizedKey] = []  # as in authorized_keys: "ssh-ed25519 AAAA... comment"
    class_: Literal["super-user", "operator", "read-only"] = Field(default="super-user", alias="class")


class Ssh(Strict):
    """SSH into the mx, srx and ios-router nodes. Defaults: user admin with a random password per lab
    (`lab status` shows it), a client key per user generated under the state dir; port 22 on fxp0/mgmt0."""

    enabled: bool = True
    port: int = Field(default=22, ge=1, le=65535)
    users: list[SshUser] = Field(default_factory=lambda: [SshUser(name="admin")], min_length=1)
    lab_key: bool = True


class Topology(Strict):
    name: str = Field(pattern=NAME_PATTERN, max_length=10)
    description: str = ""
    addressing: Addressing = Addressing()
    services: Services = Services()
    nodes: dict[str, Node]
    links: list[Link] = []
    mnha: list[MnhaPair] = []
    srd: Srd | None = None
    ssh: Ssh | None = None  # None: the defaults of Ssh
