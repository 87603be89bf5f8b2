"""The SRXs' use case from their source-NAT rules and security policies: sfw, cgnat or mixed.

A source-NAT rule translates the sources its `match source-address` names (no source match: every
source), the first rule that matches a source deciding, as Junos takes them in order (`source-nat off`
leaves it untranslated); a trust-to-untrust policy that permits named sources passes them. Against
the client hosts' prefixes: every one translated is cgnat, none is sfw, some is mixed with
`services.nat_sources` the translated ones, as the JVD's SRXs run NAPT44 (rule srx_nat_rule1:
source-address 172.80.0.0/12) beside SFW (policy SFW44_POLICY: 172.160.0.0/12)."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Any

from .devices import SRX, Device, Result
from .parse import Statement
from .secpolicy import ANY4, NatRule, Policy

TRANSLATING = ("pool", "interface")  # `then source-nat` actions that translate (off does not)


@dataclass(eq=False)  # one per statement and prefix: compared by identity
class Named:
    """One IPv4 prefix a rule or a policy names as source, where it says so."""

    net: IPv4Network
    stmt: Statement
    rule: NatRule | None = None
    policy: Policy | None = None

    @property
    def translates(self) -> bool:
        return self.rule is not None and self.rule.action in TRANSLATING

    def where(self) -> str:
        what = f"rule {self.rule.name}" if self.rule else f"policy {self.policy.name}" if self.policy else ""
        return f"{self.stmt.where} {what} (source-address {self.net})"


def permitted_sources(devices: list[Device]) -> list[Named]:
    """The IPv4 prefixes (not `any`) that the SRXs' permitting trust-to-untrust policies name as source."""
    out: list[Named] = []
    for d in devices:
        j = d.junos
        if d.kind != SRX or j is None:
            continue
        for p in j.policies:
            if not p.permit or j.zone_side(p.from_zone) != "trust" or j.zone_side(p.to_zone) != "untrust":
                continue
            for word, stmt in p.sources:
                out += [Named(n, stmt, policy=p) for n in j.resolve(word) or [] if n != ANY4]
    return out


def _rules(d: Device) -> tuple[list[Named], list[tuple[str, Statement]]]:
    """The IPv4 sources of D's source-NAT rules in rule order (a rule with no source match: 0.0.0.0/0),
    and the source names no address book of the file resolves."""
    j = d.junos
    assert j is not None
    out: list[Named] = []
    unresolved: list[tuple[str, Statement]] = []
    for rule in j.nat_rules:
        if rule.action is None:
            continue
        if not rule.sources:
            where = next((s for s in rule.stmts if "nat-rule" in s.tags), rule.stmts[0])
            out.append(Named(ANY4, where, rule=rule))
            continue
        named: list[Named] = []
        missing = False
        for word, stmt in rule.sources:
            nets = j.resolve(word)
            if nets is None:
                unresolved.append((word, stmt))
                missing = True
            else:
                named += [Named(n, stmt, rule=rule) for n in nets]
        if not named and not missing:  # IPv6 sources only (NAT64): no IPv4 client is translated by it
            for s in rule.stmts:
                s.mark("ignored", f"rule {rule.name} matches IPv6 sources only (NAT64): the lab is IPv4-only")
        out += named
    return out, unresolved


def _split(prefixes: list[IPv4Network], sources: list[Named]) -> list[tuple[IPv4Network, Named | None]]:
    """Each client prefix with the first rule source that matches it (None: no rule does), a prefix
    split where a rule matches only part of it."""
    pieces: list[tuple[IPv4Network, Named | None]] = [(p, None) for p in prefixes]
    for n in sources:
        out: list[tuple[IPv4Network, Named | None]] = []
        for piece, decided in pieces:
            if decided is not None or not piece.overlaps(n.net):
                out.append((piece, decided))
            elif piece.subnet_of(n.net):
                out.append((piece, n))
            else:  # the rule matches part of the piece: that part is decided, the rest still open
                out += sorted([(n.net, n), *((rest, None) for rest in piece.address_exclude(n.net))],
                              key=lambda x: int(x[0].network_address))
        pieces = out
    return pieces


def _client_prefixes(nodes: dict[str, dict[str, Any]], result: Result) -> list[IPv4Network]:
    return [IPv4Network(p) for host in result.clients if host in nodes for p in nodes[host].get("prefixes", [])]


def decide(srx: list[Device], nodes: dict[str, dict[str, Any]], result: Result) -> dict[str, Any]:
    """services.use_case (and nat_sources) for the SRXs, from the first SRX with source-NAT rules; the
    client hosts' prefixes are split where a rule matches part of one. Each decision is a note of the
    report that says where the configuration says so (FILE:LINE)."""
    if not srx:
        return {}
    with_rules = [d for d in srx if d.junos is not None and any(r.action in TRANSLATING for r in d.junos.nat_rules)]
    if not with_rules:
        return {"use_case": "sfw"}
    ref = with_rules[0]
    rules = [(d, *_rules(d)) for d in with_rules]
    _, sources, unresolved = rules[0]
    if unresolved:
        word, stmt = unresolved[0]
        result.notes.append(f"use_case cgnat: {stmt.where}: source {word} is in no address book of {ref.file}, so "
                            "which sources the NAT rules translate is not known; the lab translates every client")
        return {"use_case": "cgnat"}
    if not any(n.translates for n in sources):
        result.notes.append(f"use_case sfw: the source-NAT rules of {ref.file} match IPv6 sources only (NAT64); "
                            "IPv4 clients pass untranslated")
        return {"use_case": "sfw"}
    clients = _client_prefixes(nodes, result)
    if not clients:
        first = next(n for n in sources if n.translates)
        result.notes.append(f"use_case cgnat: {first.where()} translates, and no client host tells which client "
                            "prefixes it covers: the lab translates every client")
        return {"use_case": "cgnat"}
    pieces = _split(clients, sources)
    nat = [p for p, n in pieces if n is not None and n.translates]
    sfw = [p for p, n in pieces if n is None or not n.translates]
    # the lab has one use case for all its SRXs: the first one's; say where another one's rules differ
    deciding: list[list[Named]] = []  # per SRX, the rule sources that translate client prefixes
    for d, theirs, missing in rules:
        split = _split(clients, theirs)
        deciding.append(list(dict.fromkeys(n for _, n in split if n is not None and n.translates)))
        translated = [p for p, n in split if n is not None and n.translates]
        if not missing and d is not ref and translated != nat:
            result.notes.append(f"{d.file}: its source-NAT rules translate {', '.join(map(str, translated)) or 'none'} "
                                f"of the client prefixes, {ref.file}'s {', '.join(map(str, nat))}: the lab has one use "
                                f"case for all its SRXs, {ref.file}'s")
    policies = permitted_sources(srx)
    for n in permitted_sources([ref]):
        if not any(n.net.overlaps(c) for c in clients) and not any(n.net.subnet_of(x.net) for x in sources
                                                                    if x.translates):
            result.notes.append(f"{n.where()} permits untranslated sources no client host has (no trust-side "
                                "route leads to them): not in the lab")
    listed = ", ".join(map(str, clients))
    if not sfw:
        for n in (n for named in deciding for n in named):
            n.stmt.mark("approximated", f"source-address {n.net} covers every client prefix ({listed}): use_case "
                                        "cgnat (the lab translates every trust-to-untrust flow)")
        result.notes.append("use_case cgnat: " + "; ".join(n.where() for n in deciding[0]) +
                            f" covers every client prefix ({listed})")
        return {"use_case": "cgnat"}
    if not nat:
        result.notes.append("use_case sfw: no source-NAT rule matches a client prefix (" +
                            "; ".join(n.where() for n in sources if n.translates) + f"; client prefixes {listed})")
        return {"use_case": "sfw"}
    # mixed: a client prefix a rule matches in part is split (in the lab a prefix is translated or not)
    for host in result.clients:
        own = [IPv4Network(x) for x in nodes.get(host, {}).get("prefixes", [])]
        new = [str(q) for p in own for q, _ in pieces if q.subnet_of(p)]
        if new != [str(p) for p in own]:
            nodes[host]["prefixes"] = new
            result.notes.append(f"client host {host}: {', '.join(map(str, own))} split into {', '.join(new)}, as "
                                "the source-NAT rules translate part of it")
    nat_sources = [str(p) for p in nat]
    for n in (n for named in deciding for n in named):
        assert n.rule is not None
        mine = [str(p) for p in nat if p.subnet_of(n.net)]
        n.stmt.mark("emulated", f"source-address {n.net}: services.nat_sources {', '.join(mine)} (use_case mixed: "
                                "the client prefixes no rule translates are SFW)")
        for s in n.rule.stmts:
            s.mark("approximated", f"source NAT rule {n.rule.name}: the lab translates the flows of "
                                   "services.nat_sources into the node's pool (use_case mixed)")
    passed = [n for n in policies if any(p.overlaps(n.net) for p in sfw)]
    for n in passed:
        n.stmt.mark("approximated", f"{n.net} permitted untranslated: an SFW client prefix of use_case mixed "
                                    "(the lab's one policy permits every trust source)")
    why = "; ".join(n.where() for n in deciding[0]) + " translates " + ", ".join(nat_sources)
    ref_passed = [n for n in passed if n.stmt.file == ref.file]
    if ref_passed:
        why += "; " + "; ".join(n.where() for n in ref_passed) + " permits untranslated"
    result.notes.append(f"use_case mixed: {why}. Client prefixes {', '.join(str(p) for p, _ in pieces)}: "
                        f"services.nat_sources {', '.join(nat_sources)} (NAPT44), {', '.join(map(str, sfw))} SFW")
    return {"use_case": "mixed", "nat_sources": nat_sources}
