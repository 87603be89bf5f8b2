"""`lab doctor`: does this host offer every kernel and tool feature the labs use?

Each kernel feature is probed for real inside one throwaway network namespace (created and deleted
here; nothing touches the root namespace): a veth pair with chosen ifindexes, a bridge, the nftables
expressions the selectors and SRX rulesets use, conntrack, NAT, macvlan, policy routing, multipath
routes, resilient nexthop groups, TUN and an XFRM ESP state. Each tool is looked up on PATH (or at its
fixed path). A check that fails says why and gives a one-line fix; features are then judged from
their requirements (some accept either of two checks: the FlexVPN data plane needs kernel ESP *or* TUN
for strongSwan's user-space ESP), and the shipped labs that use a feature that will not work are named.

The pure part (`judge`, `features_of`) is separate from the probes, so it is unit-tested without root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from . import kernel_room

if TYPE_CHECKING:
    from ..plan.plantypes import LabPlan

APT = "apt-get install -y {}"


@dataclass(frozen=True)
class Check:
    name: str
    group: str  # kernel | nftables | tool
    what: str  # what it is, for the reader
    fix: str  # one line


@dataclass
class CheckResult:
    name: str
    group: str
    what: str
    ok: bool
    detail: str = ""
    fix: str = ""


@dataclass(frozen=True)
class Feature:
    name: str
    needs: tuple[tuple[str, ...], ...]  # all of these groups; within a group, any one check is enough
    scope: str  # who uses it: every lab, a kind of lab, a command


@dataclass
class FeatureResult:
    name: str
    scope: str
    ok: bool
    missing: list[str] = field(default_factory=list)
    labs: list[str] = field(default_factory=list)  # shipped labs that use it


KERNEL_FIX = "a kernel with {} (built in or as a module); a container needs --privileged or CAP_NET_ADMIN"

CHECKS: tuple[Check, ...] = (
    Check("root", "host", "root (namespaces, links and rulesets need CAP_NET_ADMIN)", "run it as root (sudo)"),
    Check("netns", "kernel", "network namespaces", KERNEL_FIX.format("CONFIG_NET_NS")),
    Check("veth", "kernel", "veth pairs", KERNEL_FIX.format("CONFIG_VETH")),
    Check("veth-ifindex", "kernel", "veth ends with chosen ifindexes (prompt carrier loss)",
          "a kernel >= 4.x that honours IFLA_IFINDEX on RTM_NEWLINK (iproute2 `index N`)"),
    Check("bridge", "kernel", "Linux bridge (LANs, management bridge)", KERNEL_FIX.format("CONFIG_BRIDGE")),
    Check("policy-routing", "kernel", "policy routing (fwmark rules, many tables)",
          KERNEL_FIX.format("CONFIG_IP_MULTIPLE_TABLES")),
    Check("multipath", "kernel", "multipath (ECMP) routes", KERNEL_FIX.format("CONFIG_IP_ROUTE_MULTIPATH")),
    Check("resilient-nexthop", "kernel", "resilient nexthop groups (kernel consistent hashing)",
          "a kernel >= 5.13 (nexthop groups `type resilient`)"),
    Check("macvlan", "kernel", "macvlan (HSRP virtual MAC)", KERNEL_FIX.format("CONFIG_MACVLAN")),
    Check("tun", "kernel", "TUN devices (/dev/net/tun)", KERNEL_FIX.format("CONFIG_TUN") + "; and /dev/net/tun"),
    Check("esp", "kernel", "kernel ESP (XFRM state proto esp)",
          KERNEL_FIX.format("CONFIG_XFRM_USER, CONFIG_INET_ESP")),
    Check("ebpf-selector", "kernel", "tc eBPF programs (the MX selector with `services.selector: ebpf`)",
          KERNEL_FIX.format("CONFIG_BPF_SYSCALL, CONFIG_NET_CLS_BPF, CONFIG_NET_SCH_INGRESS")),
    Check("nft-basic", "nftables", "nftables tables and chains", KERNEL_FIX.format("CONFIG_NF_TABLES")),
    Check("nft-map", "nftables", "nftables maps (the selector's bucket map)", KERNEL_FIX.format("CONFIG_NF_TABLES")),
    Check("nft-jhash", "nftables", "nftables jhash (bucket of a subscriber address)",
          KERNEL_FIX.format("CONFIG_NFT_HASH")),
    Check("nft-numgen", "nftables", "nftables numgen (the bucket map's key type)",
          KERNEL_FIX.format("CONFIG_NFT_NUMGEN")),
    Check("nft-fib", "nftables", "nftables fib expression", KERNEL_FIX.format("CONFIG_NFT_FIB_IPV4")),
    Check("conntrack", "nftables", "conntrack (ct state: SRX sessions)",
          KERNEL_FIX.format("CONFIG_NF_CONNTRACK, CONFIG_NFT_CT")),
    Check("nat", "nftables", "source NAT (CGNAT pools)", KERNEL_FIX.format("CONFIG_NF_NAT, CONFIG_NFT_NAT")),
    Check("conntrack-limit", "nftables", "conntrack table size (kernel-wide: services.max_sessions per SRX)",
          "as root `lab up` raises net.netfilter.nf_conntrack_max and nf_conntrack_buckets to the lab's "
          "services.max_sessions; otherwise: sysctl -w net.netfilter.nf_conntrack_max=N"),
    Check("ip", "tool", "iproute2 `ip`", APT.format("iproute2")),
    Check("nft", "tool", "nftables `nft`", APT.format("nftables")),
    Check("bird", "tool", "BIRD 2 (BGP)", APT.format("bird2")),
    Check("conntrack-tool", "tool", "`conntrack` (session tables)", APT.format("conntrack")),
    Check("conntrackd", "tool", "`conntrackd` (MNHA session sync, FTFW)", APT.format("conntrackd")),
    Check("tayga", "tool", "`tayga` (the NAT64 translator, `services.nat64`)", APT.format("tayga")),
    Check("ssh", "tool", "OpenSSH client (`lab ssh`)", APT.format("openssh-client")),
    Check("dot", "tool", "Graphviz `dot` (`lab graph` SVG/PNG)", APT.format("graphviz")),
    Check("tshark", "tool", "tshark (decodes HSRP and IKEv2 in the FlexVPN tests)", APT.format("tshark")),
    Check("strongswan", "tool", "strongSwan charon + swanctl (real IKEv2 clients)",
          APT.format("strongswan-charon strongswan-swanctl libstrongswan-standard-plugins")),
    Check("libipsec", "tool", "strongSwan kernel-libipsec plugin (ESP in user space on TUN)",
          APT.format("libcharon-extra-plugins")),
    Check("tc", "tool", "iproute2 `tc` (the eBPF selector's filters)", APT.format("iproute2")),
    Check("iperf3", "tool", "iperf3 (benchmarks' baseline)", APT.format("iperf3")),
)
BY_NAME = {c.name: c for c in CHECKS}

CORE = (("root",), ("netns",), ("veth",), ("veth-ifindex",), ("bridge",), ("policy-routing",), ("nft-basic",),
        ("ip",), ("nft",), ("bird",))
FEATURES: tuple[Feature, ...] = (
    Feature("any lab (namespaces, links, BGP)", CORE, "every lab"),
    Feature("MX selector (ECMP CHASH, ECMP, TLB)",
            (("nft-map",), ("nft-jhash",), ("nft-numgen",), ("policy-routing",), ("multipath",)), "labs with an mx"),
    Feature("SRX security policy and sessions", (("conntrack",), ("conntrack-tool",), ("conntrack-limit",)),
            "labs with an srx"),
    Feature("CGNAT source NAT", (("nat",),), "use_case cgnat or mixed"),
    Feature("MNHA session sync", (("conntrackd",), ("conntrack",)), "labs with MNHA pairs"),
    Feature("FlexVPN HSRP virtual IP", (("macvlan",),), "labs with HSRP"),
    Feature("FlexVPN real IKEv2 clients", (("strongswan",),), "labs with an IKEv2 cluster"),
    Feature("FlexVPN data plane (CHILD_SA traffic)", (("strongswan",), ("esp", "tun"), ("libipsec", "esp")),
            "labs with an IKEv2 cluster"),
    Feature("SSH CLI (`lab ssh`)", (("ssh",),), "labs with mx, srx or ios-router nodes"),
    Feature("`lab graph` SVG/PNG", (("dot",),), "command"),
    Feature("packet decoding in the FlexVPN tests", (("tshark",),), "tests"),
    Feature("benchmarks (iperf3 baseline, nft fib, kernel resilient hashing baseline)",
            (("iperf3",), ("nft-fib",), ("resilient-nexthop",)), "bench/"),
    Feature(EBPF_SELECTOR := "MX eBPF selector (`services.selector: ebpf`)", (("ebpf-selector",), ("tc",)),
            "labs with selector: ebpf"),
    Feature(NAT64 := "NAT64 (`services.nat64`)", (("tayga",), ("tun",), ("nat",)), "labs with services.nat64"),
)


def judge(results: Iterable[CheckResult], lab_features: dict[str, set[str]] | None = None) -> list[FeatureResult]:
    """Each feature: works when every group of its needs has one passing check."""
    ok = {r.name: r.ok for r in results}
    verdicts = []
    for feature in FEATURES:
        missing = [" or ".join(group) for group in feature.needs if not any(ok.get(n, False) for n in group)]
        labs = sorted(lab for lab, used in (lab_features or {}).items() if feature.name in used)
        verdicts.append(FeatureResult(feature.name, feature.scope, not missing, missing, labs))
    return verdicts


def features_of(topology: object) -> set[str]:
    """The features a topology uses (names of FEATURES)."""
    from .. import kinds as K
    from ..model.schema import NAT_USE_CASES, Topology

    assert isinstance(topology, Topology)
    facts = [K.get(n.kind) for n in topology.nodes.values()]
    used = {FEATURES[0].name}
    if any(k.load_balancer for k in facts):
        used.add(FEATURES[1].name)
        if topology.services.selector == "ebpf":
            used.add(EBPF_SELECTOR)
    if any(k.firewall for k in facts):
        used.add(FEATURES[2].name)
        if topology.services.use_case in NAT_USE_CASES:
            used.add(FEATURES[3].name)
    if any(p.sync for p in topology.mnha):
        used.add(FEATURES[4].name)
    if any(s.standby for n in topology.nodes.values() for s in n.interfaces.values()):
        used.add(FEATURES[5].name)
    if any(n.ikev2_cluster or n.ikev2 or n.flexvpn_client for n in topology.nodes.values()):
        used.update({FEATURES[6].name, FEATURES[7].name})
    if any(k.ssh_vendor for k in facts) and (topology.ssh is None or topology.ssh.enabled):
        used.add(FEATURES[8].name)
    if topology.services.nat64 is not None:
        used.add(NAT64)
    return used


def shipped_lab_features(labs_dir: Path) -> dict[str, set[str]]:
    """labs/*.yml -> the features each uses (files that do not load are left out)."""
    from ..model.diagnostics import LabError
    from ..model.validate import load_topology

    found: dict[str, set[str]] = {}
    for path in sorted(labs_dir.glob("*.yml")):
        try:
            found[path.name] = features_of(load_topology(path, []).topology)
        except (LabError, OSError):
            continue
    return found


# ---------------------------------------------------------------- probes (the edge: root, kernel, PATH)

CHARON = Path("/usr/lib/ipsec/charon")
LIBIPSEC = Path("/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so")
TOOL_BINARIES = {"ip": "ip", "nft": "nft", "bird": "bird", "conntrack-tool": "conntrack", "conntrackd": "conntrackd",
                 "tayga": "tayga", "ssh": "ssh", "dot": "dot", "tshark": "tshark", "iperf3": "iperf3", "tc": "tc"}


def probe_tools(path: str | None = None) -> list[CheckResult]:
    results = []
    for check in CHECKS:
        if check.group != "tool":
            continue
        if check.name in TOOL_BINARIES:
            binary = TOOL_BINARIES[check.name]
            found = shutil.which(binary, path=path)
            detail = found or f"`{binary}` not found on PATH"
        elif check.name == "strongswan":
            swanctl = shutil.which("swanctl", path=path)
            missing = [name for name, there in (("swanctl", swanctl), (str(CHARON), CHARON.exists())) if not there]
            found = None if missing else swanctl
            detail = f"{swanctl}, {CHARON}" if found else f"missing: {', '.join(missing)}"
        else:  # libipsec
            found = str(LIBIPSEC) if LIBIPSEC.exists() else None
            detail = found or f"{LIBIPSEC} missing"
        results.append(_result(check, found is not None, detail))
    return results


def _result(check: Check, ok: bool, detail: str) -> CheckResult:
    return CheckResult(check.name, check.group, check.what, ok, detail, "" if ok else check.fix)


class _Sandbox:
    """One throwaway namespace; every probe runs in it; deleted on exit."""

    def __init__(self, ip: str | None, nft: str | None):
        self.name = f"labdoctor-{os.getpid()}"  # a node name cannot start with a digit: no lab has it
        self.ip, self.nft = ip, nft

    def __enter__(self) -> _Sandbox:
        from labkit import netnsutil

        netnsutil.create(self.name)
        return self

    def __exit__(self, *exc: object) -> None:
        from labkit import netnsutil

        netnsutil.delete(self.name)

    def run(self, argv: list[str], stdin: str | None = None) -> str | None:
        """None on success, else the tool's complaint (one line)."""
        from .netns import run_in_namespace

        try:
            done = run_in_namespace(self.name, argv, stdin=stdin, timeout=10.0)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        if done.returncode == 0:
            return None
        text = (done.stderr or done.stdout).strip().splitlines()
        return next((line.strip() for line in text if "rror" in line), text[0] if text else f"exit {done.returncode}")

    def ipc(self, *args: str) -> str | None:
        if self.ip is None:
            return "cannot probe: `ip` (iproute2) is missing"
        return self.run([self.ip, *args])

    def nftf(self, ruleset: str) -> str | None:
        if self.nft is None:
            return "cannot probe: `nft` (nftables) is missing"
        return self.run([self.nft, "-f", "-"], stdin=ruleset)


NFT_PROBES = {
    "nft-basic": "table inet doc_basic { chain f { type filter hook forward priority 0; counter accept; }\n}",
    "nft-map": "table ip doc_map { map m { type mark : mark; elements = { 1 : 0x101 }; }\n"
               "chain p { type filter hook prerouting priority 0; meta mark set meta mark map @m; }\n}",
    "nft-jhash": "table ip doc_jhash { chain p { type filter hook prerouting priority 0;"
                 " meta mark set jhash ip saddr mod 64 seed 0x5eed; }\n}",
    "nft-numgen": "table ip doc_numgen { map sel { typeof numgen inc mod 64 : meta mark; }\n"
                  "chain p { type filter hook prerouting priority 0;"
                  " meta mark set jhash ip saddr mod 64 seed 0x5eed map @sel; }\n}",
    "nft-fib": "table ip doc_fib { chain p { type filter hook prerouting priority 0;"
               " fib daddr type local counter; }\n}",
    "conntrack": "table inet doc_ct { chain f { type filter hook forward priority 0;"
                 " ct state established,related accept; }\n}",
    "nat": "table ip doc_nat { chain post { type nat hook postrouting priority 100;"
           " oifname \"a0\" snat to 198.51.100.1-198.51.100.14; }\n}",
}


def probe_kernel(need: SessionNeed, path: str | None = None) -> list[CheckResult]:
    """Every kernel check, in one throwaway namespace (root); the conntrack limit against NEED."""
    results: list[CheckResult] = []
    add = results.append
    if os.geteuid() != 0:
        add(_result(BY_NAME["root"], False, "not root: the kernel probes need CAP_NET_ADMIN"))
        for check in CHECKS:
            if check.group in ("kernel", "nftables"):
                add(_result(check, False, "not probed (needs root)"))
        return results
    add(_result(BY_NAME["root"], True, "uid 0"))
    add(conntrack_limit(need))
    try:
        sandbox = _Sandbox(shutil.which("ip", path=path), shutil.which("nft", path=path))
        with sandbox as box:
            add(_result(BY_NAME["netns"], True, f"created {box.name}"))
            results.extend(_probe_in(box))
            ebpf = _probe_ebpf(box, shutil.which("tc", path=path))
            add(_result(BY_NAME["ebpf-selector"], ebpf is None, ebpf or "works"))
    except OSError as exc:
        add(_result(BY_NAME["netns"], False, str(exc)))
        for check in CHECKS:
            if check.group in ("kernel", "nftables") and check.name not in ("netns", "conntrack-limit"):
                add(_result(check, False, "not probed (no namespace)"))
    return results


@dataclass(frozen=True)
class SessionNeed:
    """The sessions the conntrack table must hold, and whose need that is (said in the report)."""

    max_sessions: int
    why: str
    tables: int = 1  # the session tables (SRXs) sharing the kernel's one hash


def default_need() -> SessionNeed:
    """Without a topology: what a lab needs when it leaves services.max_sessions at its default."""
    from ..model.schema import Services

    default = Services.model_fields["max_sessions"].default
    return SessionNeed(default, "the default services.max_sessions; `lab doctor TOPOLOGY` checks a lab's own")


def need_of(plan: LabPlan) -> SessionNeed:
    tables = kernel_room.session_tables(plan)
    return SessionNeed(plan.max_sessions, f"services.max_sessions of lab {plan.name}, {tables} SRX tables", tables)


def conntrack_limit(need: SessionNeed, base: Path = Path("/proc/sys/net/netfilter")) -> CheckResult:
    """The kernel-wide conntrack limit and hash size against what `lab up` sets them to for NEED: enough
    already, or writable here (`lab up` raises them, `lab down` gives them back). Only a low limit fails:
    past it the kernel drops new sessions, while a smaller hash only makes each lookup longer."""
    check = BY_NAME["conntrack-limit"]
    have: dict[str, int] = {}
    stuck: list[str] = []  # below the need and not writable here: `lab up` cannot raise them
    wanted = kernel_room.conntrack_room(need.max_sessions, need.tables)
    for name, value in wanted.items():
        try:
            have[name] = int((base / name).read_text())
        except (OSError, ValueError) as exc:
            return _result(check, False, f"cannot read the conntrack limit: {exc}")
        if have[name] < value and not os.access(base / name, os.W_OK):
            stuck.append(name)
    values = ", ".join(f"{name} {have[name]}" + ("" if have[name] >= value else f" (needs {value})")
                       for name, value in wanted.items())
    low = any(have[name] < value for name, value in wanted.items())
    then = "; not writable here" if stuck else "; `lab up` raises them" if low else ""
    detail = (f"{values}: room for {need.max_sessions} sessions per table ({need.why}), a hash of a quarter "
              f"as many buckets as all tables hold; one value for every namespace{then}")
    ok = "nf_conntrack_max" not in stuck
    fix = ("as root where /proc/sys is writable (a container's host): sysctl -w "
           + " ".join(f"net.netfilter.{name}={wanted[name]}" for name in stuck))
    return CheckResult(check.name, check.group, check.what, ok, detail, "" if ok else fix)


def _probe_in(box: _Sandbox) -> list[CheckResult]:
    results: list[CheckResult] = []

    def record(name: str, complaint: str | None, ok_detail: str = "works") -> bool:
        results.append(_result(BY_NAME[name], complaint is None, complaint or ok_detail))
        return complaint is None

    veth = box.ipc("link", "add", "a0", "type", "veth", "peer", "name", "b0")
    record("veth", veth)
    indexed = box.ipc("link", "add", "a1", "index", "50", "type", "veth", "peer", "name", "b1", "index", "60")
    if indexed is None and box.ip is not None:
        shown = subprocess.run([box.ip, "-n", box.name, "-o", "link", "show", "b1"], capture_output=True, text=True)
        if shown.returncode != 0:  # e.g. in a chroot whose root is not a mount point: `ip -n` cannot enter
            indexed = f"`ip -n {box.name}` failed: {shown.stderr.strip() or shown.returncode}"
        else:
            indexed = None if shown.stdout.startswith("60:") else f"asked for ifindex 60, got {shown.stdout[:4]!r}"
    record("veth-ifindex", indexed, "ifindex 50/60 as asked")
    for cmd in (("addr", "add", "198.18.0.0/31", "dev", "a0"), ("addr", "add", "198.18.0.2/31", "dev", "a1"),
                ("link", "set", "a0", "up"), ("link", "set", "b0", "up"), ("link", "set", "a1", "up"),
                ("link", "set", "b1", "up")):
        box.ipc(*cmd)
    record("bridge", box.ipc("link", "add", "br0", "type", "bridge"))
    rule = box.ipc("rule", "add", "fwmark", "0x101", "table", "101") or \
        box.ipc("route", "add", "blackhole", "default", "table", "101")
    record("policy-routing", rule)
    record("multipath", box.ipc("route", "add", "203.0.113.0/24", "nexthop", "via", "198.18.0.1", "dev", "a0",
                                "nexthop", "via", "198.18.0.3", "dev", "a1"))
    nh = box.ipc("nexthop", "add", "id", "1", "via", "198.18.0.1", "dev", "a0") or \
        box.ipc("nexthop", "add", "id", "2", "via", "198.18.0.3", "dev", "a1") or \
        box.ipc("nexthop", "add", "id", "100", "group", "1/2", "type", "resilient", "buckets", "8")
    record("resilient-nexthop", nh)
    record("macvlan", box.ipc("link", "add", "link", "a0", "name", "mv0", "type", "macvlan", "mode", "private"))
    record("tun", box.ipc("tuntap", "add", "tun0", "mode", "tun"))
    record("esp", box.ipc("xfrm", "state", "add", "src", "198.18.0.0", "dst", "198.18.0.1", "proto", "esp",
                          "spi", "0x1000", "mode", "tunnel", "enc", "cbc(aes)", "0x" + "11" * 16,
                          "auth", "hmac(sha256)", "0x" + "22" * 32))
    for name, ruleset in NFT_PROBES.items():
        record(name, box.nftf(ruleset))
    return results


def _probe_ebpf(box: _Sandbox, tc: str | None) -> str | None:
    """The selector's own program loads (bpf(2), the verifier) and a clsact qdisc can be added."""
    from dataplane.kernel import tcsel

    complaint = tcsel.probe()
    if complaint is not None:
        return complaint
    return "cannot probe: `tc` (iproute2) is missing" if tc is None else \
        box.run([tc, "qdisc", "add", "dev", "a0", "clsact"])


def run(path: str | None = None, labs_dir: Path | None = None,
        need: SessionNeed | None = None) -> tuple[list[CheckResult], list[FeatureResult]]:
    """Probe everything; PATH is the environment's unless given (tests hide a tool this way); the
    conntrack limit against NEED (default: a lab with the default services.max_sessions)."""
    checks = probe_kernel(need or default_need(), path) + probe_tools(path)
    order = {c.name: i for i, c in enumerate(CHECKS)}
    checks.sort(key=lambda r: order[r.name])
    lab_features = shipped_lab_features(labs_dir) if labs_dir and labs_dir.is_dir() else {}
    return checks, judge(checks, lab_features)


def to_json(checks: list[CheckResult], features: list[FeatureResult]) -> dict[str, object]:
    return {"ok": all(f.ok for f in features), "checks": [asdict(c) for c in checks],
            "features": [asdict(f) for f in features]}


def lines(checks: list[CheckResult], features: list[FeatureResult]) -> list[str]:
    """The plain-text report (also what the CLI prints, with colour)."""
    text = []
    for c in checks:
        mark = "ok  " if c.ok else ("--  " if _optional(c.name, checks) else "FAIL")
        text.append(f"{mark} {c.group:<8} {c.name:<18} {c.detail}")
        if not c.ok:
            text.append(f"{'':<33}fix: {c.fix}")
    broken = [f for f in features if not f.ok]
    text.append("")
    if not broken:
        text.append("every feature the labs use works on this host")
    for f in broken:
        labs = f"; labs: {', '.join(f.labs)}" if f.labs else ""
        text.append(f"will not work: {f.name} ({f.scope}) — missing {', '.join(f.missing)}{labs}")
    return text


def _optional(name: str, checks: list[CheckResult]) -> bool:
    """A failed check is only informative when every feature that needs it has an alternative that passed."""
    ok = {c.name: c.ok for c in checks}
    groups = [g for f in FEATURES for g in f.needs if name in g]
    return bool(groups) and all(any(ok.get(n, False) for n in g) for g in groups)

