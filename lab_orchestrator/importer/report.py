"""The import report: every statement of every file with what the lab does with it."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .devices import Result
from .parse import Statement

STATUSES = ("emulated", "approximated", "ignored", "unsupported")

# Statements nothing above claimed, by the start of their path: (status, why). First match wins.
_RULES: list[tuple[tuple[str, ...], str, str]] = [
    (("version",), "ignored", "software version of the device"),
    (("apply-groups",), "ignored", "configuration groups are not in the files (their content is unknown)"),
    (("groups",), "ignored", "configuration groups: only applied groups would matter"),
    (("system",), "ignored", "device management (the lab runs its own management, SSH and users)"),
    (("chassis", "high-availability"), "unsupported", "MNHA setting not modelled"),
    (("chassis",), "ignored", "hardware (FPC/PIC, aggregate count, redundancy): the lab's nodes are namespaces"),
    (("snmp",), "ignored", "SNMP: the lab has no SNMP agent (`lab status`, the live view and SSH show state)"),
    (("security", "address-book"), "approximated",
     "address book: the lab's zone policy permits every trust-to-untrust session"),
    (("security", "policies"), "approximated",
     "security policy: the lab's SRX permits trust-to-untrust sessions and their return traffic (nftables)"),
    (("security", "zones"), "approximated",
     "zone setting: the lab's zones are trust, untrust and icl, and allow the lab's own protocols"),
    (("security", "nat", "source", "rule-set"), "approximated",
     "source NAT rule: the lab translates every trust-to-untrust flow into the node's pool (use_case cgnat)"),
    (("security", "nat", "source", "pool"), "approximated", "pool option: the lab's NAT is paired port translation"),
    (("security", "nat", "destination"), "unsupported", "destination NAT (the NAT64 server) is not modelled"),
    (("security", "alg"), "unsupported", "application-layer gateways are not modelled"),
    (("security",), "unsupported", "security setting not modelled"),
    (("services", "traffic-load-balance"), "approximated",
     "TLB: the lab's MX hashes client prefixes over the real-services (services.load_balancing tlb)"),
    (("services",), "unsupported", "service not modelled"),
    (("firewall",), "approximated",
     "firewall filter (TLB filter-based forwarding): the lab's MX steers the client prefixes to its selector"),
    (("forwarding-options", "enhanced-hash-key"), "approximated",
     "symmetric hashing: the lab hashes both directions with one seed (services.hash_seed)"),
    (("policy-options",), "approximated",
     "routing policy: the lab's export filters announce the equivalent routes"),
    (("routing-options", "forwarding-table"), "approximated",
     "forwarding-table load balancing: the lab installs every equal path (ECMP)"),
    (("routing-options", "nonstop-routing"), "ignored", "routing-engine redundancy: one control plane per node"),
    (("routing-options", "autonomous-system"), "approximated", "AS of the master instance: the lab uses the "
                                                               "BGP sessions' local AS"),
    (("routing-instances",), "approximated", "routing-instance setting: the lab builds its own instances"),
    (("routing-options",), "unsupported", "routing option not modelled"),
    (("protocols",), "unsupported", "protocol not modelled"),
    (("interfaces",), "ignored", "interface with no link to another file"),
    # IOS
    (("interface",), "approximated", "interface setting: the lab's interface is a veth with the address"),
    (("crypto", "ikev2", "profile"), "approximated",
     "IKEv2 profile: the lab's gateway authenticates with its own credentials and assigns from ikev2.pool"),
    (("crypto", "ikev2", "authorization"), "approximated", "authorization policy: ikev2.pool is pushed to clients"),
    (("crypto", "ipsec"), "approximated", "IPsec profile: the lab's ESP transform (flexvpn_client.esp)"),
    (("crypto", "pki"), "ignored", "PKI: the lab generates its own credentials"),
    (("crypto",), "unsupported", "crypto setting not modelled"),
    (("ip", "local", "pool"), "ignored", "a pool no authorization policy uses"),
    (("aaa",), "ignored", "AAA: the lab's gateway authorises every client it authenticates"),
]


def classify(statements: list[Statement]) -> None:
    for s in statements:
        if s.status:
            continue
        if any(t == "instance-type" for t in s.tags):
            s.mark("approximated", "instance type: the lab's MX has TRUST-VR and UNTRUST-VR namespaces, the SRX one")
            continue
        if any(t == "instance-interface" for t in s.tags):
            s.mark("approximated", "instance membership: the interface's link zone decides its instance")
            continue
        if any(t == "zone-interface" for t in s.tags):
            s.mark("approximated", "zone membership: the interface's link zone (trust, untrust, icl)")
            continue
        if "static" in s.tags:
            s.mark("ignored", "static route the lab does not need (its BGP and hosts carry the prefixes)"
                   if "inet6" not in " ".join(s.path) else "IPv6 route: the lab is IPv4-only")
            continue
        if any(":" in w and "/" in w for w in s.path):
            s.mark("ignored", "IPv6: the lab is IPv4-only")
            continue
        if s.path[:1] == ("interface",) and len(s.path) > 1 and s.path[1].lower().startswith("virtual-template"):
            s.mark("approximated", "virtual template: the lab's IKEv2 gateway builds one tunnel (XFRM policy) "
                                   "per client")
            continue
        for prefix, status, why in _RULES:
            if s.path[:len(prefix)] == prefix:
                s.mark(status, why)
                break
        else:
            s.mark("unsupported", "not modelled by the lab")


def counts(result: Result) -> dict[str, int]:
    c: Counter[str] = Counter(s.status for d in result.devices for s in d.statements)
    return {k: c.get(k, 0) for k in STATUSES}


def to_json(result: Result) -> dict[str, Any]:
    return {
        "nodes": {d.file: {"node": d.name, "kind": d.kind, "syntax": d.syntax} for d in result.devices},
        "counts": counts(result),
        "added": [{"what": a.what, "why": a.why} for a in result.added],
        "notes": result.notes,
        "statements": [{"file": s.file, "line": s.line, "statement": " ".join(s.path), "status": s.status,
                        "note": s.note} for d in result.devices for s in d.statements],
    }


def to_text(result: Result, output: str) -> str:
    lines = [f"lab import: {len(result.devices)} configuration(s) -> {output}", ""]
    for d in result.devices:
        lines.append(f"  {d.file}: {d.syntax}, {len(d.statements)} statements -> node {d.name} ({d.kind})")
    c = counts(result)
    lines += ["", "statements: " + ", ".join(f"{v} {k}" for k, v in c.items()), ""]
    if result.added:
        lines.append("added (implied by the configurations, not in them):")
        lines += [f"  + {a.what}: {a.why}" for a in result.added]
        lines.append("")
    if result.notes:
        lines.append("notes:")
        lines += [f"  - {n}" for n in result.notes]
        lines.append("")
    for status in STATUSES:
        rows = [s for d in result.devices for s in d.statements if s.status == status]
        if not rows:
            continue
        lines.append(f"{status.upper()} ({len(rows)}):")
        for s in rows:
            lines.append(f"  {s.file}:{s.line}: {' '.join(s.path)}  -- {s.note}")
        lines.append("")
    return "\n".join(lines)
